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

/// Checks a port number (0 to 65535; `allow_zero` for "any free port").
void check_port(int port, bool allow_zero, const char* what);

}  // namespace genesis::debug::detail
