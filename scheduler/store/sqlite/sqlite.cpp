#include "scheduler/store/sqlite/sqlite.h"

#include <filesystem>

#include "shared/base/disk_space.h"

namespace tessera::store {

namespace {

// The database's folder: what fills up, and what an operator must free.
std::string DataFolderOf(sqlite3* db) {
  const char* file = db ? sqlite3_db_filename(db, "main") : nullptr;
  if (file == nullptr || *file == '\0') return ".";
  return std::filesystem::path(file).parent_path().string();
}

// SQLite's word for a full or read-only filesystem: SQLITE_FULL, SQLITE_READONLY (the file or
// its filesystem cannot be written), or an I/O error whose errno says the disk is full.
bool IsStorageFull(sqlite3* db) {
  if (db == nullptr) return false;
  const int primary = sqlite3_extended_errcode(db) & 0xff;
  if (primary == SQLITE_FULL || primary == SQLITE_READONLY) return true;
  return primary == SQLITE_IOERR && disk_space::IsFullErrno(sqlite3_system_errno(db));
}

}  // namespace

Status SqliteStatus(sqlite3* db, const std::string& what) {
  const std::string message = what + ": " + (db ? sqlite3_errmsg(db) : "out of memory");
  if (!IsStorageFull(db)) return Status::Internal(message);
  const std::string folder = DataFolderOf(db);
  StatusOr<disk_space::Room> room = disk_space::RoomFor(folder);
  return Status::StorageFull(message + ": the data folder " + folder + " is full (" +
                             (room.ok() ? disk_space::Describe(*room) : room.status().message()) +
                             ")");
}

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
  return SqliteStatus(sqlite3_db_handle(stmt_), "sqlite step");
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
    return SqliteStatus(raw, "cannot open database " + path);
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

Status Db::Error(const std::string& what) const { return SqliteStatus(db_, what); }

Status Db::Exec(const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    sqlite3_free(err);  // the same text as sqlite3_errmsg, which SqliteStatus reads
    return SqliteStatus(db_, "sqlite (in: " + sql.substr(0, 80) + ")");
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
  if (!nested_ && sqlite3_get_autocommit(db_.db_) != 0) {
    // SQLite rolled the whole transaction back itself when a statement in it failed (it may on a
    // full disk or an I/O error): nothing of it is in the database. Full, when the data folder
    // has next to no room left.
    const std::string folder = DataFolderOf(db_.db_);
    return disk_space::ClassifyWriteFailure(
        Status::Internal("the transaction was rolled back by SQLite after a statement in it "
                         "failed (data folder " +
                         folder + ")"),
        folder, 0);
  }
  Status s = RunCached(db_, nested_ ? "RELEASE nested" : "COMMIT");
  if (s.ok()) done_ = true;
  return s;
}

}  // namespace tessera::store
