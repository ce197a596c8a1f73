#pragma once
// Thin RAII layer over the SQLite C API: connections, cached prepared statements, and
// BEGIN IMMEDIATE transactions that roll back unless committed. Every failure is a Status.
// A Db is not thread-safe: one thread uses it at a time (the Store serialises access).

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "shared/base/status.h"

namespace tessera::store {

// The status of the failure SQLite just reported on `db`: kStorageFull (naming the data folder
// and the room left on it) when the filesystem is full or read-only (SQLITE_FULL,
// SQLITE_READONLY, an I/O error with ENOSPC, EDQUOT or EROFS), kInternal otherwise.
Status SqliteStatus(sqlite3* db, const std::string& what);

class Stmt {
 public:
  explicit Stmt(sqlite3_stmt* stmt) : stmt_(stmt) {}
  Stmt(Stmt&& other) noexcept : stmt_(other.stmt_) { other.stmt_ = nullptr; }
  Stmt& operator=(Stmt&& other) noexcept {
    std::swap(stmt_, other.stmt_);
    return *this;
  }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  // Resetting releases the statement's read snapshot so WAL checkpoints are not held back.
  ~Stmt() {
    if (stmt_) sqlite3_reset(stmt_);
  }

  Stmt& Bind(int index, int64_t value);
  Stmt& Bind(int index, int value) { return Bind(index, static_cast<int64_t>(value)); }
  Stmt& Bind(int index, double value);
  Stmt& Bind(int index, std::string_view value);
  Stmt& Bind(int index, const char* value) { return Bind(index, std::string_view(value)); }
  Stmt& Bind(int index, const std::string& value) { return Bind(index, std::string_view(value)); }
  Stmt& BindNull(int index);
  template <typename T>
  Stmt& Bind(int index, const std::optional<T>& value) {
    return value ? Bind(index, *value) : BindNull(index);
  }

  // Returns true while a row is available; false when done. Errors become a Status.
  StatusOr<bool> Step();
  // Steps to completion (for statements that return no rows).
  Status Run();

  int64_t Int(int col) const { return sqlite3_column_int64(stmt_, col); }
  double Double(int col) const { return sqlite3_column_double(stmt_, col); }
  std::string Text(int col) const;
  bool IsNull(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  int ColumnCount() const { return sqlite3_column_count(stmt_); }
  // SQLITE_INTEGER, SQLITE_FLOAT, SQLITE_TEXT, SQLITE_BLOB or SQLITE_NULL.
  int ColumnType(int col) const { return sqlite3_column_type(stmt_, col); }
  std::optional<int64_t> OptInt(int col) const {
    return IsNull(col) ? std::nullopt : std::optional<int64_t>(Int(col));
  }

 private:
  sqlite3_stmt* stmt_;
};

class Db {
 public:
  // Opens (creating if asked) the database at `path` with WAL, foreign keys and a busy timeout.
  static StatusOr<std::unique_ptr<Db>> Open(const std::string& path, bool read_only,
                                            const std::string& synchronous = "NORMAL");
  ~Db();
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  Status Exec(const std::string& sql);
  // A prepared statement, cached by its SQL text and reset for reuse.
  StatusOr<Stmt> Prepare(const std::string& sql);
  int64_t LastInsertId() const { return sqlite3_last_insert_rowid(db_); }
  int Changes() const { return sqlite3_changes(db_); }
  Status Error(const std::string& what) const;

 private:
  friend class Transaction;
  explicit Db(sqlite3* db) : db_(db) {}

  struct StmtDeleter {
    void operator()(sqlite3_stmt* s) const { sqlite3_finalize(s); }
  };
  sqlite3* db_;
  std::unordered_map<std::string, std::unique_ptr<sqlite3_stmt, StmtDeleter>> cache_;
  int open_transactions_ = 0;  // Transaction objects alive on this connection
};

// BEGIN IMMEDIATE on construction; ROLLBACK on destruction unless Commit() succeeded.
// Transactions nest: one opened while another is open on the same Db is a SAVEPOINT inside it,
// so an operation stays all-or-nothing when it joins a larger group commit.
class Transaction {
 public:
  explicit Transaction(Db& db);
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  const Status& begin_status() const { return begin_; }
  Status Commit();

 private:
  Db& db_;
  Status begin_;
  bool nested_ = false;
  bool done_ = false;
};

// Runs `body` inside a write transaction on `db`.
template <typename F>
Status InWriteTx(Db& db, F&& body) {
  Transaction tx(db);
  TSR_RETURN_IF_ERROR(tx.begin_status());
  TSR_RETURN_IF_ERROR(body());
  return tx.Commit();
}

}  // namespace tessera::store
