// Dispatch on its own, with a clock moved by hand: queued tasks go to workers with free slots,
// the higher priority first; a straggler near its job's end gets a backup copy on an idle worker
// once it has run backup_factor x the job's mean (and backup_min_seconds), not before, and the
// first copy to finish wins; `why` says what a task waits for.

#include "scheduler/broker/dispatch.h"

#include "tests/scheduler/broker/parts_fixture.h"

namespace tessera::broker {
namespace {

using namespace std::chrono_literals;

class DispatchTest : public BrokerPartsTest {
 protected:
  void Done(const std::string& identity, int64_t task_id, int attempt) {
    protocol::TaskDone done;
    done.task_id = task_id;
    done.attempt = attempt;
    parts_->task_ends.OnTaskDone(*pass_, identity, *parts_->workers.Find(identity), done);
  }
};

TEST_F(DispatchTest, FreeSlotsGetQueuedTasksTheHigherPriorityFirst) {
  Build();
  const int64_t low = SubmitNoop(2);
  spec::JobSpec urgent;
  urgent.name = "urgent";
  urgent.renderer = spec::kRendererNoop;
  urgent.frame_start = urgent.frame_end = 1;
  urgent.priority = 90;
  const int64_t high = StoreJob(urgent);
  Register("w1", /*slots=*/2);

  parts_->dispatch.Run(*pass_);
  std::vector<protocol::Assign> assigns = Assignments("w1");
  ASSERT_EQ(assigns.size(), 2u);
  EXPECT_EQ(assigns[0].job_id, high);
  EXPECT_EQ(assigns[1].job_id, low);
  EXPECT_EQ(assigns[1].frame_start, 1);
  EXPECT_EQ(parts_->table.queue().size(), 1u);
  EXPECT_EQ(counters_.Read().tasks_dispatched, 2u);
  EXPECT_EQ(Task(assigns[0].task_id).state, store::TaskState::kRunning);
}

TEST_F(DispatchTest, StragglerGetsABackupCopyOnAnIdleWorkerAndTheFirstToFinishWins) {
  options_.backup_factor = 1.5;
  options_.backup_min_seconds = 60;
  Build();
  Register("a");
  Register("b");
  const int64_t job = SubmitNoop(2);
  const int64_t fast = TaskIds(job).at(0), slow = TaskIds(job).at(1);
  parts_->dispatch.Run(*pass_);
  ASSERT_TRUE(parts_->table.tasks().at(slow).running());
  const std::string slow_on = parts_->table.tasks().at(slow).leases.at(0).worker;
  const std::string fast_on = slow_on == "a" ? "b" : "a";

  Advance(10s);
  Done(fast_on, fast, 1);  // the job's tasks take 10 s on average
  Advance(40s);            // the slow one has run 50 s: more than 15 s, but under 60 s
  parts_->dispatch.StartBackups(*pass_);
  EXPECT_EQ(parts_->table.tasks().at(slow).leases.size(), 1u);

  ClearOutbox();
  Advance(11s);  // 61 s
  parts_->dispatch.StartBackups(*pass_);
  const LiveTask& task = parts_->table.tasks().at(slow);
  ASSERT_EQ(task.leases.size(), 2u);
  std::vector<protocol::Assign> backup = Assignments(fast_on);
  ASSERT_EQ(backup.size(), 1u);
  EXPECT_EQ(backup[0].task_id, slow);
  EXPECT_EQ(backup[0].attempt, 2);

  // The backup finishes first: the original copy is told to stop.
  ClearOutbox();
  Done(fast_on, slow, 2);
  EXPECT_EQ(Task(slow).state, store::TaskState::kDone);
  EXPECT_EQ(CountSent(slow_on, protocol::MessageType::kCancel), 1);
}

TEST_F(DispatchTest, WhySaysWhatAQueuedTaskWaitsFor) {
  Build();
  const int64_t job = SubmitNoop(1);
  const int64_t task_id = TaskIds(job).at(0);
  StatusOr<nlohmann::json> why = parts_->dispatch.Why(*pass_, task_id);
  ASSERT_TRUE(why.ok());
  EXPECT_EQ((*why)["state"], "queued");
  EXPECT_EQ((*why)["reason"], "no workers are connected");

  ASSERT_TRUE(parts_->jobs.SetPaused(*pass_, job, true).ok());
  why = parts_->dispatch.Why(*pass_, task_id);
  EXPECT_EQ((*why)["reason"], "job " + std::to_string(job) + " is paused (tessera resume " +
                                  std::to_string(job) + ")");

  ASSERT_TRUE(parts_->jobs.SetPaused(*pass_, job, false).ok());
  Register("w1");
  parts_->dispatch.Run(*pass_);
  why = parts_->dispatch.Why(*pass_, task_id);
  EXPECT_EQ((*why)["state"], "running");
  EXPECT_EQ((*why)["reason"], "running on worker w1, attempt 1");
}

TEST_F(DispatchTest, CapacityCountsWaitingWorkAndIdleTime) {
  Build();
  const int64_t job = SubmitNoop(3);
  Register("w1");
  parts_->dispatch.Run(*pass_);
  Register("w2");
  Advance(30s);
  CapacityView view = parts_->dispatch.Capacity(*pass_);
  ASSERT_EQ(view.jobs.size(), 1u);
  EXPECT_EQ(view.jobs[0].job_id, job);
  EXPECT_EQ(view.jobs[0].waiting, 2);
  EXPECT_EQ(view.jobs[0].running, 1);
  ASSERT_EQ(view.workers.size(), 2u);
  for (const CapacityView::WorkerActivity& w : view.workers) {
    EXPECT_EQ(w.busy, w.name == "w1") << w.name;
    if (!w.busy) {
      EXPECT_DOUBLE_EQ(w.idle_seconds, 30.0);
    }
  }
}

}  // namespace
}  // namespace tessera::broker
