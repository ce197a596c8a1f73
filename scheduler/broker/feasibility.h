#pragma once
// Feasibility: each loaded job's notice that no connected worker could ever run it (its pools,
// tags, hardware, blocklist), written to the store and recorded as an event when that becomes
// true, and cleared when a worker that can connects again. A job held for full outputs keeps
// the notice that says so.
//
// Threads: broker thread only.

#include <cstdint>

#include "scheduler/broker/lease_table.h"
#include "scheduler/broker/pass.h"
#include "scheduler/broker/worker_registry.h"

namespace tessera::broker {

class Feasibility {
 public:
  Feasibility(const WorkerRegistry& workers, LeaseTable& table)
      : workers_(workers), table_(table) {}

  // Re-evaluates the job against the connected workers.
  void Update(Pass& pass, int64_t job_id, JobInfo& job);
  // Every loaded job (a worker came or went).
  void UpdateAll(Pass& pass);

 private:
  const WorkerRegistry& workers_;
  LeaseTable& table_;
};

}  // namespace tessera::broker
