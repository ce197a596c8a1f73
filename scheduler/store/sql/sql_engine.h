#pragma once
// The SQL the store runs, independent of the database engine: SQLite (embedded, the default) or
// PostgreSQL (several schedulers on one server). Both engines implement `sql::Db`, shaped like the
// SQLite wrapper in sqlite.h so the store's code keeps its form:
//
//   TSR_ASSIGN_OR_RETURN(sql::Stmt s, db.Prepare("UPDATE tasks SET state = ?2 WHERE id = ?1"));
//   TSR_RETURN_IF_ERROR(s.Bind(1, id).Bind(2, "done").Run());
//   sql::Transaction tx(db);                 // BEGIN, or a SAVEPOINT when one is open
//   ...
//   TSR_RETURN_IF_ERROR(tx.Commit());        // rolled back unless committed
//
// What the statements may use on both engines (see sqlite_engine.h and postgres.h):
// - placeholders `?` and `?N` (SQLite's numbering: a bare `?` is one more than the largest
//   index before it); PostgreSQL receives them as `$N`, rewritten once per statement;
// - INSERT ... ON CONFLICT (...) DO NOTHING / DO UPDATE SET c = excluded.c (never INSERT OR
//   IGNORE / INSERT OR REPLACE); in DO UPDATE, a column of the existing row is named with its
//   table (`cost_days.cost + ?2`): PostgreSQL finds a bare name ambiguous;
// - INSERT ... RETURNING id for a new row's id (there is no LastInsertId: InsertReturningId);
// - count(*) FILTER (WHERE ...) and COALESCE(SUM(x), 0) instead of SQLite's total();
// - `WHERE true`, not `WHERE 1`; the column `user` quoted as "user";
// - values bound with the type of their column: integers for INTEGER columns, text for TEXT.
//   A flag column is an integer 0/1 on both engines. A boolean expression read back with Int()
//   is 0 or 1 on both.
// Everything else -- JSON arrays kept in TEXT columns, SQLite's INDEXED BY, substring search --
// differs, and each such statement names both forms with DialectSql, so the SQL that differs
// between the engines stays in plain sight.
//
// Threads: a Db and its statements are used by one thread at a time (the store serialises them).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "shared/base/status.h"

namespace tessera::store::sql {

enum class Engine { kSqlite, kPostgres };
const char* EngineName(Engine engine);

// What a column of the current row holds, for code that copies rows it does not know
// (`store copy`): integers (and PostgreSQL booleans), reals (and numerics), text, or NULL.
enum class ValueType { kNull, kInt, kDouble, kText };

// A prepared statement of one engine, owned and cached by its connection; the store reaches it
// through a Stmt. Columns are 0-based, parameters 1-based.
class Cursor {
 public:
  virtual ~Cursor() = default;
  virtual void BindInt(int index, int64_t value) = 0;
  virtual void BindDouble(int index, double value) = 0;
  virtual void BindText(int index, std::string_view value) = 0;
  virtual void BindNull(int index) = 0;
  // True while a row is available, false at the end; a failure is a Status.
  virtual StatusOr<bool> Step() = 0;
  virtual int64_t Int(int col) const = 0;
  virtual double Double(int col) const = 0;
  virtual std::string Text(int col) const = 0;
  virtual bool IsNull(int col) const = 0;
  virtual int ColumnCount() const = 0;
  virtual ValueType TypeOf(int col) const = 0;
  // Ends the current execution (the rest of its rows are dropped) so the statement can run again;
  // its parameters are cleared.
  virtual void Reset() = 0;
};

// A statement in use: a handle on its connection's cached Cursor, reset when it goes away (so a
// half-read SELECT holds nothing back). Move-only, like the SQLite wrapper's Stmt.
class Stmt {
 public:
  explicit Stmt(Cursor* cursor) : cursor_(cursor) {}
  Stmt(Stmt&& other) noexcept : cursor_(std::exchange(other.cursor_, nullptr)) {}
  Stmt& operator=(Stmt&& other) noexcept {
    std::swap(cursor_, other.cursor_);
    return *this;
  }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  ~Stmt() {
    if (cursor_) cursor_->Reset();
  }

  Stmt& Bind(int index, int64_t value) {
    cursor_->BindInt(index, value);
    return *this;
  }
  Stmt& Bind(int index, int value) { return Bind(index, static_cast<int64_t>(value)); }
  Stmt& Bind(int index, double value) {
    cursor_->BindDouble(index, value);
    return *this;
  }
  Stmt& Bind(int index, std::string_view value) {
    cursor_->BindText(index, value);
    return *this;
  }
  Stmt& Bind(int index, const char* value) { return Bind(index, std::string_view(value)); }
  Stmt& Bind(int index, const std::string& value) { return Bind(index, std::string_view(value)); }
  Stmt& BindNull(int index) {
    cursor_->BindNull(index);
    return *this;
  }
  template <typename T>
  Stmt& Bind(int index, const std::optional<T>& value) {
    return value ? Bind(index, *value) : BindNull(index);
  }

