// Leases on their own, with a clock moved by hand: a copy that ends without finishing its task
// requeues it until its retries run out, then it fails for good and leaves memory; a lease's
// time and its share of the worker's price are charged when it ends; a backup copy ending leaves
// the other copy running.

#include "scheduler/broker/leases.h"

#include "tests/scheduler/broker/parts_fixture.h"

namespace tessera::broker {
namespace {

using namespace std::chrono_literals;

class LeasesTest : public BrokerPartsTest {};

store::AttemptEnd Failed(const std::string& why) {
  return {store::AttemptOutcome::kFailed, "render", why, /*charged=*/true};
}

TEST_F(LeasesTest, FailedLastCopyRequeuesTheTaskUntilItsRetriesRunOut) {
  Build();
  Register("w1");
  const int64_t job = SubmitNoop(1, /*task_timeout_s=*/0, /*retries=*/1);
  const int64_t task_id = TaskIds(job).at(0);

  parts_->dispatch.Run(*pass_);
  LiveTask& task = parts_->table.tasks().at(task_id);
  ASSERT_TRUE(task.running());
  parts_->leases.End(*pass_, task, "w1", Failed("crashed"), /*cancel=*/false);
  EXPECT_FALSE(task.running());
  EXPECT_EQ(task.failures, 1);
  EXPECT_EQ(Task(task_id).state, store::TaskState::kQueued);
  EXPECT_EQ(parts_->table.queue().size(), 1u);  // back in the queue
  EXPECT_EQ(parts_->workers.Find("w1")->used_slots(), 0);

  parts_->dispatch.Run(*pass_);
  ASSERT_TRUE(parts_->table.tasks().at(task_id).running());
  parts_->leases.End(*pass_, parts_->table.tasks().at(task_id), "w1", Failed("crashed again"),
                     /*cancel=*/false);
  // Past its retries: failed for good, gone from memory, and its job reported finished.
  EXPECT_EQ(Task(task_id).state, store::TaskState::kFailed);
  EXPECT_EQ(parts_->table.tasks().count(task_id), 0u);
  EXPECT_EQ(pass_->finished_jobs, std::vector<int64_t>{job});
}

TEST_F(LeasesTest, EndedLeaseIsChargedItsTimeAndItsShareOfTheWorkersPrice) {
  options_.price_of = [](const std::string&, const protocol::CloudInfo&) {
    return WorkerPrice{"spot", 4.0};  // per hour
  };
  Build();
  Register("w1", /*slots=*/2);
  const auto [job, task_id] = DispatchOneNoopTask();

  Advance(30min);
  parts_->leases.Release(*pass_, parts_->table.tasks().at(task_id), "w1");
  // Half an hour of one of its two slots: 4.0 / 2 / 2.
  EXPECT_DOUBLE_EQ(Task(task_id).cost, 1.0);
  EXPECT_EQ(parts_->workers.Find("w1")->used_slots(), 0);
  EXPECT_EQ(parts_->table.jobs().at(job).running, 0);
}

TEST_F(LeasesTest, CancelledCopyKeepsItsSlotUntilTheWorkerStopsIt) {
  Build();
  WorkerConn& worker = Register("w1");
  const auto [job, task_id] = DispatchOneNoopTask();
  ClearOutbox();

  parts_->leases.CancelAll(*pass_, parts_->table.tasks().at(task_id), "the job was canceled");
  EXPECT_EQ(CountSent("w1", protocol::MessageType::kCancel), 1);
  EXPECT_EQ(worker.free_slots(), 0);  // still stopping
  WorkerRegistry::FreeStopped(worker, {});
  EXPECT_EQ(worker.free_slots(), 1);
}

}  // namespace
}  // namespace tessera::broker
