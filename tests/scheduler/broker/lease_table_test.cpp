// The lease table on its own, with a clock moved by hand: fencing by attempt, task and progress
// timeouts, leases a heartbeat no longer lists, straggler backups, re-attach deadlines,
// frame-on-frame gates and split frames' parts.

#include "scheduler/broker/lease_table.h"

#include <gtest/gtest.h>

#include <chrono>

namespace tessera::broker {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

class LeaseTableTest : public ::testing::Test {
 protected:
  // A task of job `job_id` (loaded with it), not running.
  LiveTask& AddTask(int64_t task_id, int64_t job_id = 1, int frame = 1) {
    LiveTask task;
    task.task_id = task_id;
    task.job_id = job_id;
    task.index = static_cast<int>(task_id);
    task.frame_start = task.frame_end = frame;
    ++table_.jobs()[job_id].unfinished;
    return table_.tasks()[task_id] = std::move(task);
  }

  const Clock::time_point t0_{};
  LeaseTable table_;
};

TEST_F(LeaseTableTest, OnlyTheCurrentAttemptOnItsHolderIsFound) {
  LiveTask& task = AddTask(10);
  task.attempt = 2;
  LeaseTable::AddLease(task, "w1", 2, {}, t0_);
  EXPECT_EQ(table_.FindLease("w1", 10, 2), &task);
  EXPECT_EQ(table_.FindLease("w1", 10, 1), nullptr);  // an older attempt's late message
  EXPECT_EQ(table_.FindLease("w2", 10, 2), nullptr);  // not the holder
  EXPECT_EQ(table_.FindLease("w1", 99, 2), nullptr);  // no such task
  // A backup copy is its own lease, fenced by its own attempt.
  task.attempt = 3;
  LeaseTable::AddLease(task, "w2", 3, {}, t0_);
  EXPECT_EQ(table_.FindLease("w2", 10, 3), &task);
  EXPECT_EQ(table_.FindLease("w2", 10, 2), nullptr);
}

TEST_F(LeaseTableTest, TaskTimeoutAndProgressTimeoutExpireAtTheirDeadline) {
  table_.jobs()[1].task_timeout_s = 60;
  table_.jobs()[2].progress_timeout_s = 10;
  LeaseTable::AddLease(AddTask(10, 1), "w1", 1, {}, t0_);
  LiveTask& quiet = AddTask(20, 2);
  LeaseTable::AddLease(quiet, "w2", 1, {}, t0_);
  AddTask(30, 1);  // queued, not running: nothing expires

  EXPECT_TRUE(table_.Expired(t0_ + 10s).empty());
  // Progress moves the progress deadline, not the task deadline.
  quiet.LeaseOn("w2")->last_progress = t0_ + 8s;
  EXPECT_TRUE(table_.Expired(t0_ + 18s).empty());
  auto expired = table_.Expired(t0_ + 18001ms);
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].task_id, 20);
  EXPECT_EQ(expired[0].identity, "w2");
  EXPECT_EQ(expired[0].why, "no progress for 10 s");

  // Progress does not move the task deadline: a copy that still progresses times out.
  quiet.LeaseOn("w2")->last_progress = t0_ + 60s;
  table_.tasks().at(10).LeaseOn("w1")->last_progress = t0_ + 59s;
  EXPECT_TRUE(table_.Expired(t0_ + 60s).empty());
  expired = table_.Expired(t0_ + 60001ms);
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].task_id, 10);
  EXPECT_EQ(expired[0].why, "timed out after 60 s");
}

TEST_F(LeaseTableTest, LeaseTheHeartbeatDoesNotListIsLostAfterTheGrace) {
  LeaseTable::AddLease(AddTask(10), "w1", 1, {}, t0_);
  LeaseTable::AddLease(AddTask(11), "w1", 4, {}, t0_);
  LeaseTable::AddLease(AddTask(12), "w1", 1, {}, t0_);
  protocol::Heartbeat beat;
  beat.running = {{10, 1}, {11, 3}};  // 11 listed with another attempt: not this lease
  beat.delivering = {{12, 1}};        // finished, results on their way: still held
  const std::set<int64_t> leased{10, 11, 12};
  EXPECT_TRUE(table_.NotHeld("w1", leased, beat, t0_ + 2s, 2s).empty());  // within the grace
  EXPECT_EQ(table_.NotHeld("w1", leased, beat, t0_ + 2001ms, 2s), std::vector<int64_t>{11});
}

