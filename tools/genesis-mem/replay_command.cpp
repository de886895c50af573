// genesis-mem replay: replays an allocation trace under one or more
// allocator configurations and reports peak reserved vs peak live bytes and
// the time per event. The work is library code (genesis/debug/replay.h,
// replay_report.h); this file maps options onto it and prints.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "json_text.h"
#include "command.h"
#include "genesis/core/bytes.h"
#include "genesis/core/error.h"
#include "genesis/debug/replay.h"
#include "genesis/memory/alloc_conf.h"
#include "genesis/debug/replay_reference.h"
#include "genesis/debug/replay_report.h"
#include "genesis/debug/trace.h"
#include "progress_bar.h"
#include "replay_corpus.h"
#include "source_options.h"

namespace genesis::tools {

namespace {

// ordered: keys print in the order written (trace, device, results, reference).
using json = nlohmann::ordered_json;

struct ReplayArgs {
  std::string trace;
  std::string corpus;  // a folder: every trace in it (replay_corpus.h)
  std::string capacity;
  std::string device = "sim";
  std::vector<std::string> configs;
  bool compare = false;
  bool json = false;
  bool progress = false;
  bool no_progress = false;
  unsigned repeat = 1;
  int warmup = -1;
  double memory_fraction = 1.0;
  bool memory_fraction_given = false;  // --memory-fraction was on the command line
  std::string sim_vmm_cost = "none";
  std::string alloc_conf;  // allocator options on top of every configuration
};

json counts_json(const debug::TraceCounts& c) {
  return json{{"lines", c.lines},
              {"alloc", c.alloc},
              {"free_requested", c.free_requested},
              {"free_completed", c.free_completed},
              {"segment_alloc", c.segment_alloc},
              {"segment_free", c.segment_free},
              {"empty_cache", c.empty_cache},
              {"oom", c.oom},
              {"other_ignored", c.other_ignored},
              {"unknown_frees", c.unknown_frees},
              {"realloc_of_live", c.realloc_of_live},
              {"live_at_end", c.live_at_end}};
}

json result_json(const debug::ReplayResult& r) {
  const memory::MemoryStats& s = r.final_stats;
  return json{{"config", r.config},
              {"upstream", r.upstream},
              {"capacity", r.capacity},
              {"events", r.events},
              {"peak_live_bytes", r.peak_live_bytes},
              {"peak_reserved_bytes", r.peak_reserved_bytes},
              {"reserved_per_live", r.reserved_per_live},
              {"ns_per_event", r.ns_per_event},
              {"ns_per_event_runs", r.ns_per_event_runs},
              {"upstream_allocs", r.upstream_allocs},
              {"stream_borrows", r.stream_borrows},
              {"upstream_frees", r.upstream_frees},
              {"ooms", r.ooms},
              // false: allocations ran out of memory and were skipped, so
              // the figures are of a run that did less than the trace.
              {"complete", r.ooms == 0},
              {"unknown_frees", r.unknown_frees},
              {"live_at_end", r.live_at_end},
              {"allocated_after_cleanup", r.allocated_after_cleanup},
              {"final_stats",
               {{"allocated_bytes", s.allocated_bytes[memory::kStatAggregate].current},
                {"reserved_bytes", s.reserved_bytes[memory::kStatAggregate].current},
                {"peak_allocated_bytes", s.allocated_bytes[memory::kStatAggregate].peak},
                {"num_allocs", s.num_allocs},
                {"num_frees", s.num_frees},
                {"num_cache_hits", s.num_cache_hits},
                {"num_cache_misses", s.num_cache_misses},
                {"num_thread_cache_hits", s.num_thread_cache_hits},
                {"num_ooms", s.num_ooms},
                {"num_cache_flushes", s.num_cache_flushes},
                {"num_stream_borrows", s.num_stream_borrows}}}};
}

int run_replay(const ReplayArgs& args) {
  GENESIS_CHECK(args.trace.empty() != args.corpus.empty(),
                args.trace.empty() ? "replay: name a trace file, or a folder of traces with --corpus DIR"
                                   : "replay: give a trace file or --corpus DIR, not both");
  // Everything that can be wrong with the options fails before the trace is read.
  const std::size_t capacity = args.capacity.empty() ? 0 : genesis::parse_bytes(args.capacity);
  const debug::ReplayDevice device = debug::parse_replay_device(args.device);
  const memory::SimulatedDevice::VmmCost vmm_cost = memory::SimulatedDevice::VmmCost::parse(args.sim_vmm_cost);
  std::vector<std::string> names = args.configs;
  if (names.empty()) {
    if (args.compare || !args.corpus.empty()) {
      for (const auto& c : debug::known_replay_configs()) names.push_back(c.name);
    } else {
      names.push_back("genesis");
    }
  }
  std::vector<debug::ReplayConfig> configs;
  for (const std::string& name : names) {
    debug::ReplayConfig config = debug::make_replay_config(name, device, capacity);
    config.options.memory_fraction = args.memory_fraction;
    if (!args.alloc_conf.empty()) {
      std::vector<std::string> keys;
      config.options = memory::parse_alloc_conf(args.alloc_conf, config.options, "--alloc-conf", &keys);
      GENESIS_CHECK(!args.memory_fraction_given ||
                        std::find(keys.begin(), keys.end(), "memory_fraction") == keys.end(),
                    "--memory-fraction and memory_fraction in --alloc-conf are the same option; give one");
      config.name += "+conf";
    }
    config.sim_vmm_cost = vmm_cost;
    configs.push_back(std::move(config));
  }

  const bool show_progress = !args.no_progress && (args.progress || stderr_is_terminal());
  if (!args.corpus.empty()) {
    return run_replay_corpus(
        {args.corpus, device, std::move(configs), args.repeat, args.warmup, args.json, show_progress});
  }
  if (show_progress) std::fprintf(stderr, "reading %s ...", args.trace.c_str());
  const debug::Trace trace = debug::read_trace(args.trace == "-" ? "/dev/stdin" : args.trace);
  if (show_progress) std::fputs("\r\033[K", stderr);
  check_replayable(trace, args.trace);
  // The trace's reference figures (Note [Reference figures]), read before the
  // replays so that a malformed file fails at once rather than after them.
  const std::optional<debug::ReferenceFigures> references = debug::load_reference_figures(args.trace);

  std::vector<debug::ReplayResult> results;
  for (const debug::ReplayConfig& config : configs) {
    ProgressBar bar("replay " + config.name, show_progress);
    debug::ReplayOptions options;
    options.repeat = args.repeat;
    options.warmup = args.warmup;
    if (show_progress) options.progress = [&bar](std::uint64_t done, std::uint64_t total) { bar.update(done, total); };
    results.push_back(debug::replay(trace, config, options));
  }

  if (args.json) {
    json out{{"trace",
              {{"path", args.trace},
               {"events", trace.events.size()},
               {"peak_live_bytes", trace.peak_live_bytes},
               {"counts", counts_json(trace.counts)}}},
             {"device", debug::replay_device_name(device)},
             {"repeat", args.repeat},
             {"warmup", args.warmup},  // -1: auto (kReplayAutoWarmup of untimed runs on sim, none on cuda)
             {"results", json::array()}};
    for (const auto& r : results) out["results"].push_back(result_json(r));
    if (references) {
      json refs = json::array();
      for (const auto& ref : references->results) {
        refs.push_back({{"allocator", ref.allocator},
                        {"peak_reserved_bytes", ref.peak_reserved_bytes},
                        {"reserved_per_live", ref.reserved_per_live},
                        {"ns_per_event", ref.ns_per_event}});
      }
      out["reference"] = {{"label", references->label},
                          {"path", debug::reference_path_for(args.trace)},
                          {"results", refs}};
    }
    std::printf("%s\n", out.dump(2, ' ', false, kBadUtf8).c_str());
    return report_out_of_memory(args.trace, results);
  }

  std::string text = debug::format_trace_summary(trace);
  text += "device: " + std::string(debug::replay_device_name(device));
  if (!results.empty()) {
    text += " (" + results.front().upstream + ", " + debug::format_thousands(results.front().capacity) + " bytes)";
  }
  text += ", repeat " + std::to_string(args.repeat) + (args.repeat > 1 ? " (median ns/event)" : "");
  if (args.warmup > 0) text += ", after " + std::to_string(args.warmup) + " untimed run" + (args.warmup > 1 ? "s" : "");
  if (args.warmup < 0 && device == debug::ReplayDevice::kSimulated)
    text += ", after " + std::to_string(debug::kReplayAutoWarmup.count()) + " ms of untimed runs";
  text += "\n\n";
  text += debug::format_replay_table(results, references);
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);  // the table first, then what standard error says about it
  return report_out_of_memory(args.trace, results);
}

}  // namespace

