// CPU tests of SimulatedDevice's streams and events: an event completes when
// the work submitted before it on its stream does, and not before.
#include <gtest/gtest.h>

#include <vector>

#include "genesis/core/error.h"
#include "genesis/memory/simulated_device.h"
#include "support/allocator_test_util.h"

namespace genesis::memory {
namespace {

using testing_support::MiB;

// --- SimulatedDevice: streams and events --------------------------------------

TEST(SimulatedDeviceEventsTest, StreamsAreNumbered) {
  SimulatedDevice sim(1 * MiB);
  EXPECT_EQ(sim.create_stream(), 1u);
  EXPECT_EQ(sim.create_stream(), 2u);
  EXPECT_EQ(sim.submitted_work(0), 0u);
  EXPECT_THROW(sim.submit_work(3), InvalidArgumentError);
  EXPECT_THROW(sim.record_event(3), InvalidArgumentError);
  EXPECT_THROW(sim.complete_work(99), InvalidArgumentError);
}

TEST(SimulatedDeviceEventsTest, EventOnIdleStreamIsDone) {
  SimulatedDevice sim(1 * MiB);
  EventId e = sim.record_event(0);
  EXPECT_NE(e, 0u);
  EXPECT_TRUE(sim.event_done(e));
  sim.release_event(e);
  EXPECT_EQ(sim.outstanding_events(), 0u);
}

TEST(SimulatedDeviceEventsTest, EventWaitsForSubmittedWork) {
  SimulatedDevice sim(1 * MiB);
  StreamId s = sim.create_stream();
  EXPECT_EQ(sim.submit_work(s), 1u);
  EventId e = sim.record_event(s);
  EXPECT_FALSE(sim.event_done(e));
  // Work submitted after the record does not delay the event...
  sim.submit_work(s);
  // ... and work on another stream does not complete it.
  sim.complete_work(0);
  EXPECT_FALSE(sim.event_done(e));
  sim.complete_work(s);
  EXPECT_TRUE(sim.event_done(e));
  EXPECT_EQ(sim.completed_work(s), 2u);
  sim.release_event(e);
}

TEST(SimulatedDeviceEventsTest, WaitCompletesOnlyUpToTheTicket) {
  SimulatedDevice sim(1 * MiB);
  StreamId s = sim.create_stream();
  sim.submit_work(s);
  EventId first = sim.record_event(s);
  sim.submit_work(s);
  EventId second = sim.record_event(s);
  EXPECT_EQ(sim.outstanding_events(), 2u);
  sim.wait_event(first);
  EXPECT_TRUE(sim.event_done(first));
  EXPECT_FALSE(sim.event_done(second));
  EXPECT_EQ(sim.completed_work(s), 1u);
  EXPECT_EQ(sim.submitted_work(s), 2u);
  sim.wait_event(first);  // waiting again changes nothing
  EXPECT_EQ(sim.completed_work(s), 1u);
  sim.complete_all();
  EXPECT_TRUE(sim.event_done(second));
  sim.release_event(first);
  sim.release_event(second);
  EXPECT_EQ(sim.outstanding_events(), 0u);
}

TEST(SimulatedDeviceEventsTest, ReleasedEventsAreForgotten) {
  SimulatedDevice sim(1 * MiB);
  EventId e = sim.record_event(0);
  sim.release_event(e);
  EXPECT_THROW(sim.event_done(e), InvalidArgumentError);
  EXPECT_THROW(sim.wait_event(e), InvalidArgumentError);
  EXPECT_EQ(sim.num_misuses(), 0u);
  sim.release_event(e);  // double release: counted, not thrown
  EXPECT_EQ(sim.num_misuses(), 1u);
  EXPECT_NE(sim.record_event(0), e);  // ids are not reused
}

TEST(SimulatedDeviceEventsTest, CompleteAllCoversEveryStream) {
  SimulatedDevice sim(1 * MiB);
  StreamId s1 = sim.create_stream();
  StreamId s2 = sim.create_stream();
  sim.submit_work(0);
  sim.submit_work(s1);
  sim.submit_work(s2);
  sim.submit_work(s2);
  std::vector<EventId> events{sim.record_event(0), sim.record_event(s1), sim.record_event(s2)};
  for (EventId e : events) EXPECT_FALSE(sim.event_done(e));
  sim.complete_all();
  for (EventId e : events) {
    EXPECT_TRUE(sim.event_done(e));
    sim.release_event(e);
  }
  EXPECT_EQ(sim.completed_work(s2), 2u);
}

}  // namespace
}  // namespace genesis::memory
