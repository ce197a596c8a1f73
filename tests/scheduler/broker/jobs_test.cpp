// Jobs on their own, with a clock moved by hand: after a restart, a task that was running waits
// for its worker to re-attach it until the liveness deadline passes, then is queued; pausing a
// job takes its tasks out of the queue and resuming puts them back; a new priority reorders the
// queue; requeueing a finished job's failed tasks loads them again.

#include "scheduler/broker/jobs.h"

#include "tests/scheduler/broker/parts_fixture.h"

namespace tessera::broker {
namespace {

using namespace std::chrono_literals;

class JobsTest : public BrokerPartsTest {};

TEST_F(JobsTest, InterruptedTaskWaitsForItsWorkerUntilTheLivenessDeadline) {
  options_.heartbeat_ms = 1000;
  options_.liveness = 5;
  Build();
  Register("w1");
  const auto [job, task_id] = DispatchOneNoopTask();

  Build();  // a restart: memory from the store
  ASSERT_TRUE(parts_->jobs.Load(*pass_, std::nullopt, /*requeue_running=*/true).ok());
  ASSERT_EQ(parts_->table.tasks().count(task_id), 1u);
  EXPECT_TRUE(parts_->table.queue().empty());
  Advance(4999ms);
  parts_->queue.EnqueueDue(*pass_);
  EXPECT_TRUE(parts_->table.queue().empty());
  Advance(1ms);  // its worker did not come back in time
  parts_->queue.EnqueueDue(*pass_);
  EXPECT_EQ(parts_->table.queue().size(), 1u);
}

TEST_F(JobsTest, PausedJobLeavesTheQueueAndResumingPutsItBack) {
  Build();
  const int64_t job = SubmitNoop(3);
  EXPECT_EQ(parts_->table.queue().size(), 3u);
  ASSERT_TRUE(parts_->jobs.SetPaused(*pass_, job, true).ok());
  EXPECT_TRUE(parts_->table.queue().empty());
  EXPECT_TRUE(Job(job).paused);
  Register("w1");
  parts_->dispatch.Run(*pass_);
  EXPECT_TRUE(Assignments("w1").empty());
  ASSERT_TRUE(parts_->jobs.SetPaused(*pass_, job, false).ok());
  EXPECT_EQ(parts_->table.queue().size(), 3u);
  EXPECT_FALSE(Job(job).paused);
}

TEST_F(JobsTest, NewPriorityReordersTheQueue) {
  Build();
  const int64_t first = SubmitNoop(1);
  const int64_t second = SubmitNoop(1);
  EXPECT_EQ(std::get<1>(*parts_->table.queue().begin()), first);
  ASSERT_TRUE(parts_->jobs.SetPriority(*pass_, second, 80).ok());
  EXPECT_EQ(std::get<1>(*parts_->table.queue().begin()), second);
  EXPECT_EQ(Job(second).priority, 80);
  EXPECT_EQ(parts_->table.queue().size(), 2u);
}

TEST_F(JobsTest, RequeuedFailedTasksAreLoadedAgain) {
  Build();
  Register("w1");
  const int64_t job = SubmitNoop(1, /*task_timeout_s=*/0, /*retries=*/0);
  const int64_t task_id = TaskIds(job).at(0);
  parts_->dispatch.Run(*pass_);
  parts_->leases.End(*pass_, parts_->table.tasks().at(task_id), "w1",
                     {store::AttemptOutcome::kFailed, "render", "crashed", /*charged=*/true},
                     /*cancel=*/false);
  parts_->steps.OnJobsFinished(*pass_);
  ASSERT_EQ(Job(job).state, store::JobState::kFailed);
  EXPECT_TRUE(parts_->table.tasks().empty());

  StatusOr<int> moved = parts_->jobs.RequeueFinished(*pass_, job, std::nullopt);
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  EXPECT_EQ(*moved, 1);
  EXPECT_EQ(parts_->table.tasks().count(task_id), 1u);
  EXPECT_EQ(parts_->table.queue().size(), 1u);
}

}  // namespace
}  // namespace tessera::broker
