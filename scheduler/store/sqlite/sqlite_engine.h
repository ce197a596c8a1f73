#pragma once
// sql::Db on SQLite: an adapter over the connection wrapper of sqlite.h (its statement cache,
// BEGIN IMMEDIATE transactions and savepoints, its full-disk classification), so code written
// against sql::Db runs on the embedded engine exactly as the store's own code does.
//
// Threads: as sql::Db (one thread at a time).

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "scheduler/store/sql/sql_engine.h"
#include "scheduler/store/sqlite/sqlite.h"

namespace tessera::store::sql {

class SqliteDb final : public Db {
 public:
  // Opens the database file at `path` as store::Db::Open does (WAL, foreign keys, busy timeout).
  static StatusOr<std::unique_ptr<SqliteDb>> Open(const std::string& path, bool read_only,
                                                  const std::string& synchronous = "NORMAL");
  // Wraps a connection that someone else owns and that outlives this adapter (the store's writer).
  SqliteDb(store::Db& db, std::string path);
  ~SqliteDb() override;

  Engine engine() const override { return Engine::kSqlite; }
  std::string Describe() const override { return "sqlite:" + path_; }
  Status Exec(const std::string& sql) override { return db_.Exec(sql); }
  int Changes() const override { return db_.Changes(); }
  store::Db& connection() { return db_; }

 protected:
  StatusOr<Cursor*> PrepareCursor(const std::string& sql) override;

 private:
  class SqliteCursor;
  SqliteDb(std::unique_ptr<store::Db> owned, std::string path);
  Status Begin() override;
  Status Commit() override;
  void Rollback() override;

  std::unique_ptr<store::Db> owned_;
  store::Db& db_;
  std::string path_;
  std::unordered_map<std::string, std::unique_ptr<SqliteCursor>> cursors_;
  // The open levels, innermost last: each a store::Transaction (BEGIN IMMEDIATE or a savepoint).
  std::vector<std::unique_ptr<store::Transaction>> levels_;
};

}  // namespace tessera::store::sql
