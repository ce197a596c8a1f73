#pragma once
// TaskRecords (task_records.h) on SQLite: each lease change is one fenced transition
// (TaskTransitions), recorded in a WriteGroup or written in a transaction of its own.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "scheduler/store/task_records.h"

namespace tessera::store {

class AttemptRows;
class Database;
class TaskTransitions;

class SqlTaskRecords : public TaskRecords {
 public:
  SqlTaskRecords(Database& db, TaskTransitions& transitions, AttemptRows& attempts)
      : db_(db), transitions_(transitions), attempts_(attempts) {}

  StatusOr<std::vector<TaskRecord>> LoadUnfinishedTasks(std::optional<int64_t> job_id,
                                                        bool requeue_running = true) override;
  Status StartTask(int64_t task_id, int attempt, int64_t worker_id, int64_t job_id = 0,
                   const std::vector<int>& gpus = {}) override;
  Status ReattachTask(int64_t task_id, int attempt, int64_t worker_id, int64_t job_id = 0) override;
  Status FinishTask(int64_t task_id, int attempt, int64_t worker_id, int64_t job_id = 0) override;
  Status RequeueTask(int64_t task_id, int attempt, const std::string& message, bool count_failure,
                     int64_t job_id = 0) override;
  Status FailTask(int64_t task_id, int attempt, const std::string& message,
                  int64_t job_id = 0) override;
  Status SetTaskProgress(int64_t task_id, int attempt, double progress,
                         const std::string& status_line = "") override;
  Status StartBackup(int64_t task_id, int attempt, std::optional<int64_t> worker_id = std::nullopt,
                     const std::vector<int>& gpus = {}) override;
  Status EndCopy(int64_t task_id, int attempt, bool count_failure) override;
  StatusOr<std::vector<std::pair<int, int>>> UndoneFrameRanges(int64_t job_id) override;

 private:
  // One task transition: recorded in a WriteGroup, otherwise in a transaction of its own.
  Status Transition(int64_t task_id, int attempt, TaskState to, const std::string& message,
                    bool count_failure, std::optional<int64_t> worker_id, int64_t job_id,
                    bool reattach = false, const std::vector<int>& gpus = {});

  Database& db_;
  TaskTransitions& transitions_;
  AttemptRows& attempts_;
};

}  // namespace tessera::store
