// What one master of the distributed memory monitor costs as jobs grow.
//
//   build/distributed_bench [--nodes 1000,10000] [--devices D] [--threads T] [--no-http]
//
// For each node count N (one worker per GPU rank, D devices per worker,
// default 1), one process simulates N workers reporting to a master:
// 1. In process: the master's work per report without the network:
//    HMAC-SHA256 check, JSON parse and validation, state update
//    (thread CPU time per report, over 3 rounds of N reports).
// 2. Memory per node: the growth of resident memory while N nodes are
//    added, divided by N.
// 3. /metrics and /status render time and size with N nodes.
// 4. Over loopback HTTP: T client threads post N signed reports per round
//    (3 rounds) to a MasterServer; throughput, and the master's CPU per
//    report (process CPU minus the client threads' own CPU). Every report
//    opens a connection, as workers reporting every few seconds do.
// Output: one RESULT line per figure.
#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "genesis/debug/distributed_master.h"
#include "genesis/debug/distributed_monitor.h"
#include "genesis/debug/memory_metrics.h"
#include "genesis/debug/node_report.h"
#include "genesis/debug/report_auth.h"

using namespace genesis::debug;

namespace {

const char* kToken = "bench-token";

double cpu_seconds(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

NodeFigures make_node(int rank, int devices, int round) {
  NodeFigures n;
  n.identity.node = "node-" + std::to_string(rank / 8);
  n.identity.rank = std::to_string(rank);
  n.identity.local_rank = std::to_string(rank % 8);
  n.identity.world_size = "10000";
  n.interval_s = 5;
  n.source = "nvml";
  n.pid = 1000 + rank;
  n.metrics_endpoint = n.identity.node + ":" + std::to_string(9464 + rank % 8);
  n.host_rss = 20ull << 30;
  for (int d = 0; d < devices; ++d) {
    DeviceFigures f;
    f.device = std::to_string(d);
    f.name = "NVIDIA H100 80GB HBM3";
    MemorySample& s = f.sample;
    s.total = 80ull << 30;
    s.reserved = (40ull << 30) + (static_cast<std::uint64_t>(rank) << 20) + static_cast<std::uint64_t>(round);
    s.used = s.reserved + (500ull << 20);
    s.allocated = s.reserved - (3ull << 30);
    s.active = s.allocated;
    s.cached = s.reserved - s.allocated;
    s.largest_free_block = 1ull << 30;
    s.num_allocs = 123456789;
    f.usage_percent = s.utilization_percent();
    f.risk_level = RiskLevel::low;
    f.recommendation = "No action needed: usage is 50.6% of 80 GiB and the peaks are not growing";
    n.devices.push_back(f);
  }
  return n;
}

struct Signed {
  std::string ts, nonce, sig, body;
};

std::uint64_t rss_bytes() { return self_resident_bytes(); }

void in_process(int nodes, int devices) {
  // Bodies are built ahead: their cost is the workers', not the master's.
  std::vector<Signed> reports;
  reports.reserve(static_cast<std::size_t>(nodes) * 3);
  const std::string ts = std::to_string(unix_seconds_now());
  for (int round = 0; round < 3; ++round) {
    for (int r = 0; r < nodes; ++r) {
      Signed s;
      s.ts = ts;
      s.nonce = make_nonce();
      s.body = node_report_json(make_node(r, devices, round));
      s.sig = sign_report(kToken, s.ts, s.nonce, s.body);
      reports.push_back(std::move(s));
    }
  }
  ReportVerifier verifier(kToken);
  const std::uint64_t rss0 = rss_bytes();
  MasterState state;
  double first_round_cpu = 0;
  const double cpu0 = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
  std::size_t i = 0;
  for (int round = 0; round < 3; ++round) {
    for (int r = 0; r < nodes; ++r, ++i) {
      const Signed& s = reports[i];
      if (verifier.check(s.ts, s.nonce, s.sig, s.body, unix_seconds_now()) != AuthResult::ok) std::abort();
      state.accept(parse_node_report(s.body), 1.0 + round);
    }
    if (round == 0) first_round_cpu = cpu_seconds(CLOCK_THREAD_CPUTIME_ID) - cpu0;
  }
  const double cpu = cpu_seconds(CLOCK_THREAD_CPUTIME_ID) - cpu0;
  const std::uint64_t rss1 = rss_bytes();
  std::printf("RESULT nodes=%d devices=%d in_process_cpu_us_per_report=%.1f (first round, nodes added: %.1f)\n",
              nodes, devices, cpu / static_cast<double>(i) * 1e6, first_round_cpu / nodes * 1e6);
  std::printf("RESULT nodes=%d devices=%d memory_bytes_per_node=%.0f (resident growth incl. %zu remembered nonces)\n",
              nodes, devices, static_cast<double>(rss1 - rss0) / nodes, verifier.remembered_nonces());
  for (int k = 0; k < 2; ++k) {
    const double t0 = wall_seconds();
    const std::string text = state.metrics_text(3.5);
    const double t1 = wall_seconds();
    const std::string status = state.status_json(3.5);
    const double t2 = wall_seconds();
    if (k == 1) {
      std::size_t series = 0;
      for (std::size_t p = 0; p < text.size(); p = text.find('\n', p) + 1) {
        if (text[p] != '#') ++series;
      }
      std::printf("RESULT nodes=%d devices=%d metrics_render_ms=%.1f metrics_bytes=%zu series=%zu "
                  "status_render_ms=%.1f status_bytes=%zu\n",
                  nodes, devices, (t1 - t0) * 1e3, text.size(), series, (t2 - t1) * 1e3, status.size());
    }
  }
}

void over_http(int nodes, int devices, int threads) {
  MasterState state;
  MasterServerOptions o;
  o.port = 0;
  o.token = kToken;
  o.threads = 32;
  MasterServer server(state, o);
  std::vector<std::string> bodies;
  for (int r = 0; r < nodes; ++r) bodies.push_back(node_report_json(make_node(r, devices, 0)));
  std::atomic<int> failures{0};
  std::vector<double> client_cpu(static_cast<std::size_t>(threads), 0);
  const double proc0 = cpu_seconds(CLOCK_PROCESS_CPUTIME_ID);
  const double wall0 = wall_seconds();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      const double c0 = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
      WorkerOptions w;
      w.port = server.port();
      w.token = kToken;
      for (int round = 0; round < 3; ++round) {
        for (int r = t; r < nodes; r += threads) {
          // A fresh client per report: a new connection, like a worker
          // whose previous connection timed out between reports.
          ReportClient client(w);
          if (!client.send(bodies[static_cast<std::size_t>(r)]).ok) failures.fetch_add(1);
        }
      }
      client_cpu[static_cast<std::size_t>(t)] = cpu_seconds(CLOCK_THREAD_CPUTIME_ID) - c0;
    });
  }
  for (std::thread& th : pool) th.join();
  const double wall = wall_seconds() - wall0;
  double clients = 0;
  for (double c : client_cpu) clients += c;
  const double master_cpu = cpu_seconds(CLOCK_PROCESS_CPUTIME_ID) - proc0 - clients;
  const double reports = 3.0 * nodes;
  std::printf("RESULT nodes=%d devices=%d http_reports_per_s=%.0f http_master_cpu_us_per_report=%.1f "
              "client_cpu_us_per_report=%.1f failures=%d nodes_seen=%zu\n",
              nodes, devices, reports / wall, master_cpu / reports * 1e6, clients / reports * 1e6, failures.load(),
              state.nodes(0).size());
  server.stop();
}

std::vector<int> parse_list(const char* text) {
  std::vector<int> out;
  for (const char* p = text; *p != '\0';) {
    out.push_back(std::atoi(p));
    p = std::strchr(p, ',');
    if (p == nullptr) break;
    ++p;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> counts = {1000, 10000};
  int devices = 1;
  int threads = 4;
  bool http = true;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--nodes") == 0 && i + 1 < argc) counts = parse_list(argv[++i]);
    else if (std::strcmp(argv[i], "--devices") == 0 && i + 1 < argc) devices = std::atoi(argv[++i]);
    else if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (std::strcmp(argv[i], "--no-http") == 0) http = false;
    else {
      std::fprintf(stderr, "usage: distributed_bench [--nodes 1000,10000] [--devices D] [--threads T] [--no-http]\n");
      return 2;
    }
  }
  if (devices < 1 || threads < 1) return 2;
  for (int n : counts) {
    if (n < 1) return 2;
    in_process(n, devices);
    if (http) over_http(n, devices, threads);
  }
  return 0;
}
