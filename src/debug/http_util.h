// Internal: listening with cpp-httplib, with errors people can act on.
#pragma once

#include <string>
#include <thread>

namespace httplib {
class Server;
}

namespace genesis::debug::detail {

/// True for 127.0.0.0/8, ::1 and "localhost".
bool is_loopback_address(const std::string& host);

/// Binds `server` to host:port (port 0: any free port) and returns the
/// port. Throws InvalidArgumentError "port P on HOST is in use: choose
/// another with <hint>" when taken, and a message naming the address when
/// it cannot be bound for another reason.
int bind_server(httplib::Server& server, const std::string& host, int port, const std::string& hint);

/// Runs server.listen_after_bind() in `thread` and returns once it
/// listens: stop() before that would be lost (httplib only stops a server
/// that runs), and the thread would then never be joined.
void start_listening(httplib::Server& server, std::thread& thread);

/// Answers, before any body is read, every request that is not a GET or
/// HEAD, except a POST to `post_path` (empty: none): 405 with "Allow: GET",
/// and the connection closed, since its body is left unread. A POST to
/// `post_path` that says neither its length nor a chunked encoding gets 411.
/// httplib would otherwise read such a body until the client closes or the
/// read timeout passes, and only then answer 400.
void refuse_unread_bodies(httplib::Server& server, const std::string& post_path);

/// Checks a port number (0 to 65535; `allow_zero` for "any free port").
void check_port(int port, bool allow_zero, const char* what);

}  // namespace genesis::debug::detail
