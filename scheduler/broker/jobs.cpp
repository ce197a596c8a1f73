#include "scheduler/broker/jobs.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "scheduler/broker/event_sink.h"
#include "shared/plugins/plugin_catalog.h"

namespace tessera::broker {
namespace {

// The job `id` among `jobs` (none: no jobs given).
const store::JobRecord* FindJob(const std::vector<store::JobRecord>* jobs, int64_t id) {
  if (jobs == nullptr) return nullptr;
  auto it = std::find_if(jobs->begin(), jobs->end(),
                         [id](const store::JobRecord& job) { return job.id == id; });
  return it == jobs->end() ? nullptr : &*it;
}

}  // namespace

void Jobs::Submitted(Pass& pass, const SubmittedJob& submitted) {
  // The rows the submission stored are still the rows in the store: its id is answered only
  // after the hand-over, and every operation on a job and every lease of its tasks runs on the
  // broker thread after this. A task already held (start-up loaded it first) is skipped, as
  // Load() skips it.
  size_t added = 0;
  for (const store::TaskRecord& t : submitted.tasks) {
    if (p_.table.tasks().count(t.id)) continue;
    if (!p_.table.jobs().count(t.job_id)) {
      const store::JobRecord* record = FindJob(&submitted.jobs, t.job_id);
      auto scene = submitted.scenes.find(t.job_id);
      Status held = record == nullptr || scene == submitted.scenes.end()
                        ? Status::Internal("the submission does not carry the job of task " +
                                           std::to_string(t.id))
                        // A new job has no failures counted and no flagged frames yet.
                        : HoldJob(pass, *record, scene->second, {}, {},
                                  record->pipeline_id ? &submitted.jobs : nullptr);
      if (!held.ok()) {
        spdlog::error("cannot load job {}: {}", t.job_id, held.ToString());
        continue;
      }
    }
    HoldTask(pass, t);
    ++added;
  }
  spdlog::info("job {} queued: {} tasks", submitted.id, added);
  pass.events.JobChanged(submitted.id);
}

void Jobs::Submitted(Pass& pass, int64_t job_id) {
  Reload(pass, job_id);
  pass.events.JobChanged(job_id);
}

void Jobs::Reload(Pass& pass, int64_t job_id) {
  if (Status s = Load(pass, job_id, /*requeue_running=*/true); !s.ok()) {
    spdlog::error("cannot load tasks: {}", s.ToString());
  }
}

Status Jobs::SetPriority(Pass& pass, int64_t job_id, int priority) {
  TSR_RETURN_IF_ERROR(p_.steps.ForEachStep(pass, job_id, [&](int64_t id) -> Status {
    TSR_RETURN_IF_ERROR(pass.store.SetJobPriority(id, priority));
    auto it = p_.table.jobs().find(id);
    if (it != p_.table.jobs().end()) {
      p_.table.DropQueued(id);
      it->second.priority = priority;
      p_.queue.EnqueueJob(pass, id);
    }
    pass.events.JobChanged(id);
    return Status::Ok();
  }));
  spdlog::info("job {} priority set to {}", job_id, priority);
  return Status::Ok();
}

Status Jobs::SetPaused(Pass& pass, int64_t job_id, bool paused) {
  TSR_RETURN_IF_ERROR(p_.steps.ForEachStep(pass, job_id, [&](int64_t id) -> Status {
    TSR_RETURN_IF_ERROR(pass.store.SetJobPaused(id, paused));
    auto it = p_.table.jobs().find(id);
    if (it != p_.table.jobs().end()) {
      it->second.paused = paused;
      if (paused) {
        p_.table.DropQueued(id);
      } else {
        p_.queue.EnqueueJob(pass, id);
      }
    }
    pass.events.JobChanged(id);
    return Status::Ok();
  }));
  spdlog::info("job {} {}", job_id, paused ? "paused" : "resumed");
  return Status::Ok();
}

StatusOr<int> Jobs::RequeueFinished(Pass& pass, int64_t job_id,
                                    std::optional<std::pair<int, int>> frames) {
  TSR_ASSIGN_OR_RETURN(store::JobRecord job, pass.store.GetJob(job_id));
  std::vector<store::JobRecord> steps{job};
  if (job.has_steps()) {
    if (job.state == store::JobState::kCanceled) {
      return Status::FailedPrecondition("job " + std::to_string(job_id) + " is canceled");
    }
    TSR_ASSIGN_OR_RETURN(steps, pass.store.PipelineSteps(job_id));
  }
  int moved = 0;
  // Steps in order: a step requeued after the one it needs waits for it again.
  for (const store::JobRecord& step : steps) {
    StatusOr<int> n =
        frames ? pass.store.RerenderFrames(step.id, frames->first, frames->second)
        // A retried job's steps that were canceled because a step failed run again too.
        : step.pipeline_id && step.state == store::JobState::kCanceled
            ? pass.store.ReviveStep(step.id)
            : pass.store.RetryFailedTasks(step.id);
    if (!n.ok() && (!job.has_steps() || n.status().code() != StatusCode::kFailedPrecondition)) {
      return n.status();
    }
    if (n.ok() && *n > 0) {
      moved += *n;
      Reload(pass, step.id);
    }
    pass.events.JobChanged(step.id);
  }
  if (job.has_steps()) pass.events.JobChanged(job_id);
  spdlog::info("job {}: {} task(s) requeued by request", job_id, moved);
  return moved;
}

Status Jobs::LoadJob(Pass& pass, int64_t job_id) {
  if (p_.table.jobs().count(job_id)) return Status::Ok();
  TSR_ASSIGN_OR_RETURN(store::JobRecord job, pass.store.GetJob(job_id));
  TSR_ASSIGN_OR_RETURN(std::string scene, pass.store.JobScene(job_id));
  TSR_ASSIGN_OR_RETURN(Failures failures, pass.store.WorkerFailures(job_id));
  TSR_ASSIGN_OR_RETURN(auto flags, pass.store.FrameFlags(job_id, spec::kMinFrame, spec::kMaxFrame));
  return HoldJob(pass, std::move(job), scene, failures, flags, nullptr);
}

Status Jobs::HoldJob(Pass& pass, store::JobRecord job, const std::string& scene,
                     const Failures& failures, const std::map<int, std::string>& flags,
                     const std::vector<store::JobRecord>* steps) {
  const int64_t job_id = job.id;
  JobInfo info;
  info.priority = job.priority;
  info.max_retries = job.max_retries;
  info.produces_frames = job.produces_frames();
  info.returns_files = job.returns_files();
  info.renderer = job.renderer;
  if (auto renderer = plugin::FindRenderer(job.renderer)) info.exact_parts = renderer->exact_parts;
  info.output = FrameOutputOf(job);
  for (const auto& [frame, reason] : flags) info.flagged_frames.insert(frame);
  info.parts_per_frame = job.parts_per_frame;
  info.scene_yaml = std::make_shared<const std::string>(scene);
  if (job.renderer != spec::kRendererNoop && !plugin::TakesTesseraScene(job.renderer)) {
    // Resolved from the job file once, when it was submitted (empty when it did not resolve:
    // its tasks then fail on the worker with a message naming the setting).
    info.settings = std::move(job.settings);
    info.scene_name = std::move(job.scene_name);
  }
  info.paused = job.paused;
  info.task_timeout_s = job.task_timeout_s;
  info.progress_timeout_s = job.progress_timeout_s;
  info.checkpoint_interval_s = job.checkpoint_interval_s;
  info.blocklist_after = job.blocklist_after;
  info.fail_after_workers = job.fail_after_workers;
  info.project = job.project;
  info.user = job.user;
  info.name = job.name;
  info.interruptible = job.interruptible;
  info.deadline_ms = job.deadline_ms;
  info.assets = std::make_shared<const std::map<std::string, std::string>>(job.assets);
  info.output_shared = job.output_shared;
  info.needs.limits = job.limits;
  info.needs.pools = job.pools;
  info.needs.tags = job.tags;
  info.needs.resources = job.resources;
  info.needs.renderer = job.renderer;
  info.notice = job.notice;
  for (const auto& [worker_id, count] : failures) {
    info.failures_by_worker[worker_id] = count;
    if (info.blocklist_after > 0 && count >= info.blocklist_after) {
      info.needs.blocklist.insert(worker_id);
    }
  }
  for (int64_t dep : job.depends_on) {
    // Another step of the same job is among `steps` when the caller has them; any other job is
    // read from the store (it is not the job being held).
    StatusOr<store::JobRecord> other = Status::NotFound("");
    if (const store::JobRecord* step = FindJob(steps, dep)) {
      other = *step;
    } else {
      other = pass.store.GetJob(dep);
    }
    // A dependency deleted from the farm was finished; only a live, unfinished one holds.
    if (other.ok() && other->state != store::JobState::kDone) info.waiting_on.insert(dep);
  }
  info.frame_deps = job.frame_depends_on;
  info.failure_policy = job.failure_policy;
  info.pipeline_id = job.pipeline_id;
  info.step = job.step;
  p_.steps.FindInputs(pass, job, info, steps);
  auto& stored = p_.table.jobs()[job_id] = std::move(info);
  p_.full_outputs.HoldIfFull(pass, job_id, stored);
  p_.feasibility.Update(pass, job_id, stored);
  if (stored.inputs_pending && stored.waiting_on.empty())
    p_.steps.GatherInputs(pass, job_id, stored);
  return Status::Ok();
}

Status Jobs::Load(Pass& pass, std::optional<int64_t> job_id, bool requeue_running) {
  TSR_ASSIGN_OR_RETURN(std::vector<store::TaskRecord> tasks,
                       pass.store.LoadUnfinishedTasks(job_id, requeue_running));
  size_t added = 0;
  for (const store::TaskRecord& t : tasks) {
    if (p_.table.tasks().count(t.id)) continue;
    if (Status s = LoadJob(pass, t.job_id); !s.ok()) {
      spdlog::error("cannot load job {}: {}", t.job_id, s.ToString());
      continue;
    }
    HoldTask(pass, t);
    ++added;
  }
  if (job_id) {
    spdlog::info("job {} queued: {} tasks", *job_id, added);
  } else if (added) {
    spdlog::info("restored {} unfinished tasks from the store", added);
  }
  return Status::Ok();
}

void Jobs::HoldTask(Pass& pass, const store::TaskRecord& t) {
  // A re-rendered task of a job others depend on frame by frame holds those frames again.
  if (FrameGate* gate = p_.table.FindGate(t.job_id)) gate->undone[t.frame_start] = t.frame_end;
  LiveTask live;
  live.task_id = t.id;
  live.job_id = t.job_id;
  live.index = t.index;
  live.frame_start = t.frame_start;
  live.frame_end = t.frame_end;
  live.attempt = t.attempt;
  live.failures = t.failures;
  live.failed_on = {t.failed_on.begin(), t.failed_on.end()};
  live.part = t.part;
  ++p_.table.jobs()[t.job_id].unfinished;
  if (p_.table.jobs()[t.job_id].parts_per_frame > 1) p_.table.AddPart(t.job_id, t.frame_start);
  const LiveTask& task = p_.table.tasks().emplace(t.id, std::move(live)).first->second;
  if (t.interrupted) {
    // Its worker is probably still rendering it and will re-attach when it re-registers.
    p_.table.AwaitReattach(t.id,
                           pass.now + std::chrono::milliseconds(int64_t{p_.options.heartbeat_ms} *
                                                                p_.options.liveness));
  } else {
    p_.queue.Enqueue(pass, task);
  }
}

}  // namespace tessera::broker
