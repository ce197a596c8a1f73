#pragma once
// JobRecords (job_records.h) on SQLite: a job's row and its task rows inserted in one
// transaction (a job with steps: its row, then each step's), and the job operations as fenced
// UPDATEs that keep the job's task counters in step.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "scheduler/store/job_records.h"

namespace tessera::store {

class AttemptRows;
class Database;
class TaskTransitions;
struct PluginFiles;  // sql/rows.h

class SqlJobRecords : public JobRecords {
 public:
  SqlJobRecords(Database& db, TaskTransitions& transitions, AttemptRows& attempts)
      : db_(db), transitions_(transitions), attempts_(attempts) {}

  StatusOr<JobRecord> CreateJob(const spec::JobSpec& spec, const std::string& job_yaml,
                                const std::function<StatusOr<std::string>(int64_t)>& output_dir_for,
                                const IdempotentRequest* request = nullptr,
                                CreatedRows* created = nullptr) override;
  StatusOr<JobRecord> CreatePipeline(
      const spec::PipelineSpec& pipeline, const std::string& job_yaml,
      const std::function<StatusOr<std::string>(int64_t)>& output_dir_for,
      const StepDirFn& step_dir_for, const IdempotentRequest* request = nullptr,
      CreatedRows* created = nullptr) override;
  StatusOr<std::vector<JobRecord>> PipelineSteps(int64_t job_id) override;
  StatusOr<std::vector<Lease>> CancelJob(int64_t job_id, const std::string& reason = "") override;
  StatusOr<int> ReviveStep(int64_t job_id) override;
  Status SetJobError(int64_t job_id, const std::string& error) override;
  Status SetJobPriority(int64_t job_id, int priority) override;
  Status SetJobPaused(int64_t job_id, bool paused) override;
  StatusOr<int> RetryFailedTasks(int64_t job_id) override;
  StatusOr<int> RerenderFrames(int64_t job_id, int first, int last) override;
  Status DeleteJob(int64_t job_id) override;
  StatusOr<std::string> JobScene(int64_t job_id) override;
  StatusOr<std::string> JobYaml(int64_t job_id) override;
  Status SetJobNotice(int64_t job_id, const std::optional<std::string>& notice) override;
  Status SetJobAssets(int64_t job_id, const std::map<std::string, std::string>& assets) override;
  Status SetFrameFlag(int64_t job_id, int frame, const std::string& reason) override;
  Status ClearFrameFlag(int64_t job_id, int frame) override;
  StatusOr<std::map<int, std::string>> FrameFlags(int64_t job_id, int first, int last) override;

 private:
  // A step's place in its job with steps.
  struct StepLink {
    int64_t pipeline_id = 0;
    std::string name;
    std::string depends_on_json;  // [{"step", "per_frame"}]
  };
  // A job's row and tasks, inside the caller's transaction (CreateJob, CreatePipeline); the
  // tasks are appended to `tasks` when given.
  StatusOr<int64_t> InsertJob(const spec::JobSpec& spec, const std::string& job_yaml,
                              const PluginFiles& files,
                              const std::function<StatusOr<std::string>(int64_t)>& output_dir_for,
                              const StepLink* step, std::vector<TaskRecord>* tasks);
  Status RecordIdempotentJob(const IdempotentRequest* request, int64_t job_id);
  // Reads the job's state on the writer (inside a transaction).
  StatusOr<JobState> JobStateForUpdate(int64_t job_id);
  // Moves every task of the job matching `task_filter` with a frame in [first, last] back to
  // queued with a fresh retry budget, keeping counters and job state in step. Returns how many
  // moved.
  StatusOr<int> RequeueFinished(int64_t job_id, const std::string& task_filter, int first,
                                int last);

  Database& db_;
  TaskTransitions& transitions_;
  AttemptRows& attempts_;
};

}  // namespace tessera::store
