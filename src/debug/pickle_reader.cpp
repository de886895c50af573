// The plain-data pickle reader (Note [Plain pickles] in genesis/debug/pickle.h).
#include <bit>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <string>
#include <unordered_map>

#include "genesis/core/error.h"
#include "genesis/debug/pickle.h"

namespace genesis::debug {

const PickleValue* PickleValue::get(std::string_view key) const noexcept {
  if (kind != Kind::kDict) return nullptr;
  // The last binding wins, as in a Python dict built by SETITEMS.
  const PickleValue* found = nullptr;
  for (std::size_t i = 0; i + 1 < items.size(); i += 2)
    if (items[i]->kind == Kind::kString && items[i]->text == key) found = items[i + 1];
  return found;
}

const char* PickleValue::kind_name() const noexcept {
  switch (kind) {
    case Kind::kNone: return "None";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kBytes: return "bytes";
    case Kind::kList: return "list";
    case Kind::kTuple: return "tuple";
    case Kind::kDict: return "dict";
  }
  return "?";
}

namespace {

using Kind = PickleValue::Kind;

// Opcodes that build something else than plain data, named in the error.
const char* refused_name(std::uint8_t op) noexcept {
  switch (op) {
    case 'c': return "GLOBAL";
    case 0x93: return "STACK_GLOBAL";
    case 'R': return "REDUCE";
    case 'b': return "BUILD";
    case 'i': return "INST";
    case 'o': return "OBJ";
    case 0x81: return "NEWOBJ";
    case 0x92: return "NEWOBJ_EX";
    case 0x82: return "EXT1";
    case 0x83: return "EXT2";
    case 0x84: return "EXT4";
    case 'P': return "PERSID";
    case 'Q': return "BINPERSID";
    case 0x8f: return "EMPTY_SET";
    case 0x90: return "ADDITEMS";
    case 0x91: return "FROZENSET";
    case 0x96: return "BYTEARRAY8";
    case 0x97: return "NEXT_BUFFER";
    case 0x98: return "READONLY_BUFFER";
    case 'S': return "STRING (text)";
    case 'T': return "BINSTRING";
    case 'U': return "SHORT_BINSTRING";
    default: return nullptr;
  }
}

class Reader {
 public:
  Reader(const std::uint8_t* data, std::size_t size, const PickleLimits& limits, std::deque<PickleValue>& nodes,
         int& protocol)
      : p_(data), size_(size), limits_(limits), nodes_(nodes), protocol_(protocol) {}

