// genesis-mem convert: a PyTorch memory snapshot (pickle) to the CSV trace
// format, so that recorded traces are kept, shared and replayed in the
// project's own format. The conversion is library code
// (genesis/debug/torch_snapshot_csv.h); the file written is read back with
// the trace reader, so what is reported is what a replay will see.
#include <cstdio>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

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

int run_convert(const ConvertArgs& args) {
  GENESIS_CHECK(args.in != args.out, "convert: the output '", args.out, "' is the input: name another file");
  debug::SnapshotCsvOptions options;
  options.device = args.device;
  options.sites = args.sites;
  const debug::SnapshotCsvResult r = debug::convert_torch_snapshot_file(args.in, args.out, options);
  const debug::Trace trace = debug::read_trace(args.out);
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
    std::printf("%s\n", out.dump(2).c_str());
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
  sub->add_option("in", args->in, "Snapshot: torch.cuda.memory._dump_snapshot() output")->required();
  sub->add_option("out", args->out, "CSV trace to write: time_us,action,addr,size,stream (data/traces/README.md)")
      ->required();
  sub->add_option("--device", args->device, "Device whose trace to write (default: the one with the most entries)")
      ->check(CLI::Range(0, 1 << 20));
  sub->add_flag("--sites", args->sites, "Add a site column: each allocation's stack frames");
  sub->add_flag("--json", args->json, "Print what was written as JSON");
  return Command{sub, [args] { return run_convert(*args); }};
}

}  // namespace genesis::tools
