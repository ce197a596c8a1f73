#pragma once
// AttemptRecords (attempt_records.h) on SQLite: the task_logs table, through AttemptRows.

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "scheduler/store/attempt_records.h"

namespace tessera::store {

class AttemptRows;
class Database;

class SqlAttemptRecords : public AttemptRecords {
 public:
  SqlAttemptRecords(Database& db, AttemptRows& attempts) : db_(db), attempts_(attempts) {}

  Status SaveTaskLog(const TaskLogRecord& log) override;
  Status EndAttempt(int64_t task_id, int attempt, int64_t job_id, const AttemptEnd& end) override;
  StatusOr<std::vector<TaskLogRecord>> TaskLogs(int64_t task_id) override;
  std::map<std::pair<std::string, std::string>, int64_t> AttemptCounts() const override;

 private:
  Database& db_;
  AttemptRows& attempts_;
};

}  // namespace tessera::store
