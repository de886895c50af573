// IpcHandle's text form (genesis/cuda/ipc.h): round trips and rejection of
// anything else with InvalidArgumentError. Pure CPU.
#include <gtest/gtest.h>

#include <limits>
#include <random>
#include <string>

#include "genesis/core/error.h"
#include "genesis/cuda/ipc.h"

namespace genesis::cuda {
namespace {

IpcHandle sample(std::uint32_t seed) {
  std::mt19937 rng(seed);
  IpcHandle h;
  for (auto& b : h.handle) b = static_cast<std::uint8_t>(rng());
  for (auto& b : h.device_uuid) b = static_cast<std::uint8_t>(rng());
  h.offset = rng() % 100000 * 512;
  h.nbytes = rng() % (1u << 30);
  h.device = static_cast<int>(rng() % 8);
  h.exporter = (std::uint64_t{rng()} << 32) | rng();
  return h;
}

std::string parse_error(const std::string& text) {
  try {
    (void)IpcHandle::from_string(text);
  } catch (const InvalidArgumentError& e) {
    return e.message();
  } catch (const std::exception& e) {
    return std::string("<wrong exception type> ") + e.what();
  }
  return "<no InvalidArgumentError>";
}

TEST(IpcHandleText, RoundTrips) {
  for (std::uint32_t seed = 0; seed < 200; ++seed) {
    const IpcHandle h = sample(seed);
    const std::string s = h.to_string();
    EXPECT_EQ(s.rfind("genesis-ipc-v1:", 0), 0u) << s;
    for (char c : s) ASSERT_TRUE(c > 0x20 && c < 0x7f) << "unprintable or space in " << s;
    EXPECT_EQ(IpcHandle::from_string(s), h) << s;
  }
}

TEST(IpcHandleText, ExtremesRoundTrip) {
  IpcHandle h;
  h.offset = 0;
  h.nbytes = std::numeric_limits<std::size_t>::max();
  h.device = std::numeric_limits<int>::max();
  h.exporter = ~std::uint64_t{0};
  for (auto& b : h.handle) b = 0xff;
  EXPECT_EQ(IpcHandle::from_string(h.to_string()), h);
  const IpcHandle zero;
  EXPECT_EQ(IpcHandle::from_string(zero.to_string()), zero);
}

TEST(IpcHandleText, AcceptsSurroundingWhitespaceAndUpperCaseHex) {
  const IpcHandle h = sample(7);
  EXPECT_EQ(IpcHandle::from_string("  " + h.to_string() + "\n"), h);
  std::string upper = h.to_string();
  const std::size_t hex_start = upper.rfind(':') + 1;
  for (std::size_t i = hex_start; i < upper.size(); ++i) upper[i] = static_cast<char>(std::toupper(upper[i]));
  EXPECT_EQ(IpcHandle::from_string(upper), h);
}

TEST(IpcHandleText, RejectsGarbageWithAReason) {
  const std::string good = sample(3).to_string();
  EXPECT_NE(parse_error("").find("empty"), std::string::npos);
  EXPECT_NE(parse_error("   ").find("empty"), std::string::npos);
  EXPECT_NE(parse_error("hello world").find("wrong prefix"), std::string::npos);
  EXPECT_NE(parse_error("genesis-ipc-v9:0:00").find("unsupported handle version"), std::string::npos);
  EXPECT_NE(parse_error(good + ":extra").find("8 ':'-separated fields"), std::string::npos);
  EXPECT_NE(parse_error(good.substr(0, good.rfind(':'))).find("6 ':'-separated fields"), std::string::npos);
  EXPECT_NE(parse_error(good.substr(0, good.size() - 2)).find("field handle has 126 characters"), std::string::npos);
  std::string bad_hex = good;
  bad_hex.back() = 'g';
  EXPECT_NE(parse_error(bad_hex).find("field handle is not hexadecimal"), std::string::npos);
  // Binary junk is shown with '?' instead of raw bytes.
  const std::string junk("\x01\x02genesis\xff", 10);
  const std::string msg = parse_error(junk);
  EXPECT_NE(msg.find("wrong prefix"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\x01'), std::string::npos);
}

TEST(IpcHandleText, RejectsBadNumbers) {
  IpcHandle h = sample(5);
  const std::string uuid_hex = h.to_string().substr(std::string("genesis-ipc-v1:").size() + 2, 32 + 1 + 16);
  const std::string handle_hex = h.to_string().substr(h.to_string().rfind(':') + 1);
  auto make = [&](const std::string& dev, const std::string& off, const std::string& n) {
    return "genesis-ipc-v1:" + dev + ":" + uuid_hex + ":" + off + ":" + n + ":" + handle_hex;
  };
  ASSERT_EQ(parse_error(make("5", "0", "16")), "<no InvalidArgumentError>") << "test helper is wrong";
  EXPECT_NE(parse_error(make("-1", "0", "16")).find("device is negative"), std::string::npos);
  EXPECT_NE(parse_error(make("x", "0", "16")).find("field device is not a decimal"), std::string::npos);
  EXPECT_NE(parse_error(make("99999999999", "0", "16")).find("field device is not a decimal number in range"),
            std::string::npos);
  EXPECT_NE(parse_error(make("0", "+5", "16")).find("field offset"), std::string::npos);
  EXPECT_NE(parse_error(make("0", "", "16")).find("field offset"), std::string::npos);
  EXPECT_NE(parse_error(make("0", "1", "-16")).find("field nbytes"), std::string::npos);
  EXPECT_NE(parse_error(make("0", "1 ", "16")).find("field offset"), std::string::npos);
  EXPECT_NE(parse_error(make("0", "18446744073709551615", "1")).find("overflows"), std::string::npos);
  EXPECT_NE(parse_error(make("0", "1", "18446744073709551616")).find("field nbytes"), std::string::npos);
}

}  // namespace
}  // namespace genesis::cuda
