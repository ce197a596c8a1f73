// A fresh store in a per-test folder, on a clock the test moves by hand (clock_), with the few
// records most store tests start from: a job of N frames and a registered worker. Every test of
// a fixture built on it runs on both engines (the test's parameter): SQLite in the test's folder,
// and PostgreSQL in a fresh database of the test binary's own server (tests/support/
// postgres_server.h; a missing PostgreSQL skips, or fails under CI=true).
//
//   class MyStoreTest : public StoreFixture { ... };
//   TSR_STORE_TEST_ON_BOTH_ENGINES(MyStoreTest);
//   TEST_P(MyStoreTest, ...) { ... }
#pragma once

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>
#include <memory>
#include <string>

#include "scheduler/store/sql/store_url.h"
#include "scheduler/store/store.h"
#include "shared/base/clock.h"
#include "tests/support/postgres_server.h"
#include "tests/support/require.h"

namespace tessera::store {

// The store on one engine: SQLite unless a subclass says otherwise (StoreFixture: the test's
// parameter). Tests of other parts that need a store (the broker's parts) use it as it is.
class StoreFixtureBase : public ::testing::Test {
 protected:
  // `prefix` names the test's folder under the test temp dir (with the test's name).
  explicit StoreFixtureBase(std::string prefix) : prefix_(std::move(prefix)) {}
  virtual sql::Engine engine() const { return sql::Engine::kSqlite; }

  void SetUp() override {
    dir_ = ::testing::TempDir() + "/" + prefix_ + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    url_.sqlite_path = dir_ + "/tessera.db";
    if (postgres()) {
      std::string why;
      pg_ = testing::SharedPostgres(&why);
      TSR_REQUIRE(pg_ != nullptr, "no PostgreSQL for the test: " << why);
      StatusOr<std::string> database = pg_->CreateDatabase();
      ASSERT_TRUE(database.ok()) << database.status().ToString();
      database_ = *database;
      StatusOr<StoreUrl> url = ParseStoreUrl(pg_->ConnInfo(database_));
      ASSERT_TRUE(url.ok()) << url.status().ToString();
      url_ = *url;
    }
    Reopen();
  }

  bool postgres() const { return engine() == sql::Engine::kPostgres; }

  // Closes the store (if open) and opens it again: from its folder, or its PostgreSQL database.
  void Reopen() {
    store_.reset();
    auto s = Store::Open(url_, dir_, clock_);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(*s);
  }

  JobRecord Submit(int frames, int chunk = 1, int retries = 3) {
    spec::JobSpec spec;
    spec.name = "shot";
    spec.scene_yaml = "width: 8\n";
    spec.frame_start = 1;
    spec.frame_end = frames;
    spec.chunk_size = chunk;
    spec.max_retries = retries;
    auto job = store_->CreateJob(spec, "name: shot\n", [&](int64_t id) -> StatusOr<std::string> {
      return dir_ + "/out/" + std::to_string(id);
    });
    EXPECT_TRUE(job.ok()) << job.status().ToString();
    return *job;
  }

  int64_t Worker(const std::string& name) {
    protocol::Register reg;
    reg.name = name;
    reg.hostname = "host-" + name;
    reg.cpu_cores = 2;
    reg.backends = {"cpu"};
    auto id = store_->UpsertWorker(reg);
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    return *id;
  }

  // Runs `sql` on the database file directly (with the store closed: an older schema, a row
  // the store would never write).
  // Takes a database back to schema 28 (run before a test's own undoing of older schemas):
  // without the steps of jobs (29), webhook cursors and job end events (30), failure policies
  // (31), tasks' status lines (32).
  static constexpr const char* kBackToSchema28 =
      "DROP TRIGGER step_counts_to_job; DROP TRIGGER job_state_from_steps;"
      "DROP TRIGGER job_end_events; DROP INDEX jobs_by_pipeline; DROP TABLE webhook_cursors;"
      "ALTER TABLE jobs DROP COLUMN pipeline_id; ALTER TABLE jobs DROP COLUMN step;"
      "ALTER TABLE jobs DROP COLUMN step_depends_on; ALTER TABLE jobs DROP COLUMN failure_policy;"
      "ALTER TABLE tasks DROP COLUMN status_line;";

  void Sql(const std::string& sql) {
    if (postgres()) {
      Status done = pg_->Exec(sql, database_);
      ASSERT_TRUE(done.ok()) << done.ToString() << "\n" << sql;
      return;
    }
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open((dir_ + "/tessera.db").c_str(), &db), SQLITE_OK);
    char* error = nullptr;
    const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error);
    const std::string message = error ? error : "";
    sqlite3_free(error);
    sqlite3_close(db);
    ASSERT_EQ(rc, SQLITE_OK) << message << "\n" << sql;
  }

  std::string dir_;
  StoreUrl url_;  // SQLite in dir_, or the test's PostgreSQL database
  testing::PostgresServer* pg_ = nullptr;
  std::string database_;
  ManualClock clock_;  // declared before the store, which reads it until it closes
  std::unique_ptr<Store> store_;

 private:
  std::string prefix_;
};

// The store on the engine the test is instantiated with (TSR_STORE_TEST_ON_BOTH_ENGINES).
class StoreFixture : public StoreFixtureBase, public ::testing::WithParamInterface<sql::Engine> {
 protected:
  using StoreFixtureBase::StoreFixtureBase;
  sql::Engine engine() const override { return GetParam(); }
};

inline std::string EngineTestName(const ::testing::TestParamInfo<sql::Engine>& info) {
  return info.param == sql::Engine::kSqlite ? "Sqlite" : "Postgres";
}

}  // namespace tessera::store

// Runs every TEST_P of `fixture` on SQLite and on PostgreSQL.
#define TSR_STORE_TEST_ON_BOTH_ENGINES(fixture)                                         \
  INSTANTIATE_TEST_SUITE_P(Engines, fixture,                                            \
                           ::testing::Values(::tessera::store::sql::Engine::kSqlite,    \
                                             ::tessera::store::sql::Engine::kPostgres), \
                           ::tessera::store::EngineTestName)

// A test of what only the SQLite engine has (its file, its migrations); PostgreSQL's own are in
// schema_postgres_test.cpp.
#define TSR_SQLITE_ONLY() \
  if (postgres()) GTEST_SKIP() << "SQLite's own (the PostgreSQL schema has its own tests)"
