// Internal: the small HTTP/1.1 server behind the metrics endpoints and the
// distributed monitor's master (Note [HTTP server]).
//
// Note [HTTP server]: both servers face whatever reaches their port: a
// scraper, a worker, or a client that sends garbage, trickles one byte at a
// time or never stops sending headers. A general-purpose server library
// gives each request a per-read timeout and no bound on its head, so a
// client that sends a header line every few seconds holds a thread forever
// (32 of them stop the master), and one that streams header lines makes
// the server store every one of them (50 MB of short lines took the master
// to 1.1 GB). This server takes one request per connection and bounds it:
//   - the request line, headers and body must all arrive within
//     `request_timeout_s` of the first read (408 otherwise), and the
//     response must be taken within `write_timeout_s`;
//   - the head (request line and headers) is at most `max_head_bytes`
//     (414 when the request line alone is longer, 431 otherwise);
//   - only a POST to `post_path` has a body, of at most `max_body_bytes`
//     (413, refused before it is read), with a Content-Length (411);
//   - any other method gets 405 with "Allow: GET", an unknown page 404,
//     a malformed request 400, all at once and with a text body that says
//     what was wrong.
// Connections wait for one of `threads` threads in a queue of at most
// `max_queued` (503 beyond it). Every response closes its connection
// (Prometheus and the workers open one per scrape or report anyway), and
// the socket is shut down for writing and drained briefly before it is
// closed, so a client whose unread body is refused still reads the answer
// instead of a reset. stop() wakes every thread at once, in-flight requests
// included; in a forked child it leaves the parent's sockets and threads
// alone (Note [Fork]).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace genesis::debug::detail {

struct HttpRequest {
  std::string method;
  std::string target;  ///< as sent, query included
  std::string path;    ///< target without its query
  std::string version;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::string remote_addr;
  /// The value of header `name` (case-insensitive), "" when absent.
  std::string header(std::string_view name) const;
  bool has_header(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  void set(std::string content, std::string type) {
    body = std::move(content);
    content_type = std::move(type);
  }
};

using HttpHandler = std::function<void(const HttpRequest&, HttpResponse&)>;

struct HttpServerOptions {
  int threads = 8;
  double request_timeout_s = 5;
  double write_timeout_s = 30;
  std::size_t max_head_bytes = 16 * 1024;
  std::string post_path;           ///< the one path that takes a POST; empty: none
  std::size_t max_body_bytes = 0;  ///< of a POST to post_path
  std::size_t max_queued = 1024;
  /// Called with 413 when a body over the limit is refused unread (the
  /// master counts those as rejected reports).
  std::function<void(int status)> on_refused;
};

/// A parsed request head, or why it could not be parsed.
struct HttpHead {
  int error_status = 0;     ///< 0: parsed
  std::string error;        ///< what was wrong, for the answer's body
  HttpRequest request;
};

/// Parses a request line and headers (`head` ends before the blank line).
/// Never throws (fuzz/http_head.cpp checks that on any bytes).
HttpHead parse_http_head(std::string_view head);

class HttpServer {
 public:
  explicit HttpServer(HttpServerOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  /// Answers GET and HEAD requests for `path` (queries ignored).
  void get(std::string path, HttpHandler handler);
  /// Answers POSTs to options.post_path.
  void post(HttpHandler handler);

  /// Binds host:port (0: any free port) and returns the port. Throws
  /// InvalidArgumentError "port P on HOST is in use: choose another with
  /// <hint>" when taken, and a message naming the address when it cannot be
  /// bound for another reason.
  int bind(const std::string& host, int port, const std::string& hint);
  /// Serves in background threads (after bind()).
  void start();
  /// Stops accepting, ends in-flight requests and joins the threads.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace genesis::debug::detail
