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

// pickle.dumps(d, protocol=5) by CPython 3.11 of
//   fr = [{"filename": "train.py", "line": 42, "name": "step"}]
//   d = {"segments": [], "device_traces": [[
//          {"action": "alloc", "addr": 0x7f0000000000, "size": 1024, "stream": 0,
//           "time_us": 1700000000000000, "frames": fr},
//          {"action": "free_requested", ..., "time_us": 1700000000000010, "frames": fr},
//          {"action": "free_completed", ..., "time_us": 1700000000000010, "frames": fr}]],
//        "allocator_settings": {"expandable_segments": False, "garbage_collection_threshold": 0.0},
//        "pool": (0, 0)}
// (FRAME, MEMOIZE, BINGET, LONG1, SETITEMS, APPENDS, TUPLE2, ...).
// NULs inside, so not a C string.
inline const std::string& python5_snapshot_pickle() {
  static constexpr char kBytes[] =
      "\x80\x05\x95\x89\x01\x00\x00\x00\x00\x00\x00\x7d\x94\x28\x8c\x08\x73\x65\x67\x6d\x65\x6e\x74\x73"
      "\x94\x5d\x94\x8c\x0d\x64\x65\x76\x69\x63\x65\x5f\x74\x72\x61\x63\x65\x73\x94\x5d\x94\x5d\x94\x28"
      "\x7d\x94\x28\x8c\x06\x61\x63\x74\x69\x6f\x6e\x94\x8c\x05\x61\x6c\x6c\x6f\x63\x94\x8c\x04\x61\x64"
      "\x64\x72\x94\x8a\x06\x00\x00\x00\x00\x00\x7f\x8c\x04\x73\x69\x7a\x65\x94\x4d\x00\x04\x8c\x06\x73"
      "\x74\x72\x65\x61\x6d\x94\x4b\x00\x8c\x07\x74\x69\x6d\x65\x5f\x75\x73\x94\x8a\x07\x00\x40\x1e\x18"
      "\x24\x0a\x06\x8c\x06\x66\x72\x61\x6d\x65\x73\x94\x5d\x94\x7d\x94\x28\x8c\x08\x66\x69\x6c\x65\x6e"
      "\x61\x6d\x65\x94\x8c\x08\x74\x72\x61\x69\x6e\x2e\x70\x79\x94\x8c\x04\x6c\x69\x6e\x65\x94\x4b\x2a"
      "\x8c\x04\x6e\x61\x6d\x65\x94\x8c\x04\x73\x74\x65\x70\x94\x75\x61\x75\x7d\x94\x28\x68\x07\x8c\x0e"
      "\x66\x72\x65\x65\x5f\x72\x65\x71\x75\x65\x73\x74\x65\x64\x94\x68\x09\x8a\x06\x00\x00\x00\x00\x00"
      "\x7f\x68\x0a\x4d\x00\x04\x68\x0b\x4b\x00\x68\x0c\x8a\x07\x0a\x40\x1e\x18\x24\x0a\x06\x68\x0d\x68"
      "\x0e\x75\x7d\x94\x28\x68\x07\x8c\x0e\x66\x72\x65\x65\x5f\x63\x6f\x6d\x70\x6c\x65\x74\x65\x64\x94"
      "\x68\x09\x8a\x06\x00\x00\x00\x00\x00\x7f\x68\x0a\x4d\x00\x04\x68\x0b\x4b\x00\x68\x0c\x8a\x07\x0a"
      "\x40\x1e\x18\x24\x0a\x06\x68\x0d\x68\x0e\x75\x65\x61\x8c\x12\x61\x6c\x6c\x6f\x63\x61\x74\x6f\x72"
      "\x5f\x73\x65\x74\x74\x69\x6e\x67\x73\x94\x7d\x94\x28\x8c\x13\x65\x78\x70\x61\x6e\x64\x61\x62\x6c"
      "\x65\x5f\x73\x65\x67\x6d\x65\x6e\x74\x73\x94\x89\x8c\x1c\x67\x61\x72\x62\x61\x67\x65\x5f\x63\x6f"
      "\x6c\x6c\x65\x63\x74\x69\x6f\x6e\x5f\x74\x68\x72\x65\x73\x68\x6f\x6c\x64\x94\x47\x00\x00\x00\x00"
      "\x00\x00\x00\x00\x75\x8c\x04\x70\x6f\x6f\x6c\x94\x4b\x00\x4b\x00\x86\x94\x75\x2e";
  static const std::string bytes(kBytes, sizeof(kBytes) - 1);
  return bytes;
}

}  // namespace genesis::debug::testing_support
