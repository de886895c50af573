// Signed reports between the workers and the master of the distributed
// memory monitor.
//
// Note [Report signatures]: workers and master share a token but the token
// never travels. A worker sends three headers with each report:
//   X-Genesis-Timestamp  seconds since the epoch
//   X-Genesis-Nonce      16 to 64 characters [A-Za-z0-9_-], fresh per report
//   X-Genesis-Signature  hex HMAC-SHA256(token, timestamp "\n" nonce "\n" body)
// The master recomputes the MAC (compared in constant time), rejects a
// timestamp further than the window from its clock (so a captured report
// cannot be replayed later), and remembers the nonces it accepted within
// the window (so it cannot be replayed sooner). Nonces older than the
// window are forgotten: the timestamp check covers them. Memory is bounded
// by a cap on remembered nonces; at the cap, the oldest go first and the
// window effectively shrinks rather than memory growing. This authenticates
// reports; it does not hide them (the figures travel in the clear: use a
// private network or a tunnel when they are sensitive).
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_set>

namespace genesis::debug {

/// Hex HMAC-SHA256 of `message` under `key`. Throws genesis::Error when
/// Genesis was built without OpenSSL.
std::string hmac_sha256_hex(std::string_view key, std::string_view message);

/// The signature of a report (Note [Report signatures]).
std::string sign_report(std::string_view token, std::string_view timestamp, std::string_view nonce,
                        std::string_view body);

/// A fresh random nonce (32 hex characters).
std::string make_nonce();

/// Seconds since the epoch now.
std::int64_t unix_seconds_now();

/// What check() decided.
enum class AuthResult { ok, missing, bad_signature, stale, replayed, malformed };

/// "ok", "missing signature", "bad signature", ...
const char* auth_result_text(AuthResult r) noexcept;

/// Checks signatures, timestamps and nonces (Note [Report signatures]).
/// Thread-safe.
class ReportVerifier {
 public:
  /// `window_s`: accepted clock difference either way (> 0).
  /// Throws InvalidArgumentError for an empty token or a window <= 0.
  ReportVerifier(std::string token, std::int64_t window_s = 300, std::size_t max_nonces = 1 << 20);
  /// The verdict for one report; `now_s` is the master's clock. Remembers
  /// the nonce when the verdict is ok.
  AuthResult check(std::string_view timestamp, std::string_view nonce, std::string_view signature,
                   std::string_view body, std::int64_t now_s);
  std::size_t remembered_nonces() const;

 private:
  std::string token_;
  std::int64_t window_s_;
  std::size_t max_nonces_;
  mutable std::mutex mutex_;
  std::unordered_set<std::string> nonces_;
  std::deque<std::pair<std::int64_t, std::string>> order_;  // (timestamp, nonce), oldest first
};

}  // namespace genesis::debug
