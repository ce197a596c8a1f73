#pragma once
// Dispatch: who gets which queued task. For each worker with a free slot it walks the ready
// queue one job at a time (priority first; among the jobs of the highest priority that have a
// task this worker can run now, the policy's fair share picks one), starts the lease and sends
// the assignment. It re-attaches the tasks a registering worker still renders, starts backup
// copies of stragglers near a job's end, and answers from the same view why a task waits
// (`tessera why`) and what the autoscaler plans from (CapacityView).
//
// Threads: broker thread only.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "scheduler/broker/broker_options.h"
#include "scheduler/broker/capacity_view.h"
#include "scheduler/broker/lease_table.h"
#include "scheduler/broker/leases.h"
#include "scheduler/broker/pass.h"
#include "scheduler/broker/running_counts.h"
#include "scheduler/broker/task_queue.h"
#include "scheduler/broker/worker_registry.h"
#include "shared/wire/protocol.h"

namespace tessera::broker {

class Dispatch {
 public:
  struct Parts {
    const BrokerOptions& options;
    LeaseTable& table;
    WorkerRegistry& workers;
    RunningCounts& running;
    Leases& leases;
    TaskQueue& queue;
  };
  explicit Dispatch(Parts parts) : p_(parts) {}

  // Leases queued tasks to every worker with a free slot.
  void Run(Pass& pass);
  // Near the end of a job, starts backup copies of its slowest running tasks on idle workers.
  void StartBackups(Pass& pass);
  // A registering worker still renders `ref` (or, `delivering`, holds its finished results):
  // take the lease back if its attempt is still the task's current one and nobody else holds
  // it; otherwise tell the worker to stop.
  void Reattach(Pass& pass, const std::string& identity, WorkerConn& worker,
                const protocol::TaskRef& ref, bool delivering);
  // Why a task is (or is not) running: {"task_id", "state", "reason", "details": [...]}.
  StatusOr<nlohmann::json> Why(Pass& pass, int64_t task_id);
  // The demand and the workers' activity, for the autoscaler.
  CapacityView Capacity(const Pass& pass) const;

 private:
  // First queued task the worker may run (skipping jobs that blocklist it), or queue().end().
  // `gpus` receives the GPUs the task would be pinned to.
  std::set<QueueKey>::iterator NextTaskFor(const WorkerConn& worker, std::vector<int>* gpus);
  // Starts a lease (the task's next attempt) of `task` on the worker and sends the assignment.
  bool StartLease(Pass& pass, LiveTask& task, const std::string& identity, WorkerConn& worker,
                  std::vector<int> gpus, bool backup);

  Parts p_;
};

}  // namespace tessera::broker
