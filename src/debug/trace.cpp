// Trace files: address resolution (TraceBuilder), the streaming CSV reader
// (plain or gzip) and the writer of the allocator's own history.
#include "genesis/debug/trace.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <system_error>

#include "genesis/core/error.h"

// Defined by CMake (1 when zlib was found); 0 when built some other way.
#ifndef GENESIS_WITH_ZLIB
#define GENESIS_WITH_ZLIB 0
#endif
#if GENESIS_WITH_ZLIB
#include <zlib.h>
#endif

namespace genesis::debug {

// ---------------------------------------------------------------------------
// TraceBuilder

TraceBuilder::TraceBuilder(std::string source) { trace_.source = std::move(source); }

std::uint16_t TraceBuilder::stream_index(StreamId stream) {
  // Nearly every trace has one stream: skip the hash for the common case.
  if (!trace_.streams.empty() && trace_.streams.front() == stream) return 0;
  auto it = stream_index_.find(stream);
  if (it != stream_index_.end()) return it->second;
  GENESIS_CHECK(trace_.streams.size() <= std::numeric_limits<std::uint16_t>::max(), trace_.source,
                ": more than 65,536 distinct streams; the replay supports at most that many");
  const auto index = static_cast<std::uint16_t>(trace_.streams.size());
  trace_.streams.push_back(stream);
  stream_index_.emplace(stream, index);
  return index;
}

void TraceBuilder::alloc(std::uintptr_t addr, std::uint64_t size, StreamId stream) {
  ++trace_.counts.alloc;
  const std::uint16_t s = stream_index(stream);
  std::uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    GENESIS_CHECK(trace_.num_slots < std::numeric_limits<std::uint32_t>::max(), trace_.source,
                  ": more than 2^32 - 1 live allocations at once");
    slot = trace_.num_slots++;
  }
  auto [it, inserted] = live_.try_emplace(addr, Live{slot, size});
  if (!inserted) {
    // The address is still live: the trace lost a free. Keep the earlier
    // allocation live to the end (a leak) rather than guess which free was
    // meant; its slot is never reused.
    ++trace_.counts.realloc_of_live;
    leaked_slots_.push_back(it->second.slot);
    it->second = Live{slot, size};
  }
  live_bytes_ += size;
  trace_.peak_live_bytes = std::max(trace_.peak_live_bytes, live_bytes_);
  trace_.events.push_back(TraceEvent{size, slot, s, TraceOp::kAlloc});
}

void TraceBuilder::free(std::uintptr_t addr, StreamId stream) {
  ++trace_.counts.free_requested;
  const std::uint16_t s = stream_index(stream);
  auto it = live_.find(addr);
  if (it == live_.end()) {
    ++trace_.counts.unknown_frees;
    trace_.events.push_back(TraceEvent{0, kNullSlot, s, TraceOp::kFree});
    return;
  }
  const Live live = it->second;
  live_.erase(it);
  live_bytes_ -= live.size;
  free_slots_.push_back(live.slot);
  trace_.events.push_back(TraceEvent{live.size, live.slot, s, TraceOp::kFree});
}

Trace TraceBuilder::finish() {
  std::vector<std::uint32_t> live = std::move(leaked_slots_);
  for (const auto& [addr, l] : live_) live.push_back(l.slot);
  std::sort(live.begin(), live.end());  // deterministic cleanup order
  trace_.counts.live_at_end = live.size();
  trace_.live_at_end_slots = std::move(live);
  if (trace_.streams.empty()) trace_.streams.push_back(0);
  Trace out = std::move(trace_);
  *this = TraceBuilder();
  return out;
}

namespace {

constexpr std::size_t kChunk = std::size_t{1} << 20;    // bytes read or written at a time
constexpr std::size_t kMaxLine = std::size_t{1} << 16;  // longer: not a trace

// ---------------------------------------------------------------------------
// Input: a plain or gzip file read in chunks.

class InputFile {
 public:
  explicit InputFile(const std::string& path) : path_(path) {
    plain_ = std::fopen(path.c_str(), "rb");
    GENESIS_CHECK(plain_ != nullptr, "cannot open trace '", path, "': ", std::strerror(errno));
    unsigned char magic[2] = {0, 0};
    const std::size_t n = std::fread(magic, 1, 2, plain_);
    gzip_ = n == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
    if (!gzip_) {
      GENESIS_CHECK(std::fseek(plain_, 0, SEEK_SET) == 0, "cannot read trace '", path, "': not a seekable file");
      return;
    }
    std::fclose(plain_);
    plain_ = nullptr;
#if GENESIS_WITH_ZLIB
    gz_ = gzopen(path.c_str(), "rb");
    GENESIS_CHECK(gz_ != nullptr, "cannot open trace '", path, "': ", std::strerror(errno));
    gzbuffer(gz_, 256 * 1024);
#else
    GENESIS_THROW(InvalidArgumentError, "trace '", path,
                  "' is gzip-compressed, but this Genesis was built without zlib: "
                  "install zlib1g-dev and rebuild, or gunzip the file");
#endif
  }
  ~InputFile() {
    if (plain_ != nullptr) std::fclose(plain_);
#if GENESIS_WITH_ZLIB
    if (gz_ != nullptr) gzclose(gz_);
#endif
  }
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  bool gzip() const noexcept { return gzip_; }

