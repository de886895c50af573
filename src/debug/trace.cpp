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
#include <deque>
#include <limits>
#include <memory>
#include <system_error>
#include <utility>

#include <sys/stat.h>

#include "genesis/core/error.h"
#include "genesis/debug/torch_snapshot.h"
#include "trace_output.h"

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
  add_alloc(addr, size, stream);
  note_no_time();
  note_no_site();
}

void TraceBuilder::alloc(std::uintptr_t addr, std::uint64_t size, StreamId stream, std::uint64_t time_us,
                         std::string_view site) {
  add_alloc(addr, size, stream);
  note_time(time_us);
  note_site(site);
}

void TraceBuilder::alloc_at_site(std::uintptr_t addr, std::uint64_t size, StreamId stream, std::string_view site) {
  add_alloc(addr, size, stream);
  note_no_time();
  note_site(site);
}

void TraceBuilder::free(std::uintptr_t addr, StreamId stream) {
  ++trace_.counts.free_requested;
  add_free(addr, stream);
  note_no_time();
  note_no_site();
}

void TraceBuilder::free(std::uintptr_t addr, StreamId stream, std::uint64_t time_us) {
  ++trace_.counts.free_requested;
  add_free(addr, stream);
  note_time(time_us);
  note_no_site();
}

bool TraceBuilder::complete_free(std::uintptr_t addr, StreamId stream) {
  if (!live_.contains(addr)) return false;
  ++trace_.counts.completed_frees;
  add_free(addr, stream);
  note_no_time();
  note_no_site();
  return true;
}

bool TraceBuilder::complete_free(std::uintptr_t addr, StreamId stream, std::uint64_t time_us) {
  if (!live_.contains(addr)) return false;
  ++trace_.counts.completed_frees;
  add_free(addr, stream);
  note_time(time_us);
  note_no_site();
  return true;
}

void check_trace(const Trace& t) {
  const std::size_t n = t.events.size();
  GENESIS_CHECK(t.num_slots >= 1, t.source, ": a trace needs num_slots >= 1 (slot 0 is the null slot)");
  GENESIS_CHECK(!t.streams.empty() || n == 0, t.source, ": a trace with events needs at least one stream");
  GENESIS_CHECK(t.time_us.empty() || t.time_us.size() == n, t.source, ": time_us has ", t.time_us.size(),
                " entries for ", n, " events");
  GENESIS_CHECK(t.event_site.empty() || t.event_site.size() == n, t.source, ": event_site has ", t.event_site.size(),
                " entries for ", n, " events");
  for (std::size_t i = 0; i < n; ++i) {
    const TraceEvent& e = t.events[i];
    GENESIS_CHECK(e.slot < t.num_slots && e.stream < t.streams.size() &&
                      (e.op == TraceOp::kFree || (e.op == TraceOp::kAlloc && e.slot != kNullSlot) ||
                       (e.op == TraceOp::kEmptyCache && e.slot == kNullSlot)),
                  t.source, ": event ", i, " is inconsistent (slot ", e.slot, " of ", t.num_slots, ", stream ", e.stream,
                  " of ", t.streams.size(), ")");
    GENESIS_CHECK(t.event_site.empty() || t.event_site[i] < std::max<std::size_t>(t.sites.size(), 1), t.source,
                  ": event ", i, " names site ", t.event_site[i], " of ", t.sites.size());
  }
  for (const std::uint32_t s : t.live_at_end_slots) {
    GENESIS_CHECK(s < t.num_slots && s != kNullSlot, t.source, ": live_at_end slot ", s, " is out of range");
  }
}

bool TraceBuilder::add_empty_cache() {
  if (!trace_.events.empty() && trace_.events.back().op == TraceOp::kEmptyCache) return false;
  ++trace_.counts.empty_cache;
  trace_.events.push_back(TraceEvent{0, kNullSlot, 0, TraceOp::kEmptyCache});
  return true;
}

void TraceBuilder::empty_cache() {
  if (!add_empty_cache()) return;
  note_no_time();
  note_no_site();
}

void TraceBuilder::empty_cache(std::uint64_t time_us) {
  if (!add_empty_cache()) return;
  note_time(time_us);
  note_no_site();
}

