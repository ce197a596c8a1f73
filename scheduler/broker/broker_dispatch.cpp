// The broker's dispatch side: which queued task each worker with a free slot gets (the policy
// picks among the jobs of the highest priority), starting leases and sending the assignments,
// re-attaching the tasks a registering worker still runs, straggler backups, and the timers
// that end leases and drop workers (liveness, timeouts, re-attach deadlines, costs). The
// decisions that depend on time are the parts' (WorkerRegistry, LeaseTable); this file acts on
// them.

#include <spdlog/spdlog.h>

#include <algorithm>
#include <climits>

#include "scheduler/broker/broker.h"
#include "shared/base/wall_time.h"

namespace tessera::broker {

using protocol::MessageType;

void Broker::Reattach(const std::string& identity, WorkerConn& worker, const protocol::TaskRef& ref,
                      bool delivering) {
  auto it = leases_.tasks().find(ref.task_id);
  // A finished render waiting to deliver needs no slot: its results follow at once.
  if (it == leases_.tasks().end() || it->second.running() || it->second.attempt != ref.attempt ||
      (!delivering && worker.free_slots() <= 0) ||
      !store_.ReattachTask(ref.task_id, ref.attempt, worker.offer.id, it->second.job_id).ok()) {
    spdlog::info(
        "worker {} still renders task {} attempt {}, which is no longer its lease: "
        "told to stop",
        worker.offer.name, ref.task_id, ref.attempt);
    Send(identity,
         protocol::Encode(MessageType::kCancel, protocol::Cancel{ref.task_id, ref.attempt}));
    WorkerRegistry::MarkStopping(worker, ref.task_id,
                                 ref.attempt);  // its room is freed once it stops
    return;
  }
  LiveTask& task = it->second;
  JobInfo& job = leases_.jobs()[task.job_id];
  leases_.queue().erase(LeaseTable::KeyOf(task, job));
  leases_.Reattached(task.task_id);
  // Which GPUs it renders on is not reported; book the ones the policy would pick.
  std::vector<int> gpus = policy::PickGpus(job.needs.resources, worker.offer, worker.claims.gpus())
                              .value_or(std::vector<int>{});
  AddLease(task, identity, worker, ref.attempt, gpus);
  spdlog::info("job {} task {} attempt {} re-attached to worker {}", task.job_id, task.task_id,
               ref.attempt, worker.offer.name);
}

std::set<QueueKey>::iterator Broker::NextTaskFor(const WorkerConn& worker, std::vector<int>* gpus) {
  // Walk the queue one job at a time (it is ordered by priority, then job). Among the jobs of
  // the highest priority that have a task this worker can run now, the policy's fair share
  // picks one; only when none can run does a lower priority get the worker.
  std::vector<policy::Candidate> candidates;
  std::vector<std::set<QueueKey>::iterator> heads;
  std::vector<std::vector<int>> picked_gpus;
  for (auto it = leases_.queue().begin(); it != leases_.queue().end();) {
    const int neg_priority = std::get<0>(*it);
    if (!candidates.empty() && neg_priority != std::get<0>(*heads.front())) break;
    const int64_t job_id = std::get<1>(*it);
    const JobInfo& job = leases_.jobs()[job_id];
    if (policy::CouldEverRun(job.needs, worker.offer) &&
        policy::LimitsAllow(job.needs.limits, options_.limits, limits_in_use_)) {
      if (auto picked = worker.claims.Pick(job.needs.resources, worker.offer)) {
        candidates.push_back({job_id, job.project, job.user, job.running, job.dispatched});
        heads.push_back(it);
        picked_gpus.push_back(std::move(*picked));
      }
    }
    it = leases_.queue().lower_bound({neg_priority, job_id + 1, INT_MIN, INT64_MIN});
  }
  std::optional<size_t> best = policy::PickFairShare(candidates, shares_);
  if (!best) return leases_.queue().end();
  *gpus = std::move(picked_gpus[*best]);
  return heads[*best];
}

WorkerConn* Broker::HeardFrom(const std::string& identity, MessageType type) {
  WorkerConn* worker = workers_.HeardFrom(identity, now_);
  if (worker == nullptr) {
    // Not welcomed (or declared dead): ask it to register again.
    if (type != MessageType::kGoodbye) {
      Send(identity, protocol::Encode(MessageType::kUnknownWorker, nlohmann::json::object()));
    }
    return nullptr;
  }
  return worker;
}

void Broker::DropWorker(std::string identity, const std::string& reason) {
  WorkerConn* found = workers_.Find(identity);
  if (found == nullptr) return;
  WorkerConn& worker = *found;
  const std::string name = worker.offer.name;
  const int64_t worker_id = worker.offer.id;
  std::vector<int64_t> held(worker.tasks.begin(), worker.tasks.end());
  SetWorkerDiskFull(worker, "");  // its alerts go with it
  ClearGpuFaultAlert(worker);
  MeterCosts(&identity);
  for (int64_t task_id : held) {
    auto it = leases_.tasks().find(task_id);
    if (it == leases_.tasks().end()) continue;
    EndLease(it->second, identity,
             {store::AttemptOutcome::kLost, "", "worker " + name + " lost: " + reason,
              /*charged=*/false},
             /*cancel=*/false);
  }
  workers_.Remove(identity);
  transfers_.Forget(identity);
  (void)store_.SetWorkerState(worker_id, store::WorkerState::kOffline);
  RecordEvent(std::nullopt, std::nullopt, worker_id, "worker_lost", reason);
  spdlog::warn("worker {} (id {}) removed: {}; {} task(s) requeued", name, worker_id, reason,
               held.size());
  UpdateAllFeasibility();
}

void Broker::OnTimer() {
  const auto now = now_;
  for (const std::string& identity : workers_.Silent(now))
    DropWorker(identity, "missed heartbeats");
  // Tasks whose licence wait is over go back to the queue.
  while (!waiting_tasks_.empty() && waiting_tasks_.begin()->first <= now) {
    auto it = leases_.tasks().find(waiting_tasks_.begin()->second);
    waiting_tasks_.erase(waiting_tasks_.begin());
    if (it != leases_.tasks().end() && !it->second.running() && it->second.not_before <= now) {
      Enqueue(it->second);
    }
  }
  // Interrupted tasks whose worker did not come back in time go back to the queue.
  for (int64_t task_id : leases_.ReattachesDue(now)) {
    auto task = leases_.tasks().find(task_id);
    if (task != leases_.tasks().end() && !task->second.running()) Enqueue(task->second);
  }
  // Timeouts: a lease older than its job's task_timeout, or silent for longer than its
  // progress_timeout, is a (charged) failure.
  for (const LeaseTable::Expiry& e : leases_.Expired(now)) {
    LiveTask& task = leases_.tasks().at(e.task_id);
    const WorkerConn* worker = workers_.Find(e.identity);
    spdlog::warn("job {} task {} on {}: {}", task.job_id, e.task_id,
                 worker ? worker->offer.name : "?", e.why);
    if (worker) ChargeWorker(task, *worker);
    EndLease(task, e.identity,
             {store::AttemptOutcome::kFailed, protocol::kFailureTimeout, e.why, /*charged=*/true},
             /*cancel=*/true);
  }
  if (now >= next_meter_) {
    MeterCosts();
    next_meter_ = now + options_.cost_interval;
  }
  if (now >= next_touch_) {
    (void)store_.TouchWorkers(workers_.LastSeen(now, wall_time::NowMs()));
    next_touch_ = now + std::chrono::seconds(5);
  }
}

void Broker::AddLease(LiveTask& task, const std::string& identity, WorkerConn& worker, int attempt,
                      const std::vector<int>& gpus) {
  CountRunning(leases_.jobs()[task.job_id], +1);
  MarkJobChanged(task.job_id);
  LeaseTable::AddLease(task, identity, attempt, gpus, now_);
  WorkerRegistry::Book(worker, task.task_id, attempt, leases_.jobs()[task.job_id].needs.resources,
                       gpus);
}

bool Broker::StartLease(LiveTask& task, const std::string& identity, WorkerConn& worker,
                        std::vector<int> gpus, bool backup) {
  JobInfo& job = leases_.jobs()[task.job_id];
  const int attempt = task.attempt + 1;
  // The lease is written in this pass's transaction; the assignment leaves only after that
  // commits (FlushOutbox), so a worker never holds a lease the store does not.
  Status s = backup ? store_.StartBackup(task.task_id, attempt, worker.offer.id, gpus)
                    : store_.StartTask(task.task_id, attempt, worker.offer.id, task.job_id, gpus);
  if (!s.ok()) {
    spdlog::error("task {}: cannot start lease: {}", task.task_id, s.ToString());
    return false;
  }
  task.attempt = attempt;
  ++job.dispatched;
  dispatched_.fetch_add(1, std::memory_order_relaxed);
  AddLease(task, identity, worker, attempt, gpus);
  protocol::Assign assign{task.task_id,     attempt,         task.job_id,
                          task.frame_start, task.frame_end,  *job.scene_yaml,
                          job.renderer,     std::move(gpus), task.part};
  assign.scene_name = job.scene_name;
  assign.settings = job.settings;
  if (job.assets) assign.assets = *job.assets;
  if (job.output_shared && task.part.whole()) {
    assign.output = {job.output.dir, job.output.pattern, job.output.formats, job.output.exr_float};
  }
  assign.timeout_s = job.task_timeout_s;
  assign.checkpoint_interval_s = job.checkpoint_interval_s;
  assign.gpu_memory_mb = job.needs.resources.gpu_memory_mb;
  assign.cpu_cores = job.needs.resources.cpu_cores;
  if (task.resume_frame > 0 || !task.checkpoint_hash.empty()) {
    // A handed-back (or lost, checkpointed) task resumes where its last copy stopped (the worker
    // fetches the checkpoint).
    assign.resume_frame = task.resume_frame;
    assign.resume_checkpoint = task.checkpoint_hash;
    assign.resume_samples = task.checkpoint_hash.empty() ? 0 : task.checkpoint_samples;
    if (!task.checkpoint_hash.empty()) {
      spdlog::info(
          "job {} task {} attempt {} resumes frame {} from attempt {}'s checkpoint after "
          "{} samples",
          task.job_id, task.task_id, attempt, task.resume_frame, task.checkpoint_attempt,
          task.checkpoint_samples);
    }
  }
  // Its finished results made durable in this pass ride along (the commit precedes the send).
  assign.acks.swap(worker.pending_acks);
  Send(identity, protocol::Encode(MessageType::kAssign, assign));
  // Per task at debug: a busy farm leases thousands a second. Job-level changes log at info.
  spdlog::debug("job {} task {} (frames {}-{}) -> worker {}, attempt {}{}", task.job_id,
                task.task_id, task.frame_start, task.frame_end, worker.offer.name, attempt,
                backup ? " (backup copy of a straggler)" : "");
  return true;
}

void Broker::Dispatch() {
  if (leases_.queue().empty()) return;
  for (auto& [identity, worker] : workers_) {
    while (worker.free_slots() > 0 && !leases_.queue().empty()) {
      std::vector<int> gpus;
      auto next = NextTaskFor(worker, &gpus);
      if (next == leases_.queue().end()) break;
      QueueKey key = *next;
      leases_.queue().erase(next);
      auto it = leases_.tasks().find(std::get<3>(key));
      if (it == leases_.tasks().end() || it->second.running()) continue;
      StartLease(it->second, identity, worker, std::move(gpus), /*backup=*/false);
    }
    if (leases_.queue().empty()) return;
  }
}

void Broker::StartBackups() {
  const std::vector<LeaseTable::Straggler> stragglers =
      leases_.Stragglers(now_, options_.backup_factor, options_.backup_min_seconds);
  // Slowest first, each onto an idle worker other than the one running it.
  for (const LeaseTable::Straggler& straggler : stragglers) {
    LiveTask& task = leases_.tasks().at(straggler.task_id);
    const JobInfo& job = leases_.jobs()[task.job_id];
    if (!policy::LimitsAllow(job.needs.limits, options_.limits, limits_in_use_)) continue;
    for (auto& [identity, worker] : workers_) {
      if (worker.free_slots() <= 0 || task.LeaseOn(identity) ||
          !policy::CouldEverRun(job.needs, worker.offer)) {
        continue;
      }
      auto gpus = worker.claims.Pick(job.needs.resources, worker.offer);
      if (!gpus) continue;
      spdlog::info(
          "job {} task {} has run {:.1f} s (the job's tasks take {:.1f} s on average): "
          "backup copy on {}",
          task.job_id, task.task_id, straggler.seconds,
          job.done_seconds / static_cast<double>(job.tasks_done), worker.offer.name);
      StartLease(task, identity, worker, std::move(*gpus), /*backup=*/true);
      break;
    }
  }
}
}  // namespace tessera::broker
