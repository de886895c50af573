// Published figures (Note [Published figures] in publish.h): the writer's
// background thread and the reader.
#include "genesis/memory/publish.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <sstream>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <utility>

#include "genesis/core/error.h"
#include "genesis/core/fork.h"
#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/device_allocators.h"

namespace genesis::memory {

namespace {

// ---------------------------------------------------------------------------
// The file's layout. Every member is a multiple of 8 bytes long, so the
// whole can be copied as 64-bit words (the seqlock's relaxed atomics).

constexpr std::uint64_t kMagic = 0x3130'4D45'4D53'4E47;  // "GNSMEM01" read as little-endian bytes

struct SharedSite {
  std::uint64_t bytes;
  std::uint64_t count;
  char site[kPublishSiteBytes];
};

struct SharedDevice {
  char id[kPublishIdBytes];
  std::uint64_t total;
  std::uint64_t allocated;
  std::uint64_t reserved;
  std::uint64_t active;
  std::uint64_t cached;
  std::uint64_t largest_free_block;
  std::uint64_t num_ooms;
  std::uint64_t num_allocs;
  std::uint64_t peak_allocated;
  std::uint64_t peak_reserved;
  std::uint32_t num_sites;
  std::uint32_t flags;  // kHasSites
  SharedSite sites[kPublishMaxSites];
};
constexpr std::uint32_t kHasSites = 1;

struct SharedHeader {
  std::uint64_t magic;
  std::uint32_t version;
  std::uint32_t device_bytes;  // sizeof(SharedDevice): the reader checks it
  std::uint64_t seq;           // the seqlock counter: odd while the writer copies
  std::int32_t pid;
  std::uint32_t num_devices;
  std::uint64_t start_ticks;   // the writer's start time (/proc/<pid>/stat field 22)
  std::uint64_t update_time_ns;
  std::uint64_t updates;
};

struct Shared {
  SharedHeader header;
  SharedDevice devices[kPublishMaxDevices];
};

static_assert(std::is_trivially_copyable_v<Shared>);
static_assert(sizeof(SharedSite) % 8 == 0 && sizeof(SharedDevice) % 8 == 0 && sizeof(SharedHeader) % 8 == 0);
static_assert(offsetof(SharedHeader, seq) % 8 == 0 && offsetof(Shared, devices) == sizeof(SharedHeader));

constexpr std::size_t kSeqOffset = offsetof(SharedHeader, seq);

std::atomic_ref<std::uint64_t> word_at(unsigned char* base, std::size_t offset) {
  return std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(base + offset));
}

// The seqlock's copies (Note [Published figures]), word by word: release
// stores on the writer's side (none may appear before the odd counter that
// precedes them), acquire loads on the reader's (the counter's second read
// cannot move before them). Fences would do the same, but ThreadSanitizer
// does not understand fences; on x86 both compile to plain moves.

// Copies `bytes` (a multiple of 8) into shared memory.
void store_words(unsigned char* dst, const void* src, std::size_t bytes) {
  const auto* s = static_cast<const unsigned char*>(src);
  for (std::size_t i = 0; i < bytes; i += 8) {
    std::uint64_t w;
    std::memcpy(&w, s + i, 8);
    word_at(dst, i).store(w, std::memory_order_release);
  }
}

// Copies `bytes` (a multiple of 8) out of shared memory.
void load_words(void* dst, const unsigned char* src, std::size_t bytes) {
  auto* d = static_cast<unsigned char*>(dst);
  auto* s = const_cast<unsigned char*>(src);  // loads only: the mapping may be read-only
  for (std::size_t i = 0; i < bytes; i += 8) {
    const std::uint64_t w = word_at(s, i).load(std::memory_order_acquire);
    std::memcpy(d + i, &w, 8);
  }
}

void copy_text(char* dst, std::size_t capacity, const std::string& text) {
  const std::size_t n = std::min(text.size(), capacity - 1);
  std::memcpy(dst, text.data(), n);
  std::memset(dst + n, 0, capacity - n);
}

std::string text_of(const char* src, std::size_t capacity) { return std::string(src, strnlen(src, capacity)); }

std::uint64_t realtime_ns() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<std::uint64_t>(ts.tv_nsec);
}


// ---------------------------------------------------------------------------
// The writer.

