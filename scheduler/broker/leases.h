#pragma once
// Leases: the life of each running copy of a task, as the broker acts on it -- booked on its
// worker (slot, GPUs) and counted against the limits and fair shares when it starts; when it
// ends, its attempt's outcome recorded, its holder told to stop (or just released), its
// GPU-seconds and cost charged, the worker charged for a failure (and blocklisted at the job's
// threshold); and when a task's last copy ends without finishing it, the task requeued -- or
// failed for good past its retries -- and, once finished either way, retired from memory.
// LeaseTable holds what these act on and decides by time; this class writes the store and sends.
//
// Threads: broker thread only.

#include <cstdint>
#include <string>
#include <vector>

#include "scheduler/broker/boundary.h"
#include "scheduler/broker/checkpoints.h"
#include "scheduler/broker/feasibility.h"
#include "scheduler/broker/lease_table.h"
#include "scheduler/broker/pass.h"
#include "scheduler/broker/result_acks.h"
#include "scheduler/broker/running_counts.h"
#include "scheduler/broker/task_queue.h"
#include "scheduler/broker/worker_registry.h"
#include "scheduler/store/store.h"

namespace tessera::broker {

class Leases {
 public:
  struct Parts {
    LeaseTable& table;
    WorkerRegistry& workers;
    RunningCounts& running;
    TaskQueue& queue;
    Checkpoints& checkpoints;
    ResultAcks& acks;
    Feasibility& feasibility;
    Boundary& boundary;
  };
  explicit Leases(Parts parts) : p_(parts) {}

  // The task whose copy on `identity` has `attempt`, or nullptr (logged, rate-limited) for a
  // stale message about any other copy.
  LiveTask* Find(const Pass& pass, const std::string& identity, int64_t task_id, int attempt,
                 const char* what);
  // Books a running copy of the task on the worker: slot, GPUs, running counts.
  void Add(Pass& pass, LiveTask& task, const std::string& identity, WorkerConn& worker, int attempt,
           const std::vector<int>& gpus);
  // Removes the copy on `identity` and frees its slot (its GPUs too unless it is stopping),
  // charging its GPU time and cost.
  void Release(Pass& pass, LiveTask& task, const std::string& identity);
  // Tells the holder of that copy to stop; its slot and GPUs stay reserved until its heartbeat
  // no longer lists it.
  void Cancel(Pass& pass, LiveTask& task, const std::string& identity);
  // Cancels every running copy of the task (the job was cancelled, a race was won, ...); each
  // copy's attempt ends canceled with `why` unless its outcome was already recorded.
  void CancelAll(Pass& pass, LiveTask& task, const std::string& why);
  // The copy on `identity` ended without finishing the task (failure, loss, timeout): its
  // attempt ends with `end`; with another copy still running (or delivered) it is just dropped;
  // otherwise the task is requeued. `cancel` also tells the worker to stop it.
  void End(Pass& pass, LiveTask& task, const std::string& identity, const store::AttemptEnd& end,
           bool cancel);
  // Records how the attempt ended (the first outcome recorded for it stands), in this pass.
  void EndAttempt(Pass& pass, const LiveTask& task, int attempt, store::AttemptOutcome outcome,
                  const std::string& failure_class, const std::string& message, bool charged);
  // Keeps an attempt's log (from its final message) for `tessera logs` and the dashboard.
  void SaveLog(Pass& pass, const LiveTask& task, int attempt, const WorkerConn& worker,
               std::string log);
  // Counts a charged failure against the worker for the task's job (durably); blocklists it at
  // the job's threshold.
  void ChargeWorker(Pass& pass, LiveTask& task, const WorkerConn& worker);
  // Back to the queue (or failed for good): `attempt` is the copy that ended, the last one.
  // `handed_back`: the frames it delivered stay delivered and the next attempt resumes.
  void Requeue(Pass& pass, LiveTask& task, int attempt, const std::string& reason,
               bool count_failure, bool handed_back = false);
  // A finished task leaves memory: its copies' results are acknowledged, its checkpoint goes,
  // and a job left with no unfinished task is reported to the loop (Pass::finished_jobs).
  void Retire(Pass& pass, int64_t task_id);

 private:
  // A copy's GPU-seconds and its share of its worker's price go to the task and its job.
  void Charge(Pass& pass, const LiveTask& task, const Lease& lease, const WorkerConn& worker);

  Parts p_;
};

}  // namespace tessera::broker
