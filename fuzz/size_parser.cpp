// Fuzz target: parse_bytes, the parser of sizes people write ("16GB",
// "512MiB", "1.5gb", "4096"), as the allocator's set_cache_size and
// genesis-mem's --capacity take them.
//
// Text that is not a size must end in InvalidArgumentError, never in another
// exception or undefined behaviour (the fuzzer build traps on every UBSan
// finding, float-to-integer overflow included). A size that parses is within
// the documented limit, and a bare byte count small enough to be exact in a
// double reads back as itself, with or without the "B" unit.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "genesis/core/bytes.h"
#include "genesis/core/error.h"

namespace {

#define FUZZ_REQUIRE(cond)                                                                   \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      std::fprintf(stderr, "parse_bytes property broken: %s (%s:%d)\n", #cond, __FILE__, __LINE__); \
      std::abort();                                                                          \
    }                                                                                        \
  } while (0)

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::size_t bytes = 0;
  try {
    bytes = genesis::parse_bytes(text);
  } catch (const genesis::InvalidArgumentError&) {
    return 0;
  }
  FUZZ_REQUIRE(bytes <= (std::size_t{1} << 62));
  if (bytes <= (std::size_t{1} << 53)) {
    const std::string plain = std::to_string(bytes);
    FUZZ_REQUIRE(genesis::parse_bytes(plain) == bytes);
    FUZZ_REQUIRE(genesis::parse_bytes(plain + "B") == bytes);
    FUZZ_REQUIRE(genesis::parse_bytes(" " + plain + " b ") == bytes);
  }
  return 0;
}
