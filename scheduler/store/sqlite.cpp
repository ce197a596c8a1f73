#include "scheduler/store/sqlite.h"

namespace tessera::store {

Stmt& Stmt::Bind(int index, int64_t value) {
  sqlite3_bind_int64(stmt_, index, value);
  return *this;
}
Stmt& Stmt::Bind(int index, double value) {
  sqlite3_bind_double(stmt_, index, value);
  return *this;
}
Stmt& Stmt::Bind(int index, std::string_view value) {
  sqlite3_bind_text(stmt_, index, value.data(), static_cast<int>(value.size()), SQLITE_TRANSIENT);
  return *this;
}
Stmt& Stmt::BindNull(int index) {
  sqlite3_bind_null(stmt_, index);
  return *this;
}

StatusOr<bool> Stmt::Step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return Status::Internal(std::string("sqlite step: ") + sqlite3_errmsg(sqlite3_db_handle(stmt_)));
}

Status Stmt::Run() {
  for (;;) {
    TSR_ASSIGN_OR_RETURN(bool row, Step());
    if (!row) return Status::Ok();
  }
}

std::string Stmt::Text(int col) const {
  const auto* p = sqlite3_column_text(stmt_, col);
  return p ? std::string(reinterpret_cast<const char*>(p),
                         static_cast<size_t>(sqlite3_column_bytes(stmt_, col)))
           : std::string();
}

StatusOr<std::unique_ptr<Db>> Db::Open(const std::string& path, bool read_only,
                                       const std::string& synchronous) {
  sqlite3* raw = nullptr;
  int flags = read_only ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  flags |= SQLITE_OPEN_NOMUTEX;
  int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  std::unique_ptr<Db> db(new Db(raw));  // owns raw even on failure
  if (rc != SQLITE_OK) {
    return Status::Internal("cannot open database " + path + ": " +
                            (raw ? sqlite3_errmsg(raw) : "out of memory"));
  }
  sqlite3_busy_timeout(raw, 5000);
  if (!read_only) {
    TSR_RETURN_IF_ERROR(db->Exec("PRAGMA journal_mode=WAL"));
    TSR_RETURN_IF_ERROR(db->Exec("PRAGMA synchronous=" + synchronous));
  }
  TSR_RETURN_IF_ERROR(db->Exec("PRAGMA foreign_keys=ON"));
  return db;
}

Db::~Db() {
  cache_.clear();
  sqlite3_close(db_);
}

Status Db::Error(const std::string& what) const {
  return Status::Internal(what + ": " + sqlite3_errmsg(db_));
}

Status Db::Exec(const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    return Status::Internal("sqlite: " + msg + " (in: " + sql.substr(0, 80) + ")");
  }
  return Status::Ok();
}

StatusOr<Stmt> Db::Prepare(const std::string& sql) {
  auto it = cache_.find(sql);
  if (it != cache_.end()) {
    sqlite3_reset(it->second.get());
    sqlite3_clear_bindings(it->second.get());
    return Stmt(it->second.get());
  }
  sqlite3_stmt* raw = nullptr;
  if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &raw, nullptr) != SQLITE_OK) {
    return Error("prepare '" + sql.substr(0, 80) + "'");
  }
  cache_.emplace(sql, std::unique_ptr<sqlite3_stmt, StmtDeleter>(raw));
  return Stmt(raw);
}

namespace {

// Statements without rows, run through the statement cache (savepoints are hot: one per store
// call inside a group commit).
Status RunCached(Db& db, const char* sql) {
  TSR_ASSIGN_OR_RETURN(Stmt s, db.Prepare(sql));
  return s.Run();
}

}  // namespace

Transaction::Transaction(Db& db) : db_(db), nested_(db.open_transactions_ > 0) {
  begin_ = RunCached(db_, nested_ ? "SAVEPOINT nested" : "BEGIN IMMEDIATE");
  if (begin_.ok()) ++db_.open_transactions_;
}

Transaction::~Transaction() {
  if (!begin_.ok()) return;
  if (!done_) {
    if (nested_) {
      (void)RunCached(db_, "ROLLBACK TO nested");
      (void)RunCached(db_, "RELEASE nested");
    } else {
      (void)RunCached(db_, "ROLLBACK");
    }
  }
  --db_.open_transactions_;
}

Status Transaction::Commit() {
  TSR_RETURN_IF_ERROR(begin_);
  Status s = RunCached(db_, nested_ ? "RELEASE nested" : "COMMIT");
  if (s.ok()) done_ = true;
  return s;
}

}  // namespace tessera::store