void TraceBuilder::note_time(std::uint64_t time_us) {
  // Events before the first time stamp take it (Note [Trace times and sites]).
  if (trace_.time_us.size() + 1 < trace_.events.size()) trace_.time_us.resize(trace_.events.size() - 1, time_us);
  trace_.time_us.push_back(time_us);
}

void TraceBuilder::note_no_time() {
  if (!trace_.time_us.empty()) trace_.time_us.push_back(trace_.time_us.back());
}

void TraceBuilder::note_site(std::string_view site) {
  std::string s = normalize_site(site);
  if (s.empty()) {
    note_no_site();
    return;
  }
  if (trace_.sites.empty()) trace_.sites.emplace_back();  // index 0: none
  auto [it, inserted] = site_index_.try_emplace(std::move(s), 0);
  if (inserted) {
    GENESIS_CHECK(trace_.sites.size() < std::numeric_limits<std::uint32_t>::max(), trace_.source,
                  ": more than 2^32 - 1 distinct allocation sites");
    it->second = static_cast<std::uint32_t>(trace_.sites.size());
    trace_.sites.push_back(it->first);
  }
  trace_.event_site.resize(trace_.events.size() - 1, 0);
  trace_.event_site.push_back(it->second);
}

void TraceBuilder::note_no_site() {
  if (!trace_.event_site.empty()) trace_.event_site.push_back(0);
}

std::string normalize_site(std::string_view site) {
  std::string out;
  std::size_t start = 0;
  while (start <= site.size()) {
    std::size_t end = site.find_first_of("|\n", start);
    if (end == std::string_view::npos) end = site.size();
    std::string_view frame = site.substr(start, end - start);
    while (!frame.empty() && (frame.front() == ' ' || frame.front() == '\t' || frame.front() == '\r'))
      frame.remove_prefix(1);
    while (!frame.empty() && (frame.back() == ' ' || frame.back() == '\t' || frame.back() == '\r'))
      frame.remove_suffix(1);
    if (!frame.empty()) {
      if (!out.empty()) out += '\n';
      out += frame;
    }
    start = end + 1;
  }
  return out;
}

void TraceBuilder::add_alloc(std::uintptr_t addr, std::uint64_t size, StreamId stream) {
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
  GENESIS_CHECK(size <= kMaxTraceSize, trace_.source, ": an allocation of ", size,
                " bytes, above 2^62 bytes, the largest request an allocator takes");
  GENESIS_CHECK(live_bytes_ <= std::numeric_limits<std::uint64_t>::max() - size, trace_.source,
                ": the live allocations add up to more than 2^64 bytes (at allocation ", trace_.counts.alloc, ")");
  live_bytes_ += size;
  trace_.peak_live_bytes = std::max(trace_.peak_live_bytes, live_bytes_);
  trace_.events.push_back(TraceEvent{size, slot, s, TraceOp::kAlloc});
}

