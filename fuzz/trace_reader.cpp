// Fuzz target: debug::read_trace over arbitrary file contents (CSV with or
// without a header, time stamps, the `site` column with quoted fields that
// span lines, gzip data, which the reader recognises by its magic bytes, and
// pickled PyTorch memory snapshots, which it recognises likewise).
//
// The reader takes a path, so the bytes go into an in-memory file
// (memfd_create) named through /proc/self/fd: a regular, seekable file as far
// as the reader can tell, so the gzip path (gzopen reopens it by name) is
// reached too, and nothing touches the disk.
//
// A malformed trace must end in InvalidArgumentError; anything else thrown
// is a bug. A trace that reads must keep the invariants trace.h promises
// (fuzz/trace_invariants.h); a broken one aborts, which libFuzzer reports as
// a crash.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "genesis/core/error.h"
#include "genesis/debug/trace.h"
#include "trace_invariants.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const int fd = memfd_create("genesis-fuzz-trace", MFD_CLOEXEC);
  if (fd < 0) {
    std::perror("memfd_create");
    std::abort();
  }
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = write(fd, data + done, size - done);
    if (n <= 0) {
      std::perror("write");
      std::abort();
    }
    done += static_cast<std::size_t>(n);
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  try {
    genesis_fuzz::check_trace_invariants(genesis::debug::read_trace(path));
  } catch (const genesis::InvalidArgumentError&) {
    // A malformed trace: the expected outcome for most inputs.
  }
  close(fd);
  return 0;
}
