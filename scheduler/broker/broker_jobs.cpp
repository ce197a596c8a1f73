// The broker's job side: operations other threads ask for (cancel, priority, pause, requeue,
// why), loading jobs and tasks from the store into the queue, job and frame dependencies, and
// the feasibility notice. The poll loop, worker messages and leases are in broker.cpp.

#include <spdlog/spdlog.h>

#include <algorithm>
#include <climits>
#include <set>

#include "scheduler/broker/broker.h"
#include "shared/plugins/plugin_catalog.h"

namespace tessera::broker {

using Clock = std::chrono::steady_clock;

void Broker::JobSubmitted(int64_t job_id) {
  Post([this, job_id] {
    LoadTasks(job_id);
    MarkJobChanged(job_id);
  });
}

Status Broker::CancelJob(int64_t job_id) {
  return OnBrokerThread<int>([this, job_id] { return CancelNow(job_id, ""); }).status();
}

// A job with steps: the operation is recorded on the job and applied to each unfinished step
// (a finished step refuses it; that is no error here). A job without steps: just the job.
Status Broker::ForEachStep(int64_t job_id, const std::function<Status(int64_t)>& apply) {
  TSR_ASSIGN_OR_RETURN(std::vector<int64_t> ids, JobsOf(job_id));
  if (ids.size() == 1 && ids[0] == job_id) return apply(job_id);
  TSR_RETURN_IF_ERROR(apply(job_id));
  for (int64_t id : ids) {
    Status s = apply(id);
    if (!s.ok() && s.code() != StatusCode::kFailedPrecondition) return s;
  }
  return Status::Ok();
}

Status Broker::SetJobPriority(int64_t job_id, int priority) {
  return OnBrokerThread<int>([this, job_id, priority]() -> StatusOr<int> {
           TSR_RETURN_IF_ERROR(ForEachStep(job_id, [&](int64_t id) -> Status {
             TSR_RETURN_IF_ERROR(store_.SetJobPriority(id, priority));
             auto it = leases_.jobs().find(id);
             if (it != leases_.jobs().end()) {
               leases_.DropQueued(id);
               it->second.priority = priority;
               EnqueueJob(id);
             }
             MarkJobChanged(id);
             return Status::Ok();
           }));
           spdlog::info("job {} priority set to {}", job_id, priority);
           return 0;
         })
      .status();
}

Status Broker::SetJobPaused(int64_t job_id, bool paused) {
  return OnBrokerThread<int>([this, job_id, paused]() -> StatusOr<int> {
           TSR_RETURN_IF_ERROR(ForEachStep(job_id, [&](int64_t id) -> Status {
             TSR_RETURN_IF_ERROR(store_.SetJobPaused(id, paused));
             auto it = leases_.jobs().find(id);
             if (it != leases_.jobs().end()) {
               it->second.paused = paused;
               if (paused) {
                 leases_.DropQueued(id);
               } else {
                 EnqueueJob(id);
               }
             }
             MarkJobChanged(id);
             return Status::Ok();
           }));
           spdlog::info("job {} {}", job_id, paused ? "paused" : "resumed");
           return 0;
         })
      .status();
}

StatusOr<int> Broker::RequeueFinished(int64_t job_id, std::optional<std::pair<int, int>> frames) {
  return OnBrokerThread<int>([this, job_id, frames]() -> StatusOr<int> {
    TSR_ASSIGN_OR_RETURN(store::JobRecord job, store_.GetJob(job_id));
    std::vector<store::JobRecord> steps{job};
    if (job.has_steps()) {
      if (job.state == store::JobState::kCanceled) {
        return Status::FailedPrecondition("job " + std::to_string(job_id) + " is canceled");
      }
      TSR_ASSIGN_OR_RETURN(steps, store_.PipelineSteps(job_id));
    }
    int moved = 0;
    // Steps in order: a step requeued after the one it needs waits for it again.
    for (const store::JobRecord& step : steps) {
      StatusOr<int> n =
          frames ? store_.RerenderFrames(step.id, frames->first, frames->second)
          // A retried job's steps that were canceled because a step failed run again too.
          : step.pipeline_id && step.state == store::JobState::kCanceled
              ? store_.ReviveStep(step.id)
              : store_.RetryFailedTasks(step.id);
      if (!n.ok() && (!job.has_steps() || n.status().code() != StatusCode::kFailedPrecondition)) {
        return n.status();
      }
      if (n.ok() && *n > 0) {
        moved += *n;
        LoadTasks(step.id);
      }
      MarkJobChanged(step.id);
    }
    if (job.has_steps()) MarkJobChanged(job_id);
    spdlog::info("job {}: {} task(s) requeued by request", job_id, moved);
    return moved;
  });
}

StatusOr<nlohmann::json> Broker::WorkerPlugins() {
  return OnBrokerThread<nlohmann::json>([this]() -> StatusOr<nlohmann::json> {
    nlohmann::json workers = nlohmann::json::array();
    for (const auto& [identity, worker] : workers_) {
      nlohmann::json plugins = nlohmann::json::array();
      for (const auto& [name, version] : worker.offer.plugins) {
        plugins.push_back({{"name", name}, {"version", version}});
      }
      workers.push_back(
          {{"id", worker.offer.id}, {"name", worker.offer.name}, {"plugins", plugins}});
    }
    return nlohmann::json{{"workers", workers}};
  });
}

StatusOr<nlohmann::json> Broker::WorkerGpuUse(bool history) {
  return OnBrokerThread<nlohmann::json>([this, history]() -> StatusOr<nlohmann::json> {
    nlohmann::json workers = nlohmann::json::object();
    for (const auto& [identity, worker] : workers_) {
      nlohmann::json gpus = worker.claims.View(worker.offer);
      for (size_t i = 0; i < gpus.size(); ++i) {
        gpus[i].update(worker.gpu_board.View(i, history));
        if (i < worker.offer.gpus.size()) gpus[i]["name"] = worker.offer.gpus[i].name;
      }
      // Unhealthy: a GPU is faulted or its disk is full (each takes work away from it).
      std::string reason = worker.gpu_board.FaultSummary();
      if (!worker.disk_full.empty()) {
        reason += (reason.empty() ? "" : "; ") + ("disk full: " + worker.disk_full);
      }
      workers[worker.offer.name] = {{"slots", worker.slots},
                                    {"slots_used", worker.used_slots()},
                                    {"cpu_cores_used", worker.claims.cpu().cores},
                                    {"ram_mb_used", worker.claims.cpu().ram_mb},
                                    {"slots_per_gpu", worker.offer.slots_per_gpu},
                                    {"memory_mb_per_slot", worker.offer.memory_mb_per_slot},
                                    {"health", reason.empty() ? "ok" : "unhealthy"},
                                    {"health_reason", reason},
                                    {"gpus", std::move(gpus)}};
    }
    return workers;
  });
}

StatusOr<nlohmann::json> Broker::Why(int64_t task_id) {
  return OnBrokerThread<nlohmann::json>([this, task_id]() -> StatusOr<nlohmann::json> {
    auto it = leases_.tasks().find(task_id);
    if (it == leases_.tasks().end()) {
      StatusOr<store::TaskRecord> rec = store_.GetTask(task_id);
      if (!rec.ok()) return rec.status();
      std::string state = store::TaskStateName(rec->state);
      return nlohmann::json{
          {"task_id", task_id},
          {"state", state},
          {"reason", "the task is " + state + (rec->message.empty() ? "" : ": " + rec->message)},
          {"details", nlohmann::json::array()}};
    }
    const LiveTask& task = it->second;
    const JobInfo& job = leases_.jobs()[task.job_id];
    nlohmann::json details = nlohmann::json::array();
    std::string reason;
    if (task.running()) {
      reason = "running";
      for (const Lease& l : task.leases) {
        const WorkerConn* holder = workers_.Find(l.worker);
        reason += std::string(&l == &task.leases.front() ? " on " : ", and as a backup copy on ") +
                  "worker " + (holder != nullptr ? holder->offer.name : "?") + ", attempt " +
                  std::to_string(l.attempt);
      }
    } else if (!job.waiting_on.empty()) {
      reason = "waiting for";
      for (int64_t dep : job.waiting_on) {
        StatusOr<store::JobRecord> other = store_.GetJob(dep);
        reason += (dep == *job.waiting_on.begin() ? " " : ", ") + DependencyName(job, dep) + " (" +
                  (other.ok() ? store::JobStateName(other->state) : "unknown") + ")";
      }
    } else if (job.inputs_pending) {
      reason = "waiting for the frames of " + DependencyName(job, job.input_frames_from) +
               " to be gathered as its input";
    } else if (WaitsOnFrames(task, job)) {
      reason = "waiting for " +
               (task.frame_start == task.frame_end ? "frame " + std::to_string(task.frame_start)
                                                   : "frames " + std::to_string(task.frame_start) +
                                                         "-" + std::to_string(task.frame_end)) +
               " of";
      for (int64_t dep : job.frame_deps) {
        reason += (dep == job.frame_deps.front() ? " " : ", ") + DependencyName(job, dep);
      }
    } else if (!policy::LimitsAllow(job.needs.limits, options_.limits, limits_in_use_)) {
      reason = "a limit is at its maximum:";
      const std::set<std::string> limits(job.needs.limits.begin(), job.needs.limits.end());
      for (const std::string& name : limits) {
        auto max = options_.limits.find(name);
        reason += " " + name + " (" + std::to_string(limits_in_use_[name]) + " of " +
                  (max == options_.limits.end() ? std::string("0, not configured")
                                                : std::to_string(max->second)) +
                  " in use)";
      }
    } else if (!policy::ProjectAllows(job.project, shares_)) {
      reason = "project " + job.project + " is at its cap of " +
               std::to_string(options_.projects.at(job.project).max_running) + " running tasks";
    } else if (job.outputs_held) {
      reason = HeldReason(job);
    } else if (job.paused) {
      reason = "job " + std::to_string(task.job_id) + " is paused (tessera resume " +
               std::to_string(task.job_id) + ")";
    } else if (workers_.empty()) {
      reason = "no workers are connected";
    } else {
      int eligible = 0, free = 0;
      std::string no_room;  // the first eligible worker's lack of CPU or GPU room
      for (const auto& [identity, worker] : workers_) {
        const std::string never = policy::WhyNever(job.needs, worker.offer);
        const std::string room =
            never.empty() ? worker.claims.WhyNoRoom(job.needs.resources, worker.offer) : "";
        const bool now = never.empty() && worker.free_slots() > 0 && room.empty();
        eligible += never.empty();
        free += now;
        if (no_room.empty()) no_room = room;
        details.push_back(worker.offer.name + ": " +
                          (!never.empty()              ? never
                           : !worker.disk_full.empty() ? "its disk is full: " + worker.disk_full
                           : now           ? std::to_string(worker.free_slots()) + " free slot(s)"
                           : !room.empty() ? "busy: " + room
                                           : "busy"));
      }
      const QueueKey key = LeaseTable::KeyOf(task, job);
      const auto ahead = std::distance(leases_.queue().begin(), leases_.queue().lower_bound(key));
      if (eligible == 0) {
        reason =
            job.notice.value_or("no connected worker can run job " + std::to_string(task.job_id));
      } else if (free == 0) {
        reason = "waiting for a free slot on " + std::to_string(eligible) + " worker(s); " +
                 std::to_string(ahead) + " queued task(s) are ahead of it";
        if (!no_room.empty()) reason += " (" + no_room + ")";
      } else {
        reason = "about to be dispatched (" + std::to_string(ahead) + " task(s) ahead)";
      }
      details.push_back("failures so far: " + std::to_string(task.failures) + " of " +
                        std::to_string(job.max_retries) + " allowed retries");
    }
    nlohmann::json why{{"task_id", task_id},
                       {"state", task.running() ? "running" : "queued"},
                       {"reason", reason},
                       {"details", details}};
    if (!task.checkpoint_hash.empty()) {
      // Where its next attempt would resume (a hand-back's or a periodic checkpoint).
      why["checkpoint"] = {{"frame", task.resume_frame},
                           {"samples", task.checkpoint_samples},
                           {"attempt", task.checkpoint_attempt}};
    }
    return why;
  });
}

assembler::FrameOutput Broker::FrameOutputOf(const store::JobRecord& job) {
  return {job.output_dir, job.output_pattern, job.output_formats, job.exr_float};
}

void Broker::EnqueueJob(int64_t job_id) {
  for (const auto& [id, task] : leases_.tasks()) {
    // A frame being assembled has all its parts: nothing of it is rendered again.
    if (task.job_id == job_id && !task.running() && !task.assembling) Enqueue(task);
  }
}

void Broker::CountRunning(JobInfo& job, int delta) {
  job.running += delta;
  for (const std::string& name : job.needs.limits) limits_in_use_[name] += delta;
  shares_.project_running[job.project] += delta;
  shares_.user_running[{job.project, job.user}] += delta;
}

void Broker::UpdateFeasibility(int64_t job_id, JobInfo& job) {
  if (job.outputs_held) return;  // its notice says why it is held until it resumes
  std::optional<std::string> notice;
  if (!workers_.empty() && std::none_of(workers_.begin(), workers_.end(), [&](const auto& w) {
        return policy::CouldEverRun(job.needs, w.second.offer);
      })) {
    const auto& [identity, first] = *workers_.begin();
    notice = "no connected worker can run this job (" + std::to_string(workers_.size()) +
             " connected; e.g. " + first.offer.name + ": " +
             policy::WhyNever(job.needs, first.offer) + ")";
  }
  if (notice == job.notice) return;
  job.notice = notice;
  (void)store_.SetJobNotice(job_id, notice);
  if (notice) {
    spdlog::warn("job {}: {}", job_id, *notice);
    RecordEvent(job_id, std::nullopt, std::nullopt, "job_infeasible", *notice);
  } else {
    spdlog::info("job {}: a connected worker can run it again", job_id);
  }
}

void Broker::UpdateAllFeasibility() {
  for (auto& [id, job] : leases_.jobs()) UpdateFeasibility(id, job);
}

// ---- loading from the store -----------------------------------------------------------------

Status Broker::LoadJob(int64_t job_id) {
  if (leases_.jobs().count(job_id)) return Status::Ok();
  TSR_ASSIGN_OR_RETURN(store::JobRecord job, store_.GetJob(job_id));
  TSR_ASSIGN_OR_RETURN(std::string scene, store_.JobScene(job_id));
  TSR_ASSIGN_OR_RETURN(auto failures, store_.WorkerFailures(job_id));
  JobInfo info;
  info.priority = job.priority;
  info.max_retries = job.max_retries;
  info.produces_frames = job.produces_frames();
  info.returns_files = job.returns_files();
  info.renderer = job.renderer;
  if (auto renderer = plugin::FindRenderer(job.renderer)) info.exact_parts = renderer->exact_parts;
  info.output = FrameOutputOf(job);
  using Flags = std::map<int, std::string>;
  TSR_ASSIGN_OR_RETURN(Flags flags, store_.FrameFlags(job_id, spec::kMinFrame, spec::kMaxFrame));
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
    StatusOr<store::JobRecord> other = store_.GetJob(dep);
    // A dependency deleted from the farm was finished; only a live, unfinished one holds.
    if (other.ok() && other->state != store::JobState::kDone) info.waiting_on.insert(dep);
  }
  info.frame_deps = job.frame_depends_on;
  info.failure_policy = job.failure_policy;
  info.pipeline_id = job.pipeline_id;
  info.step = job.step;
  FindInputFrames(job, info);
  auto& stored = leases_.jobs()[job_id] = std::move(info);
  HoldIfOutputsFull(job_id, stored);
  UpdateFeasibility(job_id, stored);
  if (stored.inputs_pending && stored.waiting_on.empty()) GatherInputFrames(job_id, stored);
  return Status::Ok();
}

