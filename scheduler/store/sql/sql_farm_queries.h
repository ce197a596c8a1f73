#pragma once
// FarmQueries (farm_queries.h) on SQLite: reads on the pool's read-only connections.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "scheduler/store/farm_queries.h"

namespace tessera::store {

class Database;

class SqlFarmQueries : public FarmQueries {
 public:
  explicit SqlFarmQueries(Database& db) : db_(db) {}

  StatusOr<std::vector<JobRecord>> ListJobs(std::optional<JobState> state, int limit) override;
  StatusOr<std::vector<JobRecord>> ListJobs(const JobFilter& filter) override;
  StatusOr<JobRecord> GetJob(int64_t job_id) override;
  StatusOr<std::vector<TaskRecord>> ListTasks(int64_t job_id) override;
  StatusOr<std::vector<TaskRecord>> ListTasks(int64_t job_id, const TaskFilter& filter) override;
  StatusOr<TaskRecord> GetTask(int64_t task_id) override;
  StatusOr<std::vector<WorkerRecord>> ListWorkers() override;
  StatusOr<FarmSummary> Summary() override;
  StatusOr<bool> BlobInUse(const std::string& hash) override;
  StatusOr<std::vector<std::pair<int64_t, std::string>>> JobsWritingTo(
      const std::string& dir) override;

 private:
  Database& db_;
};

}  // namespace tessera::store
