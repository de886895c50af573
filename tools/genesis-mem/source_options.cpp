#include "source_options.h"

#include <cstdlib>
#include <string_view>

#include "genesis/core/bytes.h"
#include "genesis/core/error.h"

namespace genesis::tools {

CLI::Validator capacity_validator() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        std::size_t bytes = 0;
        try {
          bytes = genesis::parse_bytes(text);
        } catch (const genesis::Error& e) {
          return e.message();
        }
        return bytes == 0 ? "'" + text + "': expected a size above 0 bytes, such as 80GB" : std::string();
      },
      "SIZE");
}

void add_source_options(CLI::App* app, SourceArgs& args) {
  app->add_option("--devices", args.devices, "devices to watch (ids such as 0 1; default: all)")
      ->expected(1, 64);
  app->add_option("--pid", args.pid, "watch another process (NVML per process, its Genesis figures, host RSS)");
  app->add_option("--trace", args.trace, "replay a recorded trace (CSV, .gz, '-' for stdin) on the simulated GPU");
  app->add_option("--speed", args.speed, "trace time per wall time for --trace: a number (10 = ten times faster) or max")
      ->capture_default_str();
  app->add_option("--capacity", args.capacity, "simulated GPU memory for --trace (e.g. 16GB; default 128 GiB, more for a trace whose peak live bytes exceed a quarter of that)")
      ->check(capacity_validator());
  app->add_option("--config", args.config, "allocator configuration for --trace (see genesis-mem replay --help)")
      ->capture_default_str();
  app->add_option("command", args.command, "after --: a command to start and watch until it exits");
}

std::unique_ptr<debug::MemorySource> open_source(const SourceArgs& args) {
  const int chosen = (args.pid != 0) + !args.trace.empty() + !args.command.empty();
  if (chosen > 1) {
    GENESIS_THROW(InvalidArgumentError,
                  "choose one source: --trace FILE, --pid PID or -- COMMAND (got more than one)");
  }
  std::vector<int> gpus;
  if (args.trace.empty()) {
    for (const std::string& d : args.devices) {
      // Only GPU indices select NVML devices; "host" and the like are picked later.
      if (!d.empty() && d.find_first_not_of("0123456789") == std::string::npos) gpus.push_back(std::stoi(d));
    }
  }
  if (!args.trace.empty()) {
    debug::TraceSourceOptions o;
    o.speed = debug::parse_speed(args.speed);
    o.capacity = args.capacity.empty() ? 0 : genesis::parse_bytes(args.capacity);
    o.config = args.config;
    return debug::open_trace_source(args.trace == "-" ? "/dev/stdin" : args.trace, o);
  }
  if (args.pid < 0) GENESIS_THROW(InvalidArgumentError, "--pid ", args.pid, ": expected a process id > 0");
  if (args.pid > 0) return debug::open_process_source(args.pid, gpus);
  if (!args.command.empty()) {
    // The child inherits this environment (plus GENESIS_MEM_PUBLISH=1).
    if (args.child_sites) ::setenv("GENESIS_MEM_SITES", "1", 1);
    return debug::open_child_source(args.command, gpus);
  }
  return debug::open_nvml_source(gpus);
}

std::vector<std::string> pick_devices(const debug::MemorySource& source, const std::vector<std::string>& wanted) {
  const std::vector<debug::SourceDevice> have = source.devices();
  std::vector<std::string> out;
  if (wanted.empty()) {
    for (const debug::SourceDevice& d : have) out.push_back(d.id);
    return out;
  }
  for (const std::string& w : wanted) {
    bool found = false;
    for (const debug::SourceDevice& d : have) found = found || d.id == w;
    if (!found) {
      std::string ids;
      for (const debug::SourceDevice& d : have) ids += (ids.empty() ? "" : ", ") + d.id;
      GENESIS_THROW(InvalidArgumentError, "unknown device '", w, "': ", source.describe(), " has ",
                    ids.empty() ? std::string("no devices") : "devices: " + ids);
    }
    out.push_back(w);
  }
  return out;
}

}  // namespace genesis::tools
