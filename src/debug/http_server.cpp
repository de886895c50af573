// The metrics endpoints' and the master's HTTP server (Note [HTTP server]).
#include "http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "genesis/core/error.h"
#include "genesis/core/fork.h"

namespace genesis::debug::detail {

namespace {

using Clock = std::chrono::steady_clock;

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

// RFC 9110 token characters: what a method and a header name may hold.
bool is_token(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) != 0) continue;
    if (std::strchr("!#$%&'*+-.^_`|~", c) != nullptr && c != '\0') continue;
    return false;
  }
  return true;
}

std::string_view strip_blanks(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// Printable text of client bytes for an error message: at most 60
// characters, control bytes as \xNN.
std::string quote_text(std::string_view s) {
  std::string out = "'";
  for (std::size_t i = 0; i < s.size() && i < 60; ++i) {
    const auto u = static_cast<unsigned char>(s[i]);
    if (u >= 0x20 && u < 0x7f) {
      out += s[i];
    } else {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[u >> 4];
      out += hex[u & 15];
    }
  }
  if (s.size() > 60) out += "...";
  return out + "'";
}

const char* reason_phrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return status < 300 ? "OK" : status < 500 ? "Bad Request" : "Internal Server Error";
  }
}

double seconds_left(Clock::time_point deadline) {
  return std::chrono::duration<double>(deadline - Clock::now()).count();
}

// Waits until `fd` is ready for `events` or `wake` is readable (stop()),
// at most until `deadline`. 1: ready, 0: deadline passed, -1: stopping or
// an error.
int wait_for(int fd, short events, int wake, Clock::time_point deadline) {
  for (;;) {
    const double left = seconds_left(deadline);
    if (left <= 0) return 0;
    pollfd p[2] = {{fd, events, 0}, {wake, POLLIN, 0}};
    const int n = ::poll(p, 2, static_cast<int>(std::min(left * 1000.0 + 1.0, 60000.0)));
    if (n < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (n == 0) continue;  // recheck the deadline
    if (p[1].revents != 0) return -1;
    if (p[0].revents != 0) return 1;  // ready, or an error the next call reports
  }
}

struct Route {
  std::string path;
  HttpHandler handler;
};

}  // namespace

std::string HttpRequest::header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (iequals(k, name)) return v;
  }
  return {};
}

bool HttpRequest::has_header(std::string_view name) const {
  return std::any_of(headers.begin(), headers.end(), [&](const auto& h) { return iequals(h.first, name); });
}

HttpHead parse_http_head(std::string_view head) {
  HttpHead out;
  auto fail = [&](int status, std::string why) {
    out.error_status = status;
    out.error = std::move(why);
    return out;
  };
  std::size_t eol = head.find('\n');
  std::string_view line = head.substr(0, eol);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  // METHOD SP request-target SP HTTP-version, single spaces.
  const std::size_t sp1 = line.find(' ');
  const std::size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp1 == std::string_view::npos || sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != line.npos) {
    return fail(400, "malformed request line " + quote_text(line) + ": expected 'METHOD /path HTTP/1.1'");
  }
  HttpRequest& r = out.request;
  r.method = std::string(line.substr(0, sp1));
  r.target = std::string(line.substr(sp1 + 1, sp2 - sp1 - 1));
  r.version = std::string(line.substr(sp2 + 1));
  if (!is_token(r.method)) return fail(400, "malformed method " + quote_text(r.method) + " in the request line");
  if (r.target.empty() || (r.target[0] != '/' && r.target != "*")) {
    return fail(400, "malformed request target " + quote_text(r.target) + ": expected a path starting with '/'");
  }
  if (r.version.size() != 8 || r.version.compare(0, 5, "HTTP/") != 0 || std::isdigit(static_cast<unsigned char>(r.version[5])) == 0 ||
      r.version[6] != '.' || std::isdigit(static_cast<unsigned char>(r.version[7])) == 0) {
    return fail(400, "malformed HTTP version " + quote_text(r.version) + ": expected HTTP/1.1 or HTTP/1.0");
  }
  if (r.version[5] != '1') return fail(505, "HTTP version " + r.version + " is not served: use HTTP/1.1 or HTTP/1.0");
  r.path = r.target.substr(0, r.target.find_first_of("?#"));

  int number = 1;
  while (eol != std::string_view::npos && eol + 1 < head.size()) {
    const std::size_t start = eol + 1;
    eol = head.find('\n', start);
    std::string_view h = head.substr(start, eol == std::string_view::npos ? head.npos : eol - start);
    ++number;
    if (!h.empty() && h.back() == '\r') h.remove_suffix(1);
    if (h.empty()) continue;
    const std::size_t colon = h.find(':');
    // Folded continuation lines (obsolete since RFC 7230) are refused too.
    if (colon == std::string_view::npos || !is_token(h.substr(0, colon))) {
      return fail(400, "malformed header line " + std::to_string(number) + " " + quote_text(h) +
                           ": expected 'Name: value'");
    }
    r.headers.emplace_back(std::string(h.substr(0, colon)), std::string(strip_blanks(h.substr(colon + 1))));
  }
  return out;
}