struct Publisher {
  std::mutex control;  // serialises start_publishing / stop_publishing
  std::mutex mutex;    // everything below, and each refresh
  std::condition_variable cv;
  std::thread* thread = nullptr;  // leaked in a forked child (the thread is not there)
  bool running = false;
  bool stop = false;
  int owner_pid = 0;
  int fd = -1;
  unsigned char* map = nullptr;
  std::unique_ptr<Shared> image;
  std::uint64_t updates = 0;
  std::uint64_t start_ticks = 0;
  std::vector<std::pair<std::string, CachingAllocator*>> registered;
  std::unordered_map<const CachingAllocator*, std::uint64_t> totals;
  std::unordered_map<const CachingAllocator*, std::vector<PublishedSite>> sites;
  std::chrono::steady_clock::time_point next_site_scan{};
  bool atexit_registered = false;
};

void prepare_fork();
void parent_after_fork();
void child_after_fork();
constexpr ForkHandlers kForkHandlers{&prepare_fork, &parent_after_fork, &child_after_fork};
// Installed at load, before any thread can take the locks (Note [Fork]).
[[maybe_unused]] const bool kForkRegistered = (register_fork_handlers(ForkRank::kPublisher, &kForkHandlers), true);

// Leaked: the background thread and the atexit handler may use it during exit.
Publisher& publisher() {
  static auto* p = new Publisher;
  return *p;
}

// The allocators to publish: the registered ones, then the process-wide ones
// whose ids are not taken; "host" and "pinned" only once used.
std::vector<std::pair<std::string, CachingAllocator*>> to_publish(const Publisher& p) {
  std::vector<std::pair<std::string, CachingAllocator*>> out = p.registered;
  for (auto& [id, a] : existing_allocators()) {
    bool taken = false;
    for (const auto& r : out) taken = taken || r.first == id || r.second == a;
    if (!taken) out.emplace_back(id, a);
  }
  return out;
}

void refresh_locked(Publisher& p, bool force_sites) {
  if (p.map == nullptr || p.owner_pid != getpid()) return;
  Shared& img = *p.image;
  const auto now = std::chrono::steady_clock::now();
  const bool contexts = detail::allocation_contexts_used.load(std::memory_order_relaxed);
  const bool scan = contexts && (force_sites || now >= p.next_site_scan);
  std::uint32_t n = 0;
  for (const auto& [id, a] : to_publish(p)) {
    if (n == kPublishMaxDevices) break;
    try {
      const MemoryStats st = a->stats();
      const bool process_host = id == "host" || id == "pinned";
      if (process_host && st.num_allocs == 0 && st.reserved_bytes[kStatAggregate].current == 0) {
        bool registered = false;
        for (const auto& r : p.registered) registered = registered || r.second == a;
        if (!registered) continue;  // created but never used
      }
      SharedDevice& d = img.devices[n];
      copy_text(d.id, sizeof d.id, id);
      auto total = p.totals.find(a);
      if (total == p.totals.end()) total = p.totals.emplace(a, a->upstream().mem_info().total_bytes).first;
      auto u = [](std::int64_t v) { return v > 0 ? static_cast<std::uint64_t>(v) : 0; };
      d.total = total->second;
      d.allocated = u(st.allocated_bytes[kStatAggregate].current);
      d.reserved = u(st.reserved_bytes[kStatAggregate].current);
      d.active = u(st.active_bytes[kStatAggregate].current);
      d.cached = d.reserved > d.allocated ? d.reserved - d.allocated : 0;
      d.largest_free_block = st.largest_free_block;
      d.num_ooms = u(st.num_ooms);
      d.num_allocs = u(st.num_allocs);
      d.peak_allocated = u(st.allocated_bytes[kStatAggregate].peak);
      d.peak_reserved = u(st.reserved_bytes[kStatAggregate].peak);
      d.flags = 0;
      d.num_sites = 0;
      if (contexts) {
        if (scan) {
          std::vector<PublishedSite> sites = group_by_site(a->large_allocations(0));
          if (sites.size() > kPublishMaxSites) sites.resize(kPublishMaxSites);
          p.sites[a] = std::move(sites);
        }
        const auto it = p.sites.find(a);
        if (it != p.sites.end()) {
          d.flags = kHasSites;
          for (const PublishedSite& s : it->second) {
            SharedSite& out = d.sites[d.num_sites++];
            out.bytes = s.bytes;
            out.count = s.count;
            copy_text(out.site, sizeof out.site, s.site);
          }
        }
      }
      ++n;
    } catch (const std::exception&) {
      // An allocator that cannot answer (CUDA shutting down at exit) is left out.
    }
  }
  if (scan) {
    // At most 1/20 of the time (Note [Published figures]).
    const auto cost = std::chrono::steady_clock::now() - now;
    p.next_site_scan = now + std::max<std::chrono::steady_clock::duration>(kPublishInterval, cost * 20);
  }
  SharedHeader& h = img.header;
  h.magic = kMagic;
  h.version = kPublishVersion;
  h.device_bytes = sizeof(SharedDevice);
  h.seq = 0;  // not copied
  h.pid = p.owner_pid;
  h.num_devices = n;
  h.start_ticks = p.start_ticks;
  h.update_time_ns = realtime_ns();
  h.updates = ++p.updates;

  // The seqlock's write side.
  std::atomic_ref<std::uint64_t> seq = word_at(p.map, kSeqOffset);
  const std::uint64_t s = seq.load(std::memory_order_relaxed);
  seq.store(s + 1, std::memory_order_relaxed);
  const auto* raw = reinterpret_cast<const unsigned char*>(&img);
  store_words(p.map, raw, kSeqOffset);
  store_words(p.map + kSeqOffset + 8, raw + kSeqOffset + 8, sizeof(SharedHeader) - kSeqOffset - 8);
  store_words(p.map + sizeof(SharedHeader), raw + sizeof(SharedHeader), n * sizeof(SharedDevice));
  seq.store(s + 2, std::memory_order_release);
}

