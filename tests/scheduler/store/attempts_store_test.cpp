// The attempt history in the store: one row per attempt from its start, exactly one outcome
// each, done only with the task's own done, the retry budget's count beside a total a retry
// does not reset, stale attempts closed after a restart, and rows from schema 25 kept.

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>
#include <string>

#include "scheduler/store/store.h"
#include "tests/scheduler/store/store_fixture.h"

namespace tessera::store {
namespace {

class AttemptsStoreTest : public StoreFixture {
 protected:
  AttemptsStoreTest() : StoreFixture("attempts") {}

  std::vector<TaskLogRecord> Attempts(int64_t task_id) {
    auto logs = store_->TaskLogs(task_id);
    EXPECT_TRUE(logs.ok()) << logs.status().ToString();
    return logs.ok() ? *logs : std::vector<TaskLogRecord>{};
  }

  static AttemptEnd Failed(const std::string& cls, const std::string& message, bool charged) {
    return {AttemptOutcome::kFailed, cls, message, charged};
  }

  int64_t Count(const std::string& outcome, const std::string& cls = "") {
    auto counts = store_->AttemptCounts();
    auto it = counts.find({outcome, cls});
    return it == counts.end() ? 0 : it->second;
  }
};
TSR_STORE_TEST_ON_BOTH_ENGINES(AttemptsStoreTest);

TEST_P(AttemptsStoreTest, EachAttemptEndsWithExactlyOneOutcome) {
  JobRecord job = Submit(3);
  const int64_t w = Worker("w1");
  auto tasks = *store_->ListTasks(job.id);
  const int64_t t0 = tasks[0].id, t1 = tasks[1].id, t2 = tasks[2].id;

  // Running from the lease's start, with its worker and GPUs; done only with the task.
  ASSERT_TRUE(store_->StartTask(t0, 1, w, job.id, {0, 1}).ok());
  std::vector<TaskLogRecord> a = Attempts(t0);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].outcome, "running");
  EXPECT_EQ(a[0].worker_name, "w1");
  EXPECT_EQ(a[0].gpus, (std::vector<int>{0, 1}));
  EXPECT_TRUE(a[0].started_at_ms.has_value());
  EXPECT_FALSE(a[0].ended_at_ms.has_value());
  // The worker's log arrives with its TASK_DONE: the attempt is not done until the task is.
  TaskLogRecord log;
  log.task_id = t0;
  log.attempt = 1;
  log.job_id = job.id;
  log.worker_id = w;
  log.log = "frame 1: 8 spp\n";
  ASSERT_TRUE(store_->SaveTaskLog(log).ok());
  EXPECT_EQ(Attempts(t0)[0].outcome, "running");
  ASSERT_TRUE(store_->FinishTask(t0, 1, w, job.id).ok());
  a = Attempts(t0);
  EXPECT_EQ(a[0].outcome, "done");
  EXPECT_EQ(a[0].log, "frame 1: 8 spp\n");
  EXPECT_TRUE(a[0].ended_at_ms.has_value());

