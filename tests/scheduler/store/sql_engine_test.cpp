// The engine interface behaves the same on SQLite and on PostgreSQL: values, placeholders, new
// ids, changed rows, nested transactions, interleaved statements, errors.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tests/scheduler/store/engine_fixture.h"

namespace tessera::store::sql {
namespace {

class SqlEngineTest : public EngineFixture {
 protected:
  void SetUp() override {
    EngineFixture::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_TRUE(db_->Exec("CREATE TABLE t (" + IdColumn() +
                          ", i BIGINT, r DOUBLE PRECISION, s TEXT, k TEXT UNIQUE)")
                    .ok());
  }

  int64_t Insert(int64_t i, const std::string& s) {
    StatusOr<Stmt> insert = db_->Prepare("INSERT INTO t (i, s) VALUES (?1, ?2) RETURNING id");
    EXPECT_TRUE(insert.ok());
    insert->Bind(1, i).Bind(2, s);
    StatusOr<int64_t> id = InsertReturningId(*insert);
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    return id.ok() ? *id : -1;
  }

  int64_t Count() { return std::stoll(One("SELECT count(*) FROM t")); }
};

TEST_P(SqlEngineTest, ValuesRoundTripExactly) {
  const int64_t big = std::numeric_limits<int64_t>::max();
  const int64_t small = std::numeric_limits<int64_t>::min();
  const std::string text = "héllo 'quoted' \"double\" ? $1 \\ tab\t newline\n ✓";
  StatusOr<Stmt> insert = db_->Prepare("INSERT INTO t (i, r, s) VALUES (?, ?, ?)");
  ASSERT_TRUE(insert.ok());
  ASSERT_TRUE(insert->Bind(1, big).Bind(2, 0.1).Bind(3, text).Run().ok());
  insert = db_->Prepare("INSERT INTO t (i, r, s) VALUES (?, ?, ?)");
  ASSERT_TRUE(insert->Bind(1, small).Bind(2, -1.5e300).Bind(3, "").Run().ok());
  insert = db_->Prepare("INSERT INTO t (i, r, s) VALUES (?, ?, ?)");
  ASSERT_TRUE(insert->Bind(1, std::optional<int64_t>()).BindNull(2).BindNull(3).Run().ok());

  StatusOr<Stmt> rows = db_->Prepare("SELECT i, r, s FROM t ORDER BY id");
  ASSERT_TRUE(rows.ok());
  ASSERT_TRUE(*rows->Step());
  EXPECT_EQ(rows->Int(0), big);
  EXPECT_EQ(rows->Double(1), 0.1);
  EXPECT_EQ(rows->Text(2), text);
  ASSERT_TRUE(*rows->Step());
  EXPECT_EQ(rows->Int(0), small);
  EXPECT_EQ(rows->Double(1), -1.5e300);
  EXPECT_EQ(rows->Text(2), "");
  EXPECT_FALSE(rows->IsNull(2));
  ASSERT_TRUE(*rows->Step());
  EXPECT_TRUE(rows->IsNull(0));
  EXPECT_EQ(rows->OptInt(0), std::nullopt);
  EXPECT_EQ(rows->Int(0), 0);
  EXPECT_EQ(rows->Text(2), "");
  EXPECT_FALSE(*rows->Step());
}

TEST_P(SqlEngineTest, PlaceholdersNumberedRepeatedAndInsideLiterals) {
  StatusOr<Stmt> s = db_->Prepare("SELECT ?2 - ?1, 'a?b', ?2 * 2, ?");
  ASSERT_TRUE(s.ok());
  s->Bind(1, int64_t{5}).Bind(2, int64_t{12}).Bind(3, "third");
  ASSERT_TRUE(*s->Step());
  EXPECT_EQ(s->Int(0), 7);
  EXPECT_EQ(s->Text(1), "a?b");
  EXPECT_EQ(s->Int(2), 24);
  EXPECT_EQ(s->Text(3), "third");
}

TEST_P(SqlEngineTest, BooleanExpressionsReadAsZeroOrOne) {
  EXPECT_EQ(One("SELECT 1 = 1"), "1");
  EXPECT_EQ(One("SELECT 1 = 2"), "0");
  ASSERT_EQ(Insert(5, "x"), 1);
  StatusOr<Stmt> s = db_->Prepare("SELECT i IS NULL, i > 3 FROM t");
  ASSERT_TRUE(*s->Step());
  EXPECT_EQ(s->Int(0), 0);
  EXPECT_EQ(s->Int(1), 1);
  EXPECT_EQ(s->Double(1), 1.0);
}

TEST_P(SqlEngineTest, InsertReturnsTheNewIdsAndChangesCountsRows) {
  EXPECT_EQ(Insert(1, "a"), 1);
  EXPECT_EQ(Insert(2, "b"), 2);
  EXPECT_EQ(Insert(3, "c"), 3);
  StatusOr<Stmt> update = db_->Prepare("UPDATE t SET r = 1.5 WHERE i >= ?");
  ASSERT_TRUE(update->Bind(1, int64_t{2}).Run().ok());
  EXPECT_EQ(db_->Changes(), 2);
  EXPECT_EQ(One("SELECT count(*) FROM t"), "3");  // a SELECT leaves the count alone
  EXPECT_EQ(db_->Changes(), 2);
  StatusOr<Stmt> none = db_->Prepare("UPDATE t SET r = 0 WHERE i > 100");
  ASSERT_TRUE(none->Run().ok());
  EXPECT_EQ(db_->Changes(), 0);
  StatusOr<Stmt> del = db_->Prepare("DELETE FROM t WHERE id = ?1 RETURNING i");
  ASSERT_TRUE(del->Bind(1, int64_t{1}).Run().ok());
  EXPECT_EQ(db_->Changes(), 1);
}

TEST_P(SqlEngineTest, NestedTransactionsAreSavepoints) {
  {
    Transaction outer(*db_);
    ASSERT_TRUE(outer.begin_status().ok());
    Insert(1, "outer");
    {
      Transaction inner(*db_);
      ASSERT_TRUE(inner.begin_status().ok());
      Insert(2, "rolled back");
    }  // not committed: back to the savepoint
    {
      Transaction inner(*db_);
      Insert(3, "kept");
      ASSERT_TRUE(inner.Commit().ok());
    }
    ASSERT_TRUE(outer.Commit().ok());
  }
  EXPECT_EQ(One("SELECT count(*) FROM t WHERE i IN (1, 3)"), "2");
  EXPECT_EQ(Count(), 2);
  {
    Transaction outer(*db_);
    Insert(4, "gone with the outer");
    Transaction inner(*db_);
    Insert(5, "gone too");
    ASSERT_TRUE(inner.Commit().ok());
  }
  EXPECT_EQ(Count(), 2);
  // InWriteTx commits what the body did unless it fails.
  EXPECT_TRUE(InWriteTx(*db_, [&] {
                Insert(6, "committed");
                return Status::Ok();
              }).ok());
  EXPECT_EQ(InWriteTx(*db_,
                      [&] {
                        Insert(7, "discarded");
                        return Status::NotFound("no");
                      })
                .code(),
            StatusCode::kNotFound);
  EXPECT_EQ(One("SELECT count(*) FROM t WHERE i IN (6, 7)"), "1");
}

TEST_P(SqlEngineTest, AFailedCallInItsOwnSavepointLeavesTheGroupCommittable) {
  // The store runs every call of a group commit in a nested transaction; a call that fails rolls
  // back to its savepoint, and the group still commits what the other calls did -- on both
  // engines, although PostgreSQL spoils a transaction at its first failed statement.
  Transaction group(*db_);
  ASSERT_TRUE(InWriteTx(*db_, [&] {
                StatusOr<Stmt> s = db_->Prepare("INSERT INTO t (i, k) VALUES (1, 'dup')");
                return s->Run();
              }).ok());
  const Status failed = InWriteTx(*db_, [&] {
    StatusOr<Stmt> s = db_->Prepare("INSERT INTO t (i, k) VALUES (2, 'dup')");
    return s->Run();
  });
  EXPECT_EQ(failed.code(), StatusCode::kInternal);
  EXPECT_NE(failed.message().find(postgres() ? "unique constraint" : "UNIQUE constraint"),
            std::string::npos)
      << failed.message();
  ASSERT_TRUE(InWriteTx(*db_, [&] {
                StatusOr<Stmt> s = db_->Prepare("INSERT INTO t (i, k) VALUES (3, 'other')");
                return s->Run();
              }).ok());
  ASSERT_TRUE(group.Commit().ok());
  EXPECT_EQ(One("SELECT count(*) FROM t WHERE i IN (1, 3)"), "2");
  EXPECT_EQ(Count(), 2);
}

TEST_P(SqlEngineTest, StatementsInterleaveWhileRowsAreRead) {
  {
    Transaction tx(*db_);
    for (int i = 0; i < 300; ++i) Insert(i, "row");
    ASSERT_TRUE(tx.Commit().ok());
  }
  // Read every row and update each while the SELECT is still open on the same connection.
  StatusOr<Stmt> rows = db_->Prepare("SELECT id, i FROM t ORDER BY id");
  ASSERT_TRUE(rows.ok());
  int seen = 0;
  for (;;) {
    StatusOr<bool> row = rows->Step();
    ASSERT_TRUE(row.ok()) << row.status().ToString();
    if (!*row) break;
    StatusOr<Stmt> update = db_->Prepare("UPDATE t SET r = ?1 WHERE id = ?2");
    ASSERT_TRUE(
        update->Bind(1, static_cast<double>(rows->Int(1)) / 2).Bind(2, rows->Int(0)).Run().ok());
    ++seen;
  }
  EXPECT_EQ(seen, 300);
  EXPECT_EQ(One("SELECT count(*) FROM t WHERE r * 2 = i"), "300");

  // A half-read statement prepared again starts over.
  StatusOr<Stmt> first = db_->Prepare("SELECT i FROM t ORDER BY id");
  ASSERT_TRUE(*first->Step());
  ASSERT_TRUE(*first->Step());
  EXPECT_EQ(first->Int(0), 1);
  first = db_->Prepare("SELECT i FROM t ORDER BY id");
  ASSERT_TRUE(*first->Step());
  EXPECT_EQ(first->Int(0), 0);
}

TEST_P(SqlEngineTest, AggregatesWrittenOnceForBothEngines) {
  EXPECT_EQ(One("SELECT COALESCE(SUM(i), 0) FROM t"), "0");
  Insert(2, "done");
  Insert(3, "done");
  Insert(4, "failed");
  StatusOr<Stmt> s = db_->Prepare(
      "SELECT count(*), count(*) FILTER (WHERE s = 'done'), COALESCE(SUM(i), 0) FROM t");
  ASSERT_TRUE(*s->Step());
  EXPECT_EQ(s->Int(0), 3);
  EXPECT_EQ(s->Int(1), 2);
  EXPECT_EQ(s->Int(2), 9);
  EXPECT_EQ(s->Double(2), 9.0);
}

TEST_P(SqlEngineTest, FailuresCarryTheEnginesMessage) {
  StatusOr<Stmt> bad = db_->Prepare("SELEC 1");
  Status failed = bad.ok() ? bad->Run() : bad.status();
  EXPECT_FALSE(failed.ok());
  EXPECT_NE(failed.message().find("syntax error"), std::string::npos) << failed.message();

  StatusOr<Stmt> unknown = db_->Prepare("SELECT nope FROM t");
  failed = unknown.ok() ? unknown->Run() : unknown.status();
  EXPECT_NE(failed.message().find("nope"), std::string::npos) << failed.message();
  // The connection is fine afterwards.
  EXPECT_EQ(Insert(1, "after"), 1);
}

INSTANTIATE_TEST_SUITE_P(Engines, SqlEngineTest,
                         ::testing::Values(Engine::kSqlite, Engine::kPostgres), EngineTestName);

}  // namespace
}  // namespace tessera::store::sql