struct HttpServer::Impl {
  HttpServerOptions options;
  std::vector<Route> routes;
  HttpHandler post_handler;
  int listen_fd = -1;
  int wake_read = -1;
  int wake_write = -1;
  int owner_pid = static_cast<int>(getpid());
  std::thread acceptor;
  std::vector<std::thread> workers;
  std::mutex mutex;
  std::condition_variable ready;
  std::deque<int> queue;
  bool stopping = false;
  bool stopped = false;

  explicit Impl(HttpServerOptions o) : options(std::move(o)) {}

  // --- sending -------------------------------------------------------------

  bool send_all(int fd, std::string_view data, Clock::time_point deadline) const {
    while (!data.empty()) {
      const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        data.remove_prefix(static_cast<std::size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        if (wait_for(fd, POLLOUT, wake_read, deadline) != 1) return false;
        continue;
      }
      return false;
    }
    return true;
  }

  void respond(int fd, const HttpRequest* req, HttpResponse& res) const {
    if (res.status >= 400 && res.body.empty()) res.set(std::string(reason_phrase(res.status)) + "\n", "text/plain");
    std::string out = "HTTP/1.1 " + std::to_string(res.status) + " " + reason_phrase(res.status) + "\r\n";
    if (!res.body.empty()) out += "Content-Type: " + res.content_type + "\r\n";
    out += "Content-Length: " + std::to_string(res.body.size()) + "\r\n";
    for (const auto& [k, v] : res.headers) out += k + ": " + v + "\r\n";
    out += "Connection: close\r\n\r\n";
    const bool head_only = req != nullptr && req->method == "HEAD";
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(options.write_timeout_s));
    // Header and body in one send when small; a large body goes on its own
    // rather than being copied once more.
    if (!head_only && res.body.size() <= 64 * 1024) {
      out += res.body;
      send_all(fd, out, deadline);
    } else if (send_all(fd, out, deadline) && !head_only) {
      send_all(fd, res.body, deadline);
    }
  }

  void refuse(int fd, const HttpRequest* req, int status, std::string message) const {
    HttpResponse res;
    res.status = status;
    res.set(std::move(message) + "\n", "text/plain");
    if (status == 405) res.headers.emplace_back("Allow", options.post_path.empty() ? "GET, HEAD" : "GET, HEAD, POST");
    respond(fd, req, res);
  }

  // Closing a socket with unread bytes resets the connection, and a reset
  // can reach the client before it read the answer: shut down the sending
  // side and read what is still coming, for a short while, first.
  void close_gently(int fd) const {
    ::shutdown(fd, SHUT_WR);
    const auto deadline = Clock::now() + std::chrono::seconds(2);
    char sink[16 * 1024];
    for (;;) {
      if (wait_for(fd, POLLIN, wake_read, deadline) != 1) break;
      const ssize_t n = ::recv(fd, sink, sizeof sink, MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)) break;
    }
    ::close(fd);
  }

  // --- one connection ------------------------------------------------------

  std::string page_list() const {
    std::string pages;
    for (const Route& r : routes) pages += (pages.empty() ? "" : ", ") + r.path;
    return pages;
  }

  void serve(int fd) {
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(options.request_timeout_s));
    const std::string timeout_text = "the request did not arrive within " +
                                     std::to_string(static_cast<int>(options.request_timeout_s)) + " s";
    std::string buffer;
    std::size_t head_end = std::string::npos;  // index of the blank line's first byte
    std::size_t body_start = 0;
    char chunk[8192];
    // The head: read until the blank line, never more than the limit.
    while (head_end == std::string::npos) {
      const int w = wait_for(fd, POLLIN, wake_read, deadline);
      if (w < 0) return;
      if (w == 0) return refuse(fd, nullptr, 408, timeout_text);
      const std::size_t room = options.max_head_bytes + 4 - buffer.size();
      const ssize_t n = ::recv(fd, chunk, std::min(sizeof chunk, room), MSG_DONTWAIT);
      if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
      if (n <= 0) {
        // The client closed its sending side: answer what came, if anything.
        if (n == 0 && !buffer.empty()) refuse(fd, nullptr, 400, "the request ended before its blank line");
        return;
      }
      const std::size_t scan_from = buffer.size() >= 3 ? buffer.size() - 3 : 0;
      buffer.append(chunk, static_cast<std::size_t>(n));
      // A blank line is CRLF CRLF, or LF LF from lenient clients.
      for (std::size_t i = scan_from; i < buffer.size(); ++i) {
        if (buffer[i] != '\n') continue;
        if (i >= 1 && buffer[i - 1] == '\n') {
          head_end = i - 1;
          body_start = i + 1;
          break;
        }
        if (i >= 3 && buffer.compare(i - 3, 3, "\r\n\r") == 0) {
          head_end = i - 3;
          body_start = i + 1;
          break;
        }
      }
      if (head_end == std::string::npos && buffer.size() >= options.max_head_bytes) {
        const bool line_too_long = buffer.find('\n') == std::string::npos;
        return refuse(fd, nullptr, line_too_long ? 414 : 431,
                      std::string(line_too_long ? "the request line exceeds " : "the request line and headers exceed ") +
                          std::to_string(options.max_head_bytes) + " bytes");
      }
    }
    if (head_end > options.max_head_bytes) {
      return refuse(fd, nullptr, 431,
                    "the request line and headers exceed " + std::to_string(options.max_head_bytes) + " bytes");
    }
    HttpHead parsed = parse_http_head(std::string_view(buffer).substr(0, head_end));
    if (parsed.error_status != 0) return refuse(fd, nullptr, parsed.error_status, parsed.error);
    HttpRequest& req = parsed.request;

    const bool is_get = req.method == "GET" || req.method == "HEAD";
    const bool is_post = req.method == "POST" && !options.post_path.empty() && req.path == options.post_path;
    if (is_get && !options.post_path.empty() && req.path == options.post_path) {
      HttpResponse res;
      res.status = 405;
      res.headers.emplace_back("Allow", "POST");
      res.set(options.post_path + " takes a POST of a report; read with GET " + page_list() + "\n", "text/plain");
      return respond(fd, &req, res);
    }
    if (!is_get && !is_post) {
      return refuse(fd, &req, 405,
                    options.post_path.empty() ? "read-only: GET only"
                                              : "read-only: GET, or POST " + options.post_path);
    }
    if (is_post) {
      if (req.has_header("Transfer-Encoding")) {
        return refuse(fd, &req, 411, "a POST to " + options.post_path +
                                         " needs a Content-Length header (chunked bodies are not accepted)");
      }
      std::string length_text;
      for (const auto& [k, v] : req.headers) {
        if (!iequals(k, "Content-Length")) continue;
        if (!length_text.empty() && v != length_text) {
          return refuse(fd, &req, 400, "two different Content-Length headers");
        }
        length_text = v;
      }
      if (length_text.empty()) {
        return refuse(fd, &req, 411, "a POST to " + options.post_path + " needs a Content-Length header");
      }
      if (!std::all_of(length_text.begin(), length_text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        return refuse(fd, &req, 400, "Content-Length " + quote_text(length_text) + " is not a byte count");
      }
      // More digits than any size_t has are over every limit.
      const std::size_t length = length_text.size() <= 18 ? std::stoull(length_text) : static_cast<std::size_t>(-1);
      if (length > options.max_body_bytes) {
        if (options.on_refused) options.on_refused(413);
        return refuse(fd, &req, 413, "a body of " + length_text + " bytes is over the limit of " +
                                         std::to_string(options.max_body_bytes) + " bytes");
      }
      if (iequals(req.header("Expect"), "100-continue") && buffer.size() - body_start < length) {
        const std::string go = "HTTP/1.1 100 Continue\r\n\r\n";
        send_all(fd, go, deadline);
      }
      req.body = buffer.substr(body_start, length);
      while (req.body.size() < length) {
        const int w = wait_for(fd, POLLIN, wake_read, deadline);
        if (w < 0) return;
        if (w == 0) return refuse(fd, &req, 408, timeout_text);
        const ssize_t n = ::recv(fd, chunk, std::min(sizeof chunk, length - req.body.size()), MSG_DONTWAIT);
        if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
        if (n <= 0) {
          if (n == 0) {
            refuse(fd, &req, 400, "the body ended after " + std::to_string(req.body.size()) + " of its " +
                                      std::to_string(length) + " bytes");
          }
          return;
        }
        req.body.append(chunk, static_cast<std::size_t>(n));
      }
    }
    req.remote_addr = peer_address(fd);

    HttpResponse res;
    const HttpHandler* handler = is_post ? &post_handler : nullptr;
    if (is_get) {
      for (const Route& r : routes) {
        if (r.path == req.path) handler = &r.handler;
      }
      if (handler == nullptr) {
        return refuse(fd, &req, 404, "no page " + quote_text(req.path) + " here: the pages are " + page_list());
      }
    }
    try {
      (*handler)(req, res);
    } catch (const std::exception& e) {
      res = HttpResponse{};
      res.status = 500;
      res.set(std::string("internal error: ") + e.what() + "\n", "text/plain");
    }
    respond(fd, &req, res);
  }

  static std::string peer_address(int fd) {
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return {};
    char text[INET6_ADDRSTRLEN] = {};
    if (a.ss_family == AF_INET) {
      ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&a)->sin_addr, text, sizeof text);
    } else if (a.ss_family == AF_INET6) {
      ::inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&a)->sin6_addr, text, sizeof text);
    }
    return text;
  }

  // --- threads -------------------------------------------------------------

  void accept_loop() {
    for (;;) {
      pollfd p[2] = {{listen_fd, POLLIN, 0}, {wake_read, POLLIN, 0}};
      const int n = ::poll(p, 2, -1);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 || p[1].revents != 0) return;
      const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) {
        // Out of descriptors: wait for connections to end instead of spinning.
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        continue;
      }
      std::unique_lock<std::mutex> lock(mutex);
      if (queue.size() >= options.max_queued) {
        lock.unlock();
        // Best effort and without waiting: the acceptor must not block.
        const std::string busy =
            "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: 38\r\n"
            "Connection: close\r\n\r\nbusy: too many connections; try again\n";
        ::send(fd, busy.data(), busy.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        ::close(fd);
        continue;
      }
      queue.push_back(fd);
      lock.unlock();
      ready.notify_one();
    }
  }

  void worker_loop() {
    for (;;) {
      int fd = -1;
      {
        std::unique_lock<std::mutex> lock(mutex);
        ready.wait(lock, [&] { return stopping || !queue.empty(); });
        if (stopping) return;
        fd = queue.front();
        queue.pop_front();
      }
      serve(fd);
      close_gently(fd);
    }
  }

  void close_fds() {
    for (int* fd : {&listen_fd, &wake_read, &wake_write}) {
      if (*fd >= 0) ::close(*fd);
      *fd = -1;
    }
  }
};

