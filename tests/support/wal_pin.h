#pragma once
// Test support: a read transaction held on a SQLite database from outside the scheduler. It
// first empties the write-ahead log (a TRUNCATE checkpoint); while it is open SQLite cannot
// start the log over from the beginning, so every commit must grow the log file: with the
// filesystem full (tests/support/tmpfs.h) the scheduler's next commit fails for want of room,
// rather than reusing log space it already holds.
//
//   WalPin pin(data + "/tessera.db");
//   ASSERT_TRUE(pin.ok());
//   tmpfs.Fill();   // ... the next commit fails
//   pin.Release();  // the log may start over again

#include <sqlite3.h>

#include <string>

namespace tessera::testing {

class WalPin {
 public:
  explicit WalPin(const std::string& db_path) {
    if (sqlite3_open_v2(db_path.c_str(), &db_, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) return;
    sqlite3_busy_timeout(db_, 5000);
    ok_ = sqlite3_exec(db_, "PRAGMA wal_checkpoint(TRUNCATE)", nullptr, nullptr, nullptr) ==
              SQLITE_OK &&
          sqlite3_exec(db_, "BEGIN", nullptr, nullptr, nullptr) == SQLITE_OK &&
          sqlite3_prepare_v2(db_, "SELECT count(*) FROM tasks", -1, &stmt_, nullptr) == SQLITE_OK &&
          sqlite3_step(stmt_) == SQLITE_ROW;
  }
  ~WalPin() { Release(); }
  WalPin(const WalPin&) = delete;
  WalPin& operator=(const WalPin&) = delete;

  bool ok() const { return ok_; }
  void Release() {
    if (stmt_) sqlite3_finalize(stmt_);
    stmt_ = nullptr;
    if (db_) {
      sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr);
      sqlite3_close(db_);
    }
    db_ = nullptr;
  }

 private:
  sqlite3* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
  bool ok_ = false;
};

// PRAGMA integrity_check's first line ("ok" for an intact database) on a read-only connection.
inline std::string IntegrityCheck(const std::string& db_path) {
  sqlite3* db = nullptr;
  std::string result = "cannot open " + db_path;
  if (sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &s, nullptr) == SQLITE_OK &&
        sqlite3_step(s) == SQLITE_ROW) {
      result = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
    }
    sqlite3_finalize(s);
  }
  sqlite3_close(db);
  return result;
}

}  // namespace tessera::testing
