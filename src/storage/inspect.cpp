// inspect_storage and StorageTracker: read the allocator, keep no books
// (Note [Tracking without a second ledger]).
#include "genesis/storage/inspect.h"

#include <algorithm>
#include <sstream>

#include "genesis/core/bytes.h"
#include "genesis/core/error.h"
#include "genesis/memory/caching_allocator.h"

namespace genesis {
namespace {

std::string dims(const std::vector<std::int64_t>& v) {
  std::string s = "(";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + (v.size() == 1 ? ",)" : ")");
}

// The allocator's record of a pooled storage's block, if it is still live.
std::optional<memory::AllocationInfo> block_of(const Storage& s) {
  const StorageImpl* impl = s.impl();
  if (impl == nullptr || impl->allocator() == nullptr || impl->block() == nullptr) return std::nullopt;
  return impl->allocator()->allocation_info(impl->block());
}

StorageInfo inspect(const Storage& s, std::vector<std::int64_t> shape, std::vector<std::int64_t> stride,
                    bool contiguous, void* data, std::size_t nbytes) {
  GENESIS_CHECK(s.defined(), "inspect_storage: the storage is null");
  StorageInfo info;
  info.shape = std::move(shape);
  info.stride = std::move(stride);
  info.dtype = s.dtype();
  info.device = s.device();
  info.nbytes = nbytes;
  info.contiguous = contiguous;
  info.data_ptr = reinterpret_cast<std::uintptr_t>(data);
  info.use_count = s.use_count();
  info.pooled = s.is_pooled();
  info.pinned = s.is_pinned();
  if (memory::CachingAllocator* a = s.impl()->allocator()) {
    info.pool = a->upstream().name();
    if (auto b = block_of(s)) {
      info.block_size = b->size;
      info.location = b->location;
    }
    const memory::MemoryStats st = a->stats();
    info.pool_allocated = static_cast<std::size_t>(st.allocated_bytes[memory::kStatAggregate].current);
    info.pool_reserved = static_cast<std::size_t>(st.reserved_bytes[memory::kStatAggregate].current);
    info.pool_fragmentation = st.fragmentation_ratio();
  }
  return info;
}

}  // namespace

std::string StorageInfo::to_string() const {
  std::ostringstream os;
  os << "Storage(shape=" << dims(shape) << ", stride=" << dims(stride) << ", dtype=" << dtype_name(dtype)
     << ", device=" << device.str() << ")\n"
     << "  bytes:       " << nbytes << " (" << detail::format_bytes(nbytes) << ")\n"
     << "  contiguous:  " << (contiguous ? "yes" : "no") << "\n"
     << "  data_ptr:    0x" << std::hex << data_ptr << std::dec << "\n"
     << "  references:  " << use_count << "\n"
     << "  pinned:      " << (pinned ? "yes" : "no") << "\n";
  if (pooled) {
    os << "  pool:        " << pool << " (block " << detail::format_bytes(block_size)
       << (location.empty() ? "" : ", allocated at " + location) << ")\n"
       << "  pool usage:  " << detail::format_bytes(pool_allocated) << " allocated, "
       << detail::format_bytes(pool_reserved) << " reserved, fragmentation " << pool_fragmentation << "\n";
  } else {
    os << "  pool:        none (external memory)\n";
  }
  return os.str();
}

StorageInfo inspect_storage(const Storage& storage) {
  GENESIS_CHECK(storage.defined(), "inspect_storage: the storage is null");
  return inspect(storage, storage.shape(), contiguous_strides(storage.shape()), true, storage.data_ptr(),
                 storage.nbytes());
}

StorageInfo inspect_storage(const StorageView& view) {
  return inspect(view.base(), view.shape(), view.stride(), view.is_contiguous(), view.data_ptr(), view.nbytes());
}

// ------------------------------------------------------------- tracker ---

void StorageTracker::register_storage(const Storage& storage, std::string label) {
  GENESIS_CHECK(storage.defined(), "StorageTracker::register_storage: the storage is null");
  std::lock_guard lock(mutex_);
  for (const Entry& e : entries_) {
    GENESIS_CHECK(e.storage.get() != storage.impl() || e.storage.expired(),
                  "StorageTracker::register_storage: storage '", label, "' is already registered",
                  e.label.empty() ? "" : " as '" + e.label + "'");
  }
  std::erase_if(entries_, [](const Entry& e) { return e.storage.expired(); });
  entries_.push_back({WeakStorage(storage), std::move(label), std::chrono::steady_clock::now()});
}

bool StorageTracker::unregister_storage(const Storage& storage) {
  std::lock_guard lock(mutex_);
  const auto n = std::erase_if(entries_, [&](const Entry& e) { return e.storage.get() == storage.impl(); });
  return n > 0;
}

std::size_t StorageTracker::count() const {
  std::lock_guard lock(mutex_);
  return static_cast<std::size_t>(
      std::count_if(entries_.begin(), entries_.end(), [](const Entry& e) { return !e.storage.expired(); }));
}

std::size_t StorageTracker::total_allocated() const {
  std::vector<Storage> alive;
  {
    std::lock_guard lock(mutex_);
    for (const Entry& e : entries_) {
      if (Storage s = e.storage.lock()) alive.push_back(std::move(s));
    }
  }
  std::size_t total = 0;
  for (const Storage& s : alive) {
    const auto b = block_of(s);
    total += b ? b->size : s.nbytes();
  }
  return total;  // `alive` drops its references outside the lock
}

std::vector<TrackedStorage> StorageTracker::check_leaks() {
  std::vector<std::pair<Storage, Entry>> alive;
  {
    std::lock_guard lock(mutex_);
    std::erase_if(entries_, [](const Entry& e) { return e.storage.expired(); });
    for (const Entry& e : entries_) {
      if (Storage s = e.storage.lock()) alive.emplace_back(std::move(s), e);
    }
  }
  const auto now = std::chrono::steady_clock::now();
  std::vector<TrackedStorage> out;
  for (const auto& [s, e] : alive) {
    TrackedStorage t;
    t.label = e.label;
    t.data_ptr = reinterpret_cast<std::uintptr_t>(s.data_ptr());
    t.nbytes = s.nbytes();
    t.device = s.device();
    if (const auto b = block_of(s)) {
      t.block_size = b->size;
      t.location = b->location;
    }
    t.age_seconds = std::chrono::duration<double>(now - e.since).count();
    out.push_back(std::move(t));
  }
  std::sort(out.begin(), out.end(), [](const TrackedStorage& a, const TrackedStorage& b) {
    return a.nbytes != b.nbytes ? a.nbytes > b.nbytes : a.data_ptr < b.data_ptr;
  });
  return out;
}

void StorageTracker::clear() {
  std::lock_guard lock(mutex_);
  entries_.clear();
}

}  // namespace genesis
