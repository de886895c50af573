// Writing pickles opcode by opcode, for the tests of the plain-data pickle
// reader and of snapshot traces: well-formed data of every supported form,
// and malformed data no Python pickler would write.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace genesis::debug::testing_support {

/// Appends opcodes to a byte string. Methods are named after the opcodes.
class PickleWriter {
 public:
  explicit PickleWriter(int protocol = 2) {
    if (protocol > 0) {
      op(0x80);
      byte(static_cast<std::uint8_t>(protocol));
    }
  }
  PickleWriter& op(std::uint8_t o) { return byte(o); }
  PickleWriter& byte(std::uint8_t b) {
    out_.push_back(static_cast<char>(b));
    return *this;
  }
  PickleWriter& le(std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) byte(static_cast<std::uint8_t>(v >> (8 * i)));
    return *this;
  }
  PickleWriter& mark() { return op('('); }
  PickleWriter& none() { return op('N'); }
  PickleWriter& boolean(bool b) { return op(b ? 0x88 : 0x89); }
  /// The smallest integer opcode Python's pickler would use.
  PickleWriter& integer(std::int64_t v) {
    if (v >= 0 && v < 256) return op('K').byte(static_cast<std::uint8_t>(v));
    if (v >= 0 && v < 65536) return op('M').le(static_cast<std::uint64_t>(v), 2);
    if (v >= INT32_MIN && v <= INT32_MAX) return op('J').le(static_cast<std::uint32_t>(static_cast<std::int32_t>(v)), 4);
    return op(0x8a).byte(8).le(static_cast<std::uint64_t>(v), 8);
  }
  /// LONG1 with explicit little-endian two's-complement bytes.
  PickleWriter& long1(std::string_view bytes) {
    op(0x8a).byte(static_cast<std::uint8_t>(bytes.size()));
    out_.append(bytes);
    return *this;
  }
  PickleWriter& real(double d) {
    std::uint64_t bits;
    std::memcpy(&bits, &d, 8);
    op('G');
    for (int i = 7; i >= 0; --i) byte(static_cast<std::uint8_t>(bits >> (8 * i)));
    return *this;
  }
  PickleWriter& str(std::string_view s) {
    if (s.size() < 256) {
      op(0x8c).byte(static_cast<std::uint8_t>(s.size()));
    } else {
      op('X').le(s.size(), 4);
    }
    out_.append(s);
    return *this;
  }
  PickleWriter& raw(std::string_view bytes) {
    out_.append(bytes);
    return *this;
  }
  PickleWriter& empty_dict() { return op('}'); }
  PickleWriter& empty_list() { return op(']'); }
  PickleWriter& setitems() { return op('u'); }
  PickleWriter& appends() { return op('e'); }
  PickleWriter& memoize() { return op(0x94); }
  PickleWriter& stop() { return op('.'); }
  /// key (a str), then whatever the caller writes as the value.
  PickleWriter& key(std::string_view k) { return str(k); }

  const std::string& bytes() const noexcept { return out_; }
  const std::uint8_t* data() const noexcept { return reinterpret_cast<const std::uint8_t*>(out_.data()); }
  std::size_t size() const noexcept { return out_.size(); }

 private:
  std::string out_;
};

/// One device-trace entry of a snapshot: {action, addr, size, stream,
/// time_us[, frames: [{filename, line, name}]]}, ready for APPENDS.
inline void write_entry(PickleWriter& w, std::string_view action, std::int64_t addr, std::int64_t size,
                        std::int64_t stream, std::int64_t time_us, std::string_view file = {}, int line = 0,
                        std::string_view name = {}) {
  w.empty_dict().mark();
  w.key("action").str(action);
  w.key("addr").integer(addr);
  w.key("size").integer(size);
  w.key("stream").integer(stream);
  w.key("time_us").integer(time_us);
  if (!file.empty()) {
    w.key("frames").empty_list().mark();
    w.empty_dict().mark().key("filename").str(file).key("line").integer(line).key("name").str(name).setitems();
    w.appends();
  }
  w.setitems();
}

}  // namespace genesis::debug::testing_support
