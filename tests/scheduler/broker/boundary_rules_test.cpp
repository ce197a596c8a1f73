// The boundary's rules on their own, with a clock moved by hand (tests/scheduler/broker/
// boundary_test.cpp drives the same through a real broker and socket): every dropped message and
// refused name is counted; a refused name is told why each time, but recorded as an event at
// most once per interval per name; a caught exception is counted.

#include "scheduler/broker/boundary.h"
#include "tests/scheduler/broker/parts_fixture.h"

namespace tessera::broker {
namespace {

using namespace std::chrono_literals;

class BoundaryRulesTest : public BrokerPartsTest {
 protected:
  size_t RefusalEvents() {
    auto events = store_->EventsAfter(0, {"registration_refused"}, 100);
    EXPECT_TRUE(events.ok());
    return events.ok() ? events->size() : 0;
  }
};

TEST_F(BoundaryRulesTest, RefusedNameIsToldEachTimeButRecordedOncePerInterval) {
  options_.noisy_log_interval = 10s;
  Build();
  Boundary& boundary = parts_->boundary;
  for (int i = 0; i < 3; ++i) {
    boundary.RefuseName(*pass_, "peer", "w1", "registration_refused", "w1 is taken", 1000);
  }
  EXPECT_EQ(CountSent("peer", protocol::MessageType::kReject), 3);
  EXPECT_EQ(counters_.Read().names_refused, 3u);
  EXPECT_EQ(RefusalEvents(), 1u);
  Advance(10s);
  boundary.RefuseName(*pass_, "peer", "w1", "registration_refused", "w1 is taken", 1000);
  EXPECT_EQ(RefusalEvents(), 2u);
}

TEST_F(BoundaryRulesTest, DroppedMessagesAndCaughtExceptionsAreCounted) {
  Build();
  Boundary& boundary = parts_->boundary;
  for (int i = 0; i < 5; ++i) boundary.DropMessage(*pass_, "peer", "not a Tessera message");
  boundary.Caught(*pass_, "a worker message", "boom");
  EXPECT_EQ(counters_.Read().messages_dropped, 5u);
  EXPECT_EQ(counters_.Read().errors_caught, 1u);
}

}  // namespace
}  // namespace tessera::broker
