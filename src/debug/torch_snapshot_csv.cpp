// PyTorch memory snapshots to CSV traces (genesis/debug/torch_snapshot_csv.h).
#include "genesis/debug/torch_snapshot_csv.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "genesis/core/error.h"
#include "genesis/debug/torch_snapshot.h"
#include "genesis/debug/trace.h"
#include "snapshot_entry.h"
#include "trace_output.h"

namespace genesis::debug {

namespace {

using detail::SnapshotEntryReader;

// The actions a CSV trace may hold (trace.cpp's parser accepts exactly these).
bool csv_action(const std::string& a) noexcept {
  return a == "alloc" || a == "free_requested" || a == "free_completed" || a == "segment_alloc" ||
         a == "segment_free" || a == "oom" || a == "segment_map" || a == "segment_unmap" || a == "snapshot";
}

// A field the replay does not need (addresses of segment and snapshot
// entries): 0 when absent, but a value of the wrong type is still refused.
std::uint64_t optional_unsigned(const SnapshotEntryReader& r, const PickleValue& e, const char* name) {
  const PickleValue* v = e.get(name);
  if (v == nullptr || v->kind == PickleValue::Kind::kNone) return 0;
  return r.unsigned_int(e, name);
}

// A site as one CSV field: frames separated by '|' (one record per line),
// quoted, with '"' doubled.
void append_site(std::string& out, const std::string& site) {
  out += '"';
  for (const char c : site) {
    if (c == '\n') {
      out += '|';
    } else {
      if (c == '"') out += '"';
      out += c;
    }
  }
  out += '"';
}

}  // namespace

SnapshotCsvResult write_torch_snapshot_csv(const PickleValue& snapshot, const std::string& source,
                                           const std::string& path, const SnapshotCsvOptions& options) {
  const detail::SnapshotDevice chosen = detail::select_snapshot_device(snapshot, source, {options.device});
  const PickleValue& entries = *chosen.entries;
  SnapshotCsvResult result;
  result.device = chosen.device;
  result.entries = entries.items.size();

  detail::OutputFile out(path, detail::gzip_name(path));
  constexpr std::size_t kChunk = std::size_t{1} << 20;
  std::string buf = options.sites ? "time_us,action,addr,size,stream,site\n" : "time_us,action,addr,size,stream\n";
  buf.reserve(kChunk + 4096);
  std::uint64_t last_time = 0;  // an entry without a time stamp takes the one before
  bool releasing = false;       // in a run of segment_free / segment_unmap entries
  for (std::size_t i = 0; i < entries.items.size(); ++i) {
    const SnapshotEntryReader r{source, chosen.device, i};
    const PickleValue& e = *entries.items[i];
    if (!e.is_dict()) r.fail(std::string("is a ") + e.kind_name() + ", expected a dict");
    const PickleValue& action = r.field(e, "action");
    if (!action.is_string()) r.fail(std::string("'action' is a ") + action.kind_name() + ", expected a str");
    const std::string& a = action.text;
    if (a == "annotate") {
      ++result.annotations;
      continue;
    }
    if (!csv_action(a)) r.fail("unknown action '" + a + "'");
    // What the replay reads is checked as strictly as trace_from_torch_snapshot() does.
    const bool replayed = a == "alloc" || a == "free_requested";
    const std::uint64_t addr = a == "oom" ? 0 : replayed ? r.unsigned_int(e, "addr") : optional_unsigned(r, e, "addr");
    const std::uint64_t size = replayed ? r.unsigned_int(e, "size") : optional_unsigned(r, e, "size");
    const StreamId stream = r.stream(e);
    std::uint64_t t = 0;
    if (r.time(e, t)) last_time = t;

    // Note [Released caches]: a run of segment releases is PyTorch giving
    // its cache back; the replay needs that said, not inferred.
    const bool release = chosen.releases_are_the_programs && (a == "segment_free" || a == "segment_unmap");
    if (release && !releasing) {
      detail::append_number(buf, last_time);
      buf += ",empty_cache,0,0,";
      detail::append_number(buf, static_cast<std::uint64_t>(stream));
      if (options.sites) buf += ',';
      buf += '\n';
      ++result.rows;
    }
    if (a == "alloc" || a == "free_requested") releasing = false;
    if (release) releasing = true;

    detail::append_number(buf, last_time);
    buf += ',';
    buf += a;
    buf += ',';
    detail::append_number(buf, addr);
    buf += ',';
    detail::append_number(buf, size);
    buf += ',';
    detail::append_number(buf, static_cast<std::uint64_t>(stream));
    if (options.sites) {
      buf += ',';
      if (a == "alloc") append_site(buf, r.site(e));
    }
    buf += '\n';
    ++result.rows;
    if (buf.size() >= kChunk) {
      out.write(buf);
      buf.clear();
    }
  }
  out.write(buf);
  out.close();
  return result;
}

SnapshotCsvResult convert_torch_snapshot_file(const std::string& in, const std::string& out,
                                              const SnapshotCsvOptions& options) {
  const std::vector<std::uint8_t> data = read_trace_bytes(in, std::size_t{16} << 30, "snapshot");
  if (!looks_like_pickle(data.data(), data.size())) {
    GENESIS_THROW(InvalidArgumentError, in, ": not a PyTorch memory snapshot (expected a pickle of protocol 0 to 5, ",
                  "from torch.cuda.memory._dump_snapshot)",
                  data.size() >= 2 && data[0] == 0x80 ? "; it is a pickle of protocol " + std::to_string(data[1])
                                                      : std::string("; a CSV trace needs no conversion"));
  }
  const Pickle p = [&] {
    try {
      return parse_pickle(data.data(), data.size());
    } catch (const InvalidArgumentError& e) {
      GENESIS_THROW(InvalidArgumentError, in, ": ", e.message());
    }
  }();
  return write_torch_snapshot_csv(p.root(), in, out, options);
}

}  // namespace genesis::debug
