// Reading a PyTorch memory snapshot's device_traces entry by entry, shared
// by the snapshot-as-trace reader (torch_snapshot.cpp) and the converter to
// the CSV trace format (torch_snapshot_csv.cpp), so that both choose the
// same device and accept and refuse the same entries. Private to src/debug.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

#include "genesis/core/error.h"
#include "genesis/debug/pickle.h"
#include "genesis/debug/torch_snapshot.h"

namespace genesis::debug::detail {

/// The device trace a reader takes (TorchSnapshotOptions::device, else the
/// one with the most entries).
struct SnapshotDevice {
  int device = -1;
  /// "<source> (device D)", with " of A, B" when several devices have entries.
  std::string name;
  const PickleValue* entries = nullptr;  ///< a list or tuple
  /// Whether a run of segment_free / segment_unmap entries is the program
  /// giving the cache back (Note [Released caches]): true for PyTorch's
  /// history; false for Genesis's (allocator_settings "allocator":
  /// "genesis"), whose unmaps are the allocator's own releases.
  bool releases_are_the_programs = true;
};

/// Checks the snapshot's shape and picks the device: throws
/// InvalidArgumentError naming `source` for a value that is not a dict, a
/// snapshot without device_traces, a device not in it, or every trace empty.
SnapshotDevice select_snapshot_device(const PickleValue& snapshot, const std::string& source,
                                      const TorchSnapshotOptions& options);

/// Typed access to the fields of one entry; every failure names the entry.
struct SnapshotEntryReader {
  using Kind = PickleValue::Kind;

  const std::string& source;
  int device;
  std::size_t index;  // of the entry in its device's trace

  [[noreturn]] void fail(const std::string& what) const {
    GENESIS_THROW(InvalidArgumentError, source, ": device_traces[", device, "][", index, "]: ", what);
  }
  const PickleValue& field(const PickleValue& e, const char* name) const {
    const PickleValue* v = e.get(name);
    if (v == nullptr) fail(std::string("no '") + name + "'");
    return *v;
  }
  std::uint64_t unsigned_int(const PickleValue& e, const char* name) const {
    const PickleValue& v = field(e, name);
    if (v.kind == Kind::kBool || v.kind != Kind::kInt)
      fail(std::string("'") + name + "' is a " + v.kind_name() + ", expected an int");
    if (!v.big && v.integer < 0) fail(std::string("'") + name + "' is negative (" + std::to_string(v.integer) + ")");
    return static_cast<std::uint64_t>(v.integer);
  }
  // Streams are signed in PyTorch (int64 of a cudaStream_t); kept as bits.
  StreamId stream(const PickleValue& e) const {
    const PickleValue* v = e.get("stream");
    if (v == nullptr || v->kind == Kind::kNone) return 0;
    if (v->kind != Kind::kInt) fail(std::string("'stream' is a ") + v->kind_name() + ", expected an int");
    return static_cast<StreamId>(v->integer);
  }
  // Microseconds; negative, non-finite or missing: none.
  bool time(const PickleValue& e, std::uint64_t& out) const {
    const PickleValue* v = e.get("time_us");
    if (v == nullptr || v->kind == Kind::kNone) return false;
    if (v->kind == Kind::kInt) {
      out = v->big ? static_cast<std::uint64_t>(v->integer) : v->integer < 0 ? 0 : static_cast<std::uint64_t>(v->integer);
      return true;
    }
    if (v->kind == Kind::kFloat) {
      const double d = v->real;
      out = std::isfinite(d) && d > 0 ? (d >= 1.8e19 ? std::numeric_limits<std::uint64_t>::max() : static_cast<std::uint64_t>(d)) : 0;
      return true;
    }
    fail(std::string("'time_us' is a ") + v->kind_name() + ", expected a number");
  }
  // frames -> "file:line in name" lines, innermost first; malformed frames
  // are skipped (a site is a hint for reports, not data the replay needs).
  std::string site(const PickleValue& e) const {
    const PickleValue* frames = e.get("frames");
    if (frames == nullptr || !frames->is_sequence()) return {};
    std::string out;
    for (const PickleValue* f : frames->items) {
      if (!f->is_dict()) continue;
      const PickleValue* file = f->get("filename");
      const PickleValue* line = f->get("line");
      const PickleValue* name = f->get("name");
      if (file == nullptr || !file->is_string()) continue;
      if (!out.empty()) out += '\n';
      out += file->text;
      out += ':';
      out += line != nullptr && line->is_int() ? std::to_string(line->integer) : "0";
      out += " in ";
      out += name != nullptr && name->is_string() ? name->text : "?";
    }
    return out;
  }
};

}  // namespace genesis::debug::detail
