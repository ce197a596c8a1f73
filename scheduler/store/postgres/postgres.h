#pragma once
// sql::Db on PostgreSQL, through libpq.
//
// - Placeholders: the store writes SQLite's `?` / `?N`; each statement is rewritten to `$N` once,
//   when it is first prepared on a connection (RewritePlaceholders). PostgreSQL's jsonb `?`
//   operators cannot be used for that reason (jsonb_exists() does the same).
// - Prepared statements are cached per connection by their text. Parameters are typed (bigint,
//   double precision, text, sent in binary), so the server never guesses a type; a statement is
//   prepared on the server at its first execution with the types it is given, and once more for
//   each other combination of types it meets (a NULL fits any).
// - Results are read row by row (libpq's single-row mode), so a large SELECT never sits in
//   memory whole. A statement run while another one's rows are still being read first takes the
//   rest of those rows into memory: statements interleave as they do on SQLite.
// - Transactions are BEGIN / COMMIT, nested ones SAVEPOINTs. A statement that fails spoils its
//   transaction until its savepoint is rolled back (the store's nested transactions do that);
//   COMMIT of a spoiled transaction is reported as the failure it is, never as success.
// - Failures are Status values carrying the server's message and SQLSTATE: kUnavailable when the
//   connection is lost or the server is read-only (a standby), also for a COMMIT whose outcome is
//   therefore unknown; kStorageFull when the server's disk is full (SQLSTATE 53100);
//   kUnauthenticated when the server refuses the credentials; kInternal otherwise. No message
//   ever holds the password: the connection is named by its redacted settings, and what libpq
//   says is scrubbed of the password as well.
//
// Threads: one thread at a time, as sql::Db.

#include <libpq-fe.h>

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "scheduler/store/sql/sql_engine.h"
#include "scheduler/store/sql/store_url.h"

namespace tessera::store::sql {

class PostgresDb final : public Db {
 public:
  // Connects to the server `url` names (engine kPostgres), with its password from
  // store.password_file when it has one. PostgreSQL 12 or newer.
  static StatusOr<std::unique_ptr<PostgresDb>> Connect(const StoreUrl& url);
  ~PostgresDb() override;
  PostgresDb(const PostgresDb&) = delete;
  PostgresDb& operator=(const PostgresDb&) = delete;

  Engine engine() const override { return Engine::kPostgres; }
  std::string Describe() const override { return redacted_; }
  Status Exec(const std::string& sql) override;
  int Changes() const override { return changes_; }

  // Connects again with the same settings after kUnavailable: with several hosts and
  // target_session_attrs=read-write, to whichever server is the primary now. A transaction that
  // was open is gone; statements are prepared again when next used. No Stmt may be in use.
  Status Reconnect();
  bool connected() const;
  bool Usable() const override { return connected(); }
  // Statements prepared on the server for this connection (each combination of parameter types
  // counts once).
  int prepared_on_server() const { return prepared_on_server_; }
  // The server process of this connection (pg_backend_pid()), e.g. to end it in a test.
  int backend_pid() const;

 protected:
  StatusOr<Cursor*> PrepareCursor(const std::string& sql) override;

 private:
  class PgCursor;
  friend class PgCursor;
  PostgresDb(PGconn* conn, std::string redacted, std::string secret);

  Status Begin() override;
  Status Commit() override;
  void Rollback() override;

  // Makes the connection free for a new command: a statement still streaming rows takes the
  // rest into memory.
  void Claim();
  // Runs `sql` with the simple protocol; a result other than `expect`ed is an error.
  StatusOr<std::string> RunSimple(const std::string& sql, const std::string& what);
  // The Status for a failed command (`result` may be null: then the connection's message).
  Status Failure(const PGresult* result, const std::string& what) const;

  PGconn* conn_;
  std::string redacted_;  // the connection settings without any password
  std::string secret_;    // the password, to scrub from every message
  std::unordered_map<std::string, std::unique_ptr<PgCursor>> cursors_;
  PgCursor* streaming_ = nullptr;  // the statement whose rows the connection is delivering
  int depth_ = 0;                  // open transaction levels
  int changes_ = 0;
  int next_statement_ = 0;  // names server-side statements "tsr_<n>"
  int prepared_on_server_ = 0;
};

// `sql` with SQLite's placeholders (`?`, `?N`) written as PostgreSQL's (`$N`), leaving string
// literals (also E'...' and $tag$...$tag$), quoted identifiers and comments alone. A bare `?` is
// one more than the largest index before it, as in SQLite. `*count` gets the largest index.
std::string RewritePlaceholders(std::string_view sql, int* count);

// The Status for an error PostgreSQL reported, by its SQLSTATE: kUnavailable when
// `connection_lost`, for a class 08 state, for 57P01-57P03 (the server shutting down or starting)
// and 25006 (a read-only standby); kStorageFull for 53100 (disk full); kInternal otherwise. The
// message reads "<what>: <server message> (SQLSTATE <state>)".
Status PostgresStatus(std::string_view sqlstate, std::string_view message, bool connection_lost,
                      const std::string& what);

}  // namespace tessera::store::sql
