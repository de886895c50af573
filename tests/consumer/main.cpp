// A program that uses Genesis from outside its source tree, as a user's
// project would: through an installed Genesis (find_package or pkg-config)
// or with Genesis added as a subproject. scripts/check_install.sh builds it
// each way and runs it with the version it expects:
//
//   genesis_consumer <the version of project(genesis VERSION ...)>
//
// It allocates through the CPU caching allocator and checks the allocator's
// books, then multiplies two tensors (the CPU matmul, so BLAS must link too)
// and compares the result with the product worked out by hand. Exit status 0
// only if everything matched.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string_view>

#include "genesis/memory/device_allocators.h"
#include "genesis/tensor/api.h"
#include "genesis/version.h"

namespace {

int failures = 0;

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "genesis_consumer: FAILED: %s\n", what);
    ++failures;
  }
}

std::int64_t allocated_now(genesis::memory::CachingAllocator& a) {
  return a.stats().allocated_bytes[genesis::memory::kStatAggregate].current;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace genesis;
  if (argc != 2) {
    std::fprintf(stderr, "usage: genesis_consumer EXPECTED_VERSION\n");
    return 2;
  }
  // The header, the library and the package metadata must agree.
  check(std::string_view(GENESIS_VERSION_STRING) == argv[1], "GENESIS_VERSION_STRING is the expected version");

  // The caching allocator: a 1 MiB block, written end to end, counted while
  // live and not after it is freed.
  memory::CachingAllocator& host = memory::allocator_for(Device(DeviceType::kCPU));
  const std::int64_t before = allocated_now(host);
  constexpr std::size_t kBytes = std::size_t{1} << 20;
  void* p = host.allocate(kBytes);
  check(p != nullptr, "allocate(1 MiB) returned memory");
  if (p != nullptr) {
    std::memset(p, 0x5a, kBytes);
    check(static_cast<unsigned char*>(p)[kBytes - 1] == 0x5a, "the whole block is writable");
    check(host.owns(p), "the allocator owns the block");
    check(allocated_now(host) - before >= static_cast<std::int64_t>(kBytes), "the live block is counted");
    host.deallocate(p);
    check(allocated_now(host) == before, "the freed block is no longer counted");
  }

  // [[1, 2], [3, 4]] @ [[5, 6], [7, 8]] = [[19, 22], [43, 50]]
  const Tensor a = tensor({{1.0, 2.0}, {3.0, 4.0}});
  const Tensor b = tensor({{5.0, 6.0}, {7.0, 8.0}});
  const Tensor c = matmul(a, b);
  const double expected[2][2] = {{19.0, 22.0}, {43.0, 50.0}};
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 2; ++j) {
      check(c[{i, j}].item<double>() == expected[i][j], "matmul element matches the hand-worked product");
    }
  }
  check((a + b).sum().item<double>() == 36.0, "(a + b).sum() == 36");

  if (failures != 0) return 1;
  std::printf("genesis_consumer: OK (Genesis %s, CUDA %d)\n", GENESIS_VERSION_STRING, GENESIS_WITH_CUDA);
  return 0;
}