void TraceBuilder::add_free(std::uintptr_t addr, StreamId stream) {
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
// Longer: not a trace (a binary file). As long as a record may be (kMaxRecord),
// so that a site of many stack frames fits on one line.
constexpr std::size_t kMaxLine = std::size_t{1} << 20;

// ---------------------------------------------------------------------------
// Input: a plain or gzip file read in chunks.

class InputFile {
 public:
  // `what` names the file in messages: "trace", "snapshot".
  explicit InputFile(const std::string& path, const char* what = "trace") : path_(path), what_(what) {
    plain_ = std::fopen(path.c_str(), "rb");
    if (plain_ == nullptr) GENESIS_THROW_FILE(path, errno, "cannot open ", what_, " '", path, "'");
    unsigned char magic[2] = {0, 0};
    const std::size_t n = std::fread(magic, 1, 2, plain_);
    gzip_ = n == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
    // A pipe (/dev/stdin) cannot seek back: its first bytes are handed out
    // from prefix_ (never seek one: a failed seek may drop buffered input).
    struct stat st {};
    const bool seekable = fstat(fileno(plain_), &st) == 0 && S_ISREG(st.st_mode) &&
                          std::fseek(plain_, 0, SEEK_SET) == 0;
    if (!gzip_) {
      if (!seekable) prefix_.assign(reinterpret_cast<const char*>(magic), n);
      return;
    }
    std::fclose(plain_);
    plain_ = nullptr;
    GENESIS_CHECK(seekable, what_, " '", path, "' is gzip-compressed data from a pipe, which cannot be read: ",
                  "pass the file itself, or decompress it on the way (gunzip -c FILE | ...)");
#if GENESIS_WITH_ZLIB
    gz_ = gzopen(path.c_str(), "rb");
    if (gz_ == nullptr) GENESIS_THROW_FILE(path, errno != 0 ? errno : EIO, "cannot open ", what_, " '", path, "'");
    gzbuffer(gz_, 256 * 1024);
#else
    GENESIS_THROW(InvalidArgumentError, what_, " '", path,
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
      if (!prefix_.empty() && n > 0) {
        const std::size_t k = std::min(n, prefix_.size());
        std::memcpy(buf, prefix_.data(), k);
        prefix_.erase(0, k);
        return k;
      }
      const std::size_t got = std::fread(buf, 1, n, plain_);
      GENESIS_CHECK(got > 0 || !std::ferror(plain_), "error reading ", what_, " '", path_, "' after line ", lines, ": ",
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
        GENESIS_THROW(InvalidArgumentError, what_, " '", path_, "': the gzip data ends early after line ", lines,
                      " (truncated file?): ", msg);
      }
      GENESIS_THROW(InvalidArgumentError, what_, " '", path_, "': corrupt gzip data after line ", lines, ": ",
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
  const char* what_;
  std::FILE* plain_ = nullptr;
  std::string prefix_;  // bytes of a pipe read before the data (the magic test)
  bool gzip_ = false;
#if GENESIS_WITH_ZLIB
  gzFile gz_ = nullptr;
#endif
};

// ---------------------------------------------------------------------------
// The CSV parser.

enum Column : int { kTime = 0, kAction, kAddr, kSize, kStream, kSite, kNumColumns };
constexpr const char* kColumnNames[kNumColumns] = {"time_us", "action", "addr", "size", "stream", "site"};
// Columns of a file without a header: the first five, in this order.
constexpr int kHeaderlessColumns = kSite;
// A record whose quoted field spans lines may be longer than one line, but
// not without bound: a quote never closed would swallow the rest of the file.
constexpr std::size_t kMaxRecord = std::size_t{1} << 20;

enum class Action {
  kAlloc,
  kFreeRequested,
  kFreeCompleted,
  kSegmentAlloc,
  kSegmentFree,
  kEmptyCache,
  kOom,
  kOther,
  kUnknown
};

Action parse_action(std::string_view s) noexcept {
  if (s == "alloc") return Action::kAlloc;
  if (s == "free_requested") return Action::kFreeRequested;
  if (s == "free_completed") return Action::kFreeCompleted;
  // What a trace written by hand or by another tool calls a release.
  if (s == "free") return Action::kFreeRequested;
  if (s == "segment_alloc") return Action::kSegmentAlloc;
  if (s == "segment_free") return Action::kSegmentFree;
  if (s == "empty_cache") return Action::kEmptyCache;
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
    // Without a header: the canonical order (no site column).
    for (int c = 0; c < kNumColumns; ++c) index_[c] = c < kHeaderlessColumns ? c : -1;
  }

  // One physical line (without its '\n'). A record whose quoted field is
  // still open at the line end continues on the next line.
  void line(std::string_view text) {
    ++line_no_;
    if (line_no_ == 1 && text.size() >= 3 && text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
    if (in_record_) {
      if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
      pending_ += '\n';
      pending_ += text;
      const bool open = ends_in_quotes(text, true);
      if (pending_.size() > kMaxRecord) {
        record_line_ = pending_line_;
        fail(pending_, "a quoted field opened on line " + std::to_string(pending_line_) + " is not closed after " +
                           std::to_string(kMaxRecord) + " bytes (missing closing quote?)");
      }
      if (open) return;
      in_record_ = false;
      record_line_ = pending_line_;
      record(trim(pending_));
      pending_.clear();
      return;
    }
    text = trim(text);
    if (text.empty() || text.front() == '#') return;
    if (std::memchr(text.data(), '"', text.size()) != nullptr && ends_in_quotes(text, false)) {
      in_record_ = true;
      pending_line_ = line_no_;
      pending_.assign(text);
      return;
    }
    record_line_ = line_no_;
    record(text);
  }

  std::uint64_t line_no() const noexcept { return line_no_; }
  Trace finish() {
    if (in_record_) {
      record_line_ = pending_line_;
      fail(pending_, "a quoted field opened on line " + std::to_string(pending_line_) +
                         " is never closed (missing closing quote)");
    }
    return builder_.finish();
  }

 private:
  [[noreturn]] void fail(std::string_view text, const std::string& what) const {
    std::string shown(text.substr(0, 80));
    if (text.size() > 80) shown += "...";
    for (char& c : shown) if (c == '\n') c = '|';
    GENESIS_THROW(InvalidArgumentError, path_, ":", record_line_, ": ", what, " (line: \"", shown, "\")");
  }

  // True when `text` (one physical line) ends inside a quoted field, which
  // then goes on on the next line. `in_quotes`: the line starts inside one.
  // A quote opens a field only at the field's start (after blanks); one
  // elsewhere is left for split_quoted() to report.
  static bool ends_in_quotes(std::string_view text, bool in_quotes) noexcept {
    bool field_start = !in_quotes;
    for (std::size_t i = 0; i < text.size(); ++i) {
      const char c = text[i];
      if (in_quotes) {
        if (c != '"') continue;
        if (i + 1 < text.size() && text[i + 1] == '"') {
          ++i;  // "" inside: a quote
        } else {
          in_quotes = false;
        }
      } else if (c == ',') {
        field_start = true;
      } else if (c == '"' && field_start) {
        in_quotes = true;
        field_start = false;
      } else if (c != ' ' && c != '\t') {
        field_start = false;
      }
    }
    return in_quotes;
  }

  void record(std::string_view text) {
    if (!seen_first_) {
      seen_first_ = true;
      const std::size_t first = text.front() == '"' && text.size() > 1 ? 1 : 0;
      if (std::isalpha(static_cast<unsigned char>(text[first])) != 0) {
        header(text);
        return;
      }
    }
    data(text);
  }

  void split(std::string_view text) {
    fields_.clear();
    if (std::memchr(text.data(), '"', text.size()) != nullptr) {
      split_quoted(text);
      return;
    }
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

  // RFC 4180 fields: "..." with "" for a quote inside; blanks around a
  // quoted field are allowed. A quoted field's text is used as it is (not
  // trimmed); one holding "" is unescaped into unquoted_.
  void split_quoted(std::string_view text) {
    unquoted_.clear();
    std::size_t i = 0;
    const std::size_t n = text.size();
    while (true) {
      while (i < n && (text[i] == ' ' || text[i] == '\t')) ++i;
      if (i < n && text[i] == '"') {
        const std::size_t open = i++;
        std::size_t start = i;
        bool escaped = false;
        while (true) {
          const std::size_t q = text.find('"', i);
          if (q == std::string_view::npos) {
            fail(text, "column " + std::to_string(fields_.size() + 1) + ": the quote at character " +
                           std::to_string(open + 1) + " is never closed");
          }
          if (q + 1 < n && text[q + 1] == '"') {  // "" inside: a quote
            escaped = true;
            i = q + 2;
            continue;
          }
          i = q + 1;
          std::string_view body = text.substr(start, q - start);
          if (escaped) {
            std::string& u = unquoted_.emplace_back();
            for (std::size_t k = 0; k < body.size(); ++k) {
              u += body[k];
              if (body[k] == '"') ++k;  // skip the second quote of ""
            }
            body = u;
          }
          fields_.push_back(body);
          break;
        }
        while (i < n && (text[i] == ' ' || text[i] == '\t' || text[i] == '\r')) ++i;
        if (i == n) return;
        if (text[i] != ',') {
          fail(text, "bad quoting in column " + std::to_string(fields_.size()) + ": '" + std::string(1, text[i]) +
                         "' after the closing quote (expected ',' or the line end; write \"\" for a quote inside)");
        }
        ++i;
        continue;
      }
      const std::size_t comma = text.find(',', i);
      const std::string_view field = text.substr(i, comma == std::string_view::npos ? n - i : comma - i);
      if (field.find('"') != std::string_view::npos) {
        fail(text, "bad quoting in column " + std::to_string(fields_.size() + 1) +
                       ": a quote inside an unquoted field (quote the whole field and write \"\" for a quote)");
      }
      fields_.push_back(trim(field));
      if (comma == std::string_view::npos) return;
      i = comma + 1;
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
    for (int c = 0; c < kNumColumns; ++c) {
      // A trailing site column may be left out of lines that have no site.
      if (c != kSite) needed_ = std::max(needed_, index_[c] + 1);
    }
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
    std::uint64_t time_us = 0;
    if (index_[kTime] >= 0) {
      const std::string_view t = fields_[static_cast<std::size_t>(index_[kTime])];
      // Integers (the usual case) exactly; anything else through double.
      const auto [iend, iec] = std::from_chars(t.data(), t.data() + t.size(), time_us);
      if (t.empty() || iec != std::errc() || iend != t.data() + t.size()) {
        double v = 0;
        const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
        if (t.empty() || ec != std::errc() || end != t.data() + t.size() || !std::isfinite(v)) {
          fail(text, "column 'time_us' is not a number: '" + std::string(t) + "'");
        }
        // Negative times (a recording relative to a later start) read as 0;
        // from 2^64 us (half a million years) on, a time is no time but a
        // broken field, and the replay's durations and rates would be
        // nonsense: refused.
        if (v >= 18446744073709551616.0) {
          fail(text, "column 'time_us' is out of range: '" + std::string(t) +
                         "' (expected microseconds below 18446744073709551616)");
        }
        time_us = v <= 0 ? 0 : static_cast<std::uint64_t>(v);
      }
    }
    const std::string_view action_text = fields_[static_cast<std::size_t>(index_[kAction])];
    const Action action = parse_action(action_text);
    if (action == Action::kUnknown) {
      fail(text, "unknown action '" + std::string(action_text) +
                     "' (expected alloc, free (or free_requested), free_completed, segment_alloc, segment_free, "
                     "segment_map, segment_unmap, snapshot, empty_cache or oom)");
    }
    const std::uint64_t addr = number(text, kAddr, true);
    const std::uint64_t size = number(text, kSize, false);
    // No allocator hands out more (requests are limited to 2^62 bytes), and
    // live totals of such sizes would pass 2^64.
    if (size > kMaxTraceSize) {
      fail(text, "size " + std::to_string(size) + " is above 2^62 bytes, the largest request an allocator takes");
    }
    const StreamId stream = index_[kStream] >= 0 ? number(text, kStream, true) : 0;
    const bool timed = index_[kTime] >= 0;
    std::string_view site;
    if (index_[kSite] >= 0 && static_cast<std::size_t>(index_[kSite]) < fields_.size()) {
      site = fields_[static_cast<std::size_t>(index_[kSite])];
    }
    TraceCounts& counts = builder_.counts();
    switch (action) {
      case Action::kAlloc:
        if (timed) {
          builder_.alloc(addr, size, stream, time_us, site);
        } else if (!site.empty()) {
          builder_.alloc_at_site(addr, size, stream, site);
        } else {
          builder_.alloc(addr, size, stream);
        }
        break;
      case Action::kFreeRequested:
        if (timed) {
          builder_.free(addr, stream, time_us);
        } else {
          builder_.free(addr, stream);
        }
        break;
      case Action::kFreeCompleted:
        ++counts.free_completed;
        if (timed) {
          builder_.complete_free(addr, stream, time_us);
        } else {
          builder_.complete_free(addr, stream);
        }
        break;
      case Action::kSegmentAlloc: ++counts.segment_alloc; break;
      case Action::kSegmentFree: ++counts.segment_free; break;
      case Action::kEmptyCache:
        if (timed) {
          builder_.empty_cache(time_us);
        } else {
          builder_.empty_cache();
        }
        break;
      case Action::kOom: ++counts.oom; break;
      case Action::kOther: ++counts.other_ignored; break;
      case Action::kUnknown: break;
    }
  }

  const std::string& path_;
  TraceBuilder builder_;
  std::uint64_t line_no_ = 0;
  std::uint64_t record_line_ = 0;   // first line of the record being parsed (for messages)
  bool seen_first_ = false;
  int index_[kNumColumns];          // field index of each column, -1 = absent
  int needed_ = kHeaderlessColumns; // fields a data line must have
  std::vector<std::string_view> fields_;
  std::deque<std::string> unquoted_;  // quoted fields that held "" (stable addresses)
  // A record whose quoted field spans lines, collected until it closes.
  bool in_record_ = false;
  std::uint64_t pending_line_ = 0;
  std::string pending_;
};

}  // namespace

// ---------------------------------------------------------------------------

namespace {

// "x.pickle", "x.pkl", and either with ".gz".
bool named_like_pickle(std::string_view path) {
  if (path.size() >= 3 && path.substr(path.size() - 3) == ".gz") path.remove_suffix(3);
  for (std::string_view ext : {".pickle", ".pkl"}) {
    if (path.size() >= ext.size() && path.substr(path.size() - ext.size()) == ext) return true;
  }
  return false;
}

// Up to 24 bytes of a file's start for a message, other bytes as '?'.
std::string printable_prefix(const char* p, std::size_t n) {
  std::string out;
  for (std::size_t i = 0; i < n && i < 24 && p[i] != '\n' && p[i] != '\r'; ++i)
    out += (p[i] >= 0x20 && p[i] < 0x7f) ? p[i] : '?';
  return out;
}

}  // namespace

Trace read_trace(const std::string& path) {
  InputFile in(path);
  Parser parser(path);
  // Left uninitialised: only the bytes read() returns are looked at, and
  // zeroing a MiB (every page touched) would cost more than reading a short
  // trace.
  const std::unique_ptr<char[]> chunk(new char[kChunk]);
  std::string carry;  // a line split across chunks
  bool first = true;
  while (true) {
    const std::size_t n = in.read(chunk.get(), kChunk, parser.line_no());
    if (n == 0) break;
    if (std::exchange(first, false)) {
      const auto* head = reinterpret_cast<const std::uint8_t*>(chunk.get());
      // A pickled PyTorch memory snapshot (genesis/debug/torch_snapshot.h).
      if (looks_like_pickle(head, n))
        return read_torch_snapshot(std::string_view(chunk.get(), n),
                                   [&in](char* buf, std::size_t cap) { return in.read(buf, cap, 0); }, path);
      // The PROTO opcode of a pickle whose protocol the reader does not take.
      GENESIS_CHECK(n < 2 || head[0] != 0x80, path, ": a pickle of protocol ", static_cast<int>(head[1]),
                    ", which is not read: PyTorch memory snapshots are pickles of protocol 0 to 5 ",
                    "(torch.cuda.memory._dump_snapshot)");
      // Named like a snapshot but not a pickle: say so, rather than what
      // the CSV reader makes of its first line.
      GENESIS_CHECK(!named_like_pickle(path), path, ": not a PyTorch memory snapshot (a file named .pickle or .pkl ",
                    "should be a pickle written by torch.cuda.memory._dump_snapshot(); this one starts with '",
                    printable_prefix(chunk.get(), n), "'); CSV traces are read whatever their name");
    }
    const char* p = chunk.get();
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

std::vector<std::uint8_t> read_trace_bytes(const std::string& path, std::size_t max_bytes, const char* what) {
  InputFile in(path, what);
  std::vector<std::uint8_t> data;
  while (true) {
    const std::size_t have = data.size();
    data.resize(have + kChunk);
    const std::size_t got = in.read(reinterpret_cast<char*>(data.data() + have), kChunk, 0);
    data.resize(have + got);
    if (got == 0) break;
    GENESIS_CHECK(data.size() <= max_bytes, path, ": larger than ", max_bytes, " bytes",
                  in.gzip() ? " once decompressed" : "", ", which is more than is read");
  }
  return data;
}

void write_trace(const std::string& path, const std::vector<memory::MemoryEvent>& events) {
  detail::OutputFile out(path, detail::gzip_name(path));
  std::string buf = "time_us,action,addr,size,stream\n";
  buf.reserve(kChunk + 256);
  for (const memory::MemoryEvent& e : events) {
    detail::append_number(buf, e.time_ns / 1000);
    buf += ',';
    buf += memory::event_action_name(e.action);
    buf += ',';
    // An OOM has no address (MemoryEvent keeps the device's free bytes there).
    detail::append_number(buf, e.action == memory::EventAction::kOOM ? 0 : e.address);
    buf += ',';
    detail::append_number(buf, e.size);
    buf += ',';
    detail::append_number(buf, e.stream);
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