void run_thread(Publisher& p) {
  std::unique_lock<std::mutex> lock(p.mutex);
  while (!p.stop) {
    p.cv.wait_for(lock, kPublishInterval, [&] { return p.stop; });
    if (p.stop) break;
    refresh_locked(p, false);
  }
}

// Forgets the state a forked child inherited (the parent's thread and file).
void forget_parent_locked(Publisher& p) {
  p.thread = nullptr;  // not in this process: leaked on purpose
  if (p.map != nullptr) munmap(p.map, sizeof(Shared));
  if (p.fd >= 0) close(p.fd);
  p.map = nullptr;
  p.fd = -1;
  p.running = false;
  p.stop = false;
}

// Note [Fork] (genesis/core/fork.h): the thread holds `mutex` while it
// refreshes, so prepare takes both locks; the child, without the thread,
// forgets the parent's file and gets a fresh condition variable (the old one
// may still count the parent's thread as a waiter, which a notify in the
// child would wait for).
void prepare_fork() {
  Publisher& p = publisher();
  p.control.lock();
  p.mutex.lock();
}
void parent_after_fork() {
  Publisher& p = publisher();
  p.mutex.unlock();
  p.control.unlock();
}
void child_after_fork() {
  Publisher& p = publisher();
  new (&p.cv) std::condition_variable;  // re-made in place; the old state is dropped, never destroyed
  if (p.running) forget_parent_locked(p);
  p.mutex.unlock();
  p.control.unlock();
}

void at_exit() noexcept {
  try {
    stop_publishing();
  } catch (...) {
    // Nothing to do at exit.
  }
}

}  // namespace

std::string published_path(int pid) { return "/dev/shm/genesis-mem." + std::to_string(pid); }

std::vector<PublishedSite> group_by_site(const std::vector<AllocationInfo>& allocations) {
  std::map<std::string_view, std::pair<std::uint64_t, std::uint64_t>> by_site;
  for (const AllocationInfo& a : allocations) {
    const bool unknown = a.location.empty() || a.location.compare(0, 2, "0x") == 0;
    auto& [bytes, count] = by_site[unknown ? std::string_view("<unknown>") : std::string_view(a.location)];
    bytes += a.size;
    ++count;
  }
  std::vector<PublishedSite> out;
  out.reserve(by_site.size());
  for (const auto& [site, v] : by_site) out.push_back(PublishedSite{std::string(site), v.first, v.second});
  std::stable_sort(out.begin(), out.end(),
                   [](const PublishedSite& a, const PublishedSite& b) { return a.bytes > b.bytes; });
  return out;
}