  /// Up to `n` bytes; 0 at the end. Throws InvalidArgumentError for read
  /// errors and corrupt or truncated gzip data. `lines` is only for messages.
  std::size_t read(char* buf, std::size_t n, std::uint64_t lines) {
    if (plain_ != nullptr) {
      const std::size_t got = std::fread(buf, 1, n, plain_);
      GENESIS_CHECK(got > 0 || !std::ferror(plain_), "error reading trace '", path_, "' after line ", lines, ": ",
                    std::strerror(errno));
      return got;
    }
#if GENESIS_WITH_ZLIB
    const int got = gzread(gz_, buf, static_cast<unsigned>(n));
    int err = Z_OK;
    const char* msg = gzerror(gz_, &err);
    // zlib prefixes its messages with the path, which ours already names.
    if (std::strncmp(msg, path_.c_str(), path_.size()) == 0 && std::strncmp(msg + path_.size(), ": ", 2) == 0)
      msg += path_.size() + 2;
    // zlib reports a stream that ends early as Z_BUF_ERROR with a short read
    // (not -1), so the error is checked on every read, not only on -1.
    if (got < 0 || (got == 0 && err != Z_OK)) {
      if (err == Z_BUF_ERROR) {
        GENESIS_THROW(InvalidArgumentError, "trace '", path_, "': the gzip data ends early after line ", lines,
                      " (truncated file?): ", msg);
      }
      GENESIS_THROW(InvalidArgumentError, "trace '", path_, "': corrupt gzip data after line ", lines, ": ",
                    err == Z_ERRNO ? std::strerror(errno) : msg);
    }
    return static_cast<std::size_t>(got);
#else
    (void)buf;
    (void)n;
    (void)lines;
    return 0;
#endif
  }