void Broker::LoadTasks(std::optional<int64_t> job_id) {
  if (Status s = LoadStoredTasks(job_id, /*requeue_running=*/true); !s.ok()) {
    spdlog::error("cannot load tasks: {}", s.ToString());
  }
}

Status Broker::LoadStoredTasks(std::optional<int64_t> job_id, bool requeue_running) {
  TSR_ASSIGN_OR_RETURN(std::vector<store::TaskRecord> tasks,
                       store_.LoadUnfinishedTasks(job_id, requeue_running));
  size_t added = 0;
  for (const store::TaskRecord& t : tasks) {
    if (leases_.tasks().count(t.id)) continue;
    if (Status s = LoadJob(t.job_id); !s.ok()) {
      spdlog::error("cannot load job {}: {}", t.job_id, s.ToString());
      continue;
    }
    // A re-rendered task of a job others depend on frame by frame holds those frames again.
    if (FrameGate* gate = leases_.FindGate(t.job_id)) gate->undone[t.frame_start] = t.frame_end;
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
    ++leases_.jobs()[t.job_id].unfinished;
    if (leases_.jobs()[t.job_id].parts_per_frame > 1) leases_.AddPart(t.job_id, t.frame_start);
    const LiveTask& task = leases_.tasks().emplace(t.id, std::move(live)).first->second;
    if (t.interrupted) {
      // Its worker is probably still rendering it and will re-attach when it re-registers.
      leases_.AwaitReattach(t.id, now_ + std::chrono::milliseconds(int64_t{options_.heartbeat_ms} *
                                                                   options_.liveness));
    } else {
      Enqueue(task);
    }
    ++added;
  }
  if (job_id) {
    spdlog::info("job {} queued: {} tasks", *job_id, added);
  } else if (added) {
    spdlog::info("restored {} unfinished tasks from the store", added);
  }
  return Status::Ok();
}

