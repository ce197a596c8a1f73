#pragma once
// Test support: a real PostgreSQL server from Debian's packages, of the test's own.
//
// `initdb` makes a cluster in a fresh temporary folder (copied from a cached template cluster, so
// a server starts in well under a second after the first) and `pg_ctl start` runs it as an
// unprivileged user -- the tests run as root in CI, and PostgreSQL refuses root: the `postgres`
// system user the package creates. It listens on a Unix socket in its folder (and on 127.0.0.1
// at a free port when asked), with fsync on: durability is what the store's tests test. The
// destructor stops it by PID (pg_ctl stop -m immediate if that fails) and removes the folder; a
// guard process does the same if the test binary dies without running its destructors.
//
//   std::string why;
//   PostgresServer* pg = SharedPostgres(&why);   // one server per test binary
//   TSR_REQUIRE(pg != nullptr, why);
//   StatusOr<std::string> db = pg->CreateDatabase();   // a fresh database per test
//   ... pg->ConnInfo(*db) ...
//
// For failover tests: StartReplica() (pg_basebackup -R, a streaming standby), Promote(), Kill()
// (kill -9 of the postmaster), Restart().
//
// Threads: a server object is used by one thread at a time.

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "shared/base/status.h"

namespace tessera::testing {

class PostgresServer {
 public:
  struct Options {
    bool tcp = false;  // also listen on 127.0.0.1 at a free port (else the Unix socket only)
  };

  // The folder of initdb, pg_ctl and postgres: $TESSERA_POSTGRES_BIN, else the newest
  // /usr/lib/postgresql/<major>/bin; "" when there is none.
  static std::string FindBinDir();
  // Makes a cluster in a new temporary folder and starts it. The error says what is missing
  // (the binaries, the postgres user) or what the server said.
  static StatusOr<std::unique_ptr<PostgresServer>> Start(const Options& options);
  static StatusOr<std::unique_ptr<PostgresServer>> Start() { return Start(Options()); }
  ~PostgresServer();
  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;

  // libpq key=value settings for `dbname` as the superuser: over the Unix socket, or (TcpConnInfo,
  // with Options::tcp) over 127.0.0.1.
  std::string ConnInfo(const std::string& dbname = "postgres") const;
  std::string TcpConnInfo(const std::string& dbname = "postgres") const;
  const std::string& folder() const { return folder_; }
  const std::string& socket_dir() const { return folder_; }
  int port() const { return port_; }
  bool tcp() const { return options_.tcp; }
  // The postmaster's PID while it runs (-1 when stopped).
  pid_t pid() const { return pid_; }
  bool running() const;

  // Runs `sql` as the superuser on `dbname`.
  Status Exec(const std::string& sql, const std::string& dbname = "postgres") const;
  // The first column of the first row `sql` gives ('' for none).
  StatusOr<std::string> Query(const std::string& sql, const std::string& dbname = "postgres") const;
  // A new empty database with a name unique on this server.
  StatusOr<std::string> CreateDatabase();

  // A streaming replica of this server (pg_basebackup -R), started and following it; listening
  // like this one (its own socket folder, and a port of its own with Options::tcp).
  StatusOr<std::unique_ptr<PostgresServer>> StartReplica();
  // Makes this replica a primary (pg_ctl promote) and returns once it takes writes.
  Status Promote();
  // kill -9 of the postmaster; returns once it is gone.
  void Kill();
  // Fast shutdown by PID; pg_ctl stop -m immediate, then SIGKILL, if it does not go.
  Status Stop();
  // Starts the server again on its folder (after Stop or Kill), recovering what it had committed.
  Status Restart();

 private:
  PostgresServer(std::string bin, std::string folder, Options options, uid_t uid, gid_t gid);
  // Runs one of the server's programs as the server's user; its output goes to the folder's log.
  Status RunTool(const std::vector<std::string>& args, int timeout_s) const;
  Status WriteSettings(bool replica);
  Status StartPostmaster();
  void StartGuard();
  std::string data() const { return folder_ + "/data"; }

  std::string bin_;
  std::string folder_;
  Options options_;
  uid_t uid_;
  gid_t gid_;
  int port_ = 5432;
  pid_t pid_ = -1;
  pid_t guard_pid_ = -1;
  int guard_fd_ = -1;  // closing it tells the guard to clean up
  int databases_ = 0;
};

// One server for the whole test binary, started at the first call and stopped when the binary
// exits; nullptr with `*why` when it cannot start (TSR_REQUIRE turns that into a skip, or a
// failure under CI=true).
PostgresServer* SharedPostgres(std::string* why);

}  // namespace tessera::testing
