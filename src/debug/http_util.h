// Internal: addresses and ports of the HTTP servers (http_server.h) and the
// worker's client, with errors people can act on.
#pragma once

#include <string>

namespace genesis::debug::detail {

/// True for 127.0.0.0/8, ::1 and "localhost".
bool is_loopback_address(const std::string& host);

/// Checks a port number (0 to 65535; `allow_zero` for "any free port").
void check_port(int port, bool allow_zero, const char* what);

}  // namespace genesis::debug::detail
