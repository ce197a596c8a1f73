#include "scheduler/broker/leases.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

#include "scheduler/broker/event_sink.h"
#include "scheduler/broker/outbox.h"
#include "shared/wire/protocol.h"

namespace tessera::broker {

using protocol::MessageType;

LiveTask* Leases::Find(const Pass& pass, const std::string& identity, int64_t task_id, int attempt,
                       const char* what) {
  if (LiveTask* task = p_.table.FindLease(identity, task_id, attempt)) return task;
  p_.boundary.Stale(pass, what, task_id, attempt);
  return nullptr;
}

void Leases::Add(Pass& pass, LiveTask& task, const std::string& identity, WorkerConn& worker,
                 int attempt, const std::vector<int>& gpus) {
  JobInfo& job = p_.table.jobs()[task.job_id];
  p_.running.Count(job, +1);
  pass.events.JobChanged(task.job_id);
  LeaseTable::AddLease(task, identity, attempt, gpus, pass.now);
  WorkerRegistry::Book(worker, task.task_id, attempt, job.needs.resources, gpus);
}

void Leases::Release(Pass& pass, LiveTask& task, const std::string& identity) {
  auto lease = std::find_if(task.leases.begin(), task.leases.end(),
                            [&](const Lease& l) { return l.worker == identity; });
  if (lease == task.leases.end()) return;
  p_.running.Count(p_.table.jobs()[task.job_id], -1);
  pass.events.JobChanged(task.job_id);
  if (WorkerConn* worker = p_.workers.Find(identity)) {
    Charge(pass, task, *lease, *worker);
    WorkerRegistry::Release(*worker, task.task_id, lease->attempt, pass.now);
  }
  task.leases.erase(lease);
}

void Leases::Charge(Pass& pass, const LiveTask& task, const Lease& lease,
                    const WorkerConn& worker) {
  // A share of a GPU counts its part.
  const double gpus = worker.claims.GpusHeld(task.task_id, lease.attempt, worker.offer,
                                             static_cast<double>(lease.gpus.size()));
  if (gpus == 0 && worker.price.per_hour <= 0) return;  // nothing to count: no write
  const double seconds = std::chrono::duration<double>(pass.now - lease.leased_at).count();
  // Its share of the worker: its GPUs of the worker's, or one slot of a worker without GPUs.
  const double share = worker.offer.gpus.empty()
                           ? 1.0 / worker.slots
                           : gpus / static_cast<double>(worker.offer.gpus.size());
  const double cost = worker.price.per_hour * seconds / 3600 * share;
  if (Status s = pass.store.AddTaskCost(task.task_id, task.job_id, gpus * seconds, cost); !s.ok()) {
    spdlog::error("task {}: cannot record its cost: {}", task.task_id, s.ToString());
  }
}

void Leases::Cancel(Pass& pass, LiveTask& task, const std::string& identity) {
  Lease* lease = task.LeaseOn(identity);
  if (!lease) return;
  pass.outbox.Send(identity, protocol::Encode(MessageType::kCancel,
                                              protocol::Cancel{task.task_id, lease->attempt}));
  if (WorkerConn* worker = p_.workers.Find(identity)) {
    WorkerRegistry::MarkStopping(*worker, task.task_id, lease->attempt);
  }
  Release(pass, task, identity);
}

void Leases::CancelAll(Pass& pass, LiveTask& task, const std::string& why) {
  while (!task.leases.empty()) {
    const std::string holder = task.leases.back().worker;  // Cancel erases the lease
    EndAttempt(pass, task, task.leases.back().attempt, store::AttemptOutcome::kCanceled, "", why,
               /*charged=*/false);
    Cancel(pass, task, holder);
  }
}

void Leases::End(Pass& pass, LiveTask& task, const std::string& identity,
                 const store::AttemptEnd& end, bool cancel) {
  Lease* lease = task.LeaseOn(identity);
  if (!lease) return;
  const int attempt = lease->attempt;
  const std::string& reason = end.message;
  const bool count_failure = end.charged;
  EndAttempt(pass, task, attempt, end.outcome, end.failure_class, end.message, end.charged);
  if (cancel) {
    Cancel(pass, task, identity);
  } else {
    Release(pass, task, identity);
  }
  if (task.running() || task.done_attempt != 0) {
    // The other copy runs on (or has already delivered): only this one ends.
    spdlog::info("job {} task {} attempt {} dropped ({}); its other copy runs on", task.job_id,
                 task.task_id, attempt, reason);
    if (count_failure) ++task.failures;
    if (Status s = pass.store.EndCopy(task.task_id, attempt, count_failure); !s.ok()) {
      spdlog::error("task {}: cannot drop attempt {}: {}", task.task_id, attempt, s.ToString());
    }
    return;
  }
  Requeue(pass, task, attempt, reason, count_failure);
}

void Leases::EndAttempt(Pass& pass, const LiveTask& task, int attempt,
                        store::AttemptOutcome outcome, const std::string& failure_class,
                        const std::string& message, bool charged) {
  if (attempt <= 0) return;
  // At debug: the caller has logged the event that ended it.
  spdlog::debug("job {} task {} attempt {}: {}{}{}", task.job_id, task.task_id, attempt,
                store::AttemptOutcomeName(outcome),
                failure_class.empty() ? "" : " (" + failure_class + ")",
                message.empty() ? "" : ": " + message);
  if (Status s = pass.store.EndAttempt(task.task_id, attempt, task.job_id,
                                       {outcome, failure_class, message, charged});
      !s.ok()) {
    spdlog::error("task {} attempt {}: cannot record its outcome: {}", task.task_id, attempt,
                  s.ToString());
  }
}

void Leases::SaveLog(Pass& pass, const LiveTask& task, int attempt, const WorkerConn& worker,
                     std::string log) {
  if (log.empty()) return;  // noop tasks say nothing: the attempt's row stays as it is
  if (log.size() > protocol::kMaxTaskLogBytes) {
    log.erase(0, log.size() - protocol::kMaxTaskLogBytes);
  }
  store::TaskLogRecord record;
  record.task_id = task.task_id;
  record.attempt = attempt;
  record.job_id = task.job_id;
  record.worker_id = worker.offer.id;
  record.log = std::move(log);
  if (Status s = pass.store.SaveTaskLog(record); !s.ok()) {
    spdlog::warn("task {} attempt {}: cannot keep its log: {}", task.task_id, attempt, s.message());
  }
}

void Leases::ChargeWorker(Pass& pass, LiveTask& task, const WorkerConn& worker) {
  JobInfo& job = p_.table.jobs()[task.job_id];
  const int64_t worker_id = worker.offer.id;
  task.failed_on.insert(worker_id);
  if (Status s = pass.store.RecordWorkerFailure(task.job_id, task.task_id, worker_id); !s.ok()) {
    spdlog::error("job {}: cannot record a failure on worker {}: {}", task.job_id,
                  worker.offer.name, s.ToString());
  }
  int failures = ++job.failures_by_worker[worker_id];
  if (job.blocklist_after > 0 && failures >= job.blocklist_after &&
      job.needs.blocklist.insert(worker_id).second) {
    spdlog::warn("job {}: worker {} blocklisted after {} failures", task.job_id, worker.offer.name,
                 failures);
    pass.events.Record(task.job_id, task.task_id, worker_id, "worker_blocklisted",
                       worker.offer.name + " failed " + std::to_string(failures) + " tasks");
    p_.feasibility.Update(pass, task.job_id, job);
  }
}

void Leases::Requeue(Pass& pass, LiveTask& task, int attempt, const std::string& reason,
                     bool count_failure, bool handed_back) {
  const JobInfo& job = p_.table.jobs()[task.job_id];
  pass.events.JobChanged(task.job_id);
  if (count_failure) ++task.failures;
  std::string fatal = std::exchange(task.fail_now, "");
  if (!fatal.empty()) {
    // A failure whose class leaves no retry (TaskEnds: the failure classes).
  } else if (count_failure && task.failures > job.max_retries) {
    fatal = "failed " + std::to_string(task.failures) + " times";
  } else if (count_failure && job.fail_after_workers > 0 &&
             static_cast<int>(task.failed_on.size()) >= job.fail_after_workers) {
    fatal = "failed on " + std::to_string(task.failed_on.size()) + " different workers";
  }
  if (!fatal.empty()) {
    Status s = pass.store.FailTask(task.task_id, attempt, reason + " (" + fatal + ")", task.job_id);
    if (!s.ok()) spdlog::error("task {}: cannot record failure: {}", task.task_id, s.ToString());
    spdlog::error("job {} task {} failed permanently ({}): {}", task.job_id, task.task_id, fatal,
                  reason);
    Retire(pass, task.task_id);
    return;
  }
  Status s = pass.store.RequeueTask(task.task_id, attempt, reason, count_failure, task.job_id);
  if (!s.ok()) spdlog::error("task {}: cannot requeue: {}", task.task_id, s.ToString());
  spdlog::info("job {} task {} requeued ({}): {}", task.job_id, task.task_id,
               count_failure ? "failure " + std::to_string(task.failures) : "not charged", reason);
  task.done_attempt = 0;
  p_.acks.AckTask(pass, task);
  if (!handed_back && !Checkpoints::Resumes(task, count_failure)) {
    // A new attempt renders every frame again.
    p_.checkpoints.Clear(task);
    task.frames_written.clear();
    task.frames_in_flight.clear();
  }
  p_.queue.Enqueue(pass, task);
}

void Leases::Retire(Pass& pass, int64_t task_id) {
  auto it = p_.table.tasks().find(task_id);
  if (it == p_.table.tasks().end()) return;
  p_.acks.AckTask(pass, it->second);  // its outcome is recorded in this pass
  p_.checkpoints.Clear(it->second);
  const int64_t job_id = it->second.job_id;
  if (p_.table.Remove(task_id)) {
    spdlog::info("job {} has no unfinished tasks left", job_id);
    pass.finished_jobs.push_back(job_id);
  }
}

}  // namespace tessera::broker
