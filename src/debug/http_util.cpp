// Addresses and ports (http_util.h).
#include "http_util.h"

#include <arpa/inet.h>

#include "genesis/core/error.h"

namespace genesis::debug::detail {

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

}  // namespace genesis::debug::detail
