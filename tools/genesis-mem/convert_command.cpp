// genesis-mem convert: a PyTorch memory snapshot (pickle) to the CSV trace
// format, so that recorded traces are kept, shared and replayed in the
// project's own format. The conversion is library code
// (genesis/debug/torch_snapshot_csv.h); the file written is read back with
// the trace reader, so what is reported is what a replay will see.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "json_text.h"
#include "command.h"
#include "genesis/core/error.h"
#include "genesis/debug/replay_report.h"
#include "genesis/debug/torch_snapshot_csv.h"
#include "genesis/debug/trace.h"

namespace genesis::tools {

namespace {

using json = nlohmann::ordered_json;

struct ConvertArgs {
  std::string in;
  std::string out;
  int device = -1;
  bool sites = false;
  bool json = false;
};

// True when `path` names something a summary cannot be read back from: a
// pipe or the terminal (stdout and other /dev files), not a regular file.
bool stream_output(const std::string& path) {
  if (path.rfind("/dev/", 0) == 0 || path.rfind("/proc/", 0) == 0) return true;
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  return !ec && std::filesystem::exists(st) && !std::filesystem::is_regular_file(st);
}

int run_convert(const ConvertArgs& args) {
  const std::string in = args.in == "-" ? "/dev/stdin" : args.in;
  const std::string out = args.out == "-" ? "/dev/stdout" : args.out;
  // The output is written before anything else: were it the input under
  // another name (a path with ./, a symbolic or hard link), the snapshot
  // would be gone.
  std::error_code ec;
  GENESIS_CHECK(args.in != args.out && !std::filesystem::equivalent(in, out, ec),
                "convert: the output '", args.out, "' is the input '", args.in, "': name another file");
  debug::SnapshotCsvOptions options;
  options.device = args.device;
  options.sites = args.sites;
  const debug::SnapshotCsvResult r = debug::convert_torch_snapshot_file(in, out, options);
  if (stream_output(out)) {
    // The trace went to a pipe or the terminal: it cannot be read back, and
    // standard output may be the trace itself, so the summary goes to
    // standard error.
    if (args.json) {
      const json summary{{"input", args.in}, {"output", args.out}, {"device", r.device},
                         {"entries", r.entries}, {"rows", r.rows},    {"annotations", r.annotations}};
      std::fprintf(stderr, "%s\n", summary.dump(2, ' ', false, kBadUtf8).c_str());
    } else {
      std::fprintf(stderr, "%s: device %d, %s entries -> %s: %s lines\n", args.in.c_str(), r.device,
                   debug::format_thousands(r.entries).c_str(), args.out.c_str(),
                   debug::format_thousands(r.rows).c_str());
    }
    return 0;
  }
  const debug::Trace trace = debug::read_trace(out);
  const debug::TraceCounts& c = trace.counts;
  if (args.json) {
    const json out{{"input", args.in},
                   {"output", args.out},
                   {"device", r.device},
                   {"entries", r.entries},
                   {"rows", r.rows},
                   {"annotations", r.annotations},
                   {"events", trace.events.size()},
                   {"peak_live_bytes", trace.peak_live_bytes},
                   {"counts",
                    {{"alloc", c.alloc},
                     {"free_requested", c.free_requested},
                     {"free_completed", c.free_completed},
                     {"segment_alloc", c.segment_alloc},
                     {"segment_free", c.segment_free},
                     {"empty_cache", c.empty_cache},
                     {"oom", c.oom},
                     {"other_ignored", c.other_ignored},
                     {"unknown_frees", c.unknown_frees},
                     {"live_at_end", c.live_at_end}}}};
    std::printf("%s\n", out.dump(2, ' ', false, kBadUtf8).c_str());
    return 0;
  }
  std::printf("%s: device %d, %s entries -> %s: %s lines", args.in.c_str(), r.device,
              debug::format_thousands(r.entries).c_str(), args.out.c_str(), debug::format_thousands(r.rows).c_str());
  if (r.annotations > 0) std::printf(" (%s annotations left out)", debug::format_thousands(r.annotations).c_str());
  std::printf("\n%s", debug::format_trace_summary(trace).c_str());
  return 0;
}

}  // namespace

Command add_convert_command(CLI::App& app) {
  auto args = std::make_shared<ConvertArgs>();
  CLI::App* sub = app.add_subcommand(
      "convert", "Write a PyTorch memory snapshot (pickle) as a CSV allocation trace (gzip when OUT ends in .gz)");
  sub->add_option("in", args->in, "Snapshot: torch.cuda.memory._dump_snapshot() output (gzip too); - reads standard input")->required();
  sub->add_option("out", args->out, "CSV trace to write: time_us,action,addr,size,stream (data/traces/README.md); - writes standard output (the summary then goes to standard error)")
      ->required();
  sub->add_option("--device", args->device, "Device whose trace to write (default: the one with the most entries)")
      ->check(CLI::Range(0, 1 << 20));
  sub->add_flag("--sites", args->sites, "Add a site column: each allocation's stack frames");
  sub->add_flag("--json", args->json, "Print what was written as JSON");
  return Command{sub, [args] { return run_convert(*args); }};
}

}  // namespace genesis::tools
