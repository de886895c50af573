// The plain-data pickle reader (genesis/debug/pickle.h): what Python's pickle
// writes, every opcode it supports, and clear errors (never a crash) for
// code, truncation, corruption and inputs beyond its limits.
#include "genesis/debug/pickle.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>

#include "genesis/core/error.h"
#include "pickle_test_util.h"

namespace genesis::debug {
namespace {

using testing_support::PickleWriter;
using Kind = PickleValue::Kind;

const std::string& kPython5 = testing_support::python5_snapshot_pickle();

// The bytes of a string literal, NULs included.
template <std::size_t N>
std::string B(const char (&s)[N]) {
  return std::string(s, N - 1);
}

Pickle parse(const std::string& bytes, const PickleLimits& limits = {}) {
  return parse_pickle(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size(), limits);
}

std::string pickle_error_of(const std::string& bytes, const PickleLimits& limits = {}) {
  try {
    parse(bytes, limits);
  } catch (const InvalidArgumentError& e) {
    return e.what();
  }
  return "";
}

TEST(PickleReader, ReadsWhatPythonWrites) {
  const Pickle p = parse(kPython5);
  EXPECT_EQ(p.protocol(), 5);
  const PickleValue& root = p.root();
  ASSERT_TRUE(root.is_dict());
  const PickleValue* traces = root.get("device_traces");
  ASSERT_NE(traces, nullptr);
  ASSERT_EQ(traces->kind, Kind::kList);
  ASSERT_EQ(traces->items.size(), 1u);
  const PickleValue& dev0 = *traces->items[0];
  ASSERT_EQ(dev0.items.size(), 3u);
  const PickleValue& alloc = *dev0.items[0];
  EXPECT_EQ(alloc.get("action")->text, "alloc");
  EXPECT_EQ(alloc.get("addr")->integer, 0x7f0000000000);
  EXPECT_FALSE(alloc.get("addr")->big);
  EXPECT_EQ(alloc.get("size")->integer, 1024);
  EXPECT_EQ(alloc.get("time_us")->integer, 1700000000000000);
  // The memo shares objects as Python does: one frames list for all three.
  EXPECT_EQ(alloc.get("frames"), dev0.items[1]->get("frames"));
  EXPECT_EQ(alloc.get("frames"), dev0.items[2]->get("frames"));
  const PickleValue& frame = *alloc.get("frames")->items.at(0);
  EXPECT_EQ(frame.get("filename")->text, "train.py");
  EXPECT_EQ(frame.get("line")->integer, 42);
  const PickleValue* settings = root.get("allocator_settings");
  ASSERT_NE(settings, nullptr);
  EXPECT_EQ(settings->get("expandable_segments")->kind, Kind::kBool);
  EXPECT_FALSE(settings->get("expandable_segments")->boolean);
  EXPECT_EQ(settings->get("garbage_collection_threshold")->kind, Kind::kFloat);
  const PickleValue* pool = root.get("pool");
  ASSERT_EQ(pool->kind, Kind::kTuple);
  ASSERT_EQ(pool->items.size(), 2u);
  EXPECT_EQ(root.get("segments")->items.size(), 0u);
  EXPECT_EQ(root.get("missing"), nullptr);
  EXPECT_EQ(alloc.get("addr")->get("x"), nullptr);  // get() of a non-dict
}

TEST(PickleReader, EveryValueForm) {
  PickleWriter w(4);
  w.empty_list().mark();
  w.none().boolean(true).boolean(false);
  w.integer(0).integer(255).integer(65535).integer(-1).integer(INT32_MIN).integer(std::int64_t{1} << 40);
  w.long1("").long1("\xff").long1(B("\x00\x00\x00\x00\x00\x00\x00\x80"));  // 0, -1, INT64_MIN
  w.long1(B("\xff\xff\xff\xff\xff\xff\xff\xff\x00"));                     // 2^64 - 1
  w.real(-2.5).str("héllo").op('X').le(3, 4).raw("abc");
  w.op(0x8d).le(2, 8).raw("xy");                   // BINUNICODE8
  w.op('C').byte(2).raw(B("\x00\x01"));               // SHORT_BINBYTES
  w.op('B').le(1, 4).raw("z").op(0x8e).le(0, 8);   // BINBYTES, BINBYTES8
  w.op(')').integer(1).op(0x85).integer(1).integer(2).op(0x86).integer(1).integer(2).integer(3).op(0x87);
  w.mark().integer(7).integer(8).op('t');          // TUPLE
  w.mark().integer(7).op('l');                     // LIST
  w.mark().str("k").integer(1).op('d');            // DICT
  w.appends().stop();
  const Pickle p = parse(w.bytes());
  const auto& v = p.root().items;
  ASSERT_EQ(v.size(), 27u);
  EXPECT_EQ(v[0]->kind, Kind::kNone);
  EXPECT_TRUE(v[1]->boolean);
  EXPECT_FALSE(v[2]->boolean);
  const std::int64_t ints[] = {0, 255, 65535, -1, INT32_MIN, std::int64_t{1} << 40, 0, -1, INT64_MIN};
  for (int i = 0; i < 9; ++i) {
    EXPECT_EQ(v[3 + i]->kind, Kind::kInt) << i;
    EXPECT_EQ(v[3 + i]->integer, ints[i]) << i;
    EXPECT_FALSE(v[3 + i]->big) << i;
  }
  EXPECT_TRUE(v[12]->big);
  EXPECT_EQ(static_cast<std::uint64_t>(v[12]->integer), std::numeric_limits<std::uint64_t>::max());
  EXPECT_EQ(v[13]->real, -2.5);
  EXPECT_EQ(v[14]->text, "héllo");
  EXPECT_EQ(v[15]->text, "abc");
  EXPECT_EQ(v[16]->text, "xy");
  EXPECT_EQ(v[17]->kind, Kind::kBytes);
  EXPECT_EQ(v[17]->text, B("\x00\x01"));
  EXPECT_EQ(v[18]->text, "z");
  EXPECT_EQ(v[19]->text, "");
  EXPECT_EQ(v[20]->kind, Kind::kTuple);
  EXPECT_EQ(v[20]->items.size(), 0u);
  EXPECT_EQ(v[21]->items.size(), 1u);
  EXPECT_EQ(v[22]->items.size(), 2u);
  EXPECT_EQ(v[23]->items.size(), 3u);
  EXPECT_EQ(v[24]->kind, Kind::kTuple);
  EXPECT_EQ(v[24]->items.size(), 2u);
  EXPECT_EQ(v[25]->kind, Kind::kList);
  EXPECT_EQ(v[25]->items.at(0)->integer, 7);
  ASSERT_TRUE(v[26]->is_dict());
  EXPECT_EQ(v[26]->get("k")->integer, 1);
}

// Structural equality of two parsed values (no cycles in the inputs
// compared); floats bit for bit, so that -0.0 is not 0.0.
::testing::AssertionResult SameValue(const PickleValue& a, const PickleValue& b, const std::string& path = "root") {
  if (a.kind != b.kind)
    return ::testing::AssertionFailure() << path << ": " << a.kind_name() << " vs " << b.kind_name();
  switch (a.kind) {
    case Kind::kBool:
      if (a.boolean != b.boolean) return ::testing::AssertionFailure() << path << ": " << a.boolean;
      break;
    case Kind::kInt:
      if (a.integer != b.integer || a.big != b.big)
        return ::testing::AssertionFailure() << path << ": " << a.integer << (a.big ? " (big)" : "") << " vs "
                                             << b.integer << (b.big ? " (big)" : "");
      break;
    case Kind::kFloat:
      if (std::bit_cast<std::uint64_t>(a.real) != std::bit_cast<std::uint64_t>(b.real))
        return ::testing::AssertionFailure() << path << ": " << a.real << " vs " << b.real;
      break;
    case Kind::kString:
    case Kind::kBytes:
      if (a.text != b.text) return ::testing::AssertionFailure() << path << ": '" << a.text << "' vs '" << b.text << "'";
      break;
    default: break;
  }
  if (a.items.size() != b.items.size())
    return ::testing::AssertionFailure() << path << ": " << a.items.size() << " vs " << b.items.size() << " items";
  for (std::size_t i = 0; i < a.items.size(); ++i) {
    auto r = SameValue(*a.items[i], *b.items[i], path + "[" + std::to_string(i) + "]");
    if (!r) return r;
  }
  return ::testing::AssertionSuccess();
}

// Protocols 0 and 1 write numbers, strings and memo indices as text (Note
// [Text opcodes]): what CPython writes in them reads as the same values as
// its protocol 5, every form at its edges included.
TEST(PickleReader, ProtocolsZeroAndOneReadAsProtocolFive) {
  const Pickle five = parse(testing_support::python5_forms_pickle());
  for (const std::string* bytes : {&testing_support::python0_forms_pickle(), &testing_support::python1_forms_pickle()}) {
    const Pickle p = parse(*bytes);
    EXPECT_EQ(p.protocol(), 0);  // neither declares one
    EXPECT_TRUE(SameValue(p.root(), five.root()));
  }
  // Spot checks of the expected values themselves, on protocol 0.
  const Pickle zero = parse(testing_support::python0_forms_pickle());
  const PickleValue& ints = *zero.root().get("ints");
  ASSERT_EQ(ints.items.size(), 13u);
  EXPECT_EQ(ints.items[9]->integer, INT64_MIN);
  EXPECT_EQ(ints.items[10]->integer, INT64_MAX);
  EXPECT_TRUE(ints.items[11]->big);
  EXPECT_EQ(static_cast<std::uint64_t>(ints.items[11]->integer), std::uint64_t{1} << 63);
  EXPECT_EQ(static_cast<std::uint64_t>(ints.items[12]->integer), std::numeric_limits<std::uint64_t>::max());
  const PickleValue& bools = *zero.root().get("bools");
  EXPECT_EQ(bools.items[0]->kind, Kind::kBool);
  EXPECT_TRUE(bools.items[0]->boolean);
  EXPECT_FALSE(bools.items[1]->boolean);
  EXPECT_EQ(bools.items[2]->kind, Kind::kNone);
  const PickleValue& floats = *zero.root().get("floats");
  EXPECT_EQ(floats.items[2]->real, 0.1);
  EXPECT_EQ(floats.items[5]->real, std::numeric_limits<double>::infinity());
  const PickleValue& strs = *zero.root().get("strs");
  EXPECT_EQ(strs.items[2]->text, B("a\\b\nc\rd\0e\x1a" "f"));
  EXPECT_EQ(strs.items[3]->text, "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");  // é € 😀 in UTF-8
  EXPECT_EQ(strs.items[4]->text, "\\u0041");   // a backslash, then u0041
  EXPECT_EQ(strs.items[5]->text, "\\\\u0041");
  EXPECT_EQ(strs.items[6]->text, "\xed\xa0\x80");  // a lone surrogate, as surrogatepass writes it
  // The memo shares objects as in the binary protocols.
  const PickleValue& j = *zero.root().get("nested")->items[2]->get("k")->get("j");
  EXPECT_EQ(j.items[0], j.items[1]);
  // And the snapshot itself.
  const Pickle snap5 = parse(kPython5);
  for (const std::string* bytes :
       {&testing_support::python0_snapshot_pickle(), &testing_support::python1_snapshot_pickle()})
    EXPECT_TRUE(SameValue(parse(*bytes).root(), snap5.root()));
}

// The text forms one by one, as a hand-written pickle gives them (also
// after a PROTO of 0 or 1, which pickle.loads accepts though Python never
// writes it).
TEST(PickleReader, TextOpcodesOneByOne) {
  PickleWriter w(1);
  w.op(']').mark();
  w.raw("I00\nI01\nI-42\nI+7\nL123L\nL-5\nF-2.5\nFnan\nVx\\u00e9y\nVbs\\\\z\nVend\\\n");
  w.raw("p17\ng17\n");
  w.appends().stop();
  const Pickle p = parse(w.bytes());
  EXPECT_EQ(p.protocol(), 1);
  const auto& v = p.root().items;
  ASSERT_EQ(v.size(), 12u);
  EXPECT_EQ(v[0]->kind, Kind::kBool);
  EXPECT_FALSE(v[0]->boolean);
  EXPECT_TRUE(v[1]->boolean);
  EXPECT_EQ(v[2]->integer, -42);
  EXPECT_EQ(v[3]->integer, 7);
  EXPECT_EQ(v[4]->integer, 123);
  EXPECT_EQ(v[5]->integer, -5);
  EXPECT_EQ(v[6]->real, -2.5);
  EXPECT_TRUE(std::isnan(v[7]->real));
  EXPECT_EQ(v[8]->text, "x\xc3\xa9y");
  EXPECT_EQ(v[9]->text, "bs\\\\z");  // an even run of backslashes stays
  EXPECT_EQ(v[10]->text, "end\\");     // a backslash at the end of the line
  EXPECT_EQ(v[11], v[10]);              // PUT 17 and GET 17
  EXPECT_EQ(parse(B("\x80\x00N.")).root().kind, Kind::kNone);
}

TEST(PickleReader, StackOpcodesAndTheMemo) {
  PickleWriter w(2);
  // [a, a, 5] with a = "shared" stored at LONG_BINPUT 70000 and read back;
  // POP, POP_MARK and DUP on the way.
  w.empty_list().mark();
  w.str("shared").op('r').le(70000, 4);
  w.op('j').le(70000, 4);
  w.integer(9).op('0');                         // POP
  w.mark().integer(1).integer(2).op('1');       // POP_MARK
  w.integer(5).op('2').op('0');                 // DUP, POP
  w.appends().stop();
  const Pickle p = parse(w.bytes());
  const auto& v = p.root().items;
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[0], v[1]);
  EXPECT_EQ(v[0]->text, "shared");
  EXPECT_EQ(v[2]->integer, 5);
}

TEST(PickleReader, AListInsideItselfIsACycleNotARecursion) {
  PickleWriter w(2);
  w.empty_list().op('q').byte(0).op('h').byte(0).op('a').stop();  // l = []; l.append(l)
  const Pickle p = parse(w.bytes());
  ASSERT_EQ(p.root().items.size(), 1u);
  EXPECT_EQ(p.root().items[0], &p.root());
}

TEST(PickleReader, CodeIsRefusedByName) {
  struct Case {
    std::string bytes;
    const char* name;
    const char* at;
  } cases[] = {
      {B("\x80\x02" "cos\nsystem\n"), "GLOBAL", "at byte 2 "},
      {B("\x80\x04\x8c\x02os\x8c\x06system\x93"), "STACK_GLOBAL", "at byte 14 "},
      {B("\x80\x02N)R"), "REDUCE", "at byte 4 "},
      {B("\x80\x02}}b"), "BUILD", "at byte 4 "},
      {B("\x80\x02)\x81"), "NEWOBJ", "at byte 3 "},
      {B("\x80\x02K\x01Q"), "BINPERSID", "at byte 4 "},
      {B("\x80\x04\x8f"), "EMPTY_SET", "at byte 2 "},
      {B("(i__main__\nC\n."), "INST", "at byte 1 "},
      {B("\x80\x02\x8c\x01" "a\x8c\x01" "bo"), "OBJ", "at byte 8 "},
      {B("\x80\x02U\x01" "a."), "SHORT_BINSTRING", "at byte 2 "},
  };
  for (const Case& c : cases) {
    const std::string e = pickle_error_of(c.bytes);
    EXPECT_NE(e.find(std::string("opcode ") + c.name + " is refused"), std::string::npos) << e;
    EXPECT_NE(e.find("only plain data"), std::string::npos) << e;
    EXPECT_NE(e.find(c.at), std::string::npos) << e;
  }
}

TEST(PickleReader, MalformedInputsAreClearErrors) {
  struct Case {
    std::string bytes;
    const char* says;
  } cases[] = {
      {"", "truncated"},
      {B("\x80\x06N."), "protocol 6"},
      {B("\x80\x02\xff"), "unknown opcode 0xff"},
      {B("\x80\x02N"), "truncated"},
      {B("\x80\x02NN."), "2 objects on the stack"},
      {B("\x80\x02."), "0 objects on the stack"},
      {B("\x80\x02(N."), "unfinished MARK"},
      {B("\x80\x02" "a"), "too few objects"},
      {B("\x80\x02Na"), "too few objects"},
      {B("\x80\x02NNa"), "APPEND to a None"},
      {B("\x80\x02}(Nu"), "key and no value"},
      {B("\x80\x02](NNu"), "SETITEMS to a list"},
      {B("\x80\x02}(Ne"), "APPENDS to a dict"},
      {B("\x80\x02(Ne"), "without a list"},
      {B("\x80\x02" "e"), "needs a MARK"},
      {B("\x80\x02h\x05"), "memo entry 5 is used before"},
      {B("\x80\x02q\x00"), "too few objects"},
      {B("\x80\x02X\xff\xff\xff\x7f" "ab"), "runs past the end"},
      {B("\x80\x04\x95\xff\xff\xff\xff\x00\x00\x00\x00N."), "frame of"},
      {B("\x80\x02\x8a\x0a" "0123456789."), "too large"},
      {B("\x80\x02\x8b\x20\x00\x00\x00"), "too large"},
      {B("\x80\x02\x8a\x09\xff\xff\xff\xff\xff\xff\xff\xff\x01."), "too large"},
      {B("\x80\x02(NNNd"), "DICT with a key and no value"},
      // The text opcodes of protocols 0 and 1.
      {B("I12"), "truncated"},
      {B("Iabc\n."), "INT 'abc' is not a decimal integer"},
      {B("I-\n."), "not a decimal integer"},
      {B("I1.5\n."), "not a decimal integer"},
      {B("L18446744073709551616L\n."), "LONG '18446744073709551616' is too large"},
      {B("L-9223372036854775809L\n."), "too large"},
      {B("F1.5x\n."), "FLOAT '1.5x' is not a number"},
      {B("F\n."), "is not a number"},
      {B("Vab\\u12\n."), "truncated \\u escape"},
      {B("V\\uZZZZ\n."), "malformed \\u escape"},
      {B("V\\U00110000\n."), "beyond U+10FFFF"},
      {B("Vabc"), "truncated"},
      {B("Np-1\n."), "PUT '-1' is not a memo index"},
      {B("g5\n."), "memo entry 5 is used before"},
      {B("Np\n."), "is not a memo index"},
      // What a damaged pickle holds is shown as text, whatever its bytes.
      {B("La\x94\\\x00" "b\n."), "LONG 'a\\x94\\x5c\\x00b' is not a decimal integer"},
  };
  for (const Case& c : cases) {
    const std::string e = pickle_error_of(c.bytes);
    EXPECT_NE(e.find(c.says), std::string::npos) << "input of " << c.bytes.size() << " bytes -> '" << e << "'";
    EXPECT_NE(e.find("pickle: "), std::string::npos) << e;
  }
}

TEST(PickleReader, EveryTruncationIsAnErrorAndTrailingBytesAreIgnored) {
  for (std::size_t n = 0; n < kPython5.size(); ++n) {
    const std::string e = pickle_error_of(kPython5.substr(0, n));
    EXPECT_FALSE(e.empty()) << "prefix of " << n << " bytes parsed";
  }
  EXPECT_NO_THROW(parse(kPython5 + "garbage after STOP"));
}

TEST(PickleReader, CorruptionNeverCrashes) {
  // Random byte changes: each input either parses or is an
  // InvalidArgumentError (any other exception fails the test; a crash or
  // hang fails it harder). Run under ASan in CI.
  std::mt19937 rng(1234);
  int parsed = 0, refused = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string b = kPython5;
    const int changes = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < changes; ++k) b[rng() % b.size()] = static_cast<char>(rng() & 0xff);
    if (rng() % 5 == 0) b.resize(rng() % b.size());
    try {
      parse(b);
      ++parsed;
    } catch (const InvalidArgumentError&) {
      ++refused;
    }
  }
  EXPECT_EQ(parsed + refused, 3000);
  EXPECT_GT(refused, 0);
}

