// A safe, bounded reader of Python pickles that hold plain data only: the
// dicts, lists, tuples, strings, numbers, booleans and None of PyTorch's
// memory snapshots (torch.cuda.memory._dump_snapshot).
//
// Note [Plain pickles]: a pickle is a program for a stack machine, and
// unpickling an arbitrary one runs arbitrary code (GLOBAL + REDUCE call any
// function). This reader executes only the opcodes that build plain data
// (protocols 0 to 5, the text forms of 0 and 1 included: Note [Text opcodes]
// in pickle_reader.cpp) and refuses every other opcode, by name
// and offset, before anything of it is acted on. It never trusts the input:
// every read is bounds-checked, every count is limited (PickleLimits), the
// stack, the mark stack and the memo are checked on every use, and a
// malformed or truncated pickle is an InvalidArgumentError, never a crash,
// a hang or unbounded memory. Objects are nodes owned by the Pickle; a
// memo reference is a second pointer to the same node, as in Python (so a
// pickle that repeats a large object through its memo costs nothing, and
// one that puts a list inside itself builds a cycle, which the consumers
// below never recurse into: they walk a fixed shape).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

namespace genesis::debug {

/// One object of a pickle.
struct PickleValue {
  enum class Kind : std::uint8_t { kNone, kBool, kInt, kFloat, kString, kBytes, kList, kTuple, kDict };
  Kind kind = Kind::kNone;
  bool boolean = false;
  /// kInt: the value. Integers outside int64 are kept when they fit in
  /// uint64 (addresses): then `big` is true and `integer` holds the bits.
  std::int64_t integer = 0;
  bool big = false;
  double real = 0.0;
  std::string text;                  ///< kString (UTF-8 as pickled) and kBytes
  std::vector<PickleValue*> items;   ///< kList, kTuple; kDict: key, value, key, value, ...

  bool is_int() const noexcept { return kind == Kind::kInt; }
  bool is_string() const noexcept { return kind == Kind::kString; }
  bool is_dict() const noexcept { return kind == Kind::kDict; }
  bool is_sequence() const noexcept { return kind == Kind::kList || kind == Kind::kTuple; }
  /// The value of a dict's string key `key`; nullptr when absent or not a dict.
  const PickleValue* get(std::string_view key) const noexcept;
  /// "dict", "list", "int", ... for messages.
  const char* kind_name() const noexcept;
};

/// Bounds on what one pickle may make (Note [Plain pickles]).
struct PickleLimits {
  std::size_t max_objects = std::size_t{1} << 24;  ///< nodes created
  std::size_t max_stack = std::size_t{1} << 24;    ///< stack entries at once
  std::size_t max_marks = 4096;                    ///< nested MARKs
  std::size_t max_memo = std::size_t{1} << 24;     ///< memo entries
};

/// A parsed pickle: its root object and every node it owns.
class Pickle {
 public:
  const PickleValue& root() const noexcept { return *root_; }
  /// Objects created while reading.
  std::size_t objects() const noexcept { return nodes_.size(); }
  /// The pickle protocol it declared: 0 when it declared none, as pickles of
  /// protocols 0 and 1 do; 1 to 5 as a PROTO opcode names it (Python writes
  /// one from protocol 2 on, and reads one naming 1).
  int protocol() const noexcept { return protocol_; }

 private:
  friend Pickle parse_pickle(const std::uint8_t* data, std::size_t size, const PickleLimits& limits);
  std::deque<PickleValue> nodes_;  // a deque: nodes never move as it grows
  const PickleValue* root_ = nullptr;
  int protocol_ = 0;
};

/// Reads one pickle from `data` (trailing bytes after its STOP are ignored,
/// as pickle.loads does). Throws InvalidArgumentError naming the offset and
/// the problem for any opcode outside plain data (GLOBAL, REDUCE, ...),
/// protocols above 5, truncated or malformed input, and input that
/// exceeds `limits`.
Pickle parse_pickle(const std::uint8_t* data, std::size_t size, const PickleLimits& limits = {});

}  // namespace genesis::debug
