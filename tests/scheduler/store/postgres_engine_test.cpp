// What only the PostgreSQL engine has to get right: its statement cache, a lost connection, a
// spoiled transaction, a full disk, and passwords -- which reach no message.

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <random>

#include "tests/scheduler/store/engine_fixture.h"
#include "tests/support/tmpfs.h"

namespace tessera::store::sql {
namespace {

class PostgresEngineTest : public EngineFixture {
 protected:
  PostgresDb& pg() { return static_cast<PostgresDb&>(*db_); }

  // A login role with `password`, unique to this test.
  std::string MakeRole(const std::string& password) {
    const std::string role = "farm_" + std::to_string(::getpid()) + "_" + std::to_string(++roles_);
    std::string quoted;
    for (char c : password) quoted += c == '\'' ? std::string("''") : std::string(1, c);
    EXPECT_TRUE(pg_->Exec("CREATE ROLE " + role + " LOGIN PASSWORD '" + quoted + "'").ok());
    return role;
  }

  std::string TcpUrl(const std::string& userinfo) const {
    return "postgresql://" + userinfo + "@127.0.0.1:" + std::to_string(pg_->port()) + "/" +
           database_;
  }

  int roles_ = 0;
};

TEST_P(PostgresEngineTest, PreparesEachStatementOncePerCombinationOfTypes) {
  const int before = pg().prepared_on_server();
  for (int i = 0; i < 20; ++i) {
    StatusOr<Stmt> s = db_->Prepare("SELECT ?1");
    s->Bind(1, int64_t{i});
    ASSERT_TRUE(*s->Step());
    EXPECT_EQ(s->Int(0), i);
  }
  EXPECT_EQ(pg().prepared_on_server() - before, 1);
  {
    StatusOr<Stmt> s = db_->Prepare("SELECT ?1");
    s->BindNull(1);  // a NULL fits the bigint statement
    ASSERT_TRUE(*s->Step());
    EXPECT_TRUE(s->IsNull(0));
  }
  EXPECT_EQ(pg().prepared_on_server() - before, 1);
  {
    StatusOr<Stmt> s = db_->Prepare("SELECT ?1");
    s->Bind(1, "text");
    ASSERT_TRUE(*s->Step());
    EXPECT_EQ(s->Text(0), "text");
  }
  EXPECT_EQ(pg().prepared_on_server() - before, 2);
  // The server agrees.
  // The server agrees (the count itself is one more statement prepared).
  const std::string on_server = One("SELECT count(*) FROM pg_prepared_statements");
  EXPECT_EQ(on_server, std::to_string(pg().prepared_on_server()));
}

TEST_P(PostgresEngineTest, ALostConnectionIsUnavailableAndReconnects) {
  ASSERT_TRUE(db_->Exec("CREATE TABLE t (i BIGINT)").ok());
  EXPECT_EQ(One("SELECT count(*) FROM t"), "0");
  ASSERT_TRUE(
      pg_->Exec("SELECT pg_terminate_backend(" + std::to_string(pg().backend_pid()) + ")").ok());
  StatusOr<Stmt> s = db_->Prepare("SELECT count(*) FROM t");
  const Status lost = s->Run();
  EXPECT_EQ(lost.code(), StatusCode::kUnavailable) << lost.ToString();
  EXPECT_NE(lost.message().find("[PostgreSQL at host="), std::string::npos) << lost.message();
  EXPECT_FALSE(pg().connected());

  ASSERT_TRUE(pg().Reconnect().ok());
  EXPECT_EQ(One("SELECT count(*) FROM t"), "0");  // prepared again on the new session

  // A COMMIT whose answer never comes: its outcome is unknown, and the error says so.
  Transaction tx(*db_);
  StatusOr<Stmt> insert = db_->Prepare("INSERT INTO t (i) VALUES (1)");
  ASSERT_TRUE(insert->Run().ok());
  ASSERT_TRUE(
      pg_->Exec("SELECT pg_terminate_backend(" + std::to_string(pg().backend_pid()) + ")").ok());
  const Status commit = tx.Commit();
  EXPECT_EQ(commit.code(), StatusCode::kUnavailable);
  EXPECT_NE(commit.message().find("unknown"), std::string::npos) << commit.message();
}

TEST_P(PostgresEngineTest, ASpoiledTransactionNeverCommits) {
  ASSERT_TRUE(db_->Exec("CREATE TABLE t (k TEXT PRIMARY KEY)").ok());
  {
    Transaction tx(*db_);
    StatusOr<Stmt> a = db_->Prepare("INSERT INTO t (k) VALUES ('a')");
    ASSERT_TRUE(a->Run().ok());
    StatusOr<Stmt> dup = db_->Prepare("INSERT INTO t (k) VALUES ('a')");
    EXPECT_FALSE(dup->Run().ok());
    const Status commit = tx.Commit();
    EXPECT_FALSE(commit.ok());
    EXPECT_NE(commit.message().find("rolled the whole transaction back"), std::string::npos)
        << commit.message();
  }
  EXPECT_EQ(One("SELECT count(*) FROM t"), "0");
}

TEST_P(PostgresEngineTest, AFullDiskIsStorageFull) {
  TSR_REQUIRE(::geteuid() == 0, "needs root to mount a small tmpfs for a tablespace");
  struct stat owner {};
  ASSERT_EQ(::stat(pg_->folder().c_str(), &owner), 0);
  testing::ScopedTmpfs small(dir_ + "/tablespace", 1 << 20);
  ASSERT_TRUE(small.mounted()) << small.error();
  ASSERT_EQ(::chown(small.dir().c_str(), owner.st_uid, owner.st_gid), 0);
  const std::string tablespace = "tiny_" + std::to_string(::getpid());
  ASSERT_TRUE(
      pg_->Exec("CREATE TABLESPACE " + tablespace + " LOCATION '" + small.dir() + "'").ok());
  ASSERT_TRUE(db_->Exec("CREATE TABLE big (s TEXT) TABLESPACE " + tablespace).ok());

  std::mt19937_64 random(7);
  std::string noise(32 * 1024, ' ');
  Status full = Status::Ok();
  for (int i = 0; i < 200 && full.ok(); ++i) {
    for (char& c : noise) c = static_cast<char>('!' + random() % 90);  // incompressible
    StatusOr<Stmt> insert = db_->Prepare("INSERT INTO big (s) VALUES (?)");
    full = insert->Bind(1, noise).Run();
  }
  EXPECT_EQ(full.code(), StatusCode::kStorageFull) << full.ToString();
  EXPECT_NE(full.message().find("SQLSTATE 53100"), std::string::npos) << full.message();
  EXPECT_NE(full.message().find("disk is full"), std::string::npos) << full.message();

  ASSERT_TRUE(db_->Exec("DROP TABLE big").ok());
  EXPECT_TRUE(pg_->Exec("DROP TABLESPACE " + tablespace).ok());
}

TEST_P(PostgresEngineTest, PasswordsNeverReachAMessage) {
  const std::string password = "s3cr@t:/%pw";  // every character a URL makes awkward
  const std::string encoded = "s3cr%40t%3A%2F%25pw";
  const std::string role = MakeRole(password);
  const char* saved = std::getenv("PGPASSFILE");
  ::setenv("PGPASSFILE", (dir_ + "/no-passfile").c_str(), 1);

  // The right password, percent-encoded in the URL: a failing statement does not quote it.
  StatusOr<StoreUrl> url = ParseStoreUrl(TcpUrl(role + ":" + encoded));
  ASSERT_TRUE(url.ok()) << url.status().ToString();
  StatusOr<std::unique_ptr<PostgresDb>> db = PostgresDb::Connect(*url);
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  Status failed = Status::Ok();
  {  // a statement lives no longer than its connection
    StatusOr<Stmt> bad = (*db)->Prepare("SELECT * FROM no_such_table");
    failed = bad->Run();
  }
  EXPECT_FALSE(failed.ok());
  EXPECT_EQ((*db)->Describe(), TcpUrl(role));

  // A wrong password: refused, the URL shown redacted.
  url = ParseStoreUrl(TcpUrl(role + ":wr0ng%40" + encoded));
  ASSERT_TRUE(url.ok());
  db = PostgresDb::Connect(*url);
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().code(), StatusCode::kUnauthenticated) << db.status().ToString();
  EXPECT_NE(db.status().message().find(TcpUrl(role)), std::string::npos) << db.status().message();
  for (const std::string& secret : {password, encoded, std::string("wr0ng")}) {
    EXPECT_EQ(db.status().message().find(secret), std::string::npos) << db.status().message();
    EXPECT_EQ(failed.message().find(secret), std::string::npos) << failed.message();
  }

