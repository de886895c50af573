// PyTorch memory snapshots as traces (genesis/debug/torch_snapshot.h).
#include "genesis/debug/torch_snapshot.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "genesis/core/error.h"
#include "snapshot_entry.h"

namespace genesis::debug {

namespace {

using detail::SnapshotDevice;
using detail::SnapshotEntryReader;
using detail::select_snapshot_device;

std::string join(const std::vector<int>& v) {
  std::string out;
  for (int x : v) out += (out.empty() ? "" : ", ") + std::to_string(x);
  return out;
}

}  // namespace

namespace detail {

SnapshotDevice select_snapshot_device(const PickleValue& snapshot, const std::string& source,
                                      const TorchSnapshotOptions& options) {
  GENESIS_CHECK(snapshot.is_dict(), source, ": not a memory snapshot (a pickled ", snapshot.kind_name(),
                ", expected the dict of torch.cuda.memory._snapshot())");
  const PickleValue* traces = snapshot.get("device_traces");
  GENESIS_CHECK(traces != nullptr, source, ": the snapshot has no device_traces (record the history first: ",
                "torch.cuda.memory._record_memory_history() or genesis.cuda.memory._record_memory_history())");
  GENESIS_CHECK(traces->is_sequence(), source, ": device_traces is a ", traces->kind_name(), ", expected a list");
  std::vector<int> non_empty;
  int device = options.device;
  std::size_t most = 0;
  for (std::size_t d = 0; d < traces->items.size(); ++d) {
    const PickleValue* t = traces->items[d];
    GENESIS_CHECK(t->is_sequence(), source, ": device_traces[", d, "] is a ", t->kind_name(), ", expected a list");
    if (!t->items.empty()) non_empty.push_back(static_cast<int>(d));
    if (options.device < 0 && t->items.size() > most) {
      most = t->items.size();
      device = static_cast<int>(d);
    }
  }
  GENESIS_CHECK(options.device < 0 || static_cast<std::size_t>(options.device) < traces->items.size(), source,
                ": no device ", options.device, " in the snapshot (it has ", traces->items.size(), ")");
  GENESIS_CHECK(device >= 0, source, ": every device trace is empty (was the history recorded while the program ran?)");

  std::string name = source + " (device " + std::to_string(device);
  if (non_empty.size() > 1) name += " of " + join(non_empty);
  name += ")";
  // A snapshot Genesis wrote says so in its allocator settings.
  bool by_genesis = false;
  if (const PickleValue* settings = snapshot.get("allocator_settings"); settings != nullptr && settings->is_dict())
    if (const PickleValue* who = settings->get("allocator"); who != nullptr && who->is_string())
      by_genesis = who->text == "genesis";
  return SnapshotDevice{device, std::move(name), traces->items[static_cast<std::size_t>(device)], !by_genesis};
}

}  // namespace detail

Trace trace_from_torch_snapshot(const PickleValue& snapshot, const std::string& source,
                                const TorchSnapshotOptions& options) {
  const SnapshotDevice chosen = select_snapshot_device(snapshot, source, options);
  const int device = chosen.device;
  TraceBuilder builder(chosen.name);
  const PickleValue& entries = *chosen.entries;
  for (std::size_t i = 0; i < entries.items.size(); ++i) {
    const SnapshotEntryReader r{source, device, i};
    const PickleValue& e = *entries.items[i];
    if (!e.is_dict()) r.fail(std::string("is a ") + e.kind_name() + ", expected a dict");
    const PickleValue& action = r.field(e, "action");
    if (!action.is_string()) r.fail(std::string("'action' is a ") + action.kind_name() + ", expected a str");
    const std::string& a = action.text;
    TraceCounts& counts = builder.counts();
    if (a == "alloc" || a == "free_requested") {
      const std::uint64_t addr = r.unsigned_int(e, "addr");
      const std::uint64_t size = r.unsigned_int(e, "size");
      const StreamId stream = r.stream(e);
      std::uint64_t t = 0;
      const bool timed = r.time(e, t);
      ++counts.lines;
      if (a == "alloc") {  // TraceBuilder counts allocs and frees
        const std::string site = r.site(e);
        if (timed)
          builder.alloc(addr, size, stream, t, site);
        else
          builder.alloc_at_site(addr, size, stream, site);
      } else {
        if (timed)
          builder.free(addr, stream, t);
        else
          builder.free(addr, stream);
      }
      continue;
    }
    ++counts.lines;
    if (a == "segment_free" || a == "segment_unmap") {
      // PyTorch gave cached memory back (Note [Released caches]): a run of
      // these is one empty_cache event.
      if (a == "segment_free") {
        ++counts.segment_free;
      } else {
        ++counts.other_ignored;
      }
      if (!chosen.releases_are_the_programs) continue;  // Genesis released pages on its own
      std::uint64_t t = 0;
      if (r.time(e, t)) {
        builder.empty_cache(t);
      } else {
        builder.empty_cache();
      }
    } else if (a == "free_completed") {
      ++counts.free_completed;
    } else if (a == "segment_alloc") {
      ++counts.segment_alloc;
    } else if (a == "oom") {
      ++counts.oom;
    } else if (a == "segment_map" || a == "snapshot" || a == "annotate") {
      ++counts.other_ignored;
    } else {
      r.fail("unknown action '" + a + "'");
    }
  }
  return builder.finish();
}

Trace read_torch_snapshot(const std::uint8_t* data, std::size_t size, const std::string& source,
                          const TorchSnapshotOptions& options) {
  Pickle p = [&] {
    try {
      return parse_pickle(data, size);
    } catch (const InvalidArgumentError& e) {
      GENESIS_THROW(InvalidArgumentError, source, ": ", e.message());
    }
  }();
  return trace_from_torch_snapshot(p.root(), source, options);
}

Trace read_torch_snapshot(std::string_view head, const std::function<std::size_t(char*, std::size_t)>& more,
                          const std::string& source, const TorchSnapshotOptions& options) {
  constexpr std::size_t kMaxBytes = std::size_t{16} << 30;
  constexpr std::size_t kStep = std::size_t{1} << 20;
  std::vector<std::uint8_t> data(head.begin(), head.end());
  while (true) {
    GENESIS_CHECK(data.size() <= kMaxBytes, source, ": a memory snapshot larger than 16 GiB is not read");
    const std::size_t have = data.size();
    data.resize(have + kStep);
    const std::size_t got = more(reinterpret_cast<char*>(data.data() + have), kStep);
    data.resize(have + got);
    if (got == 0) break;
  }
  return read_torch_snapshot(data.data(), data.size(), source, options);
}

bool looks_like_pickle(const std::uint8_t* data, std::size_t size) noexcept {
  if (size < 2) return false;
  if (data[0] == 0x80) return data[1] <= 5;  // PROTO
  // Protocols 0 and 1 declare none. A pickled dict or list opens with
  // EMPTY_DICT or EMPTY_LIST (protocol 1) or with MARK and then DICT or
  // LIST (protocol 0); no CSV trace starts with any of these.
  if (data[0] == '}' || data[0] == ']') return true;
  return data[0] == '(' && (data[1] == 'd' || data[1] == 'l');
}

}  // namespace genesis::debug
