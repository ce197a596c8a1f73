#include "scheduler/broker/dispatch.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <climits>

#include "scheduler/broker/broker_counters.h"
#include "scheduler/broker/outbox.h"
#include "scheduler/store/store.h"

namespace tessera::broker {

using protocol::MessageType;

void Dispatch::Reattach(Pass& pass, const std::string& identity, WorkerConn& worker,
                        const protocol::TaskRef& ref, bool delivering) {
  auto it = p_.table.tasks().find(ref.task_id);
  // A finished render waiting to deliver needs no slot: its results follow at once.
  if (it == p_.table.tasks().end() || it->second.running() || it->second.attempt != ref.attempt ||
      (!delivering && worker.free_slots() <= 0) ||
      !pass.store.ReattachTask(ref.task_id, ref.attempt, worker.offer.id, it->second.job_id).ok()) {
    spdlog::info(
        "worker {} still renders task {} attempt {}, which is no longer its lease: "
        "told to stop",
        worker.offer.name, ref.task_id, ref.attempt);
    pass.outbox.Send(identity, protocol::Encode(MessageType::kCancel,
                                                protocol::Cancel{ref.task_id, ref.attempt}));
    // Its slot is freed once it stops.
    WorkerRegistry::MarkStopping(worker, ref.task_id, ref.attempt);
    return;
  }
  LiveTask& task = it->second;
  JobInfo& job = p_.table.jobs()[task.job_id];
  p_.table.queue().erase(LeaseTable::KeyOf(task, job));
  p_.table.Reattached(task.task_id);
  // Which GPUs it renders on is not reported; book the ones the policy would pick.
  std::vector<int> gpus = policy::PickGpus(job.needs.resources, worker.offer, worker.claims.gpus())
                              .value_or(std::vector<int>{});
  p_.leases.Add(pass, task, identity, worker, ref.attempt, gpus);
  spdlog::info("job {} task {} attempt {} re-attached to worker {}", task.job_id, task.task_id,
               ref.attempt, worker.offer.name);
}

std::set<QueueKey>::iterator Dispatch::NextTaskFor(const WorkerConn& worker,
                                                   std::vector<int>* gpus) {
  // Walk the queue one job at a time (it is ordered by priority, then job). Among the jobs of
  // the highest priority that have a task this worker can run now, the policy's fair share
  // picks one; only when none can run does a lower priority get the worker.
  std::vector<policy::Candidate> candidates;
  std::vector<std::set<QueueKey>::iterator> heads;
  std::vector<std::vector<int>> picked_gpus;
  std::set<QueueKey>& queue = p_.table.queue();
  for (auto it = queue.begin(); it != queue.end();) {
    const int neg_priority = std::get<0>(*it);
    if (!candidates.empty() && neg_priority != std::get<0>(*heads.front())) break;
    const int64_t job_id = std::get<1>(*it);
    const JobInfo& job = p_.table.jobs()[job_id];
    if (policy::CouldEverRun(job.needs, worker.offer) &&
        policy::LimitsAllow(job.needs.limits, p_.options.limits, p_.running.limits_in_use)) {
      if (auto picked = worker.claims.Pick(job.needs.resources, worker.offer)) {
        candidates.push_back({job_id, job.project, job.user, job.running, job.dispatched});
        heads.push_back(it);
        picked_gpus.push_back(std::move(*picked));
      }
    }
    it = queue.lower_bound({neg_priority, job_id + 1, INT_MIN, INT64_MIN});
  }
  std::optional<size_t> best = policy::PickFairShare(candidates, p_.running.shares);
  if (!best) return queue.end();
  *gpus = std::move(picked_gpus[*best]);
  return heads[*best];
}

bool Dispatch::StartLease(Pass& pass, LiveTask& task, const std::string& identity,
                          WorkerConn& worker, std::vector<int> gpus, bool backup) {
  JobInfo& job = p_.table.jobs()[task.job_id];
  const int attempt = task.attempt + 1;
  // The lease is written in this pass's transaction; the assignment leaves only after that
  // commits (the outbox), so a worker never holds a lease the store does not.
  Status s = backup
                 ? pass.store.StartBackup(task.task_id, attempt, worker.offer.id, gpus)
                 : pass.store.StartTask(task.task_id, attempt, worker.offer.id, task.job_id, gpus);
  if (!s.ok()) {
    spdlog::error("task {}: cannot start lease: {}", task.task_id, s.ToString());
    return false;
  }
  task.attempt = attempt;
  ++job.dispatched;
  pass.counters.tasks_dispatched.fetch_add(1, std::memory_order_relaxed);
  p_.leases.Add(pass, task, identity, worker, attempt, gpus);
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
  pass.outbox.Send(identity, protocol::Encode(MessageType::kAssign, assign));
  // Per task at debug: a busy farm leases thousands a second. Job-level changes log at info.
  spdlog::debug("job {} task {} (frames {}-{}) -> worker {}, attempt {}{}", task.job_id,
                task.task_id, task.frame_start, task.frame_end, worker.offer.name, attempt,
                backup ? " (backup copy of a straggler)" : "");
  return true;
}

void Dispatch::Run(Pass& pass) {
  std::set<QueueKey>& queue = p_.table.queue();
  if (queue.empty()) return;
  for (auto& [identity, worker] : p_.workers) {
    while (worker.free_slots() > 0 && !queue.empty()) {
      std::vector<int> gpus;
      auto next = NextTaskFor(worker, &gpus);
      if (next == queue.end()) break;
      QueueKey key = *next;
      queue.erase(next);
      auto it = p_.table.tasks().find(std::get<3>(key));
      if (it == p_.table.tasks().end() || it->second.running()) continue;
      StartLease(pass, it->second, identity, worker, std::move(gpus), /*backup=*/false);
    }
    if (queue.empty()) return;
  }
}

void Dispatch::StartBackups(Pass& pass) {
  const std::vector<LeaseTable::Straggler> stragglers =
      p_.table.Stragglers(pass.now, p_.options.backup_factor, p_.options.backup_min_seconds);
  // Slowest first, each onto an idle worker other than the one running it.
  for (const LeaseTable::Straggler& straggler : stragglers) {
    LiveTask& task = p_.table.tasks().at(straggler.task_id);
    const JobInfo& job = p_.table.jobs()[task.job_id];
    if (!policy::LimitsAllow(job.needs.limits, p_.options.limits, p_.running.limits_in_use)) {
      continue;
    }
    for (auto& [identity, worker] : p_.workers) {
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
      StartLease(pass, task, identity, worker, std::move(*gpus), /*backup=*/true);
      break;
    }
  }
}

}  // namespace tessera::broker