Command add_replay_command(CLI::App& app) {
  auto args = std::make_shared<ReplayArgs>();
  CLI::App* sub = app.add_subcommand(
      "replay", "Replay an allocation trace (CSV, plain or .gz) through Genesis's allocator and report peak "
                "reserved vs peak live bytes and ns per event");
  sub->add_option("trace", args->trace,
                  "Trace file: time_us,action,addr,size,stream (data/traces/README.md), or a PyTorch memory "
                  "snapshot (torch.cuda.memory._dump_snapshot; its busiest device); - reads standard input");
  sub->add_option("--corpus", args->corpus,
                  "Replay every trace in this folder (NAME.trace.csv[.gz], NAME.pickle; NAME.json sidecars give "
                  "PyTorch's figures) through every configuration (or the --config ones): one table");
  sub->add_option("--capacity", args->capacity,
                  "Simulated device size, e.g. 80GB (default 128 GiB, more for a trace whose peak live bytes exceed a quarter of that, at most 1 TiB); with --device cuda a cap "
                  "on reserved memory")
      ->check(capacity_validator());
  sub->add_option("--device", args->device, "sim (simulated GPU, default) or cuda (GPU 0)");
  sub->add_option("--config", args->configs,
                  "Allocator configuration to run (repeatable): genesis, genesis-classic, genesis-expandable, "
                  "genesis-expandable-pages, genesis-no-tcache")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  sub->add_flag("--compare", args->compare, "Run every configuration (or the --config ones) side by side");
  sub->add_flag("--json", args->json, "Machine-readable output (JSON on stdout)");
  CLI::Option* progress = sub->add_flag("--progress", args->progress, "Show a progress bar even if stderr is not a terminal");
  sub->add_flag("--no-progress", args->no_progress, "Never show a progress bar")->excludes(progress);
  sub->add_option("--repeat", args->repeat, "Replay N times; report the median ns/event")
      ->check(CLI::Range(1u, 1000u));
  sub->add_option("--warmup", args->warmup,
                  "Untimed replays before the timed ones (default: as many as fit in " +
                      std::to_string(debug::kReplayAutoWarmup.count()) + " ms on the simulated device, none on cuda)")
      ->check(CLI::Range(0, 100));
  sub->add_option("--sim-vmm-cost", args->sim_vmm_cost,
                  "Simulated device: what mapping a 2 MiB page costs: none (default), cuda (H200 driver figures), "
                  "or MAP,SET_ACCESS,UNMAP microseconds per page");
  sub->add_option("--alloc-conf", args->alloc_conf,
                  "Allocator options on top of every configuration, as GENESIS_ALLOC_CONF writes them "
                  "(e.g. thread_cache_size:64MB,thread_cache_large_park:2); the configurations are named NAME+conf");
  CLI::Option* fraction = sub->add_option("--memory-fraction", args->memory_fraction,
                  "Cap reserved memory at this fraction of the device, in (0, 1]")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            double f = 0;
            try {
              std::size_t used = 0;
              f = std::stod(text, &used);
              if (used != text.size()) f = -1;
            } catch (const std::exception&) {
              f = -1;
            }
            return f > 0 && f <= 1 ? std::string() : "'" + text + "': expected a fraction in (0, 1], such as 0.5";
          },
          "FRACTION"));
  return Command{sub, [args, fraction] {
                   args->memory_fraction_given = fraction->count() > 0;
                   return run_replay(*args);
                 }};
}

}  // namespace genesis::tools