void Broker::Enqueue(const LiveTask& task) {
  const JobInfo& job = leases_.jobs()[task.job_id];
  if (job.paused || job.outputs_held || !job.waiting_on.empty() || job.inputs_pending) return;
  if (task.not_before > now_) {  // a licence failure's wait: OnTimer queues it then
    waiting_tasks_.emplace(task.not_before, task.task_id);
    return;
  }
  if (WaitsOnFrames(task, job)) {
    for (int64_t dep : job.frame_deps) {
      GateFor(dep).waiters.emplace(task.frame_start, task.task_id);
    }
    return;
  }
  leases_.queue().insert(LeaseTable::KeyOf(task, job));
}

// ---- dependencies ---------------------------------------------------------------------------

void Broker::OnJobFinished(int64_t job_id) {
  StatusOr<store::JobRecord> job = store_.GetJob(job_id);
  if (!job.ok()) return;
  if (job->state != store::JobState::kDone) {
    // The steps after a failed step cannot run; other dependents keep waiting.
    if (job->terminal()) CancelStepsAfter(*job);
    return;
  }
  for (auto& [id, info] : leases_.jobs()) {
    if (info.waiting_on.erase(job_id) && info.waiting_on.empty()) {
      spdlog::info("job {}: dependency job {} is done; its tasks are queued", id, job_id);
      EnqueueJob(id);
      if (info.inputs_pending) GatherInputFrames(id, info);
    }
  }
  leases_.DropUnusedGates();
}