HttpServer::HttpServer(HttpServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
  const HttpServerOptions& o = impl_->options;
  if (o.threads <= 0 || !(o.request_timeout_s > 0) || !(o.write_timeout_s > 0) || o.max_head_bytes < 64 ||
      o.max_queued == 0) {
    GENESIS_THROW(InvalidArgumentError, "HTTP server: threads, timeouts and limits must be > 0");
  }
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::get(std::string path, HttpHandler handler) {
  impl_->routes.push_back(Route{std::move(path), std::move(handler)});
}

void HttpServer::post(HttpHandler handler) { impl_->post_handler = std::move(handler); }

int HttpServer::bind(const std::string& host, int port, const std::string& hint) {
  Impl& m = *impl_;
  if (host.empty()) GENESIS_THROW(InvalidArgumentError, "empty address to listen on");
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* result = nullptr;
  const int gai = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &result);
  if (gai != 0 || result == nullptr) {
    GENESIS_THROW(InvalidArgumentError, "cannot listen on ", host, ": ", ::gai_strerror(gai),
                  " (expected an address or host name of this machine)");
  }
  int err = 0;
  for (addrinfo* a = result; a != nullptr && m.listen_fd < 0; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      err = errno;
      continue;
    }
    // SO_REUSEADDR lets a restarted server take over a port whose old
    // connections linger in TIME_WAIT; SO_REUSEPORT is left off, since with
    // it a second server binds a port in use without an error and the
    // kernel splits the connections between the two.
    int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, SOMAXCONN) != 0) {
      err = errno;
      ::close(fd);
      continue;
    }
    m.listen_fd = fd;
  }
  ::freeaddrinfo(result);
  if (m.listen_fd < 0) {
    if (err == EADDRINUSE) {
      GENESIS_THROW(InvalidArgumentError, "port ", port, " on ", host, " is in use: choose another with ", hint);
    }
    if (err == EACCES) {
      GENESIS_THROW(InvalidArgumentError, "port ", port, " on ", host,
                    ": permission denied (ports below 1024 need privileges): choose another with ", hint);
    }
    GENESIS_THROW(InvalidArgumentError, "cannot listen on ", host, ":", port, ": ", std::strerror(err),
                  " (is it an address of this machine?)");
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  ::getsockname(m.listen_fd, reinterpret_cast<sockaddr*>(&bound), &len);
  return ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                           : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
}

