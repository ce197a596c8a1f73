#include "scheduler/store/store.h"

#include <filesystem>

#include "scheduler/store/sqlite/attempt_rows.h"
#include "scheduler/store/sqlite/sqlite_database.h"
#include "scheduler/store/sqlite/task_transitions.h"

namespace tessera::store {

// What the SQLite record tables share, made before them (the tables hold references): the
// connections with the group commit and the clock, the attempt rows that task and job changes
// write, and the fenced task transitions, which also apply the group's recorded writes.
struct Store::Engine {
  explicit Engine(std::unique_ptr<SqliteDatabase> db)
      : database(std::move(db)), attempts(*database), transitions(*database, attempts) {
    database->set_applier(&transitions);
  }
  std::unique_ptr<SqliteDatabase> database;
  AttemptRows attempts;
  TaskTransitions transitions;
};

Store::WriteGroup::WriteGroup(Store& store) : db_(*store.engine_->database) { db_.BeginGroup(); }
Store::WriteGroup::~WriteGroup() { db_.EndGroup(); }
Status Store::WriteGroup::Commit() { return db_.CommitGroup(); }

Store::Store(std::unique_ptr<Engine> engine, int schema_version)
    : SqliteJobRecords(*engine->database, engine->transitions, engine->attempts),
      SqliteTaskRecords(*engine->database, engine->transitions, engine->attempts),
      SqliteAttemptRecords(*engine->database, engine->attempts),
      SqliteWorkerRecords(*engine->database),
      SqliteCredentialRecords(*engine->database),
      SqliteCostRecords(*engine->database),
      SqliteAutoscalerNodeRecords(*engine->database),
      SqliteFarmQueries(*engine->database),
      SqliteIdempotencyRecords(*engine->database),
      SqliteWebhookCursors(*engine->database),
      SqliteEventRecords(*engine->database),
      engine_(std::move(engine)),
      schema_version_(schema_version) {}

// The checkpointer stops with the database (engine_), before the tables that refer to it go.
Store::~Store() = default;

std::string Store::data_dir() const {
  return std::filesystem::path(engine_->database->path()).parent_path().string();
}

StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& data_dir,
                                             const std::string& synchronous) {
  return Open(data_dir, Clock::Real(), synchronous);
}

StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& data_dir, const Clock& clock,
                                             const std::string& synchronous) {
  std::error_code ec;
  std::filesystem::create_directories(data_dir, ec);
  if (ec) return Status::Internal("cannot create data directory " + data_dir + ": " + ec.message());
  const std::string path = (std::filesystem::path(data_dir) / "tessera.db").string();
  TSR_ASSIGN_OR_RETURN(std::unique_ptr<SqliteDatabase> db,
                       SqliteDatabase::Open(path, synchronous, clock));
  TSR_ASSIGN_OR_RETURN(const int version, MigrateSchema(*db));
  auto engine = std::make_unique<Engine>(std::move(db));
  TSR_RETURN_IF_ERROR(engine->attempts.LoadCounts());
  TSR_RETURN_IF_ERROR(engine->database->StartCheckpointer(synchronous));
  return std::unique_ptr<Store>(new Store(std::move(engine), version));
}

}  // namespace tessera::store
