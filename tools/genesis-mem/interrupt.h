// Ctrl-C for long-running genesis-mem commands.
//
// The first SIGINT (or SIGTERM) asks the running command to stop: it stops
// sampling and still writes its report. A second one, while the report is
// being written, gives up at once with exit status 130 and a line saying
// that the report may be missing or incomplete. Signals within a second of
// the first count as the first: `timeout` and `kill` of a process group
// deliver one request twice.
#pragma once

#include "genesis/debug/memory_source.h"

namespace genesis::tools {

/// Installs the handlers (idempotent) and returns the flag the first signal
/// sets. The flag is cleared by each call.
debug::StopFlag& install_interrupt_handler();

/// Removes the handlers (the previous ones come back).
void remove_interrupt_handler();

}  // namespace genesis::tools
