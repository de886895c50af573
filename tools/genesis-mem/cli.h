// genesis-mem's entry point, shared by the executable and the Python module.
#pragma once

namespace genesis::tools {

/// Runs `genesis-mem argv[1..]` and returns the exit status: 0 success, 1 a
/// failure while running, 2 bad input (unknown command or flag, bad value,
/// unreadable trace, unwritable output), 130 interrupted twice.
int genesis_mem_main(int argc, char** argv);

/// The version string `genesis-mem --version` prints.
const char* genesis_mem_version() noexcept;

}  // namespace genesis::tools
