// The HTTP servers of the master and the metrics endpoints against clients
// that misbehave: raw sockets, since a well-behaved client library cannot
// send what these tests send.
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "genesis/debug/distributed_master.h"
#include "genesis/debug/distributed_monitor.h"
#include "genesis/debug/metrics_server.h"

namespace genesis::debug {
namespace {

using Clock = std::chrono::steady_clock;

int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  return fd;
}

void send_all(int fd, const std::string& data) {
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n <= 0) return;  // the server may close early: what it answered is what counts
    done += static_cast<std::size_t>(n);
  }
}

// Reads until the server closes or `timeout_s` passes.
std::string read_all(int fd, double timeout_s) {
  std::string out;
  const auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<int>(timeout_s * 1000));
  char buf[4096];
  while (Clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (::poll(&p, 1, static_cast<int>(std::max<long long>(left, 1))) <= 0) continue;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

// One request, the sending side optionally shut down after it (as
// `nc -N` and HTTP/1.0 clients do), the whole answer.
std::string exchange(int port, const std::string& request, bool half_close = false, double timeout_s = 5) {
  const int fd = connect_to(port);
  send_all(fd, request);
  if (half_close) ::shutdown(fd, SHUT_WR);
  std::string reply = read_all(fd, timeout_s);
  ::close(fd);
  return reply;
}

std::string body_of(const std::string& reply) {
  const auto at = reply.find("\r\n\r\n");
  return at == std::string::npos ? std::string() : reply.substr(at + 4);
}

MasterServerOptions local_master() {
  MasterServerOptions o;
  o.port = 0;
  o.max_body_bytes = 4096;
  return o;
}

TEST(HttpServer, EndlessHeadersAreRefusedNotStored) {
  MasterState state;
  MasterServer server(state, local_master());
  // 256 KiB of one-byte headers and no blank line: the server must answer
  // once the head passes its limit, not keep every line until the client
  // stops.
  std::string flood = "GET /status HTTP/1.1\r\n";
  while (flood.size() < 256 * 1024) flood += "X:b\r\n";
  const auto t0 = Clock::now();
  const std::string reply = exchange(server.port(), flood, false, 4);
  EXPECT_EQ(reply.rfind("HTTP/1.1 431 ", 0), 0u) << reply.substr(0, 200);
  EXPECT_NE(body_of(reply).find("exceed 16384 bytes"), std::string::npos) << reply;
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 3.5);
  // A request line alone over the limit.
  const std::string long_line = exchange(server.port(), "GET /" + std::string(20000, 'a') + " HTTP/1.1\r\n\r\n");
  EXPECT_EQ(long_line.rfind("HTTP/1.1 414 ", 0), 0u) << long_line.substr(0, 200);
  // The master serves on.
  EXPECT_EQ(exchange(server.port(), "GET /status HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 200 ", 0), 0u);
}

TEST(HttpServer, TricklingClientIsCutOffAndBlocksNoOne) {
  MasterState state;
  MasterServerOptions o = local_master();
  o.threads = 1;  // the trickler takes the only thread
  o.read_timeout_s = 1;
  MasterServer server(state, o);
  std::atomic<bool> done{false};
  std::string trickler_reply;
  std::thread trickler([&] {
    const int fd = connect_to(server.port());
    send_all(fd, "GET /status HTTP/1.1\r\n");
    // A header line every 100 ms: each read comes well within the
    // timeout, the whole request never does.
    const auto until = Clock::now() + std::chrono::seconds(6);
    while (!done && Clock::now() < until) {
      send_all(fd, "X-Slow: 1\r\n");
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 100) > 0) {
        trickler_reply = read_all(fd, 1);
        break;
      }
    }
    ::close(fd);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto t0 = Clock::now();
  const std::string reply = exchange(server.port(), "GET /status HTTP/1.1\r\n\r\n", false, 5);
  const double waited = std::chrono::duration<double>(Clock::now() - t0).count();
  done = true;
  trickler.join();
  EXPECT_EQ(reply.rfind("HTTP/1.1 200 ", 0), 0u) << reply.substr(0, 200);
  EXPECT_LT(waited, 3.0);
  EXPECT_EQ(trickler_reply.rfind("HTTP/1.1 408 ", 0), 0u) << trickler_reply;
  EXPECT_NE(body_of(trickler_reply).find("did not arrive within 1 s"), std::string::npos) << trickler_reply;
}