  // No password at all: the message says where one may come from.
  url = ParseStoreUrl(TcpUrl(role));
  db = PostgresDb::Connect(*url);
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().code(), StatusCode::kUnauthenticated);
  EXPECT_NE(db.status().message().find("store.password_file"), std::string::npos)
      << db.status().message();

  // store.password_file.
  const std::string file = dir_ + "/password";
  std::ofstream(file) << password << "\n";
  StoreUrlSources sources;
  sources.config_url = TcpUrl(role);
  sources.password_file = file;
  url = ResolveStoreUrl(sources);
  ASSERT_TRUE(url.ok()) << url.status().ToString();
  db = PostgresDb::Connect(*url);
  ASSERT_TRUE(db.ok()) << db.status().ToString();

  // libpq's own PGPASSFILE.
  const std::string passfile = dir_ + "/pgpass";
  std::string escaped;
  for (char c : password)
    escaped += (c == ':' || c == '\\') ? std::string("\\") + c : std::string(1, c);
  std::ofstream(passfile) << "127.0.0.1:" << pg_->port() << ":*:" << role << ":" << escaped << "\n";
  ::chmod(passfile.c_str(), 0600);
  ::setenv("PGPASSFILE", passfile.c_str(), 1);
  url = ParseStoreUrl(TcpUrl(role));
  db = PostgresDb::Connect(*url);
  EXPECT_TRUE(db.ok()) << db.status().ToString();

  if (saved != nullptr) {
    ::setenv("PGPASSFILE", saved, 1);
  } else {
    ::unsetenv("PGPASSFILE");
  }
}

TEST_P(PostgresEngineTest, AnUnreachableServerIsUnavailableAndNamed) {
  StatusOr<StoreUrl> url =
      ParseStoreUrl("host=" + dir_ + "/nowhere port=1 dbname=farm connect_timeout=2");
  ASSERT_TRUE(url.ok());
  StatusOr<std::unique_ptr<PostgresDb>> db = PostgresDb::Connect(*url);
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(db.status().message().find("cannot connect to PostgreSQL at host=" + dir_ + "/nowhere"),
            std::string::npos)
      << db.status().message();
}

INSTANTIATE_TEST_SUITE_P(Engines, PostgresEngineTest, ::testing::Values(Engine::kPostgres),
                         EngineTestName);

}  // namespace
}  // namespace tessera::store::sql
