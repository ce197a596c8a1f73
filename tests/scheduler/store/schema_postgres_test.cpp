// The PostgreSQL schema is the SQLite schema at the same version: tables, columns, defaults, keys,
// indexes, foreign keys and triggers, which behave the same; and the farm's identity guards it.

#include "scheduler/store/postgres/schema_postgres.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <thread>
#include <vector>

#include "tests/scheduler/store/both_engines.h"

namespace tessera::store {
namespace {

using Rows = std::vector<std::vector<std::string>>;

// Every row of `sql` with each column as text (NULL as "<null>").
Rows All(sql::Db& db, const std::string& sql, int columns) {
  Rows rows;
  StatusOr<sql::Stmt> s = db.Prepare(sql);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  if (!s.ok()) return rows;
  for (;;) {
    StatusOr<bool> row = s->Step();
    EXPECT_TRUE(row.ok()) << sql << ": " << row.status().ToString();
    if (!row.ok() || !*row) return rows;
    std::vector<std::string> values;
    for (int c = 0; c < columns; ++c) values.push_back(s->IsNull(c) ? "<null>" : s->Text(c));
    rows.push_back(std::move(values));
  }
}

// A table as both engines can describe it: "name type [NOT NULL] [DEFAULT x]" per column, its
// keys and foreign keys as PostgreSQL writes them.
struct TableShape {
  std::vector<std::string> columns;
  std::set<std::string> constraints;
};

std::string PgType(const std::string& sqlite_type) {
  if (sqlite_type == "INTEGER") return "bigint";
  if (sqlite_type == "REAL") return "double precision";
  if (sqlite_type == "TEXT") return "text";
  return "? " + sqlite_type;
}

std::map<std::string, TableShape> SqliteShapes(sql::Db& db) {
  std::map<std::string, TableShape> shapes;
  for (const auto& t : All(db,
                           "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT "
                           "LIKE 'sqlite_%'",
                           1)) {
    TableShape& shape = shapes[t[0]];
    std::map<int, std::string> key;
    for (const auto& c : All(db, "PRAGMA table_info(" + t[0] + ")", 6)) {
      const bool pk = c[5] != "0";
      // A primary key is never NULL in PostgreSQL; SQLite lets a TEXT one be (a known quirk).
      shape.columns.push_back(c[1] + " " + PgType(c[2]) + (c[3] == "1" || pk ? " NOT NULL" : "") +
                              (c[4] == "<null>" ? "" : " DEFAULT " + c[4]));
      if (pk) key[std::stoi(c[5])] = c[1];
    }
    std::string pk;
    for (const auto& [order, name] : key) pk += (pk.empty() ? "" : ", ") + name;
    shape.constraints.insert("PRIMARY KEY (" + pk + ")");
    for (const auto& index : All(db, "PRAGMA index_list(" + t[0] + ")", 4)) {
      if (index[3] != "u") continue;  // UNIQUE constraints (not CREATE INDEX, not the key)
      std::string cols;
      for (const auto& c : All(db, "PRAGMA index_info(" + index[1] + ")", 3)) {
        cols += (cols.empty() ? "" : ", ") + c[2];
      }
      shape.constraints.insert("UNIQUE (" + cols + ")");
    }
    for (const auto& fk : All(db, "PRAGMA foreign_key_list(" + t[0] + ")", 7)) {
      shape.constraints.insert("FOREIGN KEY (" + fk[3] + ") REFERENCES " + fk[2] + "(" + fk[4] +
                               ") ON DELETE " + fk[6]);
    }
  }
  return shapes;
}

std::map<std::string, TableShape> PostgresShapes(sql::Db& db) {
  std::map<std::string, TableShape> shapes;
  for (const auto& c :
       All(db,
           "SELECT table_name, column_name, data_type, is_nullable, column_default FROM "
           "information_schema.columns WHERE table_schema = current_schema() AND table_name "
           "<> 'tessera_meta' ORDER BY table_name, ordinal_position",
           5)) {
    std::string dflt = c[4];
    if (dflt.size() > 6 && dflt.substr(dflt.size() - 6) == "::text") dflt.resize(dflt.size() - 6);
    shapes[c[0]].columns.push_back(c[1] + " " + c[2] + (c[3] == "NO" ? " NOT NULL" : "") +
                                   (dflt == "<null>" ? "" : " DEFAULT " + dflt));
  }
  for (const auto& k : All(db,
                           "SELECT conrelid::regclass::text, pg_get_constraintdef(oid) FROM "
                           "pg_constraint WHERE connamespace = current_schema()::regnamespace "
                           "AND contype IN ('p', 'u', 'f')",
                           2)) {
    shapes[k[0]].constraints.insert(k[1]);
  }
  return shapes;
}

std::set<std::string> Names(const Rows& rows) {
  std::set<std::string> names;
  for (const auto& r : rows) names.insert(r[0]);
  return names;
}

TEST(PostgresSchema, VersionFollowsTheSqliteMigrations) {
  EXPECT_EQ(kPostgresSchemaVersion, Store::kSchemaVersion)
      << "a migration was added to schema.cpp: add the same step to schema_postgres.cpp";
}

class PostgresSchemaTest : public BothEngines {};

TEST_F(PostgresSchemaTest, HasTheSqliteTablesColumnsKeysIndexesAndTriggers) {
  const auto sqlite = SqliteShapes(*sqlite_);
  const auto postgres = PostgresShapes(*postgres_);
  std::vector<std::string> sqlite_tables, postgres_tables;
  for (const auto& [name, shape] : sqlite) sqlite_tables.push_back(name);
  // tessera_meta is PostgreSQL's own: the schema version (SQLite keeps it in PRAGMA user_version)
  // and the farm's identity, which a database shared over the network needs.
  for (const auto& [name, shape] : postgres) {
    if (name != "tessera_meta") postgres_tables.push_back(name);
  }
  ASSERT_EQ(postgres_tables, sqlite_tables);
  for (const auto& [name, shape] : sqlite) {
    EXPECT_EQ(postgres.at(name).columns, shape.columns) << "table " << name;
    EXPECT_EQ(postgres.at(name).constraints, shape.constraints) << "table " << name;
  }

  // Indexes by name, each on the same columns and partial where the SQLite one is.
  const Rows sqlite_indexes = All(*sqlite_,
                                  "SELECT name, sql FROM sqlite_master WHERE type = "
                                  "'index' AND sql IS NOT NULL",
                                  2);
  const Rows postgres_indexes =
      All(*postgres_,
          "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = "
          "current_schema() AND indexname NOT LIKE '%\\_pkey' AND indexname NOT LIKE "
          "'%\\_key'",
          2);
  ASSERT_EQ(Names(postgres_indexes), Names(sqlite_indexes));
  for (const auto& index : sqlite_indexes) {
    const auto pg = std::find_if(postgres_indexes.begin(), postgres_indexes.end(),
                                 [&](const auto& r) { return r[0] == index[0]; });
    std::string cols;
    for (const auto& c : All(*sqlite_, "PRAGMA index_info(" + index[0] + ")", 3)) {
      cols += (cols.empty() ? "" : ", ") + c[2];
    }
    EXPECT_NE((*pg)[1].find("(" + cols + ")"), std::string::npos) << (*pg)[1];
    EXPECT_EQ((*pg)[1].find(" WHERE ") != std::string::npos,
              index[1].find(" WHERE ") != std::string::npos)
        << (*pg)[1];
  }

  EXPECT_EQ(Names(All(*postgres_,
                      "SELECT DISTINCT trigger_name FROM information_schema.triggers "
                      "WHERE trigger_schema = current_schema()",
                      1)),
            Names(All(*sqlite_, "SELECT name FROM sqlite_master WHERE type = 'trigger'", 1)));
}

// The same statements on both engines: the per-job counters of a job with steps follow its steps,
// its state follows the counters, and a job's end becomes an event, all by the schema's triggers.
TEST_F(PostgresSchemaTest, TriggersBehaveTheSameOnBothEngines) {
  auto run = [](sql::Db& db) {
    std::vector<std::string> transcript;
    auto exec = [&](const std::string& sql) {
      StatusOr<sql::Stmt> s = db.Prepare(sql);
      ASSERT_TRUE(s.ok());
      const Status st = s->Run();
      ASSERT_TRUE(st.ok()) << sql << ": " << st.ToString();
    };
    auto job = [&](const std::string& name, const std::string& renderer, int tasks,
                   const std::string& pipeline) -> int64_t {
      StatusOr<sql::Stmt> s = db.Prepare(
          "INSERT INTO jobs (name, state, priority, frame_start, frame_end, chunk_size, "
          "max_retries, job_yaml, scene_yaml, output_dir, output_pattern, output_formats, "
          "tasks_total, tasks_queued, submitted_at, renderer, pipeline_id) VALUES (?1, 'queued', "
          "0, 1, 2, 1, 0, '', '', '', '', '[]', ?2, ?2, 1000, ?3, ?4) RETURNING id");
      s->Bind(1, name).Bind(2, int64_t{tasks}).Bind(3, renderer);
      if (pipeline.empty()) {
        s->BindNull(4);
      } else {
        s->Bind(4, static_cast<int64_t>(std::stoll(pipeline)));
      }
      StatusOr<int64_t> id = sql::InsertReturningId(*s);
      EXPECT_TRUE(id.ok()) << id.status().ToString();
      return id.ok() ? *id : -1;
    };
    auto snapshot = [&](const std::string& label) {
      for (const auto& r :
           All(db,
               "SELECT id, state, tasks_queued, tasks_running, tasks_done, tasks_failed, "
               "tasks_canceled, started_at IS NOT NULL, finished_at IS NOT NULL FROM jobs "
               "ORDER BY id",
               9)) {
        std::string line = label + ":";
        for (const auto& v : r) line += " " + v;
        transcript.push_back(line);
      }
      for (const auto& r : All(db, "SELECT id, job_id, kind, message FROM events ORDER BY id", 4)) {
        transcript.push_back(label + ": event " + r[0] + " " + r[1] + " " + r[2] + " '" + r[3] +
                             "'");
      }
    };
    const int64_t pipeline = job("pipeline", "steps", 4, "");
    const std::string p = std::to_string(pipeline);
    const int64_t sim = job("sim", "noop", 2, p);
    const int64_t render = job("render", "noop", 2, p);
    exec("INSERT INTO tasks (job_id, idx, frame_start, frame_end, state) VALUES (" +
         std::to_string(sim) + ", 0, 1, 1, 'queued')");
    snapshot("submitted");
    exec(
        "UPDATE jobs SET tasks_queued = tasks_queued - 1, tasks_running = tasks_running + 1 "
        "WHERE id = " +
        std::to_string(sim));
    snapshot("one running");
    exec(
        "UPDATE jobs SET tasks_queued = 0, tasks_running = 0, tasks_done = 2, state = 'done' "
        "WHERE pipeline_id = " +
        p);
    snapshot("steps done");
    exec(
        "UPDATE jobs SET tasks_done = tasks_done - 2, tasks_queued = tasks_queued + 2, "
        "error = 'retried' WHERE id = " +
        std::to_string(render));
    snapshot("a step retried");
    exec("UPDATE jobs SET state = 'canceled', error = 'by request' WHERE id = " + p);
    exec("UPDATE jobs SET tasks_queued = 0, tasks_canceled = 2, state = 'canceled' WHERE id = " +
         std::to_string(render));
    snapshot("canceled");
    exec("DELETE FROM jobs WHERE id = " + std::to_string(sim));  // its task goes with it
    transcript.push_back("tasks left: " + All(db, "SELECT count(*) FROM tasks", 1)[0][0]);
    return transcript;
  };
  const std::vector<std::string> sqlite = run(*sqlite_);
  const std::vector<std::string> postgres = run(*postgres_);
  EXPECT_EQ(postgres, sqlite);
  // What the transcript shows, so a regression on both engines is caught too.
  EXPECT_NE(std::find(sqlite.begin(), sqlite.end(), "one running: 1 running 3 1 0 0 0 1 0"),
            sqlite.end());
  EXPECT_NE(std::find(sqlite.begin(), sqlite.end(), "steps done: 1 done 0 0 4 0 0 1 1"),
            sqlite.end());
  EXPECT_NE(
      std::find(sqlite.begin(), sqlite.end(), "canceled: event 4 1 job_canceled 'by request'"),
      sqlite.end());
  EXPECT_EQ(sqlite.back(), "tasks left: 0");
}

TEST_F(PostgresSchemaTest, OpeningAgainFindsTheSameFarm) {
  StatusOr<FarmDatabase> again = OpenPostgresSchema(*postgres_, "", "another-id");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->farm_id, "0123456789abcdef0123456789abcdef");
  EXPECT_EQ(again->schema_version, kPostgresSchemaVersion);
  again = OpenPostgresSchema(*postgres_, "0123456789abcdef0123456789abcdef", "");
  EXPECT_TRUE(again.ok()) << again.status().ToString();
}

TEST_F(PostgresSchemaTest, RefusesAnotherFarmsDatabaseNamingBoth) {
  StatusOr<FarmDatabase> other = OpenPostgresSchema(*postgres_, "fedcba9876543210", "");
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(other.status().message().find("belongs to farm 0123456789abcdef0123456789abcdef, not "
                                          "to this scheduler's farm fedcba9876543210"),
            std::string::npos)
      << other.status().message();
  EXPECT_NE(other.status().message().find(pg_->ConnInfo(database_)), std::string::npos);
}

TEST_F(PostgresSchemaTest, RefusesANewerSchemaAndWritesNothing) {
  ASSERT_TRUE(
      pg_->Exec("UPDATE tessera_meta SET value = '33' WHERE name = 'schema_version'", database_)
          .ok());
  StatusOr<FarmDatabase> newer = OpenPostgresSchema(*postgres_, "", "");
  ASSERT_FALSE(newer.ok());
  EXPECT_EQ(newer.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(newer.status().message().find("database schema version 33"), std::string::npos)
      << newer.status().message();
  EXPECT_NE(newer.status().message().find("newer than this scheduler supports (32)"),
            std::string::npos);
  EXPECT_EQ(*pg_->Query("SELECT value FROM tessera_meta WHERE name = 'schema_version'", database_),
            "33");
}

TEST_F(PostgresSchemaTest, RefusesADatabaseThatIsNotTessera) {
  StatusOr<std::string> other = pg_->CreateDatabase();
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE(pg_->Exec("CREATE TABLE accounts (id int)", *other).ok());
  const std::string saved = database_;
  database_ = *other;
  std::unique_ptr<sql::PostgresDb> db = Connect();
  database_ = saved;
  StatusOr<FarmDatabase> farm = OpenPostgresSchema(*db, "", "abc");
  ASSERT_FALSE(farm.ok());
  EXPECT_NE(farm.status().message().find("not a Tessera database"), std::string::npos)
      << farm.status().message();
  EXPECT_EQ(*pg_->Query("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'", *other), "1");
}

TEST_F(PostgresSchemaTest, SchedulersStartingTogetherCreateTheSchemaOnce) {
  StatusOr<std::string> empty = pg_->CreateDatabase();
  ASSERT_TRUE(empty.ok());
  database_ = *empty;
  std::vector<std::unique_ptr<sql::PostgresDb>> dbs;
  for (int i = 0; i < 4; ++i) dbs.push_back(Connect());
  std::vector<StatusOr<FarmDatabase>> results(dbs.size(), Status::Internal("not run"));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < dbs.size(); ++i) {
    threads.emplace_back([&, i] {
      std::mt19937_64 random(i);
      results[i] = OpenPostgresSchema(*dbs[i], "", NewFarmId(random));
    });
  }
  for (std::thread& t : threads) t.join();
  int created = 0;
  for (const auto& r : results) {
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    created += r->created ? 1 : 0;
    EXPECT_EQ(r->farm_id, results[0]->farm_id);
  }
  EXPECT_EQ(created, 1);
  EXPECT_EQ(results[0]->farm_id.size(), 32u);
}

TEST(NewFarmId, Is128RandomBitsInHex) {
  std::mt19937_64 a(1), b(1), c(2);
  const std::string id = NewFarmId(a);
  EXPECT_EQ(id.size(), 32u);
  EXPECT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(NewFarmId(b), id);
  EXPECT_NE(NewFarmId(c), id);
}

}  // namespace
}  // namespace tessera::store
