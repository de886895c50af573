// The memory source flags every watching command shares:
//   (none)              GPUs through NVML
//   --pid PID           another process (NVML per process, its published
//                       Genesis figures, its resident host memory)
//   -- CMD ARGS...      start CMD and watch it until it exits
//   --trace FILE        replay a recorded trace on the simulated device
//       [--speed X|max] [--capacity SIZE] [--config NAME]
//   --devices 0 1       which devices (default: all the source has)
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "genesis/debug/memory_source.h"

namespace genesis::tools {

struct SourceArgs {
  std::vector<std::string> devices;
  int pid = 0;
  std::string trace;
  std::string speed = "1";
  std::string capacity;
  std::string config = "genesis";
  std::vector<std::string> command;  // after "--"
  /// Ask a started command to record allocation sites (GENESIS_MEM_SITES=1
  /// in its environment; a Genesis Python program then names its lines).
  bool child_sites = false;
};

/// Checks a --capacity value as it is parsed: a size such as 80GB, above 0
/// bytes (an empty or zero capacity would otherwise quietly mean the
/// default).
CLI::Validator capacity_validator();

/// Declares the source flags on `app`; the values land in `args`.
void add_source_options(CLI::App* app, SourceArgs& args);

/// Opens the source the flags name. Throws InvalidArgumentError for
/// contradictory flags (--trace with --pid), a bad speed or capacity, a pid
/// that does not exist, a command that cannot be started; genesis::Error
/// when NVML is wanted and missing (the message names the other sources).
std::unique_ptr<debug::MemorySource> open_source(const SourceArgs& args);

/// The device ids to watch: --devices as given, checked against the
/// source's devices (an unknown one is an InvalidArgumentError that lists
/// those that exist), or all of them.
std::vector<std::string> pick_devices(const debug::MemorySource& source, const std::vector<std::string>& wanted);

}  // namespace genesis::tools
