#pragma once
// Reads for the HTTP API, the dashboard and the CLI: pages of jobs, of a job's tasks and the
// workers, single jobs and tasks, the farm's summary (counters kept on the job rows, never a scan
// of the tasks), and the lookups the blob store and the output checks make. Reads only, from any
// thread, beside the writer.
//
// One of the store's record tables (store.h): an engine-neutral interface, implemented for SQLite
// by SqlFarmQueries (sql/sql_farm_queries.h).

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "scheduler/store/records.h"
#include "shared/base/status.h"
#include "shared/jobs/job_file.h"

namespace tessera::store {

class FarmQueries {
 public:
  // Newest first; every set field narrows the list. `before`: only jobs with a smaller id (the
  // next page after a page that ended at that id).
  struct JobFilter {
    std::optional<JobState> state;
    std::optional<bool> paused;  // set: only jobs held (true) or not held (false), unfinished
    std::string user, project;
    std::optional<int64_t> before;
    int limit = 100;
    bool steps = true;  // false: not the steps of jobs with steps (their jobs are listed)
  };
  // In task index order: those in `state` (when set) with an index above `after_index`, at most
  // `limit` of them.
  struct TaskFilter {
    std::optional<TaskState> state;
    int after_index = -1;
    int limit = static_cast<int>(spec::kMaxTasksPerJob);  // default: every task of the job
  };

  virtual ~FarmQueries() = default;

  virtual StatusOr<std::vector<JobRecord>> ListJobs(std::optional<JobState> state, int limit) = 0;
  virtual StatusOr<std::vector<JobRecord>> ListJobs(const JobFilter& filter) = 0;
  virtual StatusOr<JobRecord> GetJob(int64_t job_id) = 0;
  // All of them, in index order.
  virtual StatusOr<std::vector<TaskRecord>> ListTasks(int64_t job_id) = 0;
  virtual StatusOr<std::vector<TaskRecord>> ListTasks(int64_t job_id, const TaskFilter& filter) = 0;
  virtual StatusOr<TaskRecord> GetTask(int64_t task_id) = 0;
  virtual StatusOr<std::vector<WorkerRecord>> ListWorkers() = 0;
  // Jobs and tasks by state, workers by state, and today's cost (the UTC day of the store's
  // clock).
  virtual StatusOr<FarmSummary> Summary() = 0;

  // Whether any stored job lists the blob `hash` among its assets.
  virtual StatusOr<bool> BlobInUse(const std::string& hash) = 0;
  // The stored jobs whose output folder is `dir` (resolved, as stored): (id, user) pairs.
  virtual StatusOr<std::vector<std::pair<int64_t, std::string>>> JobsWritingTo(
      const std::string& dir) = 0;
};

}  // namespace tessera::store