void HttpServer::start() {
  Impl& m = *impl_;
  if (m.listen_fd < 0) GENESIS_THROW(InvalidArgumentError, "HTTP server: start() before bind()");
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    GENESIS_THROW(InvalidArgumentError, "HTTP server: cannot create its wake-up pipe: ", std::strerror(errno));
  }
  m.wake_read = pipe_fds[0];
  m.wake_write = pipe_fds[1];
  m.owner_pid = static_cast<int>(getpid());
  for (int i = 0; i < m.options.threads; ++i) m.workers.emplace_back([&m] { m.worker_loop(); });
  m.acceptor = std::thread([&m] { m.accept_loop(); });
}

void HttpServer::stop() {
  Impl& m = *impl_;
  if (m.stopped) return;
  m.stopped = true;
  // A forked child shares the parent's sockets and pipe: writing the pipe
  // would stop the parent's server, and the threads are not in this
  // process. Its copies of the descriptors close when it exits.
  if (in_forked_child(m.owner_pid)) {
    join_or_forget(m.acceptor, m.owner_pid);
    for (std::thread& t : m.workers) join_or_forget(t, m.owner_pid);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(m.mutex);
    m.stopping = true;
  }
  m.ready.notify_all();
  if (m.wake_write >= 0) {
    const char byte = 1;
    while (::write(m.wake_write, &byte, 1) < 0 && errno == EINTR) {
    }
  }
  if (m.acceptor.joinable()) m.acceptor.join();
  for (std::thread& t : m.workers) {
    if (t.joinable()) t.join();
  }
  for (int fd : m.queue) ::close(fd);
  m.queue.clear();
  m.close_fds();
}

}  // namespace genesis::debug::detail