  // A frame write that fails after the worker reported done: failed, with its class and
  // message; a later, vaguer outcome for the same attempt does not replace it.
  ASSERT_TRUE(store_->StartTask(t1, 1, w, job.id).ok());
  log.task_id = t1;
  log.log = "ok\n";
  ASSERT_TRUE(store_->SaveTaskLog(log).ok());
  ASSERT_TRUE(
      store_->EndAttempt(t1, 1, job.id, Failed(kFailureOutputWrite, "disk says no", true)).ok());
  ASSERT_TRUE(
      store_->EndAttempt(t1, 1, job.id, {AttemptOutcome::kCanceled, "", "told to stop", false})
          .ok());
  ASSERT_TRUE(store_->RequeueTask(t1, 1, "output write failed", true, job.id).ok());
  ASSERT_TRUE(store_->StartTask(t1, 2, w, job.id).ok());
  ASSERT_TRUE(store_->FinishTask(t1, 2, w, job.id).ok());
  a = Attempts(t1);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].outcome, "failed");
  EXPECT_EQ(a[0].failure_class, kFailureOutputWrite);
  EXPECT_EQ(a[0].message, "disk says no");
  EXPECT_EQ(a[0].charged, true);
  EXPECT_EQ(a[0].log, "ok\n");
  EXPECT_EQ(a[1].outcome, "done");

  // Handed back, then the job is canceled while the next attempt runs.
  ASSERT_TRUE(store_->StartTask(t2, 1, w, job.id).ok());
  ASSERT_TRUE(
      store_->EndAttempt(t2, 1, job.id, {AttemptOutcome::kHandedBack, "", "spot notice", false})
          .ok());
  ASSERT_TRUE(store_->RequeueTask(t2, 1, "handed back", false, job.id).ok());
  ASSERT_TRUE(store_->StartTask(t2, 2, w, job.id).ok());
  ASSERT_TRUE(store_->CancelJob(job.id).ok());
  a = Attempts(t2);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].outcome, "handed_back");
  EXPECT_EQ(a[0].charged, false);
  EXPECT_EQ(a[1].outcome, "canceled");

  // The counters say what the rows say.
  EXPECT_EQ(Count("done"), 2);
  EXPECT_EQ(Count("failed", kFailureOutputWrite), 1);
  EXPECT_EQ(Count("handed_back"), 1);
  EXPECT_EQ(Count("canceled"), 1);
  EXPECT_EQ(Count("lost"), 0);
  Reopen();  // and again from the file
  EXPECT_EQ(Count("done"), 2);
  EXPECT_EQ(Count("failed", kFailureOutputWrite), 1);
  EXPECT_EQ(Count("canceled"), 1);
}

TEST_P(AttemptsStoreTest, OutcomesCommitWithTheWriteGroupOrNotAtAll) {
  JobRecord job = Submit(2);
  const int64_t w = Worker("w1");
  auto tasks = *store_->ListTasks(job.id);
  {
    Store::WriteGroup group(*store_);
    ASSERT_TRUE(store_->StartTask(tasks[0].id, 1, w, job.id).ok());
    ASSERT_TRUE(store_->EndAttempt(tasks[0].id, 1, job.id, Failed("render", "boom", true)).ok());
    ASSERT_TRUE(store_->RequeueTask(tasks[0].id, 1, "boom", true, job.id).ok());
    // Not committed: dropped with the group.
  }
  EXPECT_TRUE(Attempts(tasks[0].id).empty());
  EXPECT_EQ(Count("failed", "render"), 0);
  {
    Store::WriteGroup group(*store_);
    ASSERT_TRUE(store_->StartTask(tasks[0].id, 1, w, job.id).ok());
    ASSERT_TRUE(store_->EndAttempt(tasks[0].id, 1, job.id, Failed("render", "boom", true)).ok());
    ASSERT_TRUE(store_->RequeueTask(tasks[0].id, 1, "boom", true, job.id).ok());
    ASSERT_TRUE(group.Commit().ok());
  }
  ASSERT_EQ(Attempts(tasks[0].id).size(), 1u);
  EXPECT_EQ(Attempts(tasks[0].id)[0].outcome, "failed");
  EXPECT_EQ(Count("failed", "render"), 1);
}

