#pragma once
// ResultAcks: the acknowledgements that let a worker drop the results it keeps in its spool
// (done, failed, handed back), sent only once the outcome they acknowledge is durable -- in the
// outbox, which leaves after the pass commits. A worker that reads them inside kAssign
// (protocol::kFeatureAcksInAssign) gets this pass's with its next assignment; those no
// assignment carried go alone at the end of the pass (SendWaiting).
//
// Threads: broker thread only.

#include <cstdint>
#include <string>
#include <vector>

#include "scheduler/broker/lease_table.h"
#include "scheduler/broker/pass.h"
#include "scheduler/broker/worker_registry.h"

namespace tessera::broker {

class ResultAcks {
 public:
  explicit ResultAcks(WorkerRegistry& workers) : workers_(workers) {}

  // Acknowledges attempt `attempt` of `task_id` to the worker on `identity` (nothing when that
  // connection is gone: the worker sends its results again after it reconnects).
  void Ack(Pass& pass, const std::string& identity, int64_t task_id, int attempt);
  // Acknowledges what the task's finished copies reported (its outcome is recorded in this
  // pass).
  void AckTask(Pass& pass, LiveTask& task);
  // The acknowledgements no assignment carried this pass go alone (after its last assignment).
  void SendWaiting(Pass& pass);
  // Nothing waits (memory was reloaded from the store).
  void Clear() { waiting_.clear(); }

 private:
  WorkerRegistry& workers_;
  std::vector<std::string> waiting_;  // workers holding WorkerConn::pending_acks
};

}  // namespace tessera::broker