TEST(HttpServer, EveryRefusalSaysWhatWasWrong) {
  MasterState state;
  MasterServer server(state, local_master());
  const int port = server.port();
  struct Case {
    std::string request;
    std::string status;
    std::string words;
  };
  const Case cases[] = {
      {"\x01\x02garbage\r\n\r\n", "400", "malformed request line"},
      {"GET /status\r\n\r\n", "400", "expected 'METHOD /path HTTP/1.1'"},
      {"GET /status HTTP/2.0\r\n\r\n", "505", "use HTTP/1.1"},
      {"GET /status HTTP/1.1\r\nno colon here\r\n\r\n", "400", "malformed header line 2"},
      {"GET /nothing HTTP/1.1\r\n\r\n", "404", "the pages are /metrics, /status, /sd, /"},
      {"DELETE /status HTTP/1.1\r\n\r\n", "405", "read-only: GET, or POST /report"},
      {"POST /report HTTP/1.1\r\n\r\n{}", "411", "needs a Content-Length"},
      {"POST /report HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", "411", "chunked"},
      {"POST /report HTTP/1.1\r\nContent-Length: 12abc\r\n\r\n{}", "400", "is not a byte count"},
      {"POST /report HTTP/1.1\r\nContent-Length: -5\r\n\r\n{}", "400", "is not a byte count"},
      {"POST /report HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 50\r\n\r\n{}", "400",
       "two different Content-Length"},
      {"POST /report HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n{}", "413", "over the limit of 4096"},
      {"POST /report HTTP/1.1\r\nContent-Length: 100\r\n\r\n{\"a\":", "400", "the body ended after 5 of its 100"},
  };
  for (const Case& c : cases) {
    // Half-closed, as `printf ... | nc -N` sends: the answer must still come,
    // and at once (the servers wait for nothing once the client is done).
    const auto t0 = Clock::now();
    const std::string reply = exchange(port, c.request, true);
    EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 1.5) << c.request;
    EXPECT_EQ(reply.rfind("HTTP/1.1 " + c.status + " ", 0), 0u) << c.request << "\n-> " << reply;
    EXPECT_NE(body_of(reply).find(c.words), std::string::npos) << c.request << "\n-> " << reply;
  }
  const std::string del = exchange(port, "DELETE / HTTP/1.1\r\n\r\n", true);
  EXPECT_NE(del.find("\r\nAllow: GET"), std::string::npos) << del;
  // HEAD: the headers of a GET, no body.
  const std::string head = exchange(port, "HEAD /metrics HTTP/1.1\r\n\r\n", true);
  EXPECT_EQ(head.rfind("HTTP/1.1 200 ", 0), 0u) << head;
  EXPECT_EQ(body_of(head), "");
  // A query does not change the page.
  EXPECT_EQ(exchange(port, "GET /status?x=1 HTTP/1.0\r\n\r\n", true).rfind("HTTP/1.1 200 ", 0), 0u);
  EXPECT_EQ(state.rejected().at("too_large"), 1u);
}

TEST(HttpServer, MetricsEndpointRefusesFloodsAndNamesItsPages) {
  MetricsServer server("127.0.0.1", 0, [] { return std::string("genesis_up 1\n"); });
  std::string flood = "GET /metrics HTTP/1.1\r\n";
  while (flood.size() < 128 * 1024) flood += "X:b\r\n";
  EXPECT_EQ(exchange(server.port(), flood, false, 4).rfind("HTTP/1.1 431 ", 0), 0u);
  const std::string missing = exchange(server.port(), "GET /metricz HTTP/1.1\r\n\r\n", true);
  EXPECT_EQ(missing.rfind("HTTP/1.1 404 ", 0), 0u) << missing;
  EXPECT_NE(body_of(missing).find("no page '/metricz' here: the pages are /metrics, /"), std::string::npos) << missing;
  const std::string post = exchange(server.port(), "POST /metrics HTTP/1.1\r\nContent-Length: 1\r\n\r\nx", true);
  EXPECT_EQ(post.rfind("HTTP/1.1 405 ", 0), 0u) << post;
  EXPECT_NE(body_of(post).find("read-only: GET only"), std::string::npos) << post;
  const std::string ok = exchange(server.port(), "GET /metrics HTTP/1.1\r\n\r\n", true);
  EXPECT_EQ(body_of(ok), "genesis_up 1\n") << ok;
}

TEST(HttpServer, HostPortBracketsIpv6) {
  EXPECT_EQ(host_port("127.0.0.1", 9464), "127.0.0.1:9464");
  EXPECT_EQ(host_port("node-3", 80), "node-3:80");
  EXPECT_EQ(host_port("::1", 9464), "[::1]:9464");
  EXPECT_EQ(host_port("fe80::1", 1), "[fe80::1]:1");
  EXPECT_EQ(host_port("[::1]", 2), "[::1]:2");
}

}  // namespace
}  // namespace genesis::debug
