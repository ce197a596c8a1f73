// The test PostgreSQL (tests/support/postgres_server.h) can do what the failover tests need: run
// as an unprivileged user with fsync on, keep what it committed across kill -9, make a streaming
// replica of itself and promote it -- and the store's connection follows a multi-host setting to
// the new primary, while a standby taken for the primary refuses writes.

#include "tests/support/postgres_server.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "scheduler/store/postgres/postgres.h"
#include "tests/support/require.h"

namespace tessera::testing {
namespace {

std::unique_ptr<PostgresServer> StartOrSkip(std::string* why) {
  StatusOr<std::unique_ptr<PostgresServer>> server = PostgresServer::Start();
  if (!server.ok()) {
    *why = server.status().message();
    return nullptr;
  }
  return std::move(*server);
}

std::unique_ptr<store::sql::PostgresDb> Connect(const std::string& conninfo) {
  StatusOr<store::StoreUrl> url = store::ParseStoreUrl(conninfo);
  EXPECT_TRUE(url.ok()) << url.status().ToString();
  if (!url.ok()) return nullptr;
  StatusOr<std::unique_ptr<store::sql::PostgresDb>> db = store::sql::PostgresDb::Connect(*url);
  EXPECT_TRUE(db.ok()) << db.status().ToString();
  return db.ok() ? std::move(*db) : nullptr;
}

Status Insert(store::sql::Db& db, int64_t value) {
  TSR_ASSIGN_OR_RETURN(store::sql::Stmt s, db.Prepare("INSERT INTO t (i) VALUES (?)"));
  return s.Bind(1, value).Run();
}

// No such process, or one that has exited and waits to be reaped (a zombie).
bool Gone(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t paren = text.rfind(')');
  return paren == std::string::npos || paren + 2 >= text.size() || text[paren + 2] == 'Z' ||
         text[paren + 2] == 'X';
}

bool EventuallyEquals(const PostgresServer& server, const std::string& sql,
                      const std::string& value) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    StatusOr<std::string> got = server.Query(sql);
    if (got.ok() && *got == value) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

TEST(PostgresServer, RunsUnprivilegedWithFsyncOnAndStopsByPid) {
  std::string why;
  std::unique_ptr<PostgresServer> server = StartOrSkip(&why);
  TSR_REQUIRE(server != nullptr, "no PostgreSQL for the test: " << why);
  EXPECT_EQ(*server->Query("SHOW fsync"), "on");
  EXPECT_EQ(*server->Query("SHOW synchronous_commit"), "on");
  EXPECT_EQ(*server->Query("SHOW listen_addresses"), "");  // the Unix socket only
  std::ifstream status("/proc/" + std::to_string(server->pid()) + "/status");
  std::string line;
  while (std::getline(status, line) && line.rfind("Uid:", 0) != 0) {
  }
  EXPECT_NE(line.find_first_of("123456789"), std::string::npos) << "runs as root: " << line;
  const pid_t pid = server->pid();
  const std::string folder = server->folder();
  server.reset();
  EXPECT_FALSE(std::filesystem::exists(folder));
  EXPECT_TRUE(Gone(pid));
}

TEST(PostgresServer, KeepsWhatItCommittedAcrossKillNine) {
  std::string why;
  std::unique_ptr<PostgresServer> server = StartOrSkip(&why);
  TSR_REQUIRE(server != nullptr, "no PostgreSQL for the test: " << why);
  {
    std::unique_ptr<store::sql::PostgresDb> db = Connect(server->ConnInfo());
    ASSERT_NE(db, nullptr);
    ASSERT_TRUE(db->Exec("CREATE TABLE t (i BIGINT)").ok());
    for (int i = 0; i < 50; ++i) {
      store::sql::Transaction tx(*db);
      ASSERT_TRUE(Insert(*db, i).ok());
      ASSERT_TRUE(tx.Commit().ok());
    }
    const pid_t pid = server->pid();
    server->Kill();
    EXPECT_TRUE(Gone(pid));
    const Status lost = Insert(*db, 99);
    EXPECT_EQ(lost.code(), StatusCode::kUnavailable) << lost.ToString();
  }
  ASSERT_TRUE(server->Restart().ok());
  EXPECT_EQ(*server->Query("SELECT count(*) FROM t"), "50");
}

TEST(PostgresServer, AReplicaFollowsAndTakesOverWhenPromoted) {
  std::string why;
  std::unique_ptr<PostgresServer> primary = StartOrSkip(&why);
  TSR_REQUIRE(primary != nullptr, "no PostgreSQL for the test: " << why);
  ASSERT_TRUE(primary->Exec("CREATE TABLE t (i BIGINT)").ok());
  ASSERT_TRUE(primary->Exec("INSERT INTO t VALUES (1)").ok());
  StatusOr<std::unique_ptr<PostgresServer>> started = primary->StartReplica();
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  std::unique_ptr<PostgresServer> replica = std::move(*started);
  EXPECT_EQ(*replica->Query("SELECT pg_is_in_recovery()"), "t");
  ASSERT_TRUE(primary->Exec("INSERT INTO t VALUES (2)").ok());
  EXPECT_TRUE(EventuallyEquals(*replica, "SELECT count(*) FROM t", "2"));

  // A standby given as the primary: writes are refused, clearly.
  std::unique_ptr<store::sql::PostgresDb> standby = Connect(replica->ConnInfo());
  ASSERT_NE(standby, nullptr);
  const Status refused = Insert(*standby, 3);
  EXPECT_EQ(refused.code(), StatusCode::kUnavailable);
  EXPECT_NE(refused.message().find("read-only standby"), std::string::npos) << refused.message();

  // Both servers in one setting; read-write picks the primary, then the promoted replica.
  const std::string both = "host=" + primary->socket_dir() + "," + replica->socket_dir() +
                           " port=" + std::to_string(primary->port()) + "," +
                           std::to_string(replica->port()) +
                           " user=postgres dbname=postgres target_session_attrs=read-write "
                           "connect_timeout=5";
  std::unique_ptr<store::sql::PostgresDb> db = Connect(both);
  ASSERT_NE(db, nullptr);
  ASSERT_TRUE(Insert(*db, 3).ok());
  EXPECT_TRUE(EventuallyEquals(*replica, "SELECT count(*) FROM t", "3"));

  primary->Kill();
  ASSERT_TRUE(replica->Promote().ok());
  EXPECT_EQ(Insert(*db, 4).code(), StatusCode::kUnavailable);
  ASSERT_TRUE(db->Reconnect().ok());
  ASSERT_TRUE(Insert(*db, 4).ok());
  EXPECT_EQ(*replica->Query("SELECT string_agg(i::text, ',' ORDER BY i) FROM t"), "1,2,3,4");
}

}  // namespace
}  // namespace tessera::testing
