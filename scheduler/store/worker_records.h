#pragma once
// Workers as the broker knows them: registration by name, state and last heartbeat, the
// operator's disable flag, the C++ renderer plugins they offer, and the charged failures of each
// job on each worker (the job's blocklist, kept across restarts). Enrolled keys are credentials
// (credential_records.h); prices and cost are costs (cost_records.h).
//
// One of the store's record tables (store.h): an engine-neutral interface, implemented for SQLite
// by SqlWorkerRecords (sql/sql_worker_records.h).

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "scheduler/store/records.h"
#include "shared/base/status.h"
#include "shared/wire/protocol.h"

namespace tessera::store {

class WorkerRecords {
 public:
  virtual ~WorkerRecords() = default;

  // Inserts or refreshes the worker by name; returns its id.
  virtual StatusOr<int64_t> UpsertWorker(const protocol::Register& reg) = 0;
  // Its state, seen now. In a WriteGroup it is applied with the group.
  virtual Status SetWorkerState(int64_t worker_id, WorkerState state) = 0;
  // Disabled workers get no new tasks (running ones finish); NotFound for an unknown name.
  virtual Status SetWorkerDisabled(const std::string& name, bool disabled) = 0;
  // When each worker was last heard from, as the broker saw it: (worker id, Unix ms).
  virtual Status TouchWorkers(
      const std::vector<std::pair<int64_t, int64_t>>& id_and_last_seen_ms) = 0;
  // At start-up nobody is connected yet.
  virtual Status MarkAllWorkersOffline() = 0;

  // C++ renderer plugins offered by workers (schema 23): the latest description of each.
  virtual Status SaveNativePlugin(const protocol::PluginOffer& offer) = 0;
  virtual StatusOr<std::vector<protocol::PluginOffer>> NativePlugins() = 0;

  // A charged failure of `task_id` on `worker_id`: adds the worker to the task's failed_on and
  // counts it against the job's failures on that worker (its blocklist, which survives restarts).
  virtual Status RecordWorkerFailure(int64_t job_id, int64_t task_id, int64_t worker_id) = 0;
  // The job's charged failures by worker id.
  virtual StatusOr<std::vector<std::pair<int64_t, int>>> WorkerFailures(int64_t job_id) = 0;
};

}  // namespace tessera::store
