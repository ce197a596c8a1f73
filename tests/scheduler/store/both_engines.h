// The store's whole schema on both engines side by side: SQLite as Store::Open leaves it (every
// migration applied) and PostgreSQL as OpenPostgresSchema creates it, in a fresh database of the
// test binary's server. A missing PostgreSQL skips the test (fails it under CI=true).
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>

#include "scheduler/store/postgres/postgres.h"
#include "scheduler/store/postgres/schema_postgres.h"
#include "scheduler/store/sql/store_url.h"
#include "scheduler/store/sqlite/sqlite_engine.h"
#include "scheduler/store/store.h"
#include "tests/support/postgres_server.h"
#include "tests/support/require.h"

namespace tessera::store {

class BothEngines : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/both-engines-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    {
      StatusOr<std::unique_ptr<Store>> store = Store::Open(dir_);
      ASSERT_TRUE(store.ok()) << store.status().ToString();
    }
    StatusOr<std::unique_ptr<sql::SqliteDb>> sqlite =
        sql::SqliteDb::Open(dir_ + "/tessera.db", /*read_only=*/false, "FULL");
    ASSERT_TRUE(sqlite.ok()) << sqlite.status().ToString();
    sqlite_ = std::move(*sqlite);

    std::string why;
    pg_ = testing::SharedPostgres(&why);
    TSR_REQUIRE(pg_ != nullptr, "no PostgreSQL for the test: " << why);
    StatusOr<std::string> name = pg_->CreateDatabase();
    ASSERT_TRUE(name.ok()) << name.status().ToString();
    database_ = *name;
    postgres_ = Connect();
    ASSERT_NE(postgres_, nullptr);
    StatusOr<FarmDatabase> farm =
        OpenPostgresSchema(*postgres_, "", "0123456789abcdef0123456789abcdef");
    ASSERT_TRUE(farm.ok()) << farm.status().ToString();
  }

  void TearDown() override {
    sqlite_.reset();
    postgres_.reset();
    std::filesystem::remove_all(dir_);
  }

  std::unique_ptr<sql::PostgresDb> Connect() const {
    StatusOr<StoreUrl> url = ParseStoreUrl(pg_->ConnInfo(database_));
    if (!url.ok()) return nullptr;
    StatusOr<std::unique_ptr<sql::PostgresDb>> db = sql::PostgresDb::Connect(*url);
    EXPECT_TRUE(db.ok()) << db.status().ToString();
    return db.ok() ? std::move(*db) : nullptr;
  }

  std::string dir_;
  testing::PostgresServer* pg_ = nullptr;
  std::string database_;
  std::unique_ptr<sql::SqliteDb> sqlite_;
  std::unique_ptr<sql::PostgresDb> postgres_;
};

}  // namespace tessera::store
