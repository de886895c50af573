// HMAC-signed reports with replay protection (Note [Report signatures]).
#include "genesis/debug/report_auth.h"

#include <chrono>
#include <random>

#include "genesis/core/error.h"

#if GENESIS_WITH_OPENSSL
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#endif

namespace genesis::debug {

namespace {

std::string to_hex(const unsigned char* data, std::size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string out(2 * n, '0');
  for (std::size_t i = 0; i < n; ++i) {
    out[2 * i] = digits[data[i] >> 4];
    out[2 * i + 1] = digits[data[i] & 15];
  }
  return out;
}

bool equal_constant_time(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return diff == 0;
}

bool parse_seconds(std::string_view text, std::int64_t& out) noexcept {
  if (text.empty() || text.size() > 12) return false;
  std::int64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  out = v;
  return true;
}

bool valid_nonce(std::string_view nonce) noexcept {
  if (nonce.size() < 16 || nonce.size() > 64) return false;
  for (char c : nonce) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                    c == '_';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

std::string hmac_sha256_hex(std::string_view key, std::string_view message) {
#if GENESIS_WITH_OPENSSL
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac, &len) == nullptr) {
    GENESIS_THROW(Error, "HMAC-SHA256 failed");
  }
  return to_hex(mac, len);
#else
  (void)key;
  (void)message;
  (void)&to_hex;
  GENESIS_THROW(Error, "signed reports need OpenSSL: Genesis was built without it (install libssl-dev)");
#endif
}

std::string sign_report(std::string_view token, std::string_view timestamp, std::string_view nonce,
                        std::string_view body) {
  std::string message;
  message.reserve(timestamp.size() + nonce.size() + body.size() + 2);
  message.append(timestamp).append("\n").append(nonce).append("\n").append(body);
  return hmac_sha256_hex(token, message);
}

std::string make_nonce() {
  unsigned char bytes[16];
#if GENESIS_WITH_OPENSSL
  if (RAND_bytes(bytes, sizeof bytes) == 1) return to_hex(bytes, sizeof bytes);
#endif
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  for (unsigned char& b : bytes) b = static_cast<unsigned char>(rng());
  return to_hex(bytes, sizeof bytes);
}

std::int64_t unix_seconds_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

const char* auth_result_text(AuthResult r) noexcept {
  switch (r) {
    case AuthResult::ok: return "ok";
    case AuthResult::missing: return "missing signature";
    case AuthResult::bad_signature: return "bad signature";
    case AuthResult::stale: return "timestamp outside the accepted window";
    case AuthResult::replayed: return "replayed report";
    case AuthResult::malformed: return "malformed signature headers";
  }
  return "?";
}

ReportVerifier::ReportVerifier(std::string token, std::int64_t window_s, std::size_t max_nonces)
    : token_(std::move(token)), window_s_(window_s), max_nonces_(max_nonces) {
  if (token_.empty()) GENESIS_THROW(InvalidArgumentError, "the report token is empty");
  if (window_s_ <= 0) GENESIS_THROW(InvalidArgumentError, "the signature window must be > 0 seconds");
  if (max_nonces_ == 0) GENESIS_THROW(InvalidArgumentError, "max_nonces must be > 0");
}

AuthResult ReportVerifier::check(std::string_view timestamp, std::string_view nonce, std::string_view signature,
                                 std::string_view body, std::int64_t now_s) {
  if (timestamp.empty() || nonce.empty() || signature.empty()) return AuthResult::missing;
  std::int64_t ts = 0;
  if (!parse_seconds(timestamp, ts) || !valid_nonce(nonce) || signature.size() != 64) return AuthResult::malformed;
  // The MAC first: an unauthenticated sender learns nothing about our clock
  // or the nonces we hold.
  if (!equal_constant_time(sign_report(token_, timestamp, nonce, body), signature)) {
    return AuthResult::bad_signature;
  }
  if (ts < now_s - window_s_ || ts > now_s + window_s_) return AuthResult::stale;
  std::lock_guard<std::mutex> lock(mutex_);
  while (!order_.empty() && (order_.front().first < now_s - window_s_ || order_.size() >= max_nonces_)) {
    nonces_.erase(order_.front().second);
    order_.pop_front();
  }
  if (!nonces_.emplace(nonce).second) return AuthResult::replayed;
  order_.emplace_back(ts, std::string(nonce));
  return AuthResult::ok;
}

std::size_t ReportVerifier::remembered_nonces() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return order_.size();
}

}  // namespace genesis::debug