  // True while a row is available; false when done. Errors become a Status.
  StatusOr<bool> Step() { return cursor_->Step(); }
  // Steps to completion (for statements that return no rows).
  Status Run();

  int64_t Int(int col) const { return cursor_->Int(col); }
  double Double(int col) const { return cursor_->Double(col); }
  std::string Text(int col) const { return cursor_->Text(col); }
  bool IsNull(int col) const { return cursor_->IsNull(col); }
  int ColumnCount() const { return cursor_->ColumnCount(); }
  ValueType TypeOf(int col) const { return cursor_->TypeOf(col); }
  std::optional<int64_t> OptInt(int col) const {
    return IsNull(col) ? std::nullopt : std::optional<int64_t>(Int(col));
  }

 private:
  Cursor* cursor_;
};

// A statement whose text differs between the engines, both forms side by side:
//   constexpr DialectSql kAddFailedOn{
//       .sqlite = "UPDATE tasks SET failed_on = json_insert(failed_on, '$[#]', ?1) ...",
//       .postgres = "UPDATE tasks SET failed_on = (failed_on::jsonb || to_jsonb(?1))::text ..."};
//   db.Prepare(db.Pick(kAddFailedOn));
struct DialectSql {
  std::string_view sqlite;
  std::string_view postgres;
};

// A connection. Transactions nest (see Transaction); statements are cached per connection by
// their text.
class Db {
 public:
  virtual ~Db() = default;

  virtual Engine engine() const = 0;
  // Where the connection goes, safe to show (a PostgreSQL password is never part of it).
  virtual std::string Describe() const = 0;

  // Runs one or more statements without parameters (schema changes, settings).
  virtual Status Exec(const std::string& sql) = 0;
  // The statement, prepared once per connection and reset for reuse. A statement PostgreSQL
  // refuses (a syntax error, an unknown column) reports it at its first Step().
  StatusOr<Stmt> Prepare(const std::string& sql) {
    TSR_ASSIGN_OR_RETURN(Cursor * cursor, PrepareCursor(sql));
    return Stmt(cursor);
  }
  StatusOr<Stmt> Prepare(const char* sql) { return Prepare(std::string(sql)); }
  StatusOr<Stmt> Prepare(const DialectSql& sql) { return Prepare(std::string(Pick(sql))); }
  // Rows inserted, changed or deleted by the last INSERT, UPDATE or DELETE run to its end
  // (not counting what triggers did).
  virtual int Changes() const = 0;
  // False once the connection is known to be lost (PostgreSQL: the server went away or ended
  // it); a pool drops such a connection instead of lending it again.
  virtual bool Usable() const { return true; }

  std::string_view Pick(const DialectSql& sql) const {
    return engine() == Engine::kSqlite ? sql.sqlite : sql.postgres;
  }

 protected:
  // The cached statement for `sql`, reset, its parameters cleared.
  virtual StatusOr<Cursor*> PrepareCursor(const std::string& sql) = 0;

 private:
  friend class Transaction;
  // The innermost level: BEGIN (SQLite: BEGIN IMMEDIATE) at depth 0, a savepoint above; its
  // commit (COMMIT or RELEASE); its rollback (ROLLBACK, or ROLLBACK TO and RELEASE).
  virtual Status Begin() = 0;
  virtual Status Commit() = 0;
  virtual void Rollback() = 0;
};

// A write transaction: BEGIN on construction, ROLLBACK on destruction unless Commit() succeeded.
// One opened while another is open on the same Db is a SAVEPOINT inside it, so an operation stays
// all-or-nothing when it joins a larger group commit. On PostgreSQL a failed statement spoils the
// transaction it is in until its savepoint is rolled back; Commit() then fails, naming it.
class Transaction {
 public:
  explicit Transaction(Db& db) : db_(db), begin_(db.Begin()) {}
  ~Transaction() {
    if (begin_.ok() && !done_) db_.Rollback();
  }
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  const Status& begin_status() const { return begin_; }
  Status Commit();

 private:
  Db& db_;
  Status begin_;
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

// Runs `insert`, an INSERT ... RETURNING id (the same text on both engines), and returns the new
// row's id. This replaces SQLite's last-insert-rowid, which PostgreSQL has no equivalent of.
StatusOr<int64_t> InsertReturningId(Stmt& insert);

}  // namespace tessera::store::sql