TEST(PickleReader, LimitsBoundWhatAPickleMayBuild) {
  PickleLimits small;
  small.max_objects = 10;
  EXPECT_NE(pickle_error_of(kPython5, small).find("max_objects"), std::string::npos);

  PickleWriter deep(2);
  for (int i = 0; i < 5000; ++i) deep.mark();
  EXPECT_NE(pickle_error_of(deep.bytes()).find("nested MARKs"), std::string::npos);

  PickleLimits few;
  few.max_stack = 3;
  PickleWriter wide(2);
  for (int i = 0; i < 10; ++i) wide.none();
  EXPECT_NE(pickle_error_of(wide.bytes(), few).find("max_stack"), std::string::npos);

  PickleLimits memo;
  memo.max_memo = 2;
  PickleWriter puts(2);
  puts.empty_list();
  for (int i = 0; i < 5; ++i) puts.op('q').byte(static_cast<std::uint8_t>(i));
  puts.stop();
  EXPECT_NE(pickle_error_of(puts.bytes(), memo).find("max_memo"), std::string::npos);
}

TEST(PickleReader, NullWithZeroSizeIsAnErrorNotACrash) {
  EXPECT_THROW(parse_pickle(nullptr, 0), InvalidArgumentError);
}

}  // namespace
}  // namespace genesis::debug