void start_publishing() {
  Publisher& p = publisher();
  std::lock_guard<std::mutex> control(p.control);
  std::unique_lock<std::mutex> lock(p.mutex);
  const int pid = getpid();
  if (p.running && p.owner_pid == pid) return;
  if (p.running) forget_parent_locked(p);

  const std::string path = published_path(pid);
  const std::string tmp = "/dev/shm/.genesis-mem." + std::to_string(pid) + ".tmp";
  const int fd = ::open(tmp.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    GENESIS_THROW(Error, "cannot publish memory figures: cannot create ", tmp, ": ", std::strerror(errno));
  }
  if (ftruncate(fd, sizeof(Shared)) != 0) {
    const int err = errno;
    close(fd);
    unlink(tmp.c_str());
    GENESIS_THROW(Error, "cannot publish memory figures: cannot size ", tmp, ": ", std::strerror(err));
  }
  void* map = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) {
    const int err = errno;
    close(fd);
    unlink(tmp.c_str());
    GENESIS_THROW(Error, "cannot publish memory figures: cannot map ", tmp, ": ", std::strerror(err));
  }
  p.fd = fd;
  p.map = static_cast<unsigned char*>(map);
  p.owner_pid = pid;
  p.updates = 0;
  p.next_site_scan = {};
  char state = '?';
  if (!detail::read_proc_stat(pid, p.start_ticks, state)) p.start_ticks = 0;
  if (!p.image) p.image = std::make_unique<Shared>();
  std::memset(p.image.get(), 0, sizeof(Shared));
  refresh_locked(p, true);  // complete before the file appears under its name
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    munmap(map, sizeof(Shared));
    close(fd);
    unlink(tmp.c_str());
    p.map = nullptr;
    p.fd = -1;
    GENESIS_THROW(Error, "cannot publish memory figures: cannot create ", path, ": ", std::strerror(err));
  }
  p.running = true;
  p.stop = false;
  p.thread = new std::thread([&p] { run_thread(p); });
  if (!p.atexit_registered) {
    p.atexit_registered = true;
    std::atexit(at_exit);
  }
}

void start_publishing_if_requested() noexcept {
  static const bool requested = [] {
    const char* v = std::getenv("GENESIS_MEM_PUBLISH");
    return v != nullptr && std::strcmp(v, "1") == 0;
  }();
  if (!requested || publishing()) return;
  try {
    start_publishing();
  } catch (const std::exception& e) {
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true)) std::fprintf(stderr, "genesis: GENESIS_MEM_PUBLISH=1: %s\n", e.what());
  }
}

void stop_publishing() {
  Publisher& p = publisher();
  std::lock_guard<std::mutex> control(p.control);
  std::thread* thread = nullptr;
  {
    std::lock_guard<std::mutex> lock(p.mutex);
    if (!p.running) return;
    if (p.owner_pid != getpid()) {  // a forked child: the file is the parent's
      forget_parent_locked(p);
      return;
    }
    p.stop = true;
    thread = p.thread;
    p.thread = nullptr;
  }
  p.cv.notify_all();
  if (thread != nullptr) {
    thread->join();
    delete thread;
  }
  std::lock_guard<std::mutex> lock(p.mutex);
  unlink(published_path(p.owner_pid).c_str());
  munmap(p.map, sizeof(Shared));
  close(p.fd);
  p.map = nullptr;
  p.fd = -1;
  p.running = false;
  p.stop = false;
}

bool publishing() noexcept {
  Publisher& p = publisher();
  std::lock_guard<std::mutex> lock(p.mutex);
  return p.running && p.owner_pid == getpid();
}

void publish_now() {
  Publisher& p = publisher();
  std::lock_guard<std::mutex> lock(p.mutex);
  if (p.running) refresh_locked(p, true);
}

void publish_allocator(std::string id, CachingAllocator* allocator) {
  GENESIS_CHECK(allocator != nullptr, "publish_allocator: the allocator is null");
  GENESIS_CHECK(!id.empty() && id.size() < kPublishIdBytes, "publish_allocator: the id must have 1 to ",
                kPublishIdBytes - 1, " bytes, got '", id, "'");
  Publisher& p = publisher();
  std::lock_guard<std::mutex> lock(p.mutex);
  auto& r = p.registered;
  r.erase(std::remove_if(r.begin(), r.end(), [&](const auto& e) { return e.first == id || e.second == allocator; }),
          r.end());
  r.emplace_back(std::move(id), allocator);
}

void unpublish_allocator(const CachingAllocator* allocator) {
  Publisher& p = publisher();
  std::lock_guard<std::mutex> lock(p.mutex);  // waits for a refresh in progress
  auto& r = p.registered;
  r.erase(std::remove_if(r.begin(), r.end(), [&](const auto& e) { return e.second == allocator; }), r.end());
  p.totals.erase(allocator);
  p.sites.erase(allocator);
}

// ---------------------------------------------------------------------------
// The reader.