TEST_F(LeaseTableTest, StragglersGetBackupsNearTheEndOfTheirJobSlowestFirst) {
  JobInfo& job = table_.jobs()[1];
  job.tasks_done = 2;
  job.done_seconds = 200;  // 100 s a task
  LeaseTable::AddLease(AddTask(10), "w1", 1, {}, t0_);
  LeaseTable::AddLease(AddTask(11), "w2", 1, {}, t0_ + 20s);
  LeaseTable::AddLease(AddTask(12), "w3", 1, {}, t0_ + 100s);

  EXPECT_TRUE(table_.Stragglers(t0_ + 150s, 1.5, 60).empty());  // 150 s is not > 1.5 x 100
  auto stragglers = table_.Stragglers(t0_ + 200s, 1.5, 60);
  ASSERT_EQ(stragglers.size(), 2u);
  EXPECT_EQ(stragglers[0].task_id, 10);
  EXPECT_DOUBLE_EQ(stragglers[0].seconds, 200);
  EXPECT_EQ(stragglers[1].task_id, 11);
  // The minimum holds even for a job whose tasks are quick; 0 turns backups off.
  EXPECT_EQ(table_.Stragglers(t0_ + 200s, 1.5, 190).size(), 1u);
  EXPECT_TRUE(table_.Stragglers(t0_ + 200s, 0, 60).empty());

  // A task of the job still queued: not near its end yet.
  LiveTask& queued = AddTask(13);
  table_.queue().insert(LeaseTable::KeyOf(queued, job));
  EXPECT_TRUE(table_.HasQueued(1, job.priority));
  EXPECT_TRUE(table_.Stragglers(t0_ + 200s, 1.5, 60).empty());
  table_.DropQueued(1);
  EXPECT_FALSE(table_.HasQueued(1, job.priority));

  // A task that already has its backup gets no other.
  LeaseTable::AddLease(table_.tasks().at(10), "w4", 2, {}, t0_ + 200s);
  stragglers = table_.Stragglers(t0_ + 200s, 1.5, 60);
  ASSERT_EQ(stragglers.size(), 1u);
  EXPECT_EQ(stragglers[0].task_id, 11);
}

TEST_F(LeaseTableTest, NoBackupBeforeTheJobHasADoneTask) {
  LeaseTable::AddLease(AddTask(10), "w1", 1, {}, t0_);
  EXPECT_TRUE(table_.Stragglers(t0_ + 1h, 1.5, 60).empty());
}

TEST_F(LeaseTableTest, ReattachDeadlinesPassOnce) {
  table_.AwaitReattach(10, t0_ + 5s);
  table_.AwaitReattach(11, t0_ + 9s);
  table_.AwaitReattach(12, t0_ + 5s);
  table_.Reattached(12);  // its worker came back in time
  EXPECT_TRUE(table_.ReattachesDue(t0_ + 4999ms).empty());
  EXPECT_EQ(table_.ReattachesDue(t0_ + 5s), std::vector<int64_t>{10});
  EXPECT_TRUE(table_.ReattachesDue(t0_ + 6s).empty());
  EXPECT_EQ(table_.ReattachesDue(t0_ + 1h), std::vector<int64_t>{11});
}

TEST_F(LeaseTableTest, FramesDoneReleaseTheTasksWaitingOnThem) {
  AddTask(20, /*job_id=*/2, /*frame=*/3);
  AddTask(21, 2, 4);
  FrameGate& gate = table_.AddGate(1);
  gate.undone = {{3, 3}, {4, 4}};
  gate.waiters.emplace(3, 20);
  gate.waiters.emplace(4, 21);
  gate.waiters.emplace(4, 99);  // a task that finished meanwhile
  EXPECT_EQ(table_.FramesDone(1, 3, 3), std::vector<int64_t>{20});
  EXPECT_EQ(table_.FindGate(1)->undone.count(3), 0u);
  EXPECT_EQ(table_.FramesDone(1, 4, 4), std::vector<int64_t>{21});
  EXPECT_TRUE(table_.FindGate(1)->waiters.empty());
  EXPECT_TRUE(table_.FramesDone(7, 1, 1).empty());  // no gate: nobody waits

  // Job 2 depends on job 1 frame by frame: its gate stays while job 2 is loaded.
  table_.jobs()[2].frame_deps = {1};
  table_.DropUnusedGates();
  EXPECT_NE(table_.FindGate(1), nullptr);
  table_.jobs()[2].frame_deps.clear();
  table_.DropUnusedGates();
  EXPECT_EQ(table_.FindGate(1), nullptr);
}

TEST_F(LeaseTableTest, LastPartOfASplitFrameAndTheJobLeavingWithItsLastTask) {
  LiveTask& a = AddTask(10, 1, 5);
  LiveTask& b = AddTask(11, 1, 5);
  table_.AddPart(1, 5);
  table_.AddPart(1, 5);
  EXPECT_FALSE(table_.IsLastPart(a));
  table_.PartDone(1, 5);
  EXPECT_TRUE(table_.IsLastPart(b));
  EXPECT_TRUE(table_.PartsPending(1, 5));
  table_.FrameEnded(1, 5);
  EXPECT_FALSE(table_.PartsPending(1, 5));

  EXPECT_FALSE(table_.Remove(10));
  EXPECT_TRUE(table_.Remove(11));  // the job's last unfinished task: the job goes too
  EXPECT_EQ(table_.jobs().count(1), 0u);
  EXPECT_FALSE(table_.Remove(11));
}

}  // namespace
}  // namespace tessera::broker