  const PickleValue* run() {
    while (true) {
      op_at_ = pos_;
      const std::uint8_t op = byte();
      switch (op) {
        case 0x80: {  // PROTO (Python writes it from protocol 2 on; pickle.loads takes 0 and 1 too)
          const int v = byte();
          if (v > 5) fail("protocol " + std::to_string(v) + " is not read (protocols 0 to 5 are)");
          protocol_ = v;
          break;
        }
        case 0x95: {  // FRAME: a length hint; the opcodes inside follow as usual
          const std::uint64_t n = u64();
          if (n > size_ - pos_) fail("frame of " + std::to_string(n) + " bytes runs past the end");
          break;
        }
        case '.': {  // STOP
          if (!marks_.empty()) fail("STOP inside an unfinished MARK");
          if (stack_.size() != 1) fail("STOP with " + std::to_string(stack_.size()) + " objects on the stack (expected 1)");
          return stack_.back();
        }
        case '(': {  // MARK
          if (marks_.size() >= limits_.max_marks) fail("more than " + std::to_string(limits_.max_marks) + " nested MARKs");
          marks_.push_back(stack_.size());
          break;
        }
        case '0': pop(); break;  // POP
        case '1': {              // POP_MARK
          stack_.resize(pop_mark());
          break;
        }
        case '2': {  // DUP
          push(top());
          break;
        }
        case 'N': push(make(Kind::kNone)); break;
        case 0x88:
        case 0x89: {  // NEWTRUE, NEWFALSE
          PickleValue* v = make(Kind::kBool);
          v->boolean = op == 0x88;
          push(v);
          break;
        }
        case 'J': push_int(static_cast<std::int32_t>(fixed(4))); break;  // BININT (signed)
        case 'K': push_int(byte()); break;                               // BININT1
        case 'M': push_int(static_cast<std::int64_t>(fixed(2))); break;  // BININT2
        case 0x8a: long_int(byte()); break;                              // LONG1
        case 0x8b: {                                                     // LONG4
          const std::uint64_t n = fixed(4);
          if (n > 9) fail("integer of " + std::to_string(n) + " bytes is too large (at most 64 bits are read)");
          long_int(static_cast<std::size_t>(n));
          break;
        }
        case 'G': {  // BINFLOAT, big-endian
          std::uint64_t bits = 0;
          for (int i = 0; i < 8; ++i) bits = (bits << 8) | byte();
          PickleValue* v = make(Kind::kFloat);
          v->real = std::bit_cast<double>(bits);
          push(v);
          break;
        }
        case 0x8c: text(Kind::kString, byte()); break;      // SHORT_BINUNICODE
        case 'X': text(Kind::kString, fixed(4)); break;     // BINUNICODE
        case 0x8d: text(Kind::kString, u64()); break;       // BINUNICODE8
        case 'C': text(Kind::kBytes, byte()); break;        // SHORT_BINBYTES
        case 'B': text(Kind::kBytes, fixed(4)); break;      // BINBYTES
        case 0x8e: text(Kind::kBytes, u64()); break;        // BINBYTES8
        case ']': push(make(Kind::kList)); break;           // EMPTY_LIST
        case ')': push(make(Kind::kTuple)); break;          // EMPTY_TUPLE
        case '}': push(make(Kind::kDict)); break;           // EMPTY_DICT
        case 'l':                                           // LIST
        case 't': {                                         // TUPLE
          PickleValue* v = make(op == 'l' ? Kind::kList : Kind::kTuple);
          const std::size_t m = pop_mark();
          v->items.assign(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
          stack_.resize(m);
          push(v);
          break;
        }
        case 'd': {  // DICT
          const std::size_t m = pop_mark();
          if ((stack_.size() - m) % 2 != 0) fail("DICT with a key and no value");
          PickleValue* v = make(Kind::kDict);
          v->items.assign(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
          stack_.resize(m);
          push(v);
          break;
        }
        case 0x85:
        case 0x86:
        case 0x87: {  // TUPLE1, TUPLE2, TUPLE3
          const std::size_t n = static_cast<std::size_t>(op - 0x84);
          need(n);
          PickleValue* v = make(Kind::kTuple);
          v->items.assign(stack_.end() - static_cast<std::ptrdiff_t>(n), stack_.end());
          stack_.resize(stack_.size() - n);
          push(v);
          break;
        }
        case 'a': {  // APPEND
          need(2);
          PickleValue* item = stack_.back();
          stack_.pop_back();
          container(Kind::kList, "APPEND")->items.push_back(item);
          break;
        }
        case 'e': {  // APPENDS
          const std::size_t m = pop_mark();
          if (m == 0) fail("APPENDS without a list below its MARK");
          PickleValue* list = stack_[m - 1];
          if (list->kind != Kind::kList) fail(std::string("APPENDS to a ") + list->kind_name() + ", not a list");
          list->items.insert(list->items.end(), stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
          stack_.resize(m);
          break;
        }
        case 's': {  // SETITEM
          need(3);
          PickleValue* value = stack_.back();
          PickleValue* key = stack_[stack_.size() - 2];
          stack_.resize(stack_.size() - 2);
          PickleValue* dict = container(Kind::kDict, "SETITEM");
          dict->items.push_back(key);
          dict->items.push_back(value);
          break;
        }
        case 'u': {  // SETITEMS
          const std::size_t m = pop_mark();
          if (m == 0) fail("SETITEMS without a dict below its MARK");
          if ((stack_.size() - m) % 2 != 0) fail("SETITEMS with a key and no value");
          PickleValue* dict = stack_[m - 1];
          if (dict->kind != Kind::kDict) fail(std::string("SETITEMS to a ") + dict->kind_name() + ", not a dict");
          dict->items.insert(dict->items.end(), stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
          stack_.resize(m);
          break;
        }
        // Protocols 0 and 1 (Note [Text opcodes]).
        case 'I': text_int(false); break;                            // INT
        case 'L': text_int(true); break;                             // LONG
        case 'F': text_float(); break;                               // FLOAT
        case 'V': text_unicode(); break;                             // UNICODE
        case 'p': memo_put(text_index("PUT")); break;                // PUT
        case 'g': memo_get(text_index("GET")); break;                // GET
        case 'q': memo_put(byte()); break;                           // BINPUT
        case 'r': memo_put(fixed(4)); break;                         // LONG_BINPUT
        case 0x94: memo_put(memo_.size()); break;                    // MEMOIZE
        case 'h': memo_get(byte()); break;                           // BINGET
        case 'j': memo_get(fixed(4)); break;                         // LONG_BINGET
        default: {
          if (const char* name = refused_name(op))
            fail(std::string("opcode ") + name + " is refused: only plain data (dict, list, tuple, str, bytes, int, "
                 "float, bool, None) is read, never objects or code");
          char buf[8];
          std::snprintf(buf, sizeof buf, "0x%02x", op);
          fail(std::string("unknown opcode ") + buf + " (not a pickle, or a damaged one)");
        }
      }
    }
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    GENESIS_THROW(InvalidArgumentError, "pickle: ", what, " (at byte ", op_at_, " of ", size_, ")");
  }
  std::uint8_t byte() {
    if (pos_ >= size_) fail("the data ends in the middle of an opcode (truncated pickle)");
    return p_[pos_++];
  }
  std::uint64_t fixed(int n) {  // little-endian, unsigned
    if (size_ - pos_ < static_cast<std::size_t>(n)) fail("the data ends in the middle of an opcode (truncated pickle)");
    std::uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = (v << 8) | p_[pos_ + static_cast<std::size_t>(i)];
    pos_ += static_cast<std::size_t>(n);
    return v;
  }
  std::uint64_t u64() { return fixed(8); }

  PickleValue* make(Kind k) {
    if (nodes_.size() >= limits_.max_objects)
      fail("more than " + std::to_string(limits_.max_objects) + " objects (PickleLimits::max_objects)");
    nodes_.emplace_back();
    nodes_.back().kind = k;
    return &nodes_.back();
  }
  void push(PickleValue* v) {
    if (stack_.size() >= limits_.max_stack)
      fail("more than " + std::to_string(limits_.max_stack) + " objects on the stack (PickleLimits::max_stack)");
    stack_.push_back(v);
  }
  // At least n entries above the innermost mark.
  void need(std::size_t n) const {
    const std::size_t floor = marks_.empty() ? 0 : marks_.back();
    if (stack_.size() < floor + n) fail("the stack has too few objects for this opcode");
  }
  PickleValue* top() const {
    need(1);
    return stack_.back();
  }
  void pop() {
    need(1);
    stack_.pop_back();
  }
  std::size_t pop_mark() {
    if (marks_.empty()) fail("an opcode needs a MARK and there is none");
    const std::size_t m = marks_.back();
    marks_.pop_back();
    return m;
  }
  PickleValue* container(Kind k, const char* op) const {
    PickleValue* c = top();
    if (c->kind != k) fail(std::string(op) + " to a " + c->kind_name() + ", not a " + (k == Kind::kList ? "list" : "dict"));
    return c;
  }
  void push_int(std::int64_t v) {
    PickleValue* n = make(Kind::kInt);
    n->integer = v;
    push(n);
  }
  // Two's complement, little-endian, n bytes; up to 64 bits of magnitude.
  void long_int(std::size_t n) {
    if (size_ - pos_ < n) fail("the data ends in the middle of an integer (truncated pickle)");
    const std::uint8_t* b = p_ + pos_;
    pos_ += n;
    PickleValue* v = make(Kind::kInt);
    if (n == 0) {
      push(v);
      return;
    }
    const bool negative = (b[n - 1] & 0x80) != 0;
    if (n > 9 || (n == 9 && (negative || b[8] != 0)))
      fail("integer of " + std::to_string(n) + " bytes is too large (at most 64 bits are read)");
    std::uint64_t bits = 0;
    const std::size_t used = n < 8 ? n : 8;
    for (std::size_t i = used; i-- > 0;) bits = (bits << 8) | b[i];
    if (negative && n < 8) bits |= ~std::uint64_t{0} << (8 * n);  // sign-extend
    v->integer = static_cast<std::int64_t>(bits);
    // 9 bytes (a zero sign byte) or 8 bytes read as positive above 2^63.
    v->big = !negative && (bits >> 63) != 0;
    push(v);
  }
  void text(Kind k, std::uint64_t n) {
    if (n > size_ - pos_) fail("a string of " + std::to_string(n) + " bytes runs past the end (truncated pickle)");
    PickleValue* v = make(k);
    v->text.assign(reinterpret_cast<const char*>(p_ + pos_), static_cast<std::size_t>(n));
    pos_ += static_cast<std::size_t>(n);
    push(v);
  }
  // Note [Text opcodes]: protocol 0 writes numbers, strings and memo
  // indices as text lines ended by '\n', the way pickle.py writes them:
  //   INT     decimal, from int.__repr__; "00" and "01" are False and True
  //           (protocols 0 and 1 have no NEWFALSE/NEWTRUE)
  //   LONG    decimal with an 'L' after it (ints outside 32 bits)
  //   FLOAT   float.__repr__ (protocol 1 uses BINFLOAT)
  //   UNICODE the str as raw-unicode-escape, with '\\', '\0', '\n', '\r'
  //           and '\x1a' escaped as \uXXXX
  //   PUT/GET the memo index in decimal (protocol 1 uses BINPUT/BINGET)
  // Protocol 1 adds the binary opcodes of containers and numbers and keeps
  // INT for booleans and LONG for ints outside 32 bits. Numbers are read as
  // the binary forms are: at most 64 bits. Python 2's byte strings (STRING,
  // BINSTRING, SHORT_BINSTRING) stay refused: Python 3 never writes them.
  std::string_view line() {
    const void* nl = pos_ < size_ ? std::memchr(p_ + pos_, '\n', size_ - pos_) : nullptr;
    if (nl == nullptr) fail("the data ends in the middle of a text opcode (truncated pickle)");
    const std::size_t end = static_cast<std::size_t>(static_cast<const std::uint8_t*>(nl) - p_);
    const std::string_view s(reinterpret_cast<const char*>(p_ + pos_), end - pos_);
    pos_ = end + 1;
    return s;
  }
  // The line as a message shows it: at most 40 bytes of it, and bytes
  // outside printable ASCII as \xNN, so that a damaged pickle's message
  // stays one line of text (a terminal's, and Python's, which decodes it).
  static std::string shown(std::string_view s) {
    std::string out(1, '\'');
    for (const char ch : s.substr(0, 40)) {
      const auto c = static_cast<unsigned char>(ch);
      if (c >= 0x20 && c < 0x7f && c != '\\') {
        out += ch;
      } else {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\x%02x", c);
        out += buf;
      }
    }
    out += s.size() > 40 ? "...'" : "'";
    return out;
  }
  // A decimal integer, optionally signed; magnitudes up to 2^64 - 1 when
  // positive (kept as `big` above INT64_MAX, as LONG1 keeps them), 2^63
  // when negative.
  void decimal(std::string_view s, const char* op) {
    const std::string_view digits = !s.empty() && (s[0] == '-' || s[0] == '+') ? s.substr(1) : s;
    const bool negative = !s.empty() && s[0] == '-';
    if (digits.empty()) fail(std::string(op) + " " + shown(s) + " is not a decimal integer");
    std::uint64_t mag = 0;
    for (const char c : digits) {
      if (c < '0' || c > '9') fail(std::string(op) + " " + shown(s) + " is not a decimal integer");
      const auto d = static_cast<std::uint64_t>(c - '0');
      if (mag > (~std::uint64_t{0} - d) / 10)
        fail(std::string(op) + " " + shown(s) + " is too large (at most 64 bits are read)");
      mag = mag * 10 + d;
    }
    if (negative && mag > (std::uint64_t{1} << 63))
      fail(std::string(op) + " " + shown(s) + " is too large (at most 64 bits are read)");
    PickleValue* v = make(Kind::kInt);
    v->integer = static_cast<std::int64_t>(negative ? std::uint64_t{0} - mag : mag);
    v->big = !negative && (mag >> 63) != 0;
    push(v);
  }
  void text_int(bool long_form) {
    std::string_view s = line();
    if (long_form) {
      if (!s.empty() && s.back() == 'L') s.remove_suffix(1);
      decimal(s, "LONG");
      return;
    }
    if (s == "00" || s == "01") {
      PickleValue* v = make(Kind::kBool);
      v->boolean = s == "01";
      push(v);
      return;
    }
    decimal(s, "INT");
  }
  void text_float() {
    const std::string_view s = line();
    double d = 0.0;
    // from_chars, not strtod: the C locale's decimal point whatever the
    // program's locale; it reads repr's "inf", "-inf" and "nan" too.
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), d);
    if (s.empty() || ec != std::errc() || end != s.data() + s.size())
      fail("FLOAT " + shown(s) + " is not a number");
    PickleValue* v = make(Kind::kFloat);
    v->real = d;
    push(v);
  }
  static void append_utf8(std::string& out, std::uint32_t cp) {
    // Surrogates are written like other code points, as the binary forms
    // carry them (Python encodes str with surrogatepass).
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xc0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xe0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }
  // raw-unicode-escape, decoded as Python decodes it: each byte is the code
  // point of its value, except \uXXXX and \UXXXXXXXX after an odd number of
  // backslashes (an even run is that many backslashes, and so is one that
  // no u or U follows).
  void text_unicode() {
    const std::string_view s = line();
    PickleValue* v = make(Kind::kString);
    std::string& out = v->text;
    out.reserve(s.size());
    std::size_t i = 0;
    while (i < s.size()) {
      const auto c = static_cast<unsigned char>(s[i]);
      if (c != '\\') {
        append_utf8(out, c);
        ++i;
        continue;
      }
      std::size_t run = 0;
      while (i < s.size() && s[i] == '\\') {
        ++run;
        ++i;
      }
      const bool escape = run % 2 == 1 && i < s.size() && (s[i] == 'u' || s[i] == 'U');
      out.append(escape ? run - 1 : run, '\\');
      if (!escape) continue;
      const std::size_t n = s[i] == 'u' ? 4 : 8;
      ++i;
      if (s.size() - i < n) fail("UNICODE " + shown(s) + " has a truncated \\u escape");
      std::uint32_t cp = 0;
      for (std::size_t k = 0; k < n; ++k, ++i) {
        const char h = s[i];
        const int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
                    : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
        if (d < 0) fail("UNICODE " + shown(s) + " has a malformed \\u escape");
        cp = (cp << 4) | static_cast<std::uint32_t>(d);
      }
      if (cp > 0x10ffff) fail("UNICODE " + shown(s) + " has an escape beyond U+10FFFF");
      append_utf8(out, cp);
    }
    push(v);
  }
  std::uint64_t text_index(const char* op) {
    const std::string_view s = line();
    std::uint64_t v = 0;
    if (s.empty() || s.size() > 19) fail(std::string(op) + " " + shown(s) + " is not a memo index");
    for (const char c : s) {
      if (c < '0' || c > '9') fail(std::string(op) + " " + shown(s) + " is not a memo index");
      v = v * 10 + static_cast<std::uint64_t>(c - '0');
    }
    return v;
  }
  void memo_put(std::uint64_t index) {
    PickleValue* v = top();
    if (memo_.size() >= limits_.max_memo && memo_.find(index) == memo_.end())
      fail("more than " + std::to_string(limits_.max_memo) + " memo entries (PickleLimits::max_memo)");
    memo_[index] = v;
  }
  void memo_get(std::uint64_t index) {
    const auto it = memo_.find(index);
    if (it == memo_.end()) fail("memo entry " + std::to_string(index) + " is used before it is stored");
    push(it->second);
  }

  const std::uint8_t* p_;
  std::size_t size_;
  std::size_t pos_ = 0;
  std::size_t op_at_ = 0;  // offset of the opcode being executed, for messages
  const PickleLimits& limits_;
  std::deque<PickleValue>& nodes_;
  int& protocol_;
  std::vector<PickleValue*> stack_;
  std::vector<std::size_t> marks_;
  std::unordered_map<std::uint64_t, PickleValue*> memo_;
};

}  // namespace

Pickle parse_pickle(const std::uint8_t* data, std::size_t size, const PickleLimits& limits) {
  GENESIS_CHECK(data != nullptr || size == 0, "pickle: no data");
  Pickle out;
  Reader reader(data, size, limits, out.nodes_, out.protocol_);
  out.root_ = reader.run();
  return out;
}

}  // namespace genesis::debug
