// The times a task's life writes are the store's clock: the attempt's start and end, the task's
// and the job's started and finished times, the worker's registration and last state change, and
// the events logged beside them -- whether written at once or recorded in a WriteGroup and
// applied at its commit. The broker drives them through the TaskRecords interface.

#include <gtest/gtest.h>

#include <chrono>

#include "tests/scheduler/store/store_fixture.h"

namespace tessera::store {
namespace {

using namespace std::chrono_literals;

class TaskRecordsTest : public StoreFixture {
 protected:
  TaskRecordsTest() : StoreFixture("task-records") {}
};
TSR_STORE_TEST_ON_BOTH_ENGINES(TaskRecordsTest);

TEST_P(TaskRecordsTest, AttemptAndTaskTimesAreTheClocks) {
  const int64_t submitted = clock_.WallMs();
  const JobRecord job = Submit(1);
  EXPECT_EQ(job.submitted_at_ms, submitted);
  clock_.Advance(5s);
  const int64_t registered = clock_.WallMs();
  const int64_t worker = Worker("w1");
  const int64_t task = store_->ListTasks(job.id)->at(0).id;
  TaskRecords& tasks = *store_;

  clock_.Advance(1s);
  const int64_t started = clock_.WallMs();
  ASSERT_TRUE(tasks.StartTask(task, 1, worker, job.id).ok());
  clock_.Advance(90s);
  const int64_t finished = clock_.WallMs();
  ASSERT_TRUE(tasks.FinishTask(task, 1, worker, job.id).ok());

  auto attempts = store_->TaskLogs(task);
  ASSERT_TRUE(attempts.ok()) << attempts.status().ToString();
  ASSERT_EQ(attempts->size(), 1u);
  EXPECT_EQ(attempts->at(0).started_at_ms, started);
  EXPECT_EQ(attempts->at(0).ended_at_ms, finished);
  EXPECT_EQ(attempts->at(0).at_ms, finished);
  const TaskRecord t = *store_->GetTask(task);
  EXPECT_EQ(t.started_at_ms, started);
  EXPECT_EQ(t.finished_at_ms, finished);
  const JobRecord j = *store_->GetJob(job.id);
  EXPECT_EQ(j.started_at_ms, started);
  EXPECT_EQ(j.finished_at_ms, finished);
  const WorkerRecord w = store_->ListWorkers()->at(0);
  EXPECT_EQ(w.registered_at_ms, registered);
}

TEST_P(TaskRecordsTest, WritesAGroupRecordsTakeTheClockOfTheirCommit) {
  const JobRecord job = Submit(2);
  const int64_t worker = Worker("w1");
  auto listed = store_->ListTasks(job.id);
  ASSERT_TRUE(listed.ok() && listed->size() == 2u);
  const int64_t a = listed->at(0).id, b = listed->at(1).id;
  {
    Store::WriteGroup group(*store_);
    ASSERT_TRUE(store_->StartTask(a, 1, worker, job.id).ok());
    ASSERT_TRUE(store_->StartTask(b, 1, worker, job.id).ok());
    ASSERT_TRUE(store_->SetWorkerState(worker, WorkerState::kBusy).ok());
    // Recorded, not yet applied: the clock moves before the commit applies them.
    clock_.Advance(3s);
    ASSERT_TRUE(group.Commit().ok());
  }
  const int64_t applied = clock_.WallMs();
  EXPECT_EQ(store_->GetTask(a)->started_at_ms, applied);
  EXPECT_EQ(store_->TaskLogs(b)->at(0).started_at_ms, applied);
  EXPECT_EQ(store_->ListWorkers()->at(0).last_seen_ms, applied);

  clock_.Advance(1min);
  AttemptEnd lost;
  lost.message = "its worker went silent";
  {
    Store::WriteGroup group(*store_);
    ASSERT_TRUE(store_->EndAttempt(a, 1, job.id, lost).ok());
    ASSERT_TRUE(store_->RequeueTask(a, 1, "lost", false, job.id).ok());
    ASSERT_TRUE(group.Commit().ok());
  }
  EXPECT_EQ(store_->TaskLogs(a)->at(0).ended_at_ms, clock_.WallMs());
  EXPECT_EQ(store_->TaskLogs(a)->at(0).outcome, "lost");
}

TEST_P(TaskRecordsTest, EventsAreStampedWithTheClock) {
  const JobRecord job = Submit(1);
  EventRecords& events = *store_;
  clock_.Advance(42s);
  ASSERT_TRUE(events.AddEvent(job.id, std::nullopt, std::nullopt, "autoscaler", "hold").ok());
  clock_.Advance(1s);
  ASSERT_TRUE(store_->SetJobPaused(job.id, true).ok());
  auto logged = events.EventsAfter(0, {"job_submitted", "autoscaler", "job_paused"}, 10);
  ASSERT_TRUE(logged.ok()) << logged.status().ToString();
  ASSERT_EQ(logged->size(), 3u);
  EXPECT_EQ(logged->at(0).kind, "job_submitted");
  EXPECT_EQ(logged->at(0).at_ms, job.submitted_at_ms);
  EXPECT_EQ(logged->at(1).at_ms, job.submitted_at_ms + 42'000);
  EXPECT_EQ(logged->at(2).kind, "job_paused");
  EXPECT_EQ(logged->at(2).at_ms, job.submitted_at_ms + 43'000);
}

}  // namespace
}  // namespace tessera::store