 private:
  std::string path_;
  std::FILE* plain_ = nullptr;
  bool gzip_ = false;
#if GENESIS_WITH_ZLIB
  gzFile gz_ = nullptr;
#endif
};

// ---------------------------------------------------------------------------
// The CSV parser.

enum Column : int { kTime = 0, kAction, kAddr, kSize, kStream, kNumColumns };
constexpr const char* kColumnNames[kNumColumns] = {"time_us", "action", "addr", "size", "stream"};

enum class Action { kAlloc, kFreeRequested, kFreeCompleted, kSegmentAlloc, kSegmentFree, kOom, kOther, kUnknown };

Action parse_action(std::string_view s) noexcept {
  if (s == "alloc") return Action::kAlloc;
  if (s == "free_requested") return Action::kFreeRequested;
  if (s == "free_completed") return Action::kFreeCompleted;
  if (s == "segment_alloc") return Action::kSegmentAlloc;
  if (s == "segment_free") return Action::kSegmentFree;
  if (s == "oom") return Action::kOom;
  // PyTorch's expandable segments and snapshots: nothing to replay.
  if (s == "segment_map" || s == "segment_unmap" || s == "snapshot") return Action::kOther;
  return Action::kUnknown;
}

std::string_view trim(std::string_view s) noexcept {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

class Parser {
 public:
  explicit Parser(const std::string& path) : path_(path), builder_(path) {
    // Without a header: the canonical order.
    for (int c = 0; c < kNumColumns; ++c) index_[c] = c;
  }

  void line(std::string_view text) {
    ++line_no_;
    if (line_no_ == 1 && text.size() >= 3 && text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
    text = trim(text);
    if (text.empty() || text.front() == '#') return;
    if (!seen_first_) {
      seen_first_ = true;
      if (std::isalpha(static_cast<unsigned char>(text.front())) != 0) {
        header(text);
        return;
      }
    }
    data(text);
  }

  std::uint64_t line_no() const noexcept { return line_no_; }
  Trace finish() { return builder_.finish(); }

 private:
  [[noreturn]] void fail(std::string_view text, const std::string& what) const {
    std::string shown(text.substr(0, 80));
    if (text.size() > 80) shown += "...";
    GENESIS_THROW(InvalidArgumentError, path_, ":", line_no_, ": ", what, " (line: \"", shown, "\")");
  }

  void split(std::string_view text) {
    fields_.clear();
    std::size_t start = 0;
    while (true) {
      const std::size_t comma = text.find(',', start);
      if (comma == std::string_view::npos) {
        fields_.push_back(trim(text.substr(start)));
        return;
      }
      fields_.push_back(trim(text.substr(start, comma - start)));
      start = comma + 1;
    }
  }

  void header(std::string_view text) {
    split(text);
    for (int c = 0; c < kNumColumns; ++c) index_[c] = -1;
    for (std::size_t i = 0; i < fields_.size(); ++i) {
      std::string name(fields_[i]);
      std::transform(name.begin(), name.end(), name.begin(), [](unsigned char ch) { return std::tolower(ch); });
      if (name == "address") name = "addr";
      if (name == "time") name = "time_us";
      for (int c = 0; c < kNumColumns; ++c) {
        if (name != kColumnNames[c]) continue;
        if (index_[c] >= 0) fail(text, "the header names column '" + name + "' twice");
        index_[c] = static_cast<int>(i);
      }
    }
    for (int c : {kAction, kAddr, kSize}) {
      if (index_[c] < 0) {
        fail(text, std::string("the header has no '") + kColumnNames[c] +
                       "' column (expected time_us,action,addr,size,stream)");
      }
    }
    needed_ = 0;
    for (int c = 0; c < kNumColumns; ++c) needed_ = std::max(needed_, index_[c] + 1);
  }

  // A non-negative integer, decimal or (for addresses and streams) "0x" hex.
  std::uint64_t number(std::string_view text, int column, bool allow_hex) const {
    std::string_view f = fields_[static_cast<std::size_t>(index_[column])];
    const char* name = kColumnNames[column];
    if (f.empty()) fail(text, std::string("column '") + name + "' is empty");
    if (f.front() == '-') {
      fail(text, column == kSize ? "negative size " + std::string(f)
                                 : std::string("column '") + name + "' is negative: " + std::string(f));
    }
    int base = 10;
    if (allow_hex && f.size() > 2 && f[0] == '0' && (f[1] == 'x' || f[1] == 'X')) {
      f.remove_prefix(2);
      base = 16;
    }
    if (!f.empty() && f.front() == '+') f.remove_prefix(1);
    std::uint64_t v = 0;
    const auto [end, ec] = std::from_chars(f.data(), f.data() + f.size(), v, base);
    if (ec == std::errc::result_out_of_range) {
      fail(text, std::string("column '") + name + "' is out of range: " + std::string(f));
    }
    if (ec != std::errc() || end != f.data() + f.size()) {
      fail(text, std::string("column '") + name + "' is not a number: '" +
                     std::string(fields_[static_cast<std::size_t>(index_[column])]) + "'");
    }
    return v;
  }

  void data(std::string_view text) {
    split(text);
    if (static_cast<int>(fields_.size()) < needed_) {
      fail(text, "missing column: expected " + std::to_string(needed_) + " columns (time_us,action,addr,size,stream), found " +
                     std::to_string(fields_.size()));
    }
    builder_.counts().lines++;
    if (index_[kTime] >= 0) {
      // Only checked: the replay keeps the order, not the times.
      const std::string_view t = fields_[static_cast<std::size_t>(index_[kTime])];
      double v = 0;
      const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
      if (t.empty() || ec != std::errc() || end != t.data() + t.size() || !std::isfinite(v)) {
        fail(text, "column 'time_us' is not a number: '" + std::string(t) + "'");
      }
    }
    const std::string_view action_text = fields_[static_cast<std::size_t>(index_[kAction])];
    const Action action = parse_action(action_text);
    if (action == Action::kUnknown) {
      fail(text, "unknown action '" + std::string(action_text) +
                     "' (expected alloc, free_requested, free_completed, segment_alloc, segment_free or oom)");
    }
    const std::uint64_t addr = number(text, kAddr, true);
    const std::uint64_t size = number(text, kSize, false);
    const StreamId stream = index_[kStream] >= 0 ? number(text, kStream, true) : 0;
    TraceCounts& counts = builder_.counts();
    switch (action) {
      case Action::kAlloc: builder_.alloc(addr, size, stream); break;
      case Action::kFreeRequested: builder_.free(addr, stream); break;
      case Action::kFreeCompleted: ++counts.free_completed; break;
      case Action::kSegmentAlloc: ++counts.segment_alloc; break;
      case Action::kSegmentFree: ++counts.segment_free; break;
      case Action::kOom: ++counts.oom; break;
      case Action::kOther: ++counts.other_ignored; break;
      case Action::kUnknown: break;
    }
  }

  const std::string& path_;
  TraceBuilder builder_;
  std::uint64_t line_no_ = 0;
  bool seen_first_ = false;
  int index_[kNumColumns];          // field index of each column, -1 = absent
  int needed_ = kNumColumns;        // fields a data line must have
  std::vector<std::string_view> fields_;
};

// ---------------------------------------------------------------------------
// Output: a plain or gzip file written in chunks.

class OutputFile {
 public:
  OutputFile(const std::string& path, bool gzip) : path_(path) {
    if (!gzip) {
      plain_ = std::fopen(path.c_str(), "wb");
      GENESIS_CHECK(plain_ != nullptr, "cannot create trace '", path, "': ", std::strerror(errno));
      return;
    }
#if GENESIS_WITH_ZLIB
    gz_ = gzopen(path.c_str(), "wb6");
    GENESIS_CHECK(gz_ != nullptr, "cannot create trace '", path, "': ", std::strerror(errno));
#else
    GENESIS_THROW(InvalidArgumentError, "cannot write '", path,
                  "': this Genesis was built without zlib (no gzip); write a .csv instead");
#endif
  }
  ~OutputFile() {
    if (plain_ != nullptr) std::fclose(plain_);
#if GENESIS_WITH_ZLIB
    if (gz_ != nullptr) gzclose(gz_);
#endif
  }
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  void write(std::string_view data) {
    if (data.empty()) return;
    bool ok = true;
    if (plain_ != nullptr) {
      ok = std::fwrite(data.data(), 1, data.size(), plain_) == data.size();
    } else {
#if GENESIS_WITH_ZLIB
      ok = gzwrite(gz_, data.data(), static_cast<unsigned>(data.size())) == static_cast<int>(data.size());
#endif
    }
    if (!ok) GENESIS_THROW(Error, "error writing trace '", path_, "': ", std::strerror(errno));
  }

  void close() {
    int rc = 0;
    if (plain_ != nullptr) {
      rc = std::fclose(plain_);
      plain_ = nullptr;
    }
#if GENESIS_WITH_ZLIB
    if (gz_ != nullptr) {
      rc = gzclose(gz_) == Z_OK ? 0 : -1;
      gz_ = nullptr;
    }
#endif
    if (rc != 0) GENESIS_THROW(Error, "error writing trace '", path_, "': ", std::strerror(errno));
  }

 private:
  std::string path_;
  std::FILE* plain_ = nullptr;
#if GENESIS_WITH_ZLIB
  gzFile gz_ = nullptr;
#endif
};

void append_number(std::string& out, std::uint64_t v) {
  char buf[24];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  (void)ec;  // 24 digits always suffice for 64 bits
  out.append(buf, end);
}

}  // namespace

// ---------------------------------------------------------------------------

Trace read_trace(const std::string& path) {
  InputFile in(path);
  Parser parser(path);
  std::vector<char> chunk(kChunk);
  std::string carry;  // a line split across chunks
  while (true) {
    const std::size_t n = in.read(chunk.data(), chunk.size(), parser.line_no());
    if (n == 0) break;
    const char* p = chunk.data();
    const char* const end = p + n;
    while (p < end) {
      const auto* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<std::size_t>(end - p)));
      if (nl == nullptr) {
        carry.append(p, end);
        GENESIS_CHECK(carry.size() <= kMaxLine, path, ":", parser.line_no() + 1, ": line longer than ", kMaxLine,
                      " bytes: not a trace (binary file?)");
        break;
      }
      if (carry.empty()) {
        parser.line(std::string_view(p, static_cast<std::size_t>(nl - p)));
      } else {
        carry.append(p, nl);
        parser.line(carry);
        carry.clear();
      }
      p = nl + 1;
    }
  }
  if (!carry.empty()) parser.line(carry);
  return parser.finish();
}

void write_trace(const std::string& path, const std::vector<memory::MemoryEvent>& events) {
  const bool gzip = path.size() >= 3 && path.compare(path.size() - 3, 3, ".gz") == 0;
  OutputFile out(path, gzip);
  std::string buf = "time_us,action,addr,size,stream\n";
  buf.reserve(kChunk + 256);
  for (const memory::MemoryEvent& e : events) {
    append_number(buf, e.time_ns / 1000);
    buf += ',';
    buf += memory::event_action_name(e.action);
    buf += ',';
    append_number(buf, e.address);
    buf += ',';
    append_number(buf, e.size);
    buf += ',';
    append_number(buf, e.stream);
    buf += '\n';
    if (buf.size() >= kChunk) {
      out.write(buf);
      buf.clear();
    }
  }
  out.write(buf);
  out.close();
}

bool trace_gzip_supported() noexcept { return GENESIS_WITH_ZLIB != 0; }

}  // namespace genesis::debug
