// Read-only mode on its own, with a clock moved by hand: entering it reloads memory from the
// store and says why; while read-only, heartbeats are answered, results are left on the workers
// and registrations are asked to come back; the data folder is checked every two seconds, and
// once it has the space to resume the broker reloads, asks every worker to register again and
// writes again.

#include "scheduler/broker/read_only.h"

#include "tests/scheduler/broker/parts_fixture.h"

namespace tessera::broker {
namespace {

using namespace std::chrono_literals;
using protocol::MessageType;

class ReadOnlyTest : public BrokerPartsTest {};

TEST_F(ReadOnlyTest, ResumesOnceTheCheckFindsTheDataFolderHasSpace) {
  options_.data_resume_bytes = 1;  // the test's folder has that much
  Build();
  Register("w1");
  const int64_t job = SubmitNoop(2);
  parts_->dispatch.Run(*pass_);
  ClearOutbox();

  ReadOnlyMode& read_only = parts_->read_only;
  read_only.Enter(*pass_, Status::StorageFull("database or disk is full"));
  EXPECT_TRUE(read_only.active());
  ASSERT_TRUE(read_only.Reason().has_value());
  EXPECT_NE(read_only.Reason()->find("database or disk is full"), std::string::npos);
  // Memory as the store has it: the task that was running stays a lease there (its worker
  // re-attaches it later), the other is queued.
  EXPECT_EQ(parts_->table.tasks().size(), 2u);
  EXPECT_EQ(parts_->table.queue().size(), 1u);
  EXPECT_EQ(counters_.Read().queue_depth, 1u);

  // A heartbeat is answered; a result is not acknowledged; a registration is told to wait.
  protocol::Heartbeat beat;
  read_only.OnMessage(*pass_, "w1", Message(MessageType::kHeartbeat, beat));
  EXPECT_EQ(CountSent("w1", MessageType::kHeartbeatAck), 1);
  protocol::TaskDone done;
  done.task_id = TaskIds(job).at(0);
  done.attempt = 1;
  read_only.OnMessage(*pass_, "w1", Message(MessageType::kTaskDone, done));
  EXPECT_EQ(CountSent("w1", MessageType::kResultAck), 0);
  protocol::Register reg;
  reg.name = "w2";
  read_only.OnMessage(*pass_, "w2", Message(MessageType::kRegister, reg));
  std::vector<protocol::Envelope> refused = Sent("w2");
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0].As<protocol::Reject>()->retry_after_ms, ReadOnlyMode::kRetryMs);

  ClearOutbox();
  Advance(1999ms);
  EXPECT_FALSE(read_only.CheckDataFolder(*pass_));
  EXPECT_TRUE(read_only.active());
  Advance(1ms);
  EXPECT_TRUE(read_only.CheckDataFolder(*pass_));
  EXPECT_FALSE(read_only.active());
  EXPECT_FALSE(read_only.Reason().has_value());
  EXPECT_EQ(CountSent("w1", MessageType::kUnknownWorker), 1);  // register anew
  EXPECT_TRUE(parts_->workers.empty());
  // Loaded the way start-up does: the running task waits for its worker to re-attach it.
  EXPECT_EQ(parts_->table.tasks().size(), 2u);
  EXPECT_EQ(parts_->table.queue().size(), 1u);
}

TEST_F(ReadOnlyTest, StaysReadOnlyWhileTheDataFolderLacksTheSpace) {
  options_.data_resume_bytes = ~uint64_t{0};  // never that much free
  Build();
  parts_->read_only.Enter(*pass_, Status::StorageFull("database or disk is full"));
  Advance(2s);
  EXPECT_FALSE(parts_->read_only.CheckDataFolder(*pass_));
  EXPECT_TRUE(parts_->read_only.active());
  EXPECT_EQ(parts_->read_only.next_check(), pass_->now + ReadOnlyMode::kDataFolderCheckInterval);
}

}  // namespace
}  // namespace tessera::broker
