#pragma once
// WorkerRecords (worker_records.h) on SQLite: the workers, native_plugins and
// job_worker_failures tables.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "scheduler/store/worker_records.h"

namespace tessera::store {

class Database;

// One worker's state, seen now, on the writer (the caller holds the write lock): what
// SetWorkerState writes, and what a WriteGroup applies for it.
Status WriteWorkerState(Database& db, int64_t worker_id, WorkerState state);

class SqlWorkerRecords : public WorkerRecords {
 public:
  explicit SqlWorkerRecords(Database& db) : db_(db) {}

  StatusOr<int64_t> UpsertWorker(const protocol::Register& reg) override;
  Status SetWorkerState(int64_t worker_id, WorkerState state) override;
  Status SetWorkerDisabled(const std::string& name, bool disabled) override;
  Status TouchWorkers(const std::vector<std::pair<int64_t, int64_t>>& id_and_last_seen_ms) override;
  Status MarkAllWorkersOffline() override;
  Status SaveNativePlugin(const protocol::PluginOffer& offer) override;
  StatusOr<std::vector<protocol::PluginOffer>> NativePlugins() override;
  Status RecordWorkerFailure(int64_t job_id, int64_t task_id, int64_t worker_id) override;
  StatusOr<std::vector<std::pair<int64_t, int>>> WorkerFailures(int64_t job_id) override;

 private:
  Database& db_;
};

}  // namespace tessera::store
