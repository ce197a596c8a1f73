#include "scheduler/store/store_copy.h"

#include <algorithm>
#include <memory>
#include <random>

#include "scheduler/store/database.h"
#include "scheduler/store/postgres/schema_postgres.h"
#include "scheduler/store/sqlite/schema.h"

namespace tessera::store {
namespace {

// A table's columns in their declared order, from the engine's catalog.
constexpr sql::DialectSql kColumnsOf{
    "SELECT name FROM pragma_table_info(?1) ORDER BY cid",
    "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
    "AND table_name = ?1 ORDER BY ordinal_position"};

StatusOr<std::vector<std::string>> ColumnsOf(sql::Db& db, const std::string& table) {
  TSR_ASSIGN_OR_RETURN(sql::Stmt s, db.Prepare(kColumnsOf));
  s.Bind(1, table);
  std::vector<std::string> columns;
  for (;;) {
    TSR_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    columns.push_back(s.Text(0));
  }
  if (columns.empty()) {
    return Status::FailedPrecondition(db.Describe() + " has no table " + table);
  }
  return columns;
}

StatusOr<int64_t> CountRows(sql::Db& db, const std::string& table) {
  TSR_ASSIGN_OR_RETURN(sql::Stmt s, db.Prepare("SELECT count(*) FROM " + table));
  TSR_ASSIGN_OR_RETURN(bool row, s.Step());
  const int64_t n = row ? s.Int(0) : 0;
  TSR_RETURN_IF_ERROR(s.Run());
  return n;
}

// `name` quoted as an identifier both engines accept ("user" is a keyword in PostgreSQL).
std::string Quoted(const std::string& name) { return "\"" + name + "\""; }

// Opens the store `url` names at this build's schema (created or migrated as a start would).
StatusOr<std::unique_ptr<Database>> OpenAtCurrentSchema(const StoreUrl& url, const Clock& clock) {
  if (url.engine == sql::Engine::kSqlite) {
    TSR_ASSIGN_OR_RETURN(std::unique_ptr<Database> db,
                         Database::OpenSqlite(url.sqlite_path, "FULL", clock));
    TSR_RETURN_IF_ERROR(MigrateSchema(*db).status());
    return db;
  }
  TSR_ASSIGN_OR_RETURN(std::unique_ptr<Database> db, Database::OpenPostgres(url, clock));
  std::random_device seed;
  std::mt19937_64 random((static_cast<uint64_t>(seed()) << 32) ^ seed());
  TSR_RETURN_IF_ERROR(OpenPostgresSchema(db->writer(), "", NewFarmId(random)).status());
  return db;
}

// Copies one table's rows (with their ids) from `from` to `to`; returns how many.
StatusOr<int64_t> CopyTable(sql::Db& from, sql::Db& to, const std::string& table) {
  TSR_ASSIGN_OR_RETURN(std::vector<std::string> target, ColumnsOf(to, table));
  TSR_ASSIGN_OR_RETURN(std::vector<std::string> source, ColumnsOf(from, table));
  for (const std::string& c : target) {
    if (std::find(source.begin(), source.end(), c) == source.end()) {
      return Status::FailedPrecondition(table + "." + c + " exists in " + to.Describe() +
                                        " but not in " + from.Describe() +
                                        ": both stores must be at the same schema version");
    }
  }
  std::string list, marks;
  for (size_t i = 0; i < target.size(); ++i) {
    list += (i ? ", " : "") + Quoted(target[i]);
    marks += (i ? ", ?" : "?") + std::to_string(i + 1);
  }
  TSR_ASSIGN_OR_RETURN(sql::Stmt read,
                       from.Prepare("SELECT " + list + " FROM " + table + " ORDER BY 1"));
  const std::string insert = "INSERT INTO " + table + " (" + list + ") VALUES (" + marks + ")";
  int64_t rows = 0;
  for (;;) {
    TSR_ASSIGN_OR_RETURN(bool row, read.Step());
    if (!row) break;
    TSR_ASSIGN_OR_RETURN(sql::Stmt write, to.Prepare(insert));
    for (int c = 0; c < static_cast<int>(target.size()); ++c) {
      switch (read.TypeOf(c)) {
        case sql::ValueType::kNull:
          write.BindNull(c + 1);
          break;
        case sql::ValueType::kInt:
          write.Bind(c + 1, read.Int(c));
          break;
        case sql::ValueType::kDouble:
          write.Bind(c + 1, read.Double(c));
          break;
        case sql::ValueType::kText:
          write.Bind(c + 1, read.Text(c));
          break;
      }
    }
    Status written = write.Run();
    if (!written.ok()) {
      return Status(written.code(),
                    table + " row " + std::to_string(rows + 1) + ": " + written.message());
    }
    ++rows;
  }
  // PostgreSQL's identity columns hand out ids from a sequence, which copied ids did not move.
  if (to.engine() == sql::Engine::kPostgres && target.front() == "id") {
    TSR_RETURN_IF_ERROR(to.Exec("SELECT setval(pg_get_serial_sequence('" + table +
                                "', 'id'), COALESCE(max(id), 0) + 1, false) FROM " + table));
  }
  return rows;
}

}  // namespace

const std::vector<std::string>& StoreTables() {
  static const std::vector<std::string> tables = {"workers",
                                                  "join_tokens",
                                                  "worker_keys",
                                                  "api_tokens",
                                                  "jobs",
                                                  "tasks",
                                                  "task_logs",
                                                  "frame_flags",
                                                  "job_worker_failures",
                                                  "events",
                                                  "webhook_cursors",
                                                  "cost_days",
                                                  "autoscaler_nodes",
                                                  "native_plugins",
                                                  "idempotent_requests"};
  return tables;
}

StatusOr<std::vector<CopiedTable>> CopyStore(const StoreUrl& from, const StoreUrl& to,
                                             const Clock& clock) {
  TSR_ASSIGN_OR_RETURN(std::unique_ptr<Database> source, OpenAtCurrentSchema(from, clock));
  TSR_ASSIGN_OR_RETURN(std::unique_ptr<Database> target, OpenAtCurrentSchema(to, clock));
  sql::Db& in = source->writer();
  sql::Db& out = target->writer();
  if (in.Describe() == out.Describe()) {
    return Status::InvalidArgument("--from and --to name the same store (" + in.Describe() + ")");
  }
  for (const std::string& table : StoreTables()) {
    TSR_ASSIGN_OR_RETURN(int64_t held, CountRows(out, table));
    if (held > 0) {
      return Status::FailedPrecondition(
          out.Describe() + " already holds records (" + std::to_string(held) + " in " + table +
          "): store copy fills an empty store only, and wrote nothing");
    }
  }
  std::vector<CopiedTable> copied;
  {
    // One snapshot of the source, one transaction on the target: all or nothing.
    sql::Transaction reading(in);
    TSR_RETURN_IF_ERROR(reading.begin_status());
    sql::Transaction writing(out);
    TSR_RETURN_IF_ERROR(writing.begin_status());
    for (const std::string& table : StoreTables()) {
      TSR_ASSIGN_OR_RETURN(int64_t rows, CopyTable(in, out, table));
      copied.push_back({table, rows});
    }
    TSR_RETURN_IF_ERROR(writing.Commit());
  }
  // The counts, read again on both sides after the commit.
  for (const CopiedTable& t : copied) {
    TSR_ASSIGN_OR_RETURN(int64_t there, CountRows(out, t.table));
    TSR_ASSIGN_OR_RETURN(int64_t here, CountRows(in, t.table));
    if (there != here || there != t.rows) {
      return Status::Internal(t.table + ": " + std::to_string(here) + " rows in " + in.Describe() +
                              " but " + std::to_string(there) + " in " + out.Describe());
    }
  }
  return copied;
}

}  // namespace tessera::store
