// The fleet on its own, with a clock moved by hand: a worker silent for liveness x heartbeat is
// dropped and its leases requeued, uncharged; a heartbeat keeps it alive and ends the leases it
// does not hold once they are two heartbeats old; a name belongs to its live connection; a
// registering worker re-attaches the task it still renders.

#include "scheduler/broker/fleet.h"

#include "tests/scheduler/broker/parts_fixture.h"

namespace tessera::broker {
namespace {

using namespace std::chrono_literals;

class FleetTest : public BrokerPartsTest {
 protected:
  void Heartbeat(const std::string& identity, std::vector<protocol::TaskRef> running) {
    protocol::Heartbeat beat;
    beat.running = std::move(running);
    WorkerConn* worker = parts_->fleet.Sender(*pass_, identity, protocol::MessageType::kHeartbeat);
    ASSERT_NE(worker, nullptr);
    parts_->fleet.OnHeartbeat(*pass_, identity, *worker,
                              Message(protocol::MessageType::kHeartbeat, beat));
  }
};

TEST_F(FleetTest, WorkerSilentPastLivenessIsDroppedAndItsLeasesRequeuedUncharged) {
  options_.heartbeat_ms = 1000;
  options_.liveness = 5;
  Build();
  Register("w1");
  const auto [job, task_id] = DispatchOneNoopTask();
  ASSERT_TRUE(parts_->table.tasks().at(task_id).running());

  Advance(4s);
  Heartbeat("w1", {{task_id, 1}});  // heard from: alive for another 5 s
  Advance(5s);
  parts_->fleet.DropSilent(*pass_);
  ASSERT_NE(parts_->workers.Find("w1"), nullptr);

  Advance(1ms);  // 5 s and a bit without a word
  parts_->fleet.DropSilent(*pass_);
  EXPECT_EQ(parts_->workers.Find("w1"), nullptr);
  const LiveTask& task = parts_->table.tasks().at(task_id);
  EXPECT_FALSE(task.running());
  EXPECT_EQ(task.failures, 0);  // lost, not failed
  EXPECT_EQ(Task(task_id).state, store::TaskState::kQueued);
  EXPECT_EQ(parts_->table.queue().size(), 1u);
  auto workers = store_->ListWorkers();
  ASSERT_TRUE(workers.ok());
  ASSERT_EQ(workers->size(), 1u);
  EXPECT_EQ((*workers)[0].state, store::WorkerState::kOffline);
}

TEST_F(FleetTest, HeartbeatEndsALeaseTheWorkerDoesNotHoldOnceItIsTwoHeartbeatsOld) {
  options_.heartbeat_ms = 1000;
  Build();
  Register("w1");
  const auto [job, task_id] = DispatchOneNoopTask();

  Advance(1500ms);  // the assignment may still be on its way
  Heartbeat("w1", {});
  EXPECT_TRUE(parts_->table.tasks().at(task_id).running());
  Advance(1s);
  Heartbeat("w1", {});
  EXPECT_FALSE(parts_->table.tasks().at(task_id).running());
  EXPECT_EQ(Task(task_id).state, store::TaskState::kQueued);
}

TEST_F(FleetTest, NameIsHeldByItsLiveConnectionUntilTheDeadline) {
  options_.heartbeat_ms = 1000;
  options_.liveness = 5;
  Build();
  Register("w1");
  ClearOutbox();

  // Another connection asking for the same name: refused while the first is alive (a peer
  // counts as gone only when a message to it cannot be routed; here there is no socket).
  protocol::Register reg;
  reg.name = "w1";
  reg.hostname = "elsewhere";
  parts_->fleet.OnRegister(*pass_, "other", Message(protocol::MessageType::kRegister, reg), "");
  std::vector<protocol::Envelope> sent = Sent("other");
  ASSERT_EQ(sent.size(), 1u);
  ASSERT_EQ(sent[0].type, protocol::MessageType::kReject);
  EXPECT_GT(sent[0].As<protocol::Reject>()->retry_after_ms, 0);
  EXPECT_EQ(counters_.Read().names_refused, 1u);

  Advance(5001ms);  // the first connection is past the deadline: the name is free
  ClearOutbox();
  parts_->fleet.OnRegister(*pass_, "other", Message(protocol::MessageType::kRegister, reg), "");
  EXPECT_EQ(CountSent("other", protocol::MessageType::kWelcome), 1);
  EXPECT_EQ(parts_->workers.Find("w1"), nullptr);
  EXPECT_NE(parts_->workers.Find("other"), nullptr);
}

TEST_F(FleetTest, WorkerRegisteringAfterARestartReattachesTheAttemptItStillRenders) {
  Build();
  Register("w1");
  const int64_t job = SubmitNoop(2);
  const int64_t rendering = TaskIds(job).at(0), queued = TaskIds(job).at(1);
  parts_->dispatch.Run(*pass_);  // one slot: the first task
  ASSERT_TRUE(parts_->table.tasks().at(rendering).running());

  // The scheduler restarts: memory is built again from the store. The task that was running
  // waits for its worker rather than going back to the queue.
  Build();
  ASSERT_TRUE(parts_->jobs.Load(*pass_, std::nullopt, /*requeue_running=*/true).ok());
  EXPECT_EQ(parts_->table.queue().size(), 1u);
  ClearOutbox();
  // The worker comes back still rendering attempt 1, and with a render that is no lease.
  Register("w1", 1, {{rendering, 1}, {queued, 3}});
  const LiveTask& task = parts_->table.tasks().at(rendering);
  ASSERT_TRUE(task.running());
  EXPECT_EQ(task.leases.at(0).worker, "w1");
  EXPECT_EQ(task.attempt, 1);
  EXPECT_EQ(Task(rendering).state, store::TaskState::kRunning);
  std::vector<protocol::Envelope> sent = Sent("w1");
  ASSERT_GE(sent.size(), 1u);
  EXPECT_EQ(sent[0].type, protocol::MessageType::kCancel);  // the stale one, before the welcome
  EXPECT_EQ(sent[0].As<protocol::Cancel>()->task_id, queued);
  EXPECT_FALSE(parts_->table.tasks().at(queued).running());
}

TEST_F(FleetTest, UnknownSenderIsAskedToRegisterAgain) {
  Build();
  EXPECT_EQ(parts_->fleet.Sender(*pass_, "stranger", protocol::MessageType::kHeartbeat), nullptr);
  EXPECT_EQ(CountSent("stranger", protocol::MessageType::kUnknownWorker), 1);
  ClearOutbox();
  EXPECT_EQ(parts_->fleet.Sender(*pass_, "stranger", protocol::MessageType::kGoodbye), nullptr);
  EXPECT_EQ(CountSent("stranger", protocol::MessageType::kUnknownWorker), 0);
}

}  // namespace
}  // namespace tessera::broker
