#pragma once
// The attempt history: one record per attempt of a task, from its lease's start to the one
// outcome it ends with (done, failed with a class, lost, handed back, canceled), with its log,
// and the count of attempts ended so far by outcome (the metrics' counters).
//
// One of the store's record tables (store.h): an engine-neutral interface, implemented for SQLite
// by SqlAttemptRecords (sql/sql_attempt_records.h). Starts and done are recorded by the
// task changes themselves (task_records.h); every other end through EndAttempt.

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "scheduler/store/records.h"
#include "shared/base/status.h"

namespace tessera::store {

class AttemptRecords {
 public:
  virtual ~AttemptRecords() = default;

  // A task attempt's log, as its final message brought it (replaces an earlier copy; the
  // attempt's outcome is not touched).
  virtual Status SaveTaskLog(const TaskLogRecord& log) = 0;
  // Ends the attempt with `end` unless it already ended (the first outcome recorded stands). In
  // a WriteGroup it is applied with the group. `done` is recorded by FinishTask, never here.
  virtual Status EndAttempt(int64_t task_id, int attempt, int64_t job_id,
                            const AttemptEnd& end) = 0;
  // Every attempt of the task, in attempt order, with its log.
  virtual StatusOr<std::vector<TaskLogRecord>> TaskLogs(int64_t task_id) = 0;
  // Attempts ended so far, by (outcome, failure class): what the store holds, plus those of
  // deleted jobs (a counter never goes down).
  virtual std::map<std::pair<std::string, std::string>, int64_t> AttemptCounts() const = 0;
};

}  // namespace tessera::store
