// The broker's side of jobs with steps (shared/job_steps.h). Each step is a job of its own in
// the queue, waiting on the steps it depends on through the job dependencies every job has
// (depends_on: the whole step; frame_depends_on: frame by frame). What is particular to steps:
// a step that fails or is canceled cancels the steps that depend on it (so the job ends, failed,
// instead of waiting forever), and an operation on the job (cancel, pause, priority, retry,
// re-render) is applied to each of its steps. The job's counters and state follow its steps' in
// the store (schema 29's triggers).

#include <spdlog/spdlog.h>

#include "scheduler/broker/broker.h"

namespace tessera::broker {

namespace {

bool DependsOn(const store::JobRecord& step, int64_t other) {
  return std::count(step.depends_on.begin(), step.depends_on.end(), other) > 0 ||
         std::count(step.frame_depends_on.begin(), step.frame_depends_on.end(), other) > 0;
}

}  // namespace

StatusOr<int> Broker::CancelNow(int64_t job_id, const std::string& reason) {
  TSR_ASSIGN_OR_RETURN(store::JobRecord job, store_.GetJob(job_id));
  if (job.has_steps()) {
    TSR_ASSIGN_OR_RETURN(std::vector<store::JobRecord> steps, store_.PipelineSteps(job_id));
    if (job.terminal()) {
      return Status::FailedPrecondition("job " + std::to_string(job_id) + " is already " +
                                        store::JobStateName(job.state));
    }
    int stopped = 0;
    for (const store::JobRecord& step : steps) {
      if (step.terminal()) continue;
      StatusOr<int> n = CancelNow(step.id, reason);
      if (n.ok()) stopped += *n;
    }
    // Its steps' counters made it canceled already, unless a step was done before.
    StatusOr<std::vector<store::Lease>> own = store_.CancelJob(job_id, reason);
    if (!own.ok() && own.status().code() != StatusCode::kFailedPrecondition) return own.status();
    MarkJobChanged(job_id);
    spdlog::info("job {} canceled with its steps ({} running tasks told to stop)", job_id, stopped);
    return stopped;
  }
  TSR_ASSIGN_OR_RETURN(std::vector<store::Lease> leases, store_.CancelJob(job_id, reason));
  for (auto& [id, task] : leases_.tasks()) {
    if (task.job_id == job_id) CancelAllLeases(task, "the job was canceled");
  }
  leases_.DropQueued(job_id);
  for (auto it = leases_.tasks().begin(); it != leases_.tasks().end();) {
    if (it->second.job_id != job_id) {
      ++it;
      continue;
    }
    ClearResume(it->second);  // its checkpoint goes with it
    it = leases_.tasks().erase(it);
  }
  leases_.jobs().erase(job_id);
  MarkJobChanged(job_id);
  spdlog::info("job {} canceled ({} running tasks told to stop){}", job_id, leases.size(),
               reason.empty() ? "" : ": " + reason);
  if (job.pipeline_id) CancelStepsAfter(job);
  return static_cast<int>(leases.size());
}

void Broker::CancelStepsAfter(const store::JobRecord& ended) {
  if (!ended.pipeline_id) return;
  StatusOr<std::vector<store::JobRecord>> steps = store_.PipelineSteps(*ended.pipeline_id);
  if (!steps.ok()) {
    spdlog::error("job {}: cannot read the steps of job {}: {}", ended.id, *ended.pipeline_id,
                  steps.status().ToString());
    return;
  }
  const std::string reason = "step " + ended.step + " " + store::JobStateName(ended.state) +
                             (ended.error ? ": " + *ended.error : std::string());
  if (ended.state == store::JobState::kFailed) {
    (void)store_.SetJobError(*ended.pipeline_id, reason);
    RecordEvent(*ended.pipeline_id, std::nullopt, std::nullopt, "step_failed", reason);
  }
  for (const store::JobRecord& step : *steps) {
    if (step.terminal() || !DependsOn(step, ended.id)) continue;
    // Canceling it cancels the steps after it in turn.
    if (StatusOr<int> n = CancelNow(step.id, reason); !n.ok()) {
      spdlog::error("job {}: cannot cancel step {}: {}", step.id, step.step, n.status().ToString());
    }
  }
}

void Broker::CancelStepsOfEndedSteps() {
  // A step that ended failed or canceled just before a crash may have left steps waiting on it.
  std::vector<int64_t> loaded;
  for (const auto& [id, info] : leases_.jobs()) {
    if (info.pipeline_id) loaded.push_back(id);
  }
  for (int64_t id : loaded) {
    StatusOr<store::JobRecord> step = store_.GetJob(id);
    if (!step.ok() || step->terminal()) continue;
    std::vector<int64_t> deps = step->depends_on;
    deps.insert(deps.end(), step->frame_depends_on.begin(), step->frame_depends_on.end());
    for (int64_t dep : deps) {
      StatusOr<store::JobRecord> other = store_.GetJob(dep);
      if (other.ok() && other->pipeline_id == step->pipeline_id &&
          (other->state == store::JobState::kFailed ||
           other->state == store::JobState::kCanceled)) {
        CancelStepsAfter(*other);
        break;
      }
    }
  }
}

std::string Broker::DependencyName(const JobInfo& job, int64_t dep) {
  if (job.pipeline_id) {
    StatusOr<store::JobRecord> other = store_.GetJob(dep);
    if (other.ok() && other->pipeline_id == job.pipeline_id) return "step " + other->step;
  }
  return "job " + std::to_string(dep);
}

StatusOr<std::vector<int64_t>> Broker::JobsOf(int64_t job_id) {
  TSR_ASSIGN_OR_RETURN(store::JobRecord job, store_.GetJob(job_id));
  if (!job.has_steps()) return std::vector<int64_t>{job_id};
  TSR_ASSIGN_OR_RETURN(std::vector<store::JobRecord> steps, store_.PipelineSteps(job_id));
  std::vector<int64_t> ids;
  for (const store::JobRecord& step : steps) ids.push_back(step.id);
  return ids;
}

}  // namespace tessera::broker
