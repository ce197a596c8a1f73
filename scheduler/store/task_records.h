#pragma once
// Tasks as the broker moves them: the unfinished tasks its queue is rebuilt from at start-up, and
// every change of a lease, fenced by (task id, attempt) -- start, re-attach, finish, requeue,
// fail, a backup copy beside the first, progress. Each change keeps its job's task counters and
// state, and the attempt history (attempt_records.h), in step in the same transaction. Inside a
// Store::WriteGroup the frequent ones are only recorded, and applied together at its commit.
//
// One of the store's record tables (store.h): an engine-neutral interface, implemented for SQLite
// by SqlTaskRecords (sql/sql_task_records.h), which repeats the default arguments.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "scheduler/store/records.h"
#include "shared/base/status.h"

namespace tessera::store {

class TaskRecords {
 public:
  virtual ~TaskRecords() = default;

  // Tasks not yet finished (of `job_id` and, for a job with steps, its steps; of every job
  // without), for the broker's queue at start-up; tasks that were running when the
  // scheduler stopped come back queued (their lease is gone; the next attempt fences it off).
  // `requeue_running` false (all jobs only): nothing is written -- the tasks the store has
  // running come back marked interrupted but stay running in the store (read-only recovery
  // while the data folder is full).
  virtual StatusOr<std::vector<TaskRecord>> LoadUnfinishedTasks(std::optional<int64_t> job_id,
                                                                bool requeue_running = true) = 0;

  // The broker passes each task's `job_id` (it knows it) to spare the store a lookup; 0 means
  // unknown, and the store reads it.
  // Records the attempt `running` on `worker_id` (with the GPUs it is pinned to) in the same
  // transaction; an older attempt of the task still recorded running is closed as lost.
  virtual Status StartTask(int64_t task_id, int attempt, int64_t worker_id, int64_t job_id = 0,
                           const std::vector<int>& gpus = {}) = 0;
  // A worker that re-registers still rendering `attempt` of a queued task whose current attempt
  // that still is (its lease was voided by a restart or a lost connection, not replaced) takes
  // the lease back: the task runs again under the same fencing token.
  virtual Status ReattachTask(int64_t task_id, int attempt, int64_t worker_id,
                              int64_t job_id = 0) = 0;
  // `worker_id` is the worker whose copy delivered the task.
  virtual Status FinishTask(int64_t task_id, int attempt, int64_t worker_id,
                            int64_t job_id = 0) = 0;
  // Back to the queue. `count_failure` charges the retry budget (render failure) or not (lost
  // worker, cancelled lease).
  virtual Status RequeueTask(int64_t task_id, int attempt, const std::string& message,
                             bool count_failure, int64_t job_id = 0) = 0;
  virtual Status FailTask(int64_t task_id, int attempt, const std::string& message,
                          int64_t job_id = 0) = 0;
  // A running attempt's progress (0..1) and status line (shown with the task).
  virtual Status SetTaskProgress(int64_t task_id, int attempt, double progress,
                                 const std::string& status_line = "") = 0;
  // Straggler backups: a second copy of a running task starts as the next attempt beside the
  // first; either may finish it (FinishTask names the winner). EndCopy drops one copy (charging
  // the task's retry budget when `count_failure`) that failed or lost while the other runs on.
  virtual Status StartBackup(int64_t task_id, int attempt,
                             std::optional<int64_t> worker_id = std::nullopt,
                             const std::vector<int>& gpus = {}) = 0;
  virtual Status EndCopy(int64_t task_id, int attempt, bool count_failure) = 0;

  // Frame ranges of the job's tasks that are not done, in frame order (frame-on-frame
  // dependencies wait on these).
  virtual StatusOr<std::vector<std::pair<int, int>>> UndoneFrameRanges(int64_t job_id) = 0;
};

}  // namespace tessera::store
