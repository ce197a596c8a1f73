// The event sink on its own, with a clock moved by hand: live events wait for the pass's commit
// (the outbox), a job's changes go out as one "job" event at most every kJobEventInterval, and
// notable events are stored as well as published.

#include "scheduler/broker/event_sink.h"

#include "scheduler/broker/outbox.h"
#include "scheduler/events/event_bus.h"
#include "tests/scheduler/broker/parts_fixture.h"

namespace tessera::broker {
namespace {

using namespace std::chrono_literals;

class EventSinkTest : public BrokerPartsTest {
 protected:
  // Releases the outbox as a committed pass does, running what waited for the commit.
  void Commit() {
    for (auto& fn : outbox_.Release().after_commit) fn();
  }
  std::vector<std::string> Kinds() {
    std::vector<std::string> kinds;
    for (const events::FarmEvent& e : bus_.Since(seen_, 0ms).events) {
      kinds.push_back(e.kind);
      seen_ = e.seq;
    }
    return kinds;
  }
  events::EventBus bus_;
  int64_t seen_ = 0;
};

TEST_F(EventSinkTest, JobEventsAreRateLimitedAndEverythingWaitsForTheCommit) {
  Build();
  EventSink sink(*store_, &bus_);
  ASSERT_TRUE(sink.enabled());
  sink.JobChanged(7);
  sink.JobChanged(7);
  sink.Publish("frame", {{"job_id", 7}, {"frame", 1}});
  sink.Flush(pass_->now, outbox_);
  EXPECT_TRUE(Kinds().empty());  // not before the commit
  Commit();
  EXPECT_EQ(Kinds(), (std::vector<std::string>{"frame", "job"}));

  Advance(100ms);
  sink.JobChanged(7);
  sink.Flush(pass_->now, outbox_);
  Commit();
  EXPECT_TRUE(Kinds().empty());  // within the interval: held
  Advance(150ms);
  sink.Flush(pass_->now, outbox_);
  Commit();
  EXPECT_EQ(Kinds(), std::vector<std::string>{"job"});
}

TEST_F(EventSinkTest, NotableEventIsStoredAndPublishedAsANotice) {
  Build();
  EventSink sink(*store_, &bus_);
  sink.Record(std::nullopt, std::nullopt, std::nullopt, "data_space_back", "room again");
  sink.Flush(pass_->now, outbox_);
  Commit();
  EXPECT_EQ(Kinds(), std::vector<std::string>{"notice"});
  auto stored = store_->EventsAfter(0, {"data_space_back"}, 10);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  ASSERT_FALSE(stored->empty());

  EventSink quiet(*store_, nullptr);  // nobody reads live events: only stored
  quiet.JobChanged(1);
  quiet.Publish("frame", {});
  quiet.Flush(pass_->now, outbox_);
  EXPECT_TRUE(outbox_.Release().after_commit.empty());
}

}  // namespace
}  // namespace tessera::broker
