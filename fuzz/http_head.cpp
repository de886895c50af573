// Fuzz target: parse_http_head, the request-head parser of the metrics
// endpoints and the distributed monitor's master (src/debug/http_server.h),
// which reads whatever reaches their port before any token is checked.
//
// Any bytes must give either a parsed request or an error status with a
// message, never an exception or undefined behaviour. A parsed request has a
// method, a target that starts with '/' (or is "*"), a path that is a prefix
// of the target, and an HTTP/1.x version; a refused one a 4xx or 505 status.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "../src/debug/http_server.h"

namespace {

void fail(const char* what) {
  std::fprintf(stderr, "http_head: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view head(reinterpret_cast<const char*>(data), size);
  const genesis::debug::detail::HttpHead h = genesis::debug::detail::parse_http_head(head);
  if (h.error_status != 0) {
    if (h.error.empty()) fail("a refusal without a message");
    if (!((h.error_status >= 400 && h.error_status < 500) || h.error_status == 505)) fail("an unexpected status");
    return 0;
  }
  const auto& r = h.request;
  if (r.method.empty()) fail("a request without a method");
  if (r.target.empty() || (r.target[0] != '/' && r.target != "*")) fail("a target that is not a path");
  if (r.target.compare(0, r.path.size(), r.path) != 0) fail("a path that is not a prefix of the target");
  if (r.version.rfind("HTTP/1.", 0) != 0) fail("a version other than HTTP/1.x");
  for (const auto& [name, value] : r.headers) {
    if (name.empty()) fail("a header without a name");
    (void)value;
  }
  return 0;
}