FrameGate& Broker::GateFor(int64_t job_id) {
  if (FrameGate* gate = leases_.FindGate(job_id)) return *gate;
  FrameGate& gate = leases_.AddGate(job_id);
  // A job that no longer exists holds nothing; one that does holds its frames until done.
  StatusOr<std::vector<std::pair<int, int>>> undone = store_.UndoneFrameRanges(job_id);
  if (undone.ok()) {
    for (const auto& [first, last] : *undone) gate.undone[first] = last;
  } else {
    spdlog::error("job {}: cannot read its frames for dependents: {}", job_id,
                  undone.status().ToString());
  }
  return gate;
}

bool Broker::WaitsOnFrames(const LiveTask& task, const JobInfo& job) {
  for (int64_t dep : job.frame_deps) {
    const std::map<int, int>& undone = GateFor(dep).undone;
    // Ranges are disjoint and keyed by start: only the last one starting at or before our end
    // can reach into our range.
    auto it = undone.upper_bound(task.frame_end);
    if (it != undone.begin() && std::prev(it)->second >= task.frame_start) return true;
  }
  return false;
}

void Broker::OnFramesDone(int64_t job_id, int frame_start, int frame_end) {
  if (options_.events) {
    for (int frame = frame_start; frame <= frame_end; ++frame) {
      Publish("frame", {{"job_id", job_id}, {"frame", frame}});
    }
  }
  const std::vector<int64_t> ready = leases_.FramesDone(job_id, frame_start, frame_end);
  for (int64_t id : ready) {
    auto task = leases_.tasks().find(id);
    if (task != leases_.tasks().end() && !task->second.running()) Enqueue(task->second);
  }
}

}  // namespace tessera::broker
