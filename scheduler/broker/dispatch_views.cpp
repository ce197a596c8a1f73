// Dispatch's read-only answers: why a task waits (`tessera why`, GET /api/v1/tasks/{id}/why) and
// the capacity view the autoscaler plans from. Both read the queue as the dispatcher walks it.

#include <algorithm>
#include <set>

#include "scheduler/broker/dispatch.h"
#include "scheduler/store/store.h"

namespace tessera::broker {

namespace {

// How `tessera why` names a job `job` depends on: "step render" (a step of the same job) or
// "job 12".
std::string DependencyName(store::Store& store, const JobInfo& job, int64_t dep) {
  if (job.pipeline_id) {
    StatusOr<store::JobRecord> other = store.GetJob(dep);
    if (other.ok() && other->pipeline_id == job.pipeline_id) return "step " + other->step;
  }
  return "job " + std::to_string(dep);
}

}  // namespace

StatusOr<nlohmann::json> Dispatch::Why(Pass& pass, int64_t task_id) {
  auto it = p_.table.tasks().find(task_id);
  if (it == p_.table.tasks().end()) {
    StatusOr<store::TaskRecord> rec = pass.store.GetTask(task_id);
    if (!rec.ok()) return rec.status();
    std::string state = store::TaskStateName(rec->state);
    return nlohmann::json{
        {"task_id", task_id},
        {"state", state},
        {"reason", "the task is " + state + (rec->message.empty() ? "" : ": " + rec->message)},
        {"details", nlohmann::json::array()}};
  }
  const LiveTask& task = it->second;
  const JobInfo& job = p_.table.jobs()[task.job_id];
  const std::map<std::string, int>& in_use = p_.running.limits_in_use;
  nlohmann::json details = nlohmann::json::array();
  std::string reason;
  if (task.running()) {
    reason = "running";
    for (const Lease& l : task.leases) {
      const WorkerConn* holder = p_.workers.Find(l.worker);
      reason += std::string(&l == &task.leases.front() ? " on " : ", and as a backup copy on ") +
                "worker " + (holder != nullptr ? holder->offer.name : "?") + ", attempt " +
                std::to_string(l.attempt);
    }
  } else if (!job.waiting_on.empty()) {
    reason = "waiting for";
    for (int64_t dep : job.waiting_on) {
      StatusOr<store::JobRecord> other = pass.store.GetJob(dep);
      reason += (dep == *job.waiting_on.begin() ? " " : ", ") +
                DependencyName(pass.store, job, dep) + " (" +
                (other.ok() ? store::JobStateName(other->state) : "unknown") + ")";
    }
  } else if (job.inputs_pending) {
    reason = "waiting for the frames of " + DependencyName(pass.store, job, job.input_frames_from) +
             " to be gathered as its input";
  } else if (p_.queue.WaitsOnFrames(pass, task, job)) {
    reason = "waiting for " +
             (task.frame_start == task.frame_end ? "frame " + std::to_string(task.frame_start)
                                                 : "frames " + std::to_string(task.frame_start) +
                                                       "-" + std::to_string(task.frame_end)) +
             " of";
    for (int64_t dep : job.frame_deps) {
      reason += (dep == job.frame_deps.front() ? " " : ", ") + DependencyName(pass.store, job, dep);
    }
  } else if (!policy::LimitsAllow(job.needs.limits, p_.options.limits, in_use)) {
    reason = "a limit is at its maximum:";
    const std::set<std::string> limits(job.needs.limits.begin(), job.needs.limits.end());
    for (const std::string& name : limits) {
      auto max = p_.options.limits.find(name);
      auto used = in_use.find(name);
      reason += " " + name + " (" + std::to_string(used == in_use.end() ? 0 : used->second) +
                " of " +
                (max == p_.options.limits.end() ? std::string("0, not configured")
                                                : std::to_string(max->second)) +
                " in use)";
    }
  } else if (!policy::ProjectAllows(job.project, p_.running.shares)) {
    reason = "project " + job.project + " is at its cap of " +
             std::to_string(p_.options.projects.at(job.project).max_running) + " running tasks";
  } else if (job.outputs_held) {
    reason = job.notice.value_or("held: its outputs' filesystem is full");
  } else if (job.paused) {
    reason = "job " + std::to_string(task.job_id) + " is paused (tessera resume " +
             std::to_string(task.job_id) + ")";
  } else if (p_.workers.empty()) {
    reason = "no workers are connected";
  } else {
    int eligible = 0, free = 0;
    std::string none_free;  // the first eligible worker's lack of free cores, RAM or GPUs
    for (const auto& [identity, worker] : p_.workers) {
      const std::string never = policy::WhyNever(job.needs, worker.offer);
      const std::string busy =
          never.empty() ? worker.claims.WhyNoneFree(job.needs.resources, worker.offer) : "";
      const bool now = never.empty() && worker.free_slots() > 0 && busy.empty();
      eligible += never.empty();
      free += now;
      if (none_free.empty()) none_free = busy;
      details.push_back(worker.offer.name + ": " +
                        (!never.empty()              ? never
                         : !worker.disk_full.empty() ? "its disk is full: " + worker.disk_full
                         : now           ? std::to_string(worker.free_slots()) + " free slot(s)"
                         : !busy.empty() ? "busy: " + busy
                                         : "busy"));
    }
    const QueueKey key = LeaseTable::KeyOf(task, job);
    const auto ahead = std::distance(p_.table.queue().begin(), p_.table.queue().lower_bound(key));
    if (eligible == 0) {
      reason =
          job.notice.value_or("no connected worker can run job " + std::to_string(task.job_id));
    } else if (free == 0) {
      reason = "waiting for a free slot on " + std::to_string(eligible) + " worker(s); " +
               std::to_string(ahead) + " queued task(s) are ahead of it";
      if (!none_free.empty()) reason += " (" + none_free + ")";
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
}

CapacityView Dispatch::Capacity(const Pass& pass) const {
  const auto seconds = [](Clock::SteadyTime::duration d) {
    return std::chrono::duration<double>(d).count();
  };
  const LeaseTable& table = p_.table;
  CapacityView view;
  // Waiting work: the queue, in dispatch order, less what project caps and named limits would
  // hold back now.
  std::map<std::string, int64_t> project_left, limit_left;
  for (const auto& [name, share] : p_.options.projects) {
    if (share.max_running > 0) {
      auto running = p_.running.shares.project_running.find(name);
      project_left[name] =
          share.max_running -
          (running == p_.running.shares.project_running.end() ? 0 : running->second);
    }
  }
  for (const auto& [name, count] : p_.options.limits) {
    auto used = p_.running.limits_in_use.find(name);
    limit_left[name] = count - (used == p_.running.limits_in_use.end() ? 0 : used->second);
  }
  std::map<int64_t, size_t> index_of;  // job id -> its entry in view.jobs
  for (const QueueKey& key : table.queue()) {
    const int64_t job_id = std::get<1>(key);
    const JobInfo& job = table.jobs().at(job_id);
    auto left = project_left.find(job.project);
    if (left != project_left.end() && left->second <= 0) continue;
    bool limited = false;
    for (const std::string& l : job.needs.limits) {
      auto it = limit_left.find(l);
      if (it != limit_left.end() && it->second <= 0) limited = true;
    }
    if (limited) continue;
    if (left != project_left.end()) --left->second;
    for (const std::string& l : job.needs.limits) {
      if (auto it = limit_left.find(l); it != limit_left.end()) --it->second;
    }
    auto [it, added] = index_of.try_emplace(job_id, view.jobs.size());
    if (added) view.jobs.push_back({.job_id = job_id});
    ++view.jobs[it->second].waiting;
  }
  // Running work counts too (a job with nothing waiting still needs its nodes).
  for (const auto& [job_id, job] : table.jobs()) {
    if (job.running > 0 && index_of.try_emplace(job_id, view.jobs.size()).second) {
      view.jobs.push_back({.job_id = job_id});
    }
  }
  for (CapacityView::JobDemand& d : view.jobs) {
    const JobInfo& job = table.jobs().at(d.job_id);
    d.name = job.name;
    d.priority = job.priority;
    d.running = job.running;
    d.pools = job.needs.pools;
    d.tags = job.needs.tags;
    d.resources = job.needs.resources;
    d.seconds_per_task = job.tasks_done > 0 ? job.done_seconds / job.tasks_done : 0;
    d.interruptible = job.interruptible;
    d.deadline_ms = job.deadline_ms;
  }
  std::stable_sort(view.jobs.begin(), view.jobs.end(), [](const auto& a, const auto& b) {
    return a.priority != b.priority ? a.priority > b.priority : a.job_id < b.job_id;
  });
  for (const auto& [identity, worker] : p_.workers) {
    CapacityView::WorkerActivity w;
    w.name = worker.offer.name;
    w.busy = !worker.tasks.empty();
    w.draining = worker.draining || worker.disabled;
    w.idle_seconds = w.busy ? 0 : seconds(pass.now - worker.idle_since);
    for (int64_t task_id : worker.tasks) {
      const LiveTask& task = table.tasks().at(task_id);
      const JobInfo& job = table.jobs().at(task.job_id);
      const Lease* lease = task.LeaseOn(identity);
      if (!lease || job.tasks_done == 0) {
        w.busy_for_seconds.reset();
        break;
      }
      const double left =
          std::max(0.0, job.done_seconds / job.tasks_done - seconds(pass.now - lease->leased_at));
      w.busy_for_seconds = std::max(w.busy_for_seconds.value_or(0), left);
    }
    view.workers.push_back(std::move(w));
  }
  return view;
}

}  // namespace tessera::broker
