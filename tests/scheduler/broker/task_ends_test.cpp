// TaskEnds on their own, with a clock moved by hand: a lease past its job's timeout is stopped
// and charged once the clock passes it (not before); a copy that reports done completes its task
// and gets its result acknowledged; a licence failure waits, uncharged, for its job's wait.

#include "scheduler/broker/task_ends.h"

#include "tests/scheduler/broker/parts_fixture.h"

namespace tessera::broker {
namespace {

using namespace std::chrono_literals;

class TaskEndsTest : public BrokerPartsTest {};

TEST_F(TaskEndsTest, LeasePastItsTimeoutIsStoppedAndChargedAfterTheClockPassesIt) {
  Build();
  Register("w1");
  const int64_t job = SubmitNoop(1, /*task_timeout_s=*/60);
  const int64_t task_id = TaskIds(job).at(0);
  parts_->dispatch.Run(*pass_);
  ClearOutbox();

  Advance(60s);  // at the timeout: not past it
  parts_->task_ends.EndExpired(*pass_);
  EXPECT_TRUE(parts_->table.tasks().at(task_id).running());
  EXPECT_EQ(CountSent("w1", protocol::MessageType::kCancel), 0);

  Advance(1s);
  parts_->task_ends.EndExpired(*pass_);
  const LiveTask& task = parts_->table.tasks().at(task_id);
  EXPECT_FALSE(task.running());
  EXPECT_EQ(task.failures, 1);  // charged
  EXPECT_EQ(CountSent("w1", protocol::MessageType::kCancel), 1);
  EXPECT_EQ(Task(task_id).state, store::TaskState::kQueued);
  auto failures = store_->WorkerFailures(job);
  ASSERT_TRUE(failures.ok());
  EXPECT_EQ(failures->size(), 1u);  // the worker is charged too
}

TEST_F(TaskEndsTest, DoneCopyCompletesItsTaskAndItsResultIsAcknowledged) {
  Build();
  WorkerConn& worker = Register("w1");
  const auto [job, task_id] = DispatchOneNoopTask();
  ClearOutbox();

  Advance(12s);
  protocol::TaskDone done;
  done.task_id = task_id;
  done.attempt = 1;
  parts_->task_ends.OnTaskDone(*pass_, "w1", worker, done);
  EXPECT_EQ(Task(task_id).state, store::TaskState::kDone);
  EXPECT_EQ(parts_->table.tasks().count(task_id), 0u);
  EXPECT_EQ(CountSent("w1", protocol::MessageType::kResultAck), 1);
  EXPECT_EQ(counters_.Read().tasks_completed, 1u);
  EXPECT_DOUBLE_EQ(counters_.Read().render_seconds, 12.0);
  EXPECT_EQ(pass_->finished_jobs, std::vector<int64_t>{job});
  Settle();
  EXPECT_EQ(Job(job).state, store::JobState::kDone);

  // The same report again (its acknowledgement was lost): stale, acknowledged, nothing changes.
  ClearOutbox();
  parts_->task_ends.OnTaskDone(*pass_, "w1", worker, done);
  EXPECT_EQ(CountSent("w1", protocol::MessageType::kResultAck), 1);
  EXPECT_EQ(counters_.Read().tasks_completed, 1u);
}

TEST_F(TaskEndsTest, LicenceFailureWaitsUnchargedForTheJobsWait) {
  Build();
  WorkerConn& worker = Register("w1");
  const auto [job, task_id] = DispatchOneNoopTask();

  protocol::TaskFailed failed;
  failed.task_id = task_id;
  failed.attempt = 1;
  failed.failure_class = protocol::kFailureLicense;
  failed.message = "no licence";
  failed.charge = true;
  parts_->task_ends.OnTaskFailed(*pass_, "w1", worker, failed);
  EXPECT_EQ(parts_->table.tasks().at(task_id).failures, 0);  // nobody's fault
  EXPECT_TRUE(parts_->table.queue().empty());                // waits

  Advance(59s);  // the default wait is 60 s
  parts_->queue.EnqueueDue(*pass_);
  EXPECT_TRUE(parts_->table.queue().empty());
  Advance(1s);
  parts_->queue.EnqueueDue(*pass_);
  EXPECT_EQ(parts_->table.queue().size(), 1u);
}

}  // namespace
}  // namespace tessera::broker
