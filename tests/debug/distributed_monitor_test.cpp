// The distributed memory monitor without processes: signatures and replays,
// report checks, node liveness, and the master's server over loopback.
#include <string>

#include <gtest/gtest.h>

#include "debug_test_util.h"
#include "genesis/core/error.h"
#include "genesis/debug/distributed_master.h"
#include "genesis/debug/distributed_monitor.h"
#include "genesis/debug/node_report.h"
#include "genesis/debug/report_auth.h"

namespace genesis::debug {
namespace {

NodeFigures node(const std::string& name, std::uint64_t used, std::uint64_t total, double interval = 1) {
  NodeFigures n;
  n.identity.node = name;
  n.interval_s = interval;
  DeviceFigures d;
  d.device = "0";
  d.sample = testing::make_sample(1, static_cast<double>(used), static_cast<double>(used), total);
  d.usage_percent = d.sample.utilization_percent();
  n.devices.push_back(d);
  return n;
}

TEST(ReportAuth, HmacMatchesRfc4231) {
  EXPECT_EQ(hmac_sha256_hex("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(ReportAuth, AcceptsOnceRejectsForgeriesStaleAndReplays) {
  ReportVerifier v("secret", 300);
  const std::int64_t now = 1'700'000'000;
  const std::string ts = std::to_string(now);
  const std::string nonce = make_nonce();
  const std::string body = "{\"a\": 1}";
  const std::string sig = sign_report("secret", ts, nonce, body);
  EXPECT_EQ(v.check(ts, nonce, sig, body, now), AuthResult::ok);
  EXPECT_EQ(v.check(ts, nonce, sig, body, now), AuthResult::replayed);
  const std::string n2 = make_nonce();
  EXPECT_EQ(v.check(ts, n2, sign_report("wrong", ts, n2, body), body, now), AuthResult::bad_signature);
  EXPECT_EQ(v.check(ts, n2, sign_report("secret", ts, n2, body), body + " ", now), AuthResult::bad_signature);
  EXPECT_EQ(v.check("", n2, "x", body, now), AuthResult::missing);
  EXPECT_EQ(v.check(ts, "short", std::string(64, 'a'), body, now), AuthResult::malformed);
  EXPECT_EQ(v.check("12x", n2, std::string(64, 'a'), body, now), AuthResult::malformed);
  const std::string old_ts = std::to_string(now - 301);
  EXPECT_EQ(v.check(old_ts, n2, sign_report("secret", old_ts, n2, body), body, now), AuthResult::stale);
  const std::string future = std::to_string(now + 301);
  EXPECT_EQ(v.check(future, n2, sign_report("secret", future, n2, body), body, now), AuthResult::stale);
  EXPECT_EQ(v.remembered_nonces(), 1u);
  // The nonce is forgotten once its timestamp left the window; by then the
  // timestamp check refuses the replay.
  EXPECT_EQ(v.check(ts, n2, sign_report("secret", ts, n2, body), body, now + 400), AuthResult::stale);
  EXPECT_THROW(ReportVerifier("", 300), InvalidArgumentError);
}

TEST(ReportAuth, NonceMemoryIsBounded) {
  ReportVerifier v("k", 300, 8);
  const std::string ts = "1000";
  for (int i = 0; i < 100; ++i) {
    const std::string n = make_nonce();
    ASSERT_EQ(v.check(ts, n, sign_report("k", ts, n, "b"), "b", 1000), AuthResult::ok);
  }
  EXPECT_LE(v.remembered_nonces(), 8u);
}

TEST(NodeReport, RoundTripsAndRejectsBadInput) {
  NodeFigures n = node("gpu-1", 5 * testing::kGiB, 10 * testing::kGiB);
  n.identity.rank = "3";
  n.devices[0].predicted_oom_seconds = 12.5;
  n.devices[0].risk_level = RiskLevel::critical;
  n.metrics_endpoint = "gpu-1:9464";
  n.warnings = {"high OOM risk"};
  const NodeFigures back = parse_node_report(node_report_json(n));
  EXPECT_EQ(back.identity.node, "gpu-1");
  EXPECT_EQ(back.identity.rank, "3");
  EXPECT_EQ(back.devices.at(0).sample.used, 5 * testing::kGiB);
  EXPECT_EQ(back.devices.at(0).risk_level, RiskLevel::critical);
  EXPECT_EQ(back.devices.at(0).predicted_oom_seconds, 12.5);
  EXPECT_EQ(back.metrics_endpoint, "gpu-1:9464");
  EXPECT_EQ(back.warnings.size(), 1u);

  for (const char* bad : {"", "{", "[]", "nul", "{\"version\": 1}", "{\"version\": 2, \"node\": \"a\", \"devices\": []}",
                          "{\"version\": 1, \"node\": 5, \"devices\": []}",
                          "{\"version\": 1, \"node\": \"\", \"devices\": []}",
                          "{\"version\": 1, \"node\": \"a\", \"devices\": {}}",
                          "{\"version\": 1, \"node\": \"a\", \"devices\": [{\"id\": \"0\", \"used\": -5}]}",
                          "{\"version\": 1, \"node\": \"a\", \"devices\": [{\"id\": \"0\", \"used\": \"5\"}]}",
                          "{\"version\": 1, \"node\": \"a\", \"devices\": [{\"id\": \"0\", \"risk_level\": 7}]}",
                          "{\"version\": 1, \"node\": \"a\", \"rank\": \"x1\", \"devices\": []}",
                          "{\"version\": 1, \"node\": \"a\", \"interval_s\": 0, \"devices\": []}",
                          "{\"version\": 1, \"node\": \"a\", \"devices\": [{\"id\": \"0\"}, {\"id\": \"0\"}]}"}) {
    EXPECT_THROW(parse_node_report(bad), InvalidArgumentError) << bad;
  }
  std::string many = "{\"version\": 1, \"node\": \"a\", \"devices\": [";
  for (int i = 0; i < 100; ++i) many += (i ? ",{\"id\": \"" : "{\"id\": \"") + std::to_string(i) + "\"}";
  EXPECT_THROW(parse_node_report(many + "]}"), InvalidArgumentError);
}

TEST(MasterState, NodesGoDownAfterThreeIntervalsAndComeBack) {
  MasterState s;
  s.accept(node("a", 1 * testing::kGiB, 10 * testing::kGiB, 1), 0);
  s.accept(node("b", 9 * testing::kGiB, 10 * testing::kGiB, 2), 0);
  auto nodes = s.nodes(2.5);
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_TRUE(nodes[0].up && nodes[1].up);
  nodes = s.nodes(3.5);  // a: 3.5 > 3 x 1 s; b: 3.5 <= 3 x 2 s
  EXPECT_FALSE(nodes[0].up);
  EXPECT_TRUE(nodes[1].up);
  EXPECT_NE(s.metrics_text(3.5).find("genesis_node_up{node=\"a\"} 0"), std::string::npos);
  s.accept(node("a", 2 * testing::kGiB, 10 * testing::kGiB, 1), 4);
  nodes = s.nodes(4);
  EXPECT_TRUE(nodes[0].up);
  EXPECT_EQ(nodes[0].reports, 2u);
  EXPECT_EQ(nodes[0].figures.devices[0].sample.used, 2 * testing::kGiB);
  EXPECT_NE(s.metrics_text(4).find("genesis_node_up{node=\"a\"} 1"), std::string::npos);
  // Never removed: still listed long after.
  EXPECT_EQ(s.nodes(1e6).size(), 2u);
  EXPECT_EQ(s.summary(1e6).nodes_up, 0u);
}

TEST(MasterState, NodeCountIsCapped) {
  MasterOptions o;
  o.max_nodes = 2;
  MasterState s(o);
  EXPECT_TRUE(s.accept(node("a", 1, 10), 0));
  EXPECT_TRUE(s.accept(node("b", 1, 10), 0));
  EXPECT_FALSE(s.accept(node("c", 1, 10), 0));
  EXPECT_TRUE(s.accept(node("a", 2, 10), 1));  // known nodes still report
  EXPECT_EQ(s.nodes(1).size(), 2u);
  EXPECT_EQ(s.rejected().at("too_many_nodes"), 1u);
  const std::string table = [&] {
    NodeFigures evil = node("\x1b[2Jx", 1, 10);
    MasterState t;
    t.accept(evil, 0);
    return t.table(0);
  }();
  EXPECT_EQ(table.find('\x1b'), std::string::npos);
}

TEST(MasterState, SummaryFindsImbalanceAndClosestToOom) {
  MasterState s;
  s.accept(node("a", 2 * testing::kGiB, 10 * testing::kGiB), 0);
  NodeFigures b = node("b", 8 * testing::kGiB, 10 * testing::kGiB);
  b.devices[0].predicted_oom_seconds = 90;
  b.warnings = {"high OOM risk on device 0"};
  s.accept(b, 0);
  NodeFigures c = node("c", 5 * testing::kGiB, 10 * testing::kGiB);
  c.identity.rank = "2";
  s.accept(c, 0);
  const JobSummary j = s.summary(0.5);
  EXPECT_EQ(j.nodes_up, 3u);
  EXPECT_NEAR(j.imbalance_percent, 60.0, 1e-9);
  EXPECT_EQ(j.most_loaded.node, "b");
  EXPECT_EQ(j.least_loaded.node, "a");
  EXPECT_EQ(j.closest_to_oom.node, "b");
  EXPECT_EQ(j.closest_to_oom.value, 90);
  ASSERT_EQ(j.warnings.size(), 1u);
  EXPECT_EQ(j.warnings[0], "b: high OOM risk on device 0");
  const std::string table = s.table(0.5);
  EXPECT_NE(table.find("imbalance 60.0%"), std::string::npos) << table;
  EXPECT_NE(table.find("c rank 2"), std::string::npos) << table;
}

TEST(MasterState, ServiceDiscoveryListsEndpoints) {
  MasterState s;
  NodeFigures a = node("a", 1, 10);
  a.metrics_endpoint = "a:9464";
  s.accept(a, 0);
  s.accept(node("b", 1, 10), 0);  // no endpoint: not listed
  const std::string sd = s.service_discovery_json();
  EXPECT_NE(sd.find("\"a:9464\""), std::string::npos) << sd;
  EXPECT_EQ(sd.find("\"b\""), std::string::npos) << sd;
}

TEST(WorkerBackoff, GrowsCappedWithJitter) {
  WorkerOptions o;
  o.interval_s = 1;
  o.max_backoff_s = 30;
  EXPECT_DOUBLE_EQ(backoff_seconds(o, 0, 1.0), 1);
  EXPECT_DOUBLE_EQ(backoff_seconds(o, 3, 1.0), 8);
  EXPECT_DOUBLE_EQ(backoff_seconds(o, 3, 0.0), 4);
  EXPECT_DOUBLE_EQ(backoff_seconds(o, 50, 1.0), 30);
  EXPECT_GE(backoff_seconds(o, 50, 0.0), 15);
}

TEST(MasterServer, ServesSignedReportsAndTurnsAwayTheRest) {
  MasterState state;
  MasterServerOptions o;
  o.port = 0;
  o.token = "t0ken";
  o.max_body_bytes = 4096;
  MasterServer server(state, o);
  WorkerOptions w;
  w.port = server.port();
  w.token = "t0ken";
  w.timeout_s = 2;
  ReportClient good(w);
  EXPECT_TRUE(good.send(node_report_json(node("a", 1, 10))).ok);
  w.token = "wrong";
  ReportClient bad(w);
  SendResult r = bad.send(node_report_json(node("evil", 1, 10)));
  EXPECT_EQ(r.status, 401);
  w.token = "";
  ReportClient unsigned_client(w);
  EXPECT_EQ(unsigned_client.send(node_report_json(node("evil", 1, 10))).status, 401);
  EXPECT_EQ(good.send(std::string(5000, ' ')).status, 413);
  EXPECT_EQ(good.send(std::string(100000, ' ')).status, 413);
  EXPECT_EQ(good.send("{\"version\": 1, \"node\": 3}").status, 400);
  EXPECT_EQ(good.send("not json").status, 400);
  EXPECT_TRUE(good.send(node_report_json(node("b", 1, 10))).ok);
  const auto nodes = state.nodes(server.now_s());
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[0].figures.identity.node, "a");
  EXPECT_EQ(nodes[1].figures.identity.node, "b");
  const auto rejected = state.rejected();
  EXPECT_EQ(rejected.at("unauthorized"), 2u);
  EXPECT_EQ(rejected.at("too_large"), 2u);
  EXPECT_EQ(rejected.at("malformed"), 2u);
}

TEST(ReportClient, SaysWhenTheMasterHostDoesNotResolve) {
  WorkerOptions w;
  w.master_host = "no-such-host.invalid";  // .invalid never resolves (RFC 6761)
  w.port = 29500;
  w.timeout_s = 2;
  ReportClient client(w);
  const SendResult r = client.send("{}");
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("no-such-host.invalid:29500: the host name does not resolve"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("check --master-host"), std::string::npos) << r.error;
}

TEST(MasterServer, PortInUseAndOpenAddressesWithoutToken) {
  MasterState state;
  MasterServerOptions o;
  o.port = 0;
  MasterServer first(state, o);
  o.port = first.port();
  try {
    MasterServer second(state, o);
    FAIL() << "bound a port in use";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(e.message().find("port " + std::to_string(o.port) + " on 127.0.0.1 is in use: choose another with --port"),
              std::string::npos)
        << e.message();
  }
  o.port = 0;
  o.bind = "0.0.0.0";
  try {
    MasterServer open(state, o);
    FAIL() << "listened on every address without a token";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(e.message().find("without a token"), std::string::npos) << e.message();
  }
}

}  // namespace
}  // namespace genesis::debug