TEST_P(AttemptsStoreTest, FailuresTotalSurvivesARetryAndEveryFailedAttemptStaysFailed) {
  JobRecord job = Submit(1, /*chunk=*/1, /*retries=*/1);
  const int64_t w = Worker("w1");
  const int64_t t = (*store_->ListTasks(job.id))[0].id;
  ASSERT_TRUE(store_->StartTask(t, 1, w, job.id).ok());
  ASSERT_TRUE(store_->EndAttempt(t, 1, job.id, Failed("render", "first", true)).ok());
  ASSERT_TRUE(store_->RequeueTask(t, 1, "first", true, job.id).ok());
  ASSERT_TRUE(store_->StartTask(t, 2, w, job.id).ok());
  ASSERT_TRUE(store_->EndAttempt(t, 2, job.id, Failed("render", "second", true)).ok());
  ASSERT_TRUE(store_->FailTask(t, 2, "second (failed 2 times)", job.id).ok());
  EXPECT_EQ(store_->GetTask(t)->failures, 2);
  EXPECT_EQ(store_->GetTask(t)->failures_total, 2);

  ASSERT_EQ(*store_->RetryFailedTasks(job.id), 1);
  EXPECT_EQ(store_->GetTask(t)->failures, 0) << "a retry gives a fresh budget";
  EXPECT_EQ(store_->GetTask(t)->failures_total, 2) << "but the task's history keeps its count";
  ASSERT_TRUE(store_->StartTask(t, 3, w, job.id).ok());
  ASSERT_TRUE(store_->EndAttempt(t, 3, job.id, Failed("render", "third", true)).ok());
  ASSERT_TRUE(store_->RequeueTask(t, 3, "third", true, job.id).ok());
  EXPECT_EQ(store_->GetTask(t)->failures, 1);
  EXPECT_EQ(store_->GetTask(t)->failures_total, 3);
  ASSERT_TRUE(store_->StartTask(t, 4, w, job.id).ok());
  ASSERT_TRUE(store_->FinishTask(t, 4, w, job.id).ok());

  std::vector<TaskLogRecord> a = Attempts(t);
  ASSERT_EQ(a.size(), 4u);
  EXPECT_EQ(a[0].message, "first");
  EXPECT_EQ(a[1].message, "second");
  EXPECT_EQ(a[2].message, "third");
  for (int i = 0; i < 3; ++i) EXPECT_EQ(a[i].outcome, "failed") << i;
  EXPECT_EQ(a[3].outcome, "done");
}

TEST_P(AttemptsStoreTest, ARestartClosesAttemptsWhoseLeaseCannotComeBack) {
  JobRecord job = Submit(2);
  const int64_t w1 = Worker("w1"), w2 = Worker("w2");
  auto tasks = *store_->ListTasks(job.id);
  const int64_t t = tasks[0].id;
  // A straggler and its backup copy run when the scheduler stops.
  ASSERT_TRUE(store_->StartTask(t, 1, w1, job.id).ok());
  ASSERT_TRUE(store_->StartBackup(t, 2, w2, {0}).ok());
  ASSERT_EQ(Attempts(t).size(), 2u);
  EXPECT_EQ(Attempts(t)[1].worker_name, "w2");
  EXPECT_EQ(Attempts(t)[1].outcome, "running");
  Reopen();
  ASSERT_TRUE(store_->LoadUnfinishedTasks(std::nullopt).ok());
  std::vector<TaskLogRecord> a = Attempts(t);
  EXPECT_EQ(a[0].outcome, "lost") << "only the current attempt can be re-attached";
  EXPECT_EQ(a[1].outcome, "running") << "its worker may still take it back";
  // Its worker did not: the next attempt closes it.
  ASSERT_TRUE(store_->StartTask(t, 3, w1, job.id).ok());
  a = Attempts(t);
  EXPECT_EQ(a[1].outcome, "lost");
  EXPECT_FALSE(a[1].message.empty());
  EXPECT_EQ(a[2].outcome, "running");
  EXPECT_EQ(Count("lost"), 2);
}

