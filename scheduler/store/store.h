#pragma once
// The scheduler's durable state: jobs, tasks, attempts, workers, credentials, costs, events.
// The store is the truth; the broker keeps in-memory indexes rebuilt from it at start-up.
//
// A set of record tables, each a small engine-neutral interface in its own header -- what the
// broker, the API and the autoscaler depend on:
//   job_records.h              jobs and jobs with steps: submit, cancel, pause, priority, retry,
//                              re-render, delete; a job's files, assets, notice and frame flags
//   task_records.h             the broker's tasks: the queue loaded at start-up and every fenced
//                              lease change (start, re-attach, finish, requeue, fail, backups)
//   attempt_records.h          the attempt history and task logs
//   worker_records.h           registrations, states, heartbeats, offered plugins, blocklists
//   credential_records.h       join tokens, enrolled worker keys, API tokens
//   cost_records.h             GPU-seconds and money per task, job, worker and UTC day
//   autoscaler_node_records.h  the machines the autoscaler requested
//   farm_queries.h             reads for the API: pages of jobs, tasks, workers; the summary
//   idempotency_records.h      Idempotency-Keys of POSTs that created something
//   webhook_cursors.h          each webhook receiver's place in the event log
//   event_records.h            the event log
// and records.h, the records they read and write.
//
// Store is the object every part holds: it derives from each table's SQLite implementation
// (sql/sql_<table>.h), so a call is `store.StartTask(...)` and a Store& converts to any of
// the interfaces. What it declares itself is its own: opening the database, the schema version,
// and the group commit. The SQLite engine lives in sqlite/: the connections, the group commit and
// the clock (sqlite_database.h), the migrations (schema.h), the fenced task transitions
// (task_transitions.h), the attempt rows (attempt_rows.h), and how rows become records (rows.h,
// table.h) over thin RAII wrappers of the C API (sqlite.h).
//
// Time is an input: the store is given a Clock when it opens and reads it in one place
// (Database::Now), for every time it stamps, compares or turns into a UTC day.
//
// Threads: every method may be called from any thread. Writes go through one writer connection
// under a mutex (BEGIN IMMEDIATE per call, or one shared transaction while the calling thread
// holds a WriteGroup); reads use a pool of read-only connections (WAL lets them run beside the
// writer); WAL checkpoints run on a thread and connection of the store's own. Job rows carry
// per-state task counters, updated in the same transaction as every task change, so status
// queries never scan the task table.

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "scheduler/store/records.h"
#include "scheduler/store/sql/sql_attempt_records.h"
#include "scheduler/store/sql/sql_autoscaler_node_records.h"
#include "scheduler/store/sql/sql_cost_records.h"
#include "scheduler/store/sql/sql_credential_records.h"
#include "scheduler/store/sql/sql_event_records.h"
#include "scheduler/store/sql/sql_farm_queries.h"
#include "scheduler/store/sql/sql_idempotency_records.h"
#include "scheduler/store/sql/sql_job_records.h"
#include "scheduler/store/sql/sql_task_records.h"
#include "scheduler/store/sql/sql_webhook_cursors.h"
#include "scheduler/store/sql/sql_worker_records.h"
#include "scheduler/store/sql/store_url.h"
#include "scheduler/store/sqlite/schema.h"
#include "shared/base/clock.h"
#include "shared/base/status.h"
#include "shared/base/wall_time.h"
#include "shared/jobs/job_file.h"
#include "shared/wire/protocol.h"

namespace tessera::store {

class Store final : public SqlJobRecords,
                    public SqlTaskRecords,
                    public SqlAttemptRecords,
                    public SqlWorkerRecords,
                    public SqlCredentialRecords,
                    public SqlCostRecords,
                    public SqlAutoscalerNodeRecords,
                    public SqlFarmQueries,
                    public SqlIdempotencyRecords,
                    public SqlWebhookCursors,
                    public SqlEventRecords {
 public:
  static constexpr int kSchemaVersion = kSqliteSchemaVersion;

  // Group commit: while a WriteGroup is alive, the writes made by the thread that opened it
  // form one transaction, and other threads' writes wait. The frequent writes of a broker pass
  // -- task transitions, worker states, progress, attempt ends -- are only recorded, and applied
  // together (job counters once per job) when the group commits; any other store call made
  // inside the group applies what was recorded first, so the group's reads see its own writes.
  // The broker opens one group per poll pass and sends nothing that depends on its writes until
  // Commit() has returned OK: durable before acknowledged, at one commit per pass instead of one
  // per state change.
  class WriteGroup {
   public:
    explicit WriteGroup(Store& store);
    // Rolls back whatever was not committed.
    ~WriteGroup();
    WriteGroup(const WriteGroup&) = delete;
    WriteGroup& operator=(const WriteGroup&) = delete;
    Status Commit();

   private:
    Database& db_;
  };

  // Opens <data_dir>/tessera.db, creating it and applying migrations as needed. The store reads
  // time from `clock` (which outlives it).
  static StatusOr<std::unique_ptr<Store>> Open(const std::string& data_dir, const Clock& clock,
                                               const std::string& synchronous = "NORMAL");
  // The same, on the real clock (tools and tests that do not move time).
  static StatusOr<std::unique_ptr<Store>> Open(const std::string& data_dir,
                                               const std::string& synchronous = "NORMAL");
  // Opens the store `url` names (store.url): a SQLite file as above, or a PostgreSQL database,
  // creating its schema on an empty one. `data_dir` is the scheduler's own folder; on PostgreSQL
  // it remembers which farm the scheduler belongs to (farm_id), and a database of another farm
  // is refused, naming both.
  static StatusOr<std::unique_ptr<Store>> Open(const StoreUrl& url, const std::string& data_dir,
                                               const Clock& clock,
                                               const std::string& synchronous = "NORMAL");
  ~Store() override;

  int schema_version() const { return schema_version_; }
  // Which engine holds the records, and where, safe to show (no password).
  sql::Engine engine() const;
  std::string Describe() const;
  // The folder holding the database (what fills up when the store reports kStorageFull).
  std::string data_dir() const;

 private:
  struct Engine;  // the parts the record tables share (store.cpp)
  Store(std::unique_ptr<Engine> engine, int schema_version);
  static StatusOr<std::unique_ptr<Store>> Finish(std::unique_ptr<Database> db, int schema_version,
                                                 const std::string& data_dir,
                                                 const std::string& synchronous);

  std::unique_ptr<Engine> engine_;
  int schema_version_ = 0;
};

// Unix ms and UTC days for callers that format the store's records (shared/base/wall_time.h).
// The store itself reads time only from its Clock.
using wall_time::NowMs;
using wall_time::UtcDay;

}  // namespace tessera::store
