#pragma once
// The attempt history's rows (task_logs, schema 26) as the SQLite engine writes them inside the
// transactions of task and job changes: an attempt opened when its lease starts, ended exactly
// once, reopened when its worker takes the lease back; and the count of attempts ended by
// outcome, which moves only once the transaction that ended them has committed.
//
// Threads: every write here runs on the writer inside the caller's transaction, under the write
// lock; Counts() from any thread.

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "scheduler/store/records.h"
#include "shared/base/status.h"

namespace tessera::store {

class Database;

class AttemptRows {
 public:
  explicit AttemptRows(Database& db) : db_(db) {}

  // A new attempt, running on `worker_id` (an attempt number already recorded is kept).
  Status Insert(int64_t task_id, int attempt, int64_t job_id, std::optional<int64_t> worker_id,
                const std::vector<int>& gpus);
  // Ends the attempt unless it already ended (the first outcome stands).
  Status Close(int64_t task_id, int attempt, int64_t job_id, const AttemptEnd& end);
  // A re-attached attempt runs again: a `lost` recorded for it is taken back.
  Status Reopen(int64_t task_id, int attempt);
  // Ends every attempt still running that `where` selects (SQL over task_logs, a constant: ?1
  // is bound to `id`, ?2 to `extra`) with `end`.
  Status CloseWhere(const char* where, int64_t id, int64_t extra, const AttemptEnd& end);
  // At start-up: attempts left running whose lease cannot come back are closed as lost.
  Status CloseStale();

  // Reads the counts of ended attempts from the rows (when the store opens).
  Status LoadCounts();
  // The outcomes written since the last call count if the transaction `committed`, or are
  // dropped.
  void Settle(bool committed);
  std::map<std::pair<std::string, std::string>, int64_t> Counts() const;

 private:
  void Count(const AttemptEnd& end, int64_t n);

  Database& db_;
  // Outcomes written in the open transaction (under the write lock), and those committed.
  std::vector<std::pair<std::pair<std::string, std::string>, int64_t>> pending_;
  mutable std::mutex counts_mu_;
  std::map<std::pair<std::string, std::string>, int64_t> counts_;
};

}  // namespace tessera::store
