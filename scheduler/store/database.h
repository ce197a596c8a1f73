#pragma once
// The store's open database, on either engine: one writer connection behind a lock, a pool of
// reader connections beside it, the group commit (Store::WriteGroup) that turns a broker pass's
// writes into one transaction, and the store's clock. The record tables (sql/) run their
// statements on the sql::Db connections it hands out and never know the engine, except where a
// statement's text differs (sql::DialectSql).
//
// - SQLite (OpenSqlite): the writer is the file's one writing connection; readers are read-only
//   connections (WAL lets them read while the writer writes); a connection of its own checkpoints
//   the WAL in the background.
// - PostgreSQL (OpenPostgres): the writer and each reader are connections to the server; the
//   server's MVCC lets readers read while the writer writes.
//
// The clock is read in one place, Now(): every time the store stamps on a row (created, started,
// ended, seen), compares with (expiry, the age of a record) or turns into a UTC day comes from
// there, so a test that moves a ManualClock moves all of them.
//
// Threads: any. Writes hold the write lock (WriteLock) and open a transaction of their own, or
// join the group's when the calling thread is inside a WriteGroup; reads borrow a Reader.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "scheduler/store/records.h"
#include "scheduler/store/sql/sql_engine.h"
#include "scheduler/store/sql/store_url.h"
#include "shared/base/clock.h"
#include "shared/base/status.h"

namespace tessera::store {

// A write a WriteGroup only records (the frequent writes of a broker pass), applied on the writer
// when the group commits -- or earlier, when the group's thread needs the writer for something
// else.
struct RecordedWrite {
  enum class Kind { kTransition, kWorkerState, kProgress, kAttemptEnd };
  Kind kind = Kind::kTransition;
  int64_t id = 0;  // task id, or worker id for kWorkerState
  int attempt = 0;
  TaskState to = TaskState::kQueued;
  WorkerState worker_state = WorkerState::kIdle;
  bool count_failure = false;
  std::optional<int64_t> worker_id;
  int64_t job_id = 0;  // kTransition: the task's job, when known
  double progress = 0;
  std::string message;
  std::vector<int> gpus;                           // kTransition to running: the lease's GPUs
  AttemptOutcome outcome = AttemptOutcome::kLost;  // kAttemptEnd
  std::string failure_class;                       // kAttemptEnd
};

// What the group commit hands its recorded writes to (TaskTransitions), and tells how a
// transaction that wrote attempt outcomes ended.
class RecordedWriteApplier {
 public:
  virtual ~RecordedWriteApplier() = default;
  // Applies `writes` in order inside the writer's open transaction, and clears them.
  virtual Status Apply(std::vector<RecordedWrite>& writes) = 0;
  // The group's transaction committed (true) or was rolled back (false).
  virtual void Settle(bool committed) = 0;
};

class Db;  // the SQLite wrapper's connection (sqlite/sqlite.h)

class Database {
 public:
  // Opens (creating) the SQLite database file at `path` for writing; `clock` outlives it.
  static StatusOr<std::unique_ptr<Database>> OpenSqlite(const std::string& path,
                                                        const std::string& synchronous,
                                                        const Clock& clock);
  // Connects to the PostgreSQL server `url` names; `clock` outlives it.
  static StatusOr<std::unique_ptr<Database>> OpenPostgres(const StoreUrl& url, const Clock& clock);
  ~Database();  // stops the checkpointer
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  sql::Engine engine() const { return writer_->engine(); }
  // Where the records are, safe to show: "sqlite:/path/tessera.db", or the PostgreSQL URL with
  // its password removed.
  std::string Describe() const { return writer_->Describe(); }
  // The SQLite file ("" on PostgreSQL).
  const std::string& path() const { return path_; }
  // The store's wall time, Unix ms: the one place the store reads its clock.
  int64_t Now() const;
  // SQLite: starts copying the WAL back into the database on a connection and thread of its own.
  // PostgreSQL: nothing to do (the server checkpoints).
  Status StartCheckpointer(const std::string& synchronous);
  void set_applier(RecordedWriteApplier* applier) { applier_ = applier; }

  // The writer connection; use it only while holding a WriteLock.
  sql::Db& writer() { return *writer_; }
  // The writer's SQLite connection, for the SQLite schema's migrations (nullptr on PostgreSQL).
  Db* sqlite_writer() { return sqlite_writer_; }
  // The write lock, taken by every call that reads or writes on the writer (except the writes a
  // group only records); on the group's thread it enters the group's transaction first.
  class WriteLock {
   public:
    explicit WriteLock(Database& db) : lock_(db.PrepareWrite()) {}

   private:
    std::lock_guard<std::recursive_mutex> lock_;
  };

  // A reader connection borrowed from the pool for one call; on the thread inside a WriteGroup,
  // the writer itself (that thread must see its own uncommitted writes).
  class Reader {
   public:
    Reader(Database* db, std::unique_ptr<sql::Db> conn) : owner_(db), owned_(std::move(conn)) {
      db_ = owned_.get();
    }
    explicit Reader(sql::Db* writer) : db_(writer) {}
    Reader(Reader&&) = default;
    ~Reader() {
      if (owned_) owner_->ReturnReader(std::move(owned_));
    }
    sql::Db& operator*() { return *db_; }
    sql::Db* operator->() { return db_; }

   private:
    Database* owner_ = nullptr;
    std::unique_ptr<sql::Db> owned_;
    sql::Db* db_ = nullptr;
  };
  StatusOr<Reader> BorrowReader();

  // ---- the group commit (sqlite_write_group.cpp) ----
  // Whether the calling thread is inside a WriteGroup.
  bool InGroup() const { return group_thread_.load() == std::this_thread::get_id(); }
  // In a WriteGroup, records `write` and returns true; elsewhere returns false.
  bool Record(RecordedWrite write);
  void BeginGroup();
  Status CommitGroup();
  void EndGroup();

 private:
  using Connect = std::function<StatusOr<std::unique_ptr<sql::Db>>()>;
  Database(std::string path, std::unique_ptr<sql::Db> writer, Connect connect_reader,
           const Clock& clock);
  std::recursive_mutex& PrepareWrite() {
    if (InGroup()) EnterGroupTransaction();
    return write_mu_;
  }
  void ReturnReader(std::unique_ptr<sql::Db> conn);
  // The group's thread needs the writer: opens the group's transaction (once) and applies the
  // writes recorded so far.
  void EnterGroupTransaction();

  const std::string path_;
  const Clock& clock_;
  RecordedWriteApplier* applier_ = nullptr;
  std::recursive_mutex write_mu_;  // recursive: a WriteGroup's thread writes inside it
  std::unique_ptr<sql::Db> writer_;
  Db* sqlite_writer_ = nullptr;
  const Connect connect_reader_;
  std::atomic<std::thread::id> group_thread_;  // the thread inside a WriteGroup, if any
  // The open group (its thread only): recorded writes, and its transaction once it needed one.
  std::vector<RecordedWrite> group_writes_;
  std::unique_lock<std::recursive_mutex> group_lock_;
  std::optional<sql::Transaction> group_tx_;
  Status group_error_;  // the first failure applying the group's writes
  std::mutex pool_mu_;
  std::vector<std::unique_ptr<sql::Db>> readers_;
  // WAL checkpoints on a thread and connection of their own.
  std::thread checkpointer_;
  std::mutex checkpoint_mu_;
  std::condition_variable checkpoint_cv_;
  bool stopping_ = false;  // guarded by checkpoint_mu_
};

}  // namespace tessera::store
