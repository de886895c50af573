// Fuzz target: cuda::parse_device, the parser of device strings ("cpu", "cuda",
// "cuda:0").
//
// A string that names no device, or a CUDA device this machine lacks (every
// one on a machine without a GPU), must end in InvalidArgumentError, never in
// another exception or undefined behaviour. A device that parses prints as a
// string that parses back to itself, and "cpu" is the only spelling of the
// CPU.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "genesis/core/device.h"
#include "genesis/core/error.h"
#include "genesis/cuda/device.h"

namespace {

#define FUZZ_REQUIRE(cond)                                                                        \
  do {                                                                                            \
    if (!(cond)) {                                                                                \
      std::fprintf(stderr, "parse_device property broken: %s (%s:%d)\n", #cond, __FILE__, __LINE__); \
      std::abort();                                                                               \
    }                                                                                             \
  } while (0)

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  genesis::Device d;
  try {
    d = genesis::cuda::parse_device(text);
  } catch (const genesis::InvalidArgumentError&) {
    return 0;
  }
  FUZZ_REQUIRE(d.is_cpu() == (text == "cpu"));
  FUZZ_REQUIRE(d.index() >= 0);
  FUZZ_REQUIRE(genesis::cuda::parse_device(d.str()) == d);
  return 0;
}
