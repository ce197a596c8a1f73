// SQLite's placeholders as PostgreSQL's, and PostgreSQL's errors as Status codes.

#include <gtest/gtest.h>

#include "scheduler/store/postgres/postgres.h"

namespace tessera::store::sql {
namespace {

std::string Rewrite(std::string_view sql, int expected_count) {
  int count = -1;
  std::string out = RewritePlaceholders(sql, &count);
  EXPECT_EQ(count, expected_count) << sql;
  return out;
}

TEST(RewritePlaceholders, BareMarksAreNumberedInOrder) {
  EXPECT_EQ(Rewrite("INSERT INTO t (a, b, c) VALUES (?, ?, ?)", 3),
            "INSERT INTO t (a, b, c) VALUES ($1, $2, $3)");
  EXPECT_EQ(Rewrite("SELECT 1", 0), "SELECT 1");
}

TEST(RewritePlaceholders, NumberedMarksKeepTheirNumberAndMayRepeat) {
  EXPECT_EQ(Rewrite("UPDATE t SET a = ?2, b = ?2 WHERE id = ?1", 2),
            "UPDATE t SET a = $2, b = $2 WHERE id = $1");
  EXPECT_EQ(Rewrite("SELECT ?10", 10), "SELECT $10");
}

TEST(RewritePlaceholders, ABareMarkFollowsTheLargestIndexBeforeIt) {
  // SQLite: "?" is one more than the largest parameter number already assigned.
  EXPECT_EQ(Rewrite("SELECT ?, ?5, ?, ?2, ?", 7), "SELECT $1, $5, $6, $2, $7");
}

TEST(RewritePlaceholders, LeavesLiteralsIdentifiersAndCommentsAlone) {
  EXPECT_EQ(Rewrite("SELECT 'a?b', ? -- why?\n, ?", 2), "SELECT 'a?b', $1 -- why?\n, $2");
  EXPECT_EQ(Rewrite("SELECT json_insert(x, '$[#]', ?) FROM t", 1),
            "SELECT json_insert(x, '$[#]', $1) FROM t");
  EXPECT_EQ(Rewrite("SELECT 'it''s ?', \"col?\", ?", 1), "SELECT 'it''s ?', \"col?\", $1");
  EXPECT_EQ(Rewrite("SELECT /* a ? /* nested ? */ still ? */ ?", 1),
            "SELECT /* a ? /* nested ? */ still ? */ $1");
  EXPECT_EQ(Rewrite("SELECT E'\\'?', ?", 1), "SELECT E'\\'?', $1");
  EXPECT_EQ(Rewrite("SELECT $$ ? $$, $q$ ? $q$, ?", 1), "SELECT $$ ? $$, $q$ ? $q$, $1");
}

TEST(RewritePlaceholders, PostgresPlaceholdersAndIdentifiersWithDollarsPassThrough) {
  EXPECT_EQ(Rewrite("SELECT $1, ?", 2), "SELECT $1, $2");
  EXPECT_EQ(Rewrite("SELECT a$1 FROM t WHERE x = ?", 1), "SELECT a$1 FROM t WHERE x = $1");
  // A lone E is an identifier, not the start of an escape string.
  EXPECT_EQ(Rewrite("SELECT e FROM t WHERE x = ?", 1), "SELECT e FROM t WHERE x = $1");
}

TEST(RewritePlaceholders, UnterminatedTextIsCopiedAsItIs) {
  EXPECT_EQ(Rewrite("SELECT 'open ?", 0), "SELECT 'open ?");
  EXPECT_EQ(Rewrite("SELECT ? /* open ?", 1), "SELECT $1 /* open ?");
}

TEST(PostgresStatus, MapsTheStatesTheStoreActsOn) {
  const Status full = PostgresStatus("53100", "could not extend file", false, "insert");
  EXPECT_EQ(full.code(), StatusCode::kStorageFull);
  EXPECT_NE(full.message().find("SQLSTATE 53100"), std::string::npos);
  EXPECT_NE(full.message().find("disk is full"), std::string::npos);

  for (const char* state : {"08006", "08001", "57P01", "57P03"}) {
    EXPECT_EQ(PostgresStatus(state, "gone", false, "step").code(), StatusCode::kUnavailable)
        << state;
  }
  EXPECT_EQ(PostgresStatus("", "server closed the connection", true, "step").code(),
            StatusCode::kUnavailable);
  const Status standby = PostgresStatus("25006",
                                        "cannot execute INSERT in a read-only "
                                        "transaction",
                                        false, "step");
  EXPECT_EQ(standby.code(), StatusCode::kUnavailable);
  EXPECT_NE(standby.message().find("standby"), std::string::npos);

  const Status dup = PostgresStatus("23505", "duplicate key value", false, "step 'INSERT'");
  EXPECT_EQ(dup.code(), StatusCode::kInternal);
  EXPECT_EQ(dup.message(), "step 'INSERT': duplicate key value (SQLSTATE 23505)");
}

}  // namespace
}  // namespace tessera::store::sql
