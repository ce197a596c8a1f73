#include "scheduler/broker/steps.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "scheduler/broker/event_sink.h"
#include "shared/plugins/plugin_catalog.h"

namespace tessera::broker {

namespace {

bool DependsOn(const store::JobRecord& step, int64_t other) {
  return std::count(step.depends_on.begin(), step.depends_on.end(), other) > 0 ||
         std::count(step.frame_depends_on.begin(), step.frame_depends_on.end(), other) > 0;
}

}  // namespace

StatusOr<int> Steps::Cancel(Pass& pass, int64_t job_id, const std::string& reason) {
  TSR_ASSIGN_OR_RETURN(store::JobRecord job, pass.store.GetJob(job_id));
  if (job.has_steps()) {
    TSR_ASSIGN_OR_RETURN(std::vector<store::JobRecord> steps, pass.store.PipelineSteps(job_id));
    if (job.terminal()) {
      return Status::FailedPrecondition("job " + std::to_string(job_id) + " is already " +
                                        store::JobStateName(job.state));
    }
    int stopped = 0;
    for (const store::JobRecord& step : steps) {
      if (step.terminal()) continue;
      StatusOr<int> n = Cancel(pass, step.id, reason);
      if (n.ok()) stopped += *n;
    }
    // Its steps' counters made it canceled already, unless a step was done before.
    StatusOr<std::vector<store::Lease>> own = pass.store.CancelJob(job_id, reason);
    if (!own.ok() && own.status().code() != StatusCode::kFailedPrecondition) return own.status();
    pass.events.JobChanged(job_id);
    spdlog::info("job {} canceled with its steps ({} running tasks told to stop)", job_id, stopped);
    return stopped;
  }
  TSR_ASSIGN_OR_RETURN(std::vector<store::Lease> leases, pass.store.CancelJob(job_id, reason));
  for (auto& [id, task] : p_.table.tasks()) {
    if (task.job_id == job_id) p_.leases.CancelAll(pass, task, "the job was canceled");
  }
  p_.table.DropQueued(job_id);
  for (auto it = p_.table.tasks().begin(); it != p_.table.tasks().end();) {
    if (it->second.job_id != job_id) {
      ++it;
      continue;
    }
    p_.checkpoints.Clear(it->second);  // its checkpoint goes with it
    it = p_.table.tasks().erase(it);
  }
  p_.table.jobs().erase(job_id);
  pass.events.JobChanged(job_id);
  spdlog::info("job {} canceled ({} running tasks told to stop){}", job_id, leases.size(),
               reason.empty() ? "" : ": " + reason);
  if (job.pipeline_id) CancelStepsAfter(pass, job);
  return static_cast<int>(leases.size());
}

// A job with steps: the operation is recorded on the job and applied to each unfinished step
// (a finished step refuses it; that is no error here). A job without steps: just the job.
Status Steps::ForEachStep(Pass& pass, int64_t job_id, const std::function<Status(int64_t)>& apply) {
  TSR_ASSIGN_OR_RETURN(store::JobRecord job, pass.store.GetJob(job_id));
  if (!job.has_steps()) return apply(job_id);
  TSR_ASSIGN_OR_RETURN(std::vector<store::JobRecord> steps, pass.store.PipelineSteps(job_id));
  TSR_RETURN_IF_ERROR(apply(job_id));
  for (const store::JobRecord& step : steps) {
    Status s = apply(step.id);
    if (!s.ok() && s.code() != StatusCode::kFailedPrecondition) return s;
  }
  return Status::Ok();
}

void Steps::OnJobsFinished(Pass& pass) {
  while (!pass.finished_jobs.empty()) {
    const int64_t job_id = pass.finished_jobs.front();
    pass.finished_jobs.erase(pass.finished_jobs.begin());
    StatusOr<store::JobRecord> job = pass.store.GetJob(job_id);
    if (!job.ok()) continue;
    if (job->state != store::JobState::kDone) {
      // The steps after a failed step cannot run; other dependents keep waiting.
      if (job->terminal()) CancelStepsAfter(pass, *job);
      continue;
    }
    for (auto& [id, info] : p_.table.jobs()) {
      if (info.waiting_on.erase(job_id) && info.waiting_on.empty()) {
        spdlog::info("job {}: dependency job {} is done; its tasks are queued", id, job_id);
        p_.queue.EnqueueJob(pass, id);
        if (info.inputs_pending) GatherInputs(pass, id, info);
      }
    }
    p_.table.DropUnusedGates();
  }
}

void Steps::CancelStepsAfter(Pass& pass, const store::JobRecord& ended) {
  if (!ended.pipeline_id) return;
  StatusOr<std::vector<store::JobRecord>> steps = pass.store.PipelineSteps(*ended.pipeline_id);
  if (!steps.ok()) {
    spdlog::error("job {}: cannot read the steps of job {}: {}", ended.id, *ended.pipeline_id,
                  steps.status().ToString());
    return;
  }
  const std::string reason = "step " + ended.step + " " + store::JobStateName(ended.state) +
                             (ended.error ? ": " + *ended.error : std::string());
  if (ended.state == store::JobState::kFailed) {
    (void)pass.store.SetJobError(*ended.pipeline_id, reason);
    pass.events.Record(*ended.pipeline_id, std::nullopt, std::nullopt, "step_failed", reason);
  }
  for (const store::JobRecord& step : *steps) {
    if (step.terminal() || !DependsOn(step, ended.id)) continue;
    // Canceling it cancels the steps after it in turn.
    if (StatusOr<int> n = Cancel(pass, step.id, reason); !n.ok()) {
      spdlog::error("job {}: cannot cancel step {}: {}", step.id, step.step, n.status().ToString());
    }
  }
}

void Steps::CancelStepsOfEndedSteps(Pass& pass) {
  // A step that ended failed or canceled just before a crash may have left steps waiting on it.
  std::vector<int64_t> loaded;
  for (const auto& [id, info] : p_.table.jobs()) {
    if (info.pipeline_id) loaded.push_back(id);
  }
  for (int64_t id : loaded) {
    StatusOr<store::JobRecord> step = pass.store.GetJob(id);
    if (!step.ok() || step->terminal()) continue;
    std::vector<int64_t> deps = step->depends_on;
    deps.insert(deps.end(), step->frame_depends_on.begin(), step->frame_depends_on.end());
    for (int64_t dep : deps) {
      StatusOr<store::JobRecord> other = pass.store.GetJob(dep);
      if (other.ok() && other->pipeline_id == step->pipeline_id &&
          (other->state == store::JobState::kFailed ||
           other->state == store::JobState::kCanceled)) {
        CancelStepsAfter(pass, *other);
        break;
      }
    }
  }
}

}  // namespace tessera::broker
