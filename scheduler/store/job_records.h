#pragma once
// Jobs as people submit and steer them: storing a job with all of its tasks (or a job with steps,
// each step a job of its own), cancelling, pausing, re-prioritising, retrying, re-rendering and
// deleting it, and what a job carries beside its tasks -- its files, its assets, its notice and
// error, and the frames output validation flagged.
//
// One of the store's record tables (store.h): an engine-neutral interface, implemented for SQLite
// by SqlJobRecords (sql/sql_job_records.h). Implementations repeat the default arguments
// declared here (a default argument comes from the type a call is made through).

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "scheduler/store/records.h"
#include "shared/base/status.h"
#include "shared/jobs/job_file.h"
#include "shared/jobs/job_steps.h"

namespace tessera::store {

class JobRecords {
 public:
  // A step's output folder: (step index, step job id, the job's folder) -> the step's folder.
  using StepDirFn = std::function<StatusOr<std::string>(size_t, int64_t, const std::string&)>;

  virtual ~JobRecords() = default;

  // Stores a validated job and all of its tasks in one transaction. `output_dir_for` maps the
  // new job id to its absolute output directory (it may create it; an error aborts the submit).
  // With `request`, its Idempotency-Key is recorded in the same transaction (resource "job",
  // the new id); a key already recorded aborts it with kAlreadyExists. With `created`, the
  // tasks it stored are reported there.
  virtual StatusOr<JobRecord> CreateJob(
      const spec::JobSpec& spec, const std::string& job_yaml,
      const std::function<StatusOr<std::string>(int64_t)>& output_dir_for,
      const IdempotentRequest* request = nullptr, CreatedRows* created = nullptr) = 0;
  // Stores a job with steps in one transaction: the job's row (renderer spec::kRendererSteps,
  // its folder from `output_dir_for`), then every step as a job of its own in the spec's order
  // (each after the steps it depends on, whose ids become its depends_on / frame_depends_on),
  // its folder from `step_dir_for(step index, step job id, the job's folder)`. With `created`,
  // the steps' rows and their tasks are reported there.
  virtual StatusOr<JobRecord> CreatePipeline(
      const spec::PipelineSpec& pipeline, const std::string& job_yaml,
      const std::function<StatusOr<std::string>(int64_t)>& output_dir_for,
      const StepDirFn& step_dir_for, const IdempotentRequest* request = nullptr,
      CreatedRows* created = nullptr) = 0;
  // The steps of a job with steps, in the order they were stored (each after those it needs).
  virtual StatusOr<std::vector<JobRecord>> PipelineSteps(int64_t job_id) = 0;

  // Marks the job and its unfinished tasks canceled; returns the leases that were running.
  // `reason` (when given) becomes the job's error, e.g. "step sim failed".
  virtual StatusOr<std::vector<Lease>> CancelJob(int64_t job_id,
                                                 const std::string& reason = "") = 0;
  // A step canceled because a step it needed failed goes back to queued, its canceled tasks
  // with it (retrying its job). Returns how many tasks moved.
  virtual StatusOr<int> ReviveStep(int64_t job_id) = 0;
  // Sets the job's error unless it has one (the first reason a job failed is the one kept).
  virtual Status SetJobError(int64_t job_id, const std::string& error) = 0;
  // Operations on an unfinished job (FailedPrecondition once it is done, failed or canceled).
  virtual Status SetJobPriority(int64_t job_id, int priority) = 0;
  virtual Status SetJobPaused(int64_t job_id, bool paused) = 0;
  // Failed tasks go back to the queue with a fresh retry budget (the job may be failed).
  // Returns how many were requeued.
  virtual StatusOr<int> RetryFailedTasks(int64_t job_id) = 0;
  // Finished (done or failed) tasks holding any frame in [first, last] are rendered again.
  virtual StatusOr<int> RerenderFrames(int64_t job_id, int first, int last) = 0;
  // Removes a finished job with its tasks and events (its output files stay on disk).
  virtual Status DeleteJob(int64_t job_id) = 0;

  // The job's scene file, and the job file as it was submitted.
  virtual StatusOr<std::string> JobScene(int64_t job_id) = 0;
  virtual StatusOr<std::string> JobYaml(int64_t job_id) = 0;
  // Set by the scheduler while something the job cannot fix by waiting holds it (nullopt
  // clears it).
  virtual Status SetJobNotice(int64_t job_id, const std::optional<std::string>& notice) = 0;
  // Replaces a job's assets (path -> blob SHA-256): the input frames of a step that takes another
  // step's frames, once gathered. The blobs a job names are kept while it exists (BlobInUse).
  virtual Status SetJobAssets(int64_t job_id, const std::map<std::string, std::string>& assets) = 0;

  // Output validation: a frame kept with bad pixels carries the reason until it is written
  // clean; the flags of frames [first, last].
  virtual Status SetFrameFlag(int64_t job_id, int frame, const std::string& reason) = 0;
  virtual Status ClearFrameFlag(int64_t job_id, int frame) = 0;
  virtual StatusOr<std::map<int, std::string>> FrameFlags(int64_t job_id, int first, int last) = 0;
};

}  // namespace tessera::store
