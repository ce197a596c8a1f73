#include "scheduler/store/store.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "scheduler/store/database.h"
#include "scheduler/store/postgres/schema_postgres.h"
#include "scheduler/store/sql/attempt_rows.h"
#include "scheduler/store/sql/task_transitions.h"
#include "scheduler/store/sqlite/schema.h"

namespace tessera::store {

// What the SQLite record tables share, made before them (the tables hold references): the
// connections with the group commit and the clock, the attempt rows that task and job changes
// write, and the fenced task transitions, which also apply the group's recorded writes.
struct Store::Engine {
  Engine(std::unique_ptr<Database> db, std::string dir)
      : database(std::move(db)),
        data_dir(std::move(dir)),
        attempts(*database),
        transitions(*database, attempts) {
    database->set_applier(&transitions);
  }
  std::unique_ptr<Database> database;
  std::string data_dir;
  AttemptRows attempts;
  TaskTransitions transitions;
};

Store::WriteGroup::WriteGroup(Store& store) : db_(*store.engine_->database) { db_.BeginGroup(); }
Store::WriteGroup::~WriteGroup() { db_.EndGroup(); }
Status Store::WriteGroup::Commit() { return db_.CommitGroup(); }

Store::Store(std::unique_ptr<Engine> engine, int schema_version)
    : SqlJobRecords(*engine->database, engine->transitions, engine->attempts),
      SqlTaskRecords(*engine->database, engine->transitions, engine->attempts),
      SqlAttemptRecords(*engine->database, engine->attempts),
      SqlWorkerRecords(*engine->database),
      SqlCredentialRecords(*engine->database),
      SqlCostRecords(*engine->database),
      SqlAutoscalerNodeRecords(*engine->database),
      SqlFarmQueries(*engine->database),
      SqlIdempotencyRecords(*engine->database),
      SqlWebhookCursors(*engine->database),
      SqlEventRecords(*engine->database),
      engine_(std::move(engine)),
      schema_version_(schema_version) {}

// The checkpointer stops with the database (engine_), before the tables that refer to it go.
Store::~Store() = default;

std::string Store::data_dir() const { return engine_->data_dir; }
sql::Engine Store::engine() const { return engine_->database->engine(); }
std::string Store::Describe() const { return engine_->database->Describe(); }

StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& data_dir,
                                             const std::string& synchronous) {
  return Open(data_dir, Clock::Real(), synchronous);
}

StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& data_dir, const Clock& clock,
                                             const std::string& synchronous) {
  StoreUrl url;
  url.sqlite_path = (std::filesystem::path(data_dir) / "tessera.db").string();
  return Open(url, data_dir, clock, synchronous);
}

namespace {

// The farm a scheduler's data folder belongs to ("" before its first start on PostgreSQL).
std::string ReadFarmId(const std::string& file) {
  std::ifstream in(file);
  std::string id;
  in >> id;
  return id;
}

// One scheduler writes a farm's database at a time: it holds a session advisory lock on its
// writer connection for as long as it runs (the server drops it with the connection, so a
// scheduler that died frees it). A second scheduler is refused, naming the one that holds it.
constexpr int64_t kSchedulerLock = 7630508855306265190;

Status HoldTheFarm(Database& db) {
  Database::WriteLock lock(db);
  sql::Db& writer = db.writer();
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const std::string me =
      std::string("tessera-scheduler ") + host + " pid " + std::to_string(::getpid());
  {
    TSR_ASSIGN_OR_RETURN(sql::Stmt name, writer.Prepare("SELECT set_config('application_name', "
                                                        "?1, false)"));
    TSR_RETURN_IF_ERROR(name.Bind(1, me).Run());
  }
  // A scheduler killed a moment ago holds it until the server sees its connection close: try
  // for a few seconds before refusing.
  for (int attempt = 0; attempt < 30; ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    TSR_ASSIGN_OR_RETURN(sql::Stmt take, writer.Prepare("SELECT pg_try_advisory_lock(?1)"));
    take.Bind(1, kSchedulerLock);
    TSR_ASSIGN_OR_RETURN(bool row, take.Step());
    const bool held = row && take.Int(0) != 0;
    TSR_RETURN_IF_ERROR(take.Run());
    if (held) return Status::Ok();
  }
  std::string holder = "another scheduler";
  TSR_ASSIGN_OR_RETURN(
      sql::Stmt who,
      writer.Prepare("SELECT a.application_name, COALESCE(host(a.client_addr), 'a local socket') "
                     "FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid WHERE "
                     "l.locktype = 'advisory' AND l.granted AND "
                     "((l.classid::bigint << 32) | l.objid::bigint) = ?1"));
  who.Bind(1, kSchedulerLock);
  TSR_ASSIGN_OR_RETURN(bool found, who.Step());
  if (found) holder = who.Text(0) + " (connected from " + who.Text(1) + ")";
  TSR_RETURN_IF_ERROR(who.Run());
  return Status::FailedPrecondition(
      db.Describe() + " is in use by " + holder +
      ": one scheduler writes a farm's database at a time; stop the other one first");
}

}  // namespace

StatusOr<std::unique_ptr<Store>> Store::Open(const StoreUrl& url, const std::string& data_dir,
                                             const Clock& clock, const std::string& synchronous) {
  std::error_code ec;
  std::filesystem::create_directories(data_dir, ec);
  if (ec) return Status::Internal("cannot create data directory " + data_dir + ": " + ec.message());
  if (url.engine == sql::Engine::kSqlite) {
    const std::string path = url.sqlite_path.empty()
                                 ? (std::filesystem::path(data_dir) / "tessera.db").string()
                                 : url.sqlite_path;
    TSR_ASSIGN_OR_RETURN(std::unique_ptr<Database> db,
                         Database::OpenSqlite(path, synchronous, clock));
    TSR_ASSIGN_OR_RETURN(const int version, MigrateSchema(*db));
    return Finish(std::move(db), version, data_dir, synchronous);
  }
  TSR_ASSIGN_OR_RETURN(std::unique_ptr<Database> db, Database::OpenPostgres(url, clock));
  const std::string farm_file = (std::filesystem::path(data_dir) / "farm_id").string();
  std::random_device seed;
  std::mt19937_64 random((static_cast<uint64_t>(seed()) << 32) ^ seed());
  FarmDatabase farm;
  {
    Database::WriteLock lock(*db);
    TSR_ASSIGN_OR_RETURN(
        farm, OpenPostgresSchema(db->writer(), ReadFarmId(farm_file), NewFarmId(random)));
  }
  TSR_RETURN_IF_ERROR(HoldTheFarm(*db));
  if (ReadFarmId(farm_file) != farm.farm_id) {
    std::ofstream out(farm_file, std::ios::trunc);
    out << farm.farm_id << "\n";
    if (!out) return Status::Internal("cannot write " + farm_file);
  }
  return Finish(std::move(db), farm.schema_version, data_dir, synchronous);
}

StatusOr<std::unique_ptr<Store>> Store::Finish(std::unique_ptr<Database> db, int schema_version,
                                               const std::string& data_dir,
                                               const std::string& synchronous) {
  auto engine = std::make_unique<Engine>(std::move(db), data_dir);
  TSR_RETURN_IF_ERROR(engine->attempts.LoadCounts());
  TSR_RETURN_IF_ERROR(engine->database->StartCheckpointer(synchronous));
  return std::unique_ptr<Store>(new Store(std::move(engine), schema_version));
}

}  // namespace tessera::store
