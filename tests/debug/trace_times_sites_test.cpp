// Trace time stamps and allocation sites (Note [Trace times and sites]):
// TraceBuilder's overloads, the reader's time_us and `site` columns, CSV
// quoting (sites span lines), and the quoting errors.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdint>
#include <fstream>
#include <thread>
#include <string>
#include <vector>

#include "debug/trace_test_util.h"
#include "genesis/core/error.h"
#include "genesis/debug/trace.h"

namespace genesis::debug {
namespace {

class TraceSitesTest : public testing_support::TempDirTest {};

using testing_support::error_of;

TEST(TraceBuilderTimesTest, TimesAndSitesAreParallelToEvents) {
  TraceBuilder b("built");
  b.alloc(0x1000, 100, 0, 10, "a.py:1 in f|b.py:2 in g");
  b.alloc(0x2000, 200, 0, 20);
  b.free(0x1000, 0, 30);
  b.alloc(0x3000, 300, 0, 25, " b.py:2 in g \n");  // goes back in time: kept as is
  const Trace t = b.finish();
  ASSERT_EQ(t.events.size(), 4u);
  EXPECT_EQ(t.time_us, (std::vector<std::uint64_t>{10, 20, 30, 25}));
  ASSERT_EQ(t.sites.size(), 3u);
  EXPECT_EQ(t.sites[0], "");
  EXPECT_EQ(t.sites[1], "a.py:1 in f\nb.py:2 in g");
  EXPECT_EQ(t.sites[2], "b.py:2 in g");
  EXPECT_EQ(t.event_site, (std::vector<std::uint32_t>{1, 0, 0, 2}));
}

TEST(TraceBuilderTimesTest, PlainEventsHaveNoTimesOrSites) {
  TraceBuilder b;
  b.alloc(0x1000, 100);
  b.free(0x1000);
  const Trace t = b.finish();
  EXPECT_TRUE(t.time_us.empty());
  EXPECT_TRUE(t.sites.empty());
  EXPECT_TRUE(t.event_site.empty());
}

TEST(TraceBuilderTimesTest, MixedEventsTakeTheNeighbouringTime) {
  TraceBuilder b;
  b.alloc(0x1000, 100);          // before the first time stamp: takes it
  b.alloc(0x2000, 100, 0, 50);
  b.free(0x2000);                // after: the time before it
  b.alloc_at_site(0x3000, 10, 0, "x.cpp:3 in h");
  const Trace t = b.finish();
  EXPECT_EQ(t.time_us, (std::vector<std::uint64_t>{50, 50, 50, 50}));
  EXPECT_EQ(t.event_site, (std::vector<std::uint32_t>{0, 0, 0, 1}));
  EXPECT_EQ(t.sites.at(1), "x.cpp:3 in h");
}

TEST(TraceBuilderTimesTest, NormalizeSite) {
  EXPECT_EQ(normalize_site("a:1 in f | b:2 in g|"), "a:1 in f\nb:2 in g");
  EXPECT_EQ(normalize_site("a:1 in f\r\nb:2 in g\n"), "a:1 in f\nb:2 in g");
  EXPECT_EQ(normalize_site("  "), "");
  EXPECT_EQ(normalize_site(""), "");
}

TEST_F(TraceSitesTest, ReadsTimesAndQuotedSites) {
  const std::string p = write_plain("s.csv",
                                    "time_us,action,addr,size,stream,site\n"
                                    "100,alloc,0x10,512,0,\"train.py:10 in step|model.py:5 in forward\"\n"
                                    "150,alloc,0x20,1024,0,\"model.py:7 in attn\n"
                                    "model.py:5 in forward\"\n"
                                    "160,alloc,0x30,64,0,\n"
                                    "170,alloc,0x40,64,0\n"
                                    "180,free_requested,0x10,512,0,\"ignored, for a free\"\n"
                                    "190,alloc,0x50,8,0,\"say \"\"hi\"\"\"\n"
                                    "200.7,free_completed,0x10,512,0,\n");
  const Trace t = read_trace(p);
  ASSERT_EQ(t.events.size(), 6u);
  EXPECT_EQ(t.counts.lines, 7u);
  EXPECT_EQ(t.time_us, (std::vector<std::uint64_t>{100, 150, 160, 170, 180, 190}));
  ASSERT_EQ(t.event_site.size(), 6u);
  EXPECT_EQ(t.sites.at(t.event_site[0]), "train.py:10 in step\nmodel.py:5 in forward");
  EXPECT_EQ(t.sites.at(t.event_site[1]), "model.py:7 in attn\nmodel.py:5 in forward");
  EXPECT_EQ(t.event_site[2], 0u);
  EXPECT_EQ(t.event_site[3], 0u);  // the site column left out of the line
  EXPECT_EQ(t.event_site[4], 0u);  // frees have no site
  EXPECT_EQ(t.sites.at(t.event_site[5]), "say \"hi\"");
}

TEST_F(TraceSitesTest, TimesWithoutSitesAndFractionalOrNegativeTimes) {
  const Trace t = read_trace(write_plain("t.csv",
                                         "time_us,action,addr,size\n"
                                         "-5,alloc,1,10\n"
                                         "2.9,alloc,2,10\n"
                                         "7,free_requested,1,10\n"));
  EXPECT_EQ(t.time_us, (std::vector<std::uint64_t>{0, 2, 7}));
  EXPECT_TRUE(t.event_site.empty());
  const Trace no_time = read_trace(write_plain("n.csv", "action,addr,size,site\nalloc,1,10,\"a:1 in f\"\n"));
  EXPECT_TRUE(no_time.time_us.empty());
  EXPECT_EQ(no_time.event_site, (std::vector<std::uint32_t>{1}));
}

TEST_F(TraceSitesTest, HeaderlessFilesHaveTimesButNoSites) {
  const Trace t = read_trace(write_plain("h.csv", "5,alloc,1,10,0\n9,free_requested,1,10,0\n"));
  EXPECT_EQ(t.time_us, (std::vector<std::uint64_t>{5, 9}));
  EXPECT_TRUE(t.event_site.empty());
}

TEST_F(TraceSitesTest, QuotedNumbersAndCrlf) {
  const Trace t = read_trace(write_plain("q.csv",
                                         "\"time_us\",\"action\",\"addr\",\"size\",\"site\"\r\n"
                                         "\"1\",\"alloc\",\"0x10\",\"100\",\"a.py:1 in f\r\n"
                                         "b.py:2 in g\"\r\n"));
  ASSERT_EQ(t.events.size(), 1u);
  EXPECT_EQ(t.events[0].size, 100u);
  EXPECT_EQ(t.sites.at(t.event_site[0]), "a.py:1 in f\nb.py:2 in g");
}

TEST_F(TraceSitesTest, BadQuotingNamesFileAndLine) {
  const std::string header = "time_us,action,addr,size,site\n";
  struct Case {
    std::string body;
    std::string line;
    std::string what;
  };
  const std::vector<Case> cases = {
      {"1,alloc,1,10,\"a\"x\n", ":2: ", "after the closing quote"},
      {"1,alloc,1,10,ok\n2,alloc,2,10,a\"b\n", ":3: ", "a quote inside an unquoted field"},
      {"1,alloc,1,10,ok\n2,alloc,2,10,\"never closed\n3,alloc,3,10,x\n", ":3: ", "never closed"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body);
    const std::string p = write_plain("bad.csv", header + c.body);
    const std::string msg = error_of([&] { (void)read_trace(p); });
    EXPECT_NE(msg.find(p + c.line), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.what), std::string::npos) << msg;
  }
}

TEST_F(TraceSitesTest, UnclosedQuoteDoesNotSwallowTheFileWithoutBound) {
  std::string body = "time_us,action,addr,size,site\n1,alloc,1,10,\"open\n";
  const std::string line = "2,alloc,2,10,x\n";
  while (body.size() < (std::size_t{3} << 20)) body += line;
  const std::string p = write_plain("big.csv", body);
  const std::string msg = error_of([&] { (void)read_trace(p); });
  EXPECT_NE(msg.find(p + ":2: "), std::string::npos) << msg.substr(0, 300);
  EXPECT_NE(msg.find("not closed after"), std::string::npos) << msg.substr(0, 300);
}

TEST_F(TraceSitesTest, PlainTraceFromAPipe) {
  // A plain trace read through a pipe (genesis-mem --trace -): no seeking back.
  const std::string p = path("fifo");
  ASSERT_EQ(::mkfifo(p.c_str(), 0600), 0);
  std::thread writer([&] { std::ofstream(p) << "time_us,action,addr,size\n1,alloc,1,10\n2,free_requested,1,10\n"; });
  const Trace t = read_trace(p);
  writer.join();
  EXPECT_EQ(t.events.size(), 2u);
  EXPECT_EQ(t.time_us, (std::vector<std::uint64_t>{1, 2}));
}

}  // namespace
}  // namespace genesis::debug