TEST_P(AttemptsStoreTest, AnAttemptItsWorkerTakesBackRunsAgainAndEndsOnce) {
  JobRecord job = Submit(1);
  const int64_t w = Worker("w1");
  const int64_t t = (*store_->ListTasks(job.id))[0].id;
  // The worker went silent: its attempt was lost and the task requeued, uncharged...
  ASSERT_TRUE(store_->StartTask(t, 1, w, job.id).ok());
  ASSERT_TRUE(store_->EndAttempt(t, 1, job.id, {AttemptOutcome::kLost, "", "silent", false}).ok());
  ASSERT_TRUE(store_->RequeueTask(t, 1, "worker lost", false, job.id).ok());
  EXPECT_EQ(Count("lost"), 1);
  // ...then it came back still rendering it, took the lease back and finished it.
  ASSERT_TRUE(store_->ReattachTask(t, 1, w, job.id).ok());
  EXPECT_EQ(Attempts(t)[0].outcome, "running");
  EXPECT_EQ(Count("lost"), 0);
  ASSERT_TRUE(store_->FinishTask(t, 1, w, job.id).ok());
  std::vector<TaskLogRecord> a = Attempts(t);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].outcome, "done");
  EXPECT_EQ(a[0].message, "");
  EXPECT_EQ(Count("done"), 1);
}

TEST_P(AttemptsStoreTest, MigrationFromSchema25KeepsTheOlderRows) {
  TSR_SQLITE_ONLY();
  JobRecord job = Submit(2);
  const int64_t w = Worker("w1");
  auto tasks = *store_->ListTasks(job.id);
  ASSERT_TRUE(store_->StartTask(tasks[0].id, 1, w, job.id).ok());
  ASSERT_TRUE(store_->RequeueTask(tasks[0].id, 1, "boom", true, job.id).ok());
  store_.reset();
  // The file as schema 25 had it: without the later schemas' columns and index, with the rows
  // task_logs held then (outcomes written when the worker's report arrived).
  const std::string ids =
      std::to_string(tasks[0].id) + ", 1, " + std::to_string(job.id) + ", " + std::to_string(w);
  const std::string ids2 =
      std::to_string(tasks[0].id) + ", 2, " + std::to_string(job.id) + ", " + std::to_string(w);
  Sql(std::string(kBackToSchema28) +
      "DELETE FROM task_logs; DROP INDEX task_logs_running;"
      "ALTER TABLE task_logs DROP COLUMN failure_class;"
      "ALTER TABLE task_logs DROP COLUMN message; ALTER TABLE task_logs DROP COLUMN charged;"
      "ALTER TABLE task_logs DROP COLUMN gpus; ALTER TABLE task_logs DROP COLUMN started_at;"
      "ALTER TABLE task_logs DROP COLUMN ended_at; ALTER TABLE tasks DROP COLUMN failures_total;"
      "ALTER TABLE jobs DROP COLUMN checkpoint_interval_s;"
      "ALTER TABLE jobs DROP COLUMN settings; ALTER TABLE jobs DROP COLUMN scene_name;"
      "INSERT INTO task_logs (task_id, attempt, job_id, worker_id, outcome, at, log) VALUES (" +
      ids + ", 'failed', 1000, 'old failure log');" +
      "INSERT INTO task_logs (task_id, attempt, job_id, worker_id, outcome, at, log) VALUES (" +
      ids2 + ", 'handed back', 2000, 'old hand-back log');" + "PRAGMA user_version = 25;");
  Reopen();
  EXPECT_EQ(store_->schema_version(), Store::kSchemaVersion);
  std::vector<TaskLogRecord> a = Attempts(tasks[0].id);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].outcome, "failed");
  EXPECT_EQ(a[0].log, "old failure log");
  EXPECT_EQ(a[0].failure_class, "");
  EXPECT_FALSE(a[0].charged.has_value()) << "not known for rows written before";
  EXPECT_EQ(a[0].ended_at_ms, 1000);
  EXPECT_EQ(a[1].outcome, "handed_back");
  EXPECT_EQ(a[1].worker_name, "w1");
  EXPECT_EQ(store_->GetTask(tasks[0].id)->failures_total, 1) << "from the budget's count";
  EXPECT_EQ(Count("failed", ""), 1);
  EXPECT_EQ(Count("handed_back"), 1);
}

}  // namespace
}  // namespace tessera::store
