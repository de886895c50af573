// Listening with cpp-httplib (http_util.h).
#include "http_util.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include <httplib.h>

#include "genesis/core/error.h"

namespace genesis::debug::detail {

namespace {

// httplib reports only that binding failed; bind a probe socket the same
// way to learn why (the address in use, not on this machine, ...).
int bind_errno(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* result = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &result) != 0 || result == nullptr) {
    return EADDRNOTAVAIL;
  }
  int err = 0;
  const int fd = socket(result->ai_family, result->ai_socktype, result->ai_protocol);
  if (fd < 0) {
    err = errno;
  } else {
    int yes = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (bind(fd, result->ai_addr, result->ai_addrlen) != 0) err = errno;
    else if (listen(fd, 1) != 0) err = errno;
    close(fd);
  }
  freeaddrinfo(result);
  return err;
}

}  // namespace

bool is_loopback_address(const std::string& host) {
  if (host == "localhost" || host == "::1") return true;
  in_addr a{};
  if (inet_pton(AF_INET, host.c_str(), &a) == 1) return (ntohl(a.s_addr) >> 24) == 127;
  return false;
}

void check_port(int port, bool allow_zero, const char* what) {
  if (port < (allow_zero ? 0 : 1) || port > 65535) {
    GENESIS_THROW(InvalidArgumentError, what, " ", port, ": expected a port number in ", allow_zero ? 0 : 1,
                  "..65535");
  }
}

void refuse_unread_bodies(httplib::Server& server, const std::string& post_path) {
  server.set_pre_routing_handler([post_path](const httplib::Request& req, httplib::Response& res) {
    if (req.method == "GET" || req.method == "HEAD") return httplib::Server::HandlerResponse::Unhandled;
    if (!post_path.empty() && req.method == "POST" && req.path == post_path) {
      if (req.has_header("Content-Length") || req.get_header_value("Transfer-Encoding") == "chunked")
        return httplib::Server::HandlerResponse::Unhandled;
      res.status = 411;
      res.set_header("Connection", "close");
      res.set_content("a POST to " + post_path + " needs a Content-Length header\n", "text/plain");
      return httplib::Server::HandlerResponse::Handled;
    }
    res.status = 405;
    res.set_header("Allow", "GET");
    res.set_header("Connection", "close");
    res.set_content(post_path.empty() ? "read-only: GET only\n" : "read-only: GET, or POST " + post_path + "\n",
                    "text/plain");
    return httplib::Server::HandlerResponse::Handled;
  });
}

void start_listening(httplib::Server& server, std::thread& thread) {
  thread = std::thread([&server] { server.listen_after_bind(); });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!server.is_running() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

int bind_server(httplib::Server& server, const std::string& host, int port, const std::string& hint) {
  if (host.empty()) GENESIS_THROW(InvalidArgumentError, "empty address to listen on");
  // httplib's default adds SO_REUSEPORT, with which a second server binds a
  // port in use without an error and the kernel splits the connections
  // between the two. SO_REUSEADDR alone still lets a restarted server take
  // over a port whose old connections linger in TIME_WAIT.
  server.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  if (port == 0) {
    const int got = server.bind_to_any_port(host);
    if (got <= 0) GENESIS_THROW(InvalidArgumentError, "cannot listen on ", host, ": ", std::strerror(bind_errno(host, 0)));
    return got;
  }
  if (server.bind_to_port(host, port)) return port;
  const int err = bind_errno(host, port);
  if (err == EADDRINUSE || err == 0) {
    GENESIS_THROW(InvalidArgumentError, "port ", port, " on ", host, " is in use: choose another with ", hint);
  }
  if (err == EACCES) {
    GENESIS_THROW(InvalidArgumentError, "port ", port, " on ", host, ": permission denied (ports below 1024 need "
                  "privileges): choose another with ", hint);
  }
  GENESIS_THROW(InvalidArgumentError, "cannot listen on ", host, ":", port, ": ", std::strerror(err),
                " (is it an address of this machine?)");
}

}  // namespace genesis::debug::detail