const PublishedDevice* PublishedFigures::find(const std::string& id) const noexcept {
  for (const PublishedDevice& d : devices)
    if (d.id == id) return &d;
  return nullptr;
}

std::optional<PublishedFigures> read_published(int pid) {
  if (pid <= 0) return std::nullopt;
  const std::string path = published_path(pid);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat st {};
  if (fstat(fd, &st) != 0 || static_cast<std::size_t>(st.st_size) < sizeof(SharedHeader)) {
    close(fd);
    return std::nullopt;
  }
  const std::size_t size = static_cast<std::size_t>(st.st_size);
  void* map = mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (map == MAP_FAILED) return std::nullopt;
  const auto* base = static_cast<const unsigned char*>(map);
  auto copy = std::make_unique<Shared>();
  bool consistent = false;
  // The seqlock's read side. The writer holds the counter odd for a few
  // microseconds; a writer that died in between leaves it odd for good.
  for (int attempt = 0; attempt < 2000 && !consistent; ++attempt) {
    if (attempt > 0) std::this_thread::yield();
    auto seq = word_at(const_cast<unsigned char*>(base), kSeqOffset);
    const std::uint64_t s1 = seq.load(std::memory_order_acquire);
    if ((s1 & 1) != 0) continue;
    load_words(&copy->header, base, sizeof(SharedHeader));
    const std::size_t n = std::min<std::size_t>(copy->header.num_devices, kPublishMaxDevices);
    const std::size_t bytes = std::min(n * sizeof(SharedDevice), size - sizeof(SharedHeader)) / 8 * 8;
    load_words(copy->devices, base + sizeof(SharedHeader), bytes);
    consistent = seq.load(std::memory_order_relaxed) == s1;
  }
  munmap(map, size);

  const SharedHeader& h = copy->header;
  std::uint64_t start_ticks = 0;
  char state = '?';
  const bool alive = (::kill(pid, 0) == 0 || errno == EPERM) && detail::read_proc_stat(pid, start_ticks, state) &&
                     state != 'Z' && state != 'X';
  const bool valid = consistent && h.magic == kMagic && h.version == kPublishVersion &&
                     h.device_bytes == sizeof(SharedDevice) && h.pid == pid && h.num_devices <= kPublishMaxDevices &&
                     size >= sizeof(SharedHeader) + h.num_devices * sizeof(SharedDevice);
  if (!alive || (valid && h.start_ticks != 0 && start_ticks != h.start_ticks)) {
    unlink(path.c_str());  // the writer is gone (or the pid was reused): the file is stale
    return std::nullopt;
  }
  if (!valid) return std::nullopt;

  PublishedFigures out;
  out.pid = h.pid;
  out.update_time_ns = h.update_time_ns;
  out.updates = h.updates;
  for (std::uint32_t i = 0; i < h.num_devices; ++i) {
    const SharedDevice& d = copy->devices[i];
    PublishedDevice dev;
    dev.id = text_of(d.id, sizeof d.id);
    dev.total = d.total;
    dev.allocated = d.allocated;
    dev.reserved = d.reserved;
    dev.active = d.active;
    dev.cached = d.cached;
    dev.largest_free_block = d.largest_free_block;
    dev.num_ooms = d.num_ooms;
    dev.num_allocs = d.num_allocs;
    dev.peak_allocated = d.peak_allocated;
    dev.peak_reserved = d.peak_reserved;
    dev.has_sites = (d.flags & kHasSites) != 0;
    for (std::uint32_t k = 0; k < std::min<std::uint32_t>(d.num_sites, kPublishMaxSites); ++k) {
      dev.sites.push_back(PublishedSite{text_of(d.sites[k].site, sizeof d.sites[k].site), d.sites[k].bytes,
                                        d.sites[k].count});
    }
    out.devices.push_back(std::move(dev));
  }
  return out;
}

// Field 22 (start time) and field 3 (state) of /proc/<pid>/stat; false when
// it cannot be read. The command name (field 2) may hold blanks and ')'.
bool detail::read_proc_stat(int pid, std::uint64_t& start_ticks, char& state) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!in || !std::getline(in, line)) return false;
  const std::size_t close = line.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream rest(line.substr(close + 1));
  std::string field;
  // After the name: state is field 3, start time field 22.
  for (int f = 3; f <= 22; ++f) {
    if (!(rest >> field)) return false;
    if (f == 3) state = field.empty() ? '?' : field[0];
  }
  start_ticks = std::strtoull(field.c_str(), nullptr, 10);
  return true;
}

}  // namespace genesis::memory
