// The store's own statements (scheduler/store/*.cpp) on both engines, with the same data, compared
// row by row. Most run unchanged. The few PostgreSQL refuses are written here in the form proposed
// for both engines: one neutral text where one exists, both forms (sql::DialectSql) where not.
// The last test runs the SQLite originals on PostgreSQL, to show why each one changes.
//
// The proposal, by the store file the statement comes from:
//   neutral rewrites (one text, both engines):
//     attempts.cpp, webhook_cursors.cpp  INSERT OR IGNORE        -> INSERT ... ON CONFLICT DO
//     NOTHING
//                                        (INSERT ... SELECT ... WHERE true ON CONFLICT ...)
//     jobs.cpp (frame flags)             INSERT OR REPLACE       -> ON CONFLICT (key) DO UPDATE SET
//                                                                   c = excluded.c
//     jobs.cpp, costs.cpp (upserts)      SET n = n + 1           -> SET n = <table>.n + 1
//     jobs.cpp, queries.cpp              total(x), total(a = b)  -> COALESCE(SUM(x), 0),
//                                                                   count(*) FILTER (WHERE a = b)
//     jobs.cpp, costs.cpp                LastInsertId()          -> INSERT ... RETURNING id
//     queries.cpp (ListJobs)             WHERE 1                 -> WHERE true
//     credentials.cpp (api_tokens)       user                    -> "user"
//     tasks.cpp, jobs.cpp                json_insert(a, '$[#]', ?) -> rtrim(a, ']') || ... || ']'
//   engine-specific (sql::DialectSql):
//     tasks.cpp (end of an attempt), jobs.cpp (failed_on): a value in a JSON array column
//     webhook_cursors.cpp: events whose kind is in a JSON array parameter
//     queries.cpp: the worker list's running tasks (group_concat / string_agg)
//     queries.cpp: jobs using an asset (instr / strpos)
//     queries.cpp: the task page's INDEXED BY (SQLite only; PostgreSQL's planner picks)

#include <gtest/gtest.h>

#include <cstdio>
#include <functional>

#include "tests/scheduler/store/both_engines.h"

namespace tessera::store {
namespace {

using Bind = std::function<void(sql::Stmt&)>;

// ---- the engine-specific statements ---------------------------------------------------------

// tasks.cpp: the end of an attempt, fenced by the live attempts (a JSON array in TEXT).
constexpr sql::DialectSql kEndAttempt{
    "UPDATE tasks SET state = ?8, message = ?3, live_attempts = '[]', worker_id = ?5, failures = "
    "failures + ?7, failures_total = failures_total + ?7, progress = ?9, finished_at = ?6 WHERE "
    "id = ?1 AND state = 'running' AND (live_attempts = ?4 OR EXISTS (SELECT 1 FROM "
    "json_each(live_attempts) WHERE value = ?2))",
    "UPDATE tasks SET state = ?8, message = ?3, live_attempts = '[]', worker_id = ?5, failures = "
    "failures + ?7, failures_total = failures_total + ?7, progress = ?9, finished_at = ?6 WHERE "
    "id = ?1 AND state = 'running' AND (live_attempts = ?4 OR live_attempts::jsonb @> "
    "jsonb_build_array(?2))"};

// jobs.cpp: a worker joins the workers a task failed on, once (append: the neutral form below).
constexpr sql::DialectSql kAddFailedOn{
    "UPDATE tasks SET failed_on = rtrim(failed_on, ']') || CASE WHEN failed_on = '[]' THEN '' "
    "ELSE ',' END || ?1 || ']' WHERE id = ?2 AND NOT EXISTS (SELECT 1 FROM json_each(failed_on) "
    "WHERE value = ?1)",
    "UPDATE tasks SET failed_on = rtrim(failed_on, ']') || CASE WHEN failed_on = '[]' THEN '' "
    "ELSE ',' END || ?1 || ']' WHERE id = ?2 AND NOT failed_on::jsonb @> jsonb_build_array(?1)"};

// webhook_cursors.cpp: the events after a cursor whose kind a receiver wants (a JSON array).
constexpr sql::DialectSql kEventsOfKinds{
    "SELECT id, job_id, kind FROM events WHERE id > ?1 AND kind IN (SELECT value FROM "
    "json_each(?2)) ORDER BY id LIMIT ?3",
    "SELECT id, job_id, kind FROM events WHERE id > ?1 AND kind IN (SELECT "
    "jsonb_array_elements_text(?2::jsonb)) ORDER BY id LIMIT ?3"};

// queries.cpp: each worker with the ids of its running tasks, comma-separated.
constexpr sql::DialectSql kWorkersWithTasks{
    "SELECT w.id, w.name, (SELECT group_concat(t.id) FROM tasks t WHERE t.worker_id = w.id AND "
    "t.state = 'running') FROM workers w ORDER BY w.id",
    "SELECT w.id, w.name, (SELECT string_agg(t.id::text, ',' ORDER BY t.id) FROM tasks t WHERE "
    "t.worker_id = w.id AND t.state = 'running') FROM workers w ORDER BY w.id"};

// queries.cpp: is a blob still used by a job's assets?
constexpr sql::DialectSql kAssetInUse{"SELECT 1 FROM jobs WHERE instr(assets, ?) > 0 LIMIT 1",
                                      "SELECT 1 FROM jobs WHERE strpos(assets, ?) > 0 LIMIT 1"};

// queries.cpp: a page of a job's unfinished tasks, on the partial index.
constexpr sql::DialectSql kUnfinishedPage{
    "SELECT t.id, t.state FROM tasks t INDEXED BY tasks_unfinished WHERE t.job_id = ?1 AND t.idx "
    "> ?2 AND t.state IN ('queued', 'running') ORDER BY t.idx LIMIT ?3",
    "SELECT t.id, t.state FROM tasks t WHERE t.job_id = ?1 AND t.idx > ?2 AND t.state IN "
    "('queued', 'running') ORDER BY t.idx LIMIT ?3"};

// ---- neutral rewrites of statements PostgreSQL refuses as SQLite has them --------------------

// tasks.cpp: a backup copy's attempt joins the live attempts. The text stays compact JSON, as
// json_insert writes it, so the fast comparison with "[N]" above keeps working on both engines.
constexpr const char* kAddLiveAttempt =
    "UPDATE tasks SET attempt = ?1, live_attempts = rtrim(live_attempts, ']') || CASE WHEN "
    "live_attempts = '[]' THEN '' ELSE ',' END || ?1 || ']' WHERE id = ?2";

class EngineStatementsTest : public BothEngines {
 protected:
  // Runs the statement on both engines and expects the same rows and the same Changes(). Columns
  // are read as `types` says: i = Int, d = Double, t = Text, n = IsNull. Returns SQLite's rows,
  // each "a|b|c".
  std::vector<std::string> Same(const sql::DialectSql& sql, const Bind& bind,
                                const std::string& types = "") {
    std::vector<std::string> sqlite = Rows(*sqlite_, sql.sqlite, bind, types);
    std::vector<std::string> postgres = Rows(*postgres_, sql.postgres, bind, types);
    EXPECT_EQ(postgres, sqlite) << sql.sqlite;
    EXPECT_EQ(postgres_->Changes(), sqlite_->Changes()) << sql.sqlite;
    return sqlite;
  }
  std::vector<std::string> Same(const std::string& sql, const Bind& bind,
                                const std::string& types = "") {
    return Same(sql::DialectSql{sql, sql}, bind, types);
  }
  std::string SameOne(const std::string& sql, const std::string& types) {
    std::vector<std::string> rows = Same(
        sql, [](sql::Stmt&) {}, types);
    return rows.empty() ? "<none>" : rows[0];
  }

  // INSERT ... RETURNING id on both engines; the same new id on each.
  int64_t SameId(const std::string& sql, const Bind& bind) {
    int64_t ids[2] = {-1, -2};
    sql::Db* dbs[2] = {sqlite_.get(), postgres_.get()};
    for (int e = 0; e < 2; ++e) {
      StatusOr<sql::Stmt> s = dbs[e]->Prepare(sql);
      EXPECT_TRUE(s.ok());
      bind(*s);
      StatusOr<int64_t> id = sql::InsertReturningId(*s);
      EXPECT_TRUE(id.ok()) << sql::EngineName(dbs[e]->engine()) << ": " << id.status().ToString();
      if (id.ok()) ids[e] = *id;
    }
    EXPECT_EQ(ids[1], ids[0]) << sql;
    return ids[0];
  }

 private:
  std::vector<std::string> Rows(sql::Db& db, std::string_view text, const Bind& bind,
                                const std::string& types) {
    std::vector<std::string> rows;
    StatusOr<sql::Stmt> s = db.Prepare(std::string(text));
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (!s.ok()) return rows;
    bind(*s);
    for (;;) {
      StatusOr<bool> row = s->Step();
      EXPECT_TRUE(row.ok()) << sql::EngineName(db.engine()) << ": " << row.status().ToString();
      if (!row.ok() || !*row) return rows;
      std::string line;
      for (size_t c = 0; c < types.size(); ++c) {
        const int col = static_cast<int>(c);
        std::string value;
        if (s->IsNull(col) && types[c] != 'n') {
          value = "NULL";
        } else if (types[c] == 'i') {
          value = std::to_string(s->Int(col));
        } else if (types[c] == 'd') {
          char buf[32];
          std::snprintf(buf, sizeof buf, "%.9g", s->Double(col));
          value = buf;
        } else if (types[c] == 'n') {
          value = s->IsNull(col) ? "null" : "set";
        } else {
          value = s->Text(col);
        }
        line += (c ? "|" : "") + value;
      }
      rows.push_back(line);
    }
  }
};

TEST_F(EngineStatementsTest, TheStoresStatementsGiveTheSameRowsOnBothEngines) {
  // workers.cpp: registration, an upsert that returns the row's id either way.
  const std::string upsert_worker =
      "INSERT INTO workers (name, hostname, state, cpu_cores, ram_mb, gpus_json, backends_json, "
      "version, registered_at, last_seen, pools_json, tags_json, details_json) VALUES (?1, ?2, "
      "'idle', ?3, ?4, ?5, ?6, ?7, ?8, ?8, ?9, ?10, ?11) ON CONFLICT(name) DO UPDATE SET hostname "
      "= ?2, state = 'idle', cpu_cores = ?3, ram_mb = ?4, gpus_json = ?5, backends_json = ?6, "
      "version = ?7, registered_at = ?8, last_seen = ?8, pools_json = ?9, tags_json = ?10, "
      "details_json = ?11 RETURNING id";
  auto worker = [&](const std::string& name, int64_t at) {
    return [=](sql::Stmt& s) {
      s.Bind(1, name).Bind(2, "host-" + name).Bind(3, 8).Bind(4, int64_t{16384}).Bind(5, "[]");
      s.Bind(6, "[\"cpu\"]").Bind(7, "1.0").Bind(8, at).Bind(9, "[\"default\"]").Bind(10, "[]");
      s.Bind(11, "{}");
    };
  };
  EXPECT_EQ(SameId(upsert_worker, worker("w1", 100)), 1);
  EXPECT_EQ(SameId(upsert_worker, worker("w2", 100)), 2);
  EXPECT_EQ(SameId(upsert_worker, worker("w1", 200)), 1);  // the same worker again

  // jobs.cpp: a job, its id from RETURNING (SQLite's last-insert-rowid has no PostgreSQL twin).
  const int64_t job = SameId(
      "INSERT INTO jobs (name, state, priority, frame_start, frame_end, chunk_size, max_retries, "
      "job_yaml, scene_yaml, output_dir, output_pattern, output_formats, tasks_total, "
      "tasks_queued, submitted_at, renderer, project, user_name, assets) VALUES (?1, 'queued', "
      "?2, ?3, ?4, 1, 3, ?5, '', '', 'f####', '[\"png\"]', ?6, ?6, ?7, 'noop', ?8, ?9, ?10) "
      "RETURNING id",
      [](sql::Stmt& s) {
        s.Bind(1, "shot").Bind(2, 50).Bind(3, 1).Bind(4, 3).Bind(5, "name: shot\n").Bind(6, 3);
        s.Bind(7, int64_t{1000}).Bind(8, "default").Bind(9, "ann").Bind(10, "{\"a.png\":\"ab12\"}");
      });
  ASSERT_EQ(job, 1);
  for (int idx = 0; idx < 3; ++idx) {
    Same(
        "INSERT INTO tasks (job_id, idx, frame_start, frame_end, part, state) VALUES (?, ?, ?, "
        "?, ?, 'queued')",
        [&](sql::Stmt& s) {
          s.Bind(1, job).Bind(2, idx).Bind(3, idx + 1).Bind(4, idx + 1).Bind(5, "");
        });
  }

  // tasks.cpp: a lease (unchanged), a backup copy, the end of the backup's attempt.
  Same(
      "UPDATE tasks SET state = 'running', attempt = ?2, message = ?3, live_attempts = ?4, "
      "worker_id = ?5, progress = 0, status_line = '', started_at = ?6, finished_at = NULL "
      "WHERE id = ?1 AND state = 'queued' AND attempt = ?2 - ?7",
      [](sql::Stmt& s) {
        s.Bind(1, int64_t{1}).Bind(2, 1).Bind(3, "").Bind(4, "[1]").Bind(5, int64_t{1});
        s.Bind(6, int64_t{2000}).Bind(7, 1);
      });
  EXPECT_EQ(sqlite_->Changes(), 1);
  Same(kAddLiveAttempt, [](sql::Stmt& s) { s.Bind(1, 2).Bind(2, int64_t{1}); });
  EXPECT_EQ(SameOne("SELECT live_attempts, attempt FROM tasks WHERE id = 1", "ti"), "[1,2]|2");
  Same(kEndAttempt, [](sql::Stmt& s) {
    s.Bind(1, int64_t{1}).Bind(2, 2).Bind(3, "done").Bind(4, "[2]").Bind(5, int64_t{2});
    s.Bind(6, int64_t{3000}).Bind(7, 0).Bind(8, "done").Bind(9, 1.0);
  });
  EXPECT_EQ(sqlite_->Changes(), 1);
  Same(kEndAttempt, [](sql::Stmt& s) {  // a stale attempt changes nothing
    s.Bind(1, int64_t{2}).Bind(2, 7).Bind(3, "x").Bind(4, "[7]").Bind(5, int64_t{2});
    s.BindNull(6).Bind(7, 1).Bind(8, "failed").Bind(9, 0.0);
  });
  EXPECT_EQ(sqlite_->Changes(), 0);
  Same(
      "UPDATE tasks SET state = 'running', worker_id = 1, live_attempts = '[1]', attempt = 1 "
      "WHERE id = 2",
      [](sql::Stmt&) {});

  // jobs.cpp: the workers a task failed on (each once) and the job's per-worker failures.
  for (int i = 0; i < 2; ++i) {
    Same(kAddFailedOn, [](sql::Stmt& s) { s.Bind(1, int64_t{2}).Bind(2, int64_t{3}); });
    Same(kAddFailedOn, [](sql::Stmt& s) { s.Bind(1, int64_t{1}).Bind(2, int64_t{3}); });
    Same(
        "INSERT INTO job_worker_failures (job_id, worker_id, failures) VALUES (?, ?, 1) ON "
        "CONFLICT (job_id, worker_id) DO UPDATE SET failures = job_worker_failures.failures + 1",
        [&](sql::Stmt& s) { s.Bind(1, job).Bind(2, int64_t{2}); });
  }
  EXPECT_EQ(SameOne("SELECT failed_on FROM tasks WHERE id = 3", "t"), "[2,1]");
  EXPECT_EQ(SameOne("SELECT failures FROM job_worker_failures", "i"), "2");

  // costs.cpp: the day's cost, summed in an upsert.
  for (int i = 0; i < 2; ++i) {
    Same(
        "INSERT INTO cost_days (day, cost, gpu_seconds) VALUES (?1, ?2, ?3) ON CONFLICT(day) DO "
        "UPDATE SET cost = cost_days.cost + ?2, gpu_seconds = cost_days.gpu_seconds + ?3",
        [](sql::Stmt& s) { s.Bind(1, "2024-05-01").Bind(2, 0.25).Bind(3, 90.5); });
  }
  EXPECT_EQ(SameOne("SELECT cost, gpu_seconds FROM cost_days", "dd"), "0.5|181");

  // jobs.cpp: a frame flag replaced.
  for (const char* reason : {"nan pixels", "black frame"}) {
    Same(
        "INSERT INTO frame_flags (job_id, frame, reason, at) VALUES (?, ?, ?, ?) ON CONFLICT "
        "(job_id, frame) DO UPDATE SET reason = excluded.reason, at = excluded.at",
        [&](sql::Stmt& s) { s.Bind(1, job).Bind(2, 1).Bind(3, reason).Bind(4, int64_t{5}); });
  }
  EXPECT_EQ(SameOne("SELECT count(*), max(reason) FROM frame_flags", "it"), "1|black frame");

  // attempts.cpp: an attempt recorded once; its log merged into the row.
  for (int i = 0; i < 2; ++i) {
    Same(
        "INSERT INTO task_logs (task_id, attempt, job_id, outcome, failure_class, message, "
        "charged, at, ended_at, log) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8, '') ON "
        "CONFLICT DO NOTHING",
        [&](sql::Stmt& s) {
          s.Bind(1, int64_t{1}).Bind(2, 1).Bind(3, job).Bind(4, "lost").BindNull(5);
          s.Bind(6, "worker gone").Bind(7, 0).Bind(8, int64_t{4000});
        });
    EXPECT_EQ(sqlite_->Changes(), i == 0 ? 1 : 0);
  }
  Same(
      "INSERT INTO task_logs (task_id, attempt, job_id, worker_id, outcome, at, log) VALUES "
      "(?1, ?2, ?3, ?4, 'running', ?5, ?6) ON CONFLICT (task_id, attempt) DO UPDATE SET log = "
      "excluded.log, worker_id = COALESCE(task_logs.worker_id, excluded.worker_id)",
      [&](sql::Stmt& s) {
        s.Bind(1, int64_t{1}).Bind(2, 1).Bind(3, job).Bind(4, int64_t{1}).Bind(5, int64_t{4100});
        s.Bind(6, "rendering frame 1\n");
      });
  EXPECT_EQ(SameOne("SELECT outcome, worker_id, log FROM task_logs", "tit"),
            "lost|1|rendering frame 1\n");

  // jobs.cpp: events; webhook_cursors.cpp: a receiver's cursor starts at the newest event, once.
  for (const char* kind : {"job_submitted", "task_failed", "job_done", "job_failed"}) {
    Same(
        "INSERT INTO events (at, job_id, task_id, worker_id, kind, message) VALUES (?, ?, ?, ?, "
        "?, ?)",
        [&](sql::Stmt& s) {
          s.Bind(1, int64_t{6000}).Bind(2, job).BindNull(3).BindNull(4).Bind(5, kind).Bind(6, "");
        });
  }
  for (int i = 0; i < 2; ++i) {
    Same(
        "INSERT INTO webhook_cursors (receiver, last_event_id) SELECT ?, COALESCE(MAX(id), 0) "
        "FROM events WHERE true ON CONFLICT DO NOTHING",
        [](sql::Stmt& s) { s.Bind(1, "ops"); });
    EXPECT_EQ(sqlite_->Changes(), i == 0 ? 1 : 0);
  }
  EXPECT_EQ(SameOne("SELECT last_event_id FROM webhook_cursors", "i"), "4");
  EXPECT_EQ(Same(
                kEventsOfKinds,
                [](sql::Stmt& s) {
                  s.Bind(1, int64_t{1}).Bind(2, "[\"job_done\",\"job_failed\"]").Bind(3, 10);
                },
                "iit"),
            (std::vector<std::string>{"3|1|job_done", "4|1|job_failed"}));

  // tasks.cpp: the job's counters, moved and read back in one statement, then its state.
  EXPECT_EQ(Same(
                "UPDATE jobs SET tasks_queued = tasks_queued + ?1, tasks_running = "
                "tasks_running + ?2, tasks_done = tasks_done + ?3, tasks_failed = tasks_failed "
                "+ ?4, tasks_canceled = tasks_canceled + ?5 WHERE id = ?6 RETURNING state, "
                "started_at IS NULL, tasks_total, tasks_running, tasks_done, tasks_failed, "
                "tasks_canceled",
                [&](sql::Stmt& s) {
                  s.Bind(1, -2).Bind(2, 1).Bind(3, 1).Bind(4, 0).Bind(5, 0).Bind(6, job);
                },
                "tiiiiii"),
            std::vector<std::string>{"queued|1|3|1|1|0|0"});
  Same(
      "UPDATE jobs SET state = CASE WHEN state = 'canceled' THEN 'canceled' WHEN tasks_done + "
      "tasks_failed + tasks_canceled = tasks_total THEN CASE WHEN tasks_failed > 0 THEN 'failed' "
      "ELSE 'done' END WHEN tasks_running + tasks_done + tasks_failed > 0 THEN 'running' ELSE "
      "'queued' END, started_at = CASE WHEN started_at IS NULL AND tasks_running > 0 THEN ?1 "
      "ELSE started_at END, finished_at = CASE WHEN state = 'canceled' THEN finished_at WHEN "
      "tasks_done + tasks_failed + tasks_canceled = tasks_total THEN COALESCE(finished_at, ?1) "
      "ELSE NULL END WHERE id = ?2",
      [&](sql::Stmt& s) { s.Bind(1, int64_t{7000}).Bind(2, job); });
  EXPECT_EQ(SameOne("SELECT state, started_at FROM jobs", "ti"), "running|7000");

  // jobs.cpp and queries.cpp: counts without SQLite's total().
  EXPECT_EQ(SameOne("SELECT count(*), count(*) FILTER (WHERE state = 'done'), count(*) FILTER "
                    "(WHERE state = 'failed') FROM tasks WHERE job_id = 1",
                    "iii"),
            "3|1|0");
  EXPECT_EQ(SameOne("SELECT COALESCE(SUM(tasks_total), 0), COALESCE(SUM(tasks_queued), 0), "
                    "COALESCE(SUM(tasks_running), 0), COALESCE(SUM(tasks_done), 0) FROM jobs "
                    "WHERE renderer != 'steps'",
                    "iiii"),
            "3|1|1|1");
  EXPECT_EQ(SameOne("SELECT (SELECT COALESCE(SUM(price_per_hour), 0) FROM workers WHERE state != "
                    "'offline'), (SELECT cost FROM cost_days WHERE day = '2024-05-01')",
                    "dd"),
            "0|0.5");

  // queries.cpp: the worker list, a blob's use, a page of unfinished tasks, the job list.
  EXPECT_EQ(Same(
                kWorkersWithTasks, [](sql::Stmt&) {}, "itt"),
            (std::vector<std::string>{"1|w1|2", "2|w2|NULL"}));
  EXPECT_EQ(Same(
                kAssetInUse, [](sql::Stmt& s) { s.Bind(1, "ab12"); }, "i"),
            std::vector<std::string>{"1"});
  EXPECT_TRUE(Same(
                  kAssetInUse, [](sql::Stmt& s) { s.Bind(1, "ffff"); }, "i")
                  .empty());
  EXPECT_EQ(
      Same(
          kUnfinishedPage, [&](sql::Stmt& s) { s.Bind(1, job).Bind(2, -1).Bind(3, 10); }, "it"),
      (std::vector<std::string>{"2|running", "3|queued"}));
  EXPECT_EQ(Same(
                "SELECT id, name FROM jobs WHERE true AND user_name = ?2 AND pipeline_id IS NULL "
                "ORDER BY id DESC LIMIT ?5",
                [](sql::Stmt& s) { s.Bind(2, "ann").Bind(5, 50); }, "it"),
            std::vector<std::string>{"1|shot"});

  // credentials.cpp: an API token, whose column "user" is a keyword of PostgreSQL's, and its
  // revocation (table.h RevokeById).
  EXPECT_EQ(Same(
                "INSERT INTO api_tokens (secret_hash, \"user\", role, note, created_at, "
                "expires_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6) RETURNING id, secret_hash, "
                "\"user\", role, note, created_at, expires_at, revoked_at",
                [](sql::Stmt& s) {
                  s.Bind(1, "hash").Bind(2, "ann").Bind(3, "admin").Bind(4, "").Bind(5, int64_t{8});
                  s.BindNull(6);
                },
                "ittttinn"),
            std::vector<std::string>{"1|hash|ann|admin||8|null|null"});
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(Same(
                  "UPDATE api_tokens SET revoked_at = coalesce(revoked_at, ?2) WHERE id = ?1 "
                  "RETURNING id, \"user\", revoked_at",
                  [&](sql::Stmt& s) { s.Bind(1, int64_t{1}).Bind(2, int64_t{9 + i}); }, "iti"),
              std::vector<std::string>{"1|ann|9"});
  }

  // workers.cpp: a plugin offer stored again only when it changed.
  for (const char* offer : {"{\"v\":1}", "{\"v\":1}", "{\"v\":2}"}) {
    Same(
        "INSERT INTO native_plugins (name, offer_json, updated_at) VALUES (?1, ?2, ?3) ON "
        "CONFLICT(name) DO UPDATE SET offer_json = ?2, updated_at = ?3 WHERE "
        "native_plugins.offer_json != ?2",
        [&](sql::Stmt& s) { s.Bind(1, "gpu-denoise").Bind(2, offer).Bind(3, int64_t{10}); });
  }
  EXPECT_EQ(SameOne("SELECT offer_json FROM native_plugins", "t"), "{\"v\":2}");

  // jobs.cpp: a cancel that keeps the first error; a delete takes the job's tasks with it.
  Same(
      "UPDATE jobs SET state = 'canceled', finished_at = ?1, tasks_canceled = tasks_canceled + "
      "tasks_queued + tasks_running, tasks_queued = 0, tasks_running = 0, error = COALESCE(error, "
      "NULLIF(?3, '')) WHERE id = ?2",
      [&](sql::Stmt& s) { s.Bind(1, int64_t{11000}).Bind(2, job).Bind(3, ""); });
  EXPECT_EQ(SameOne("SELECT state, error, tasks_canceled FROM jobs", "tti"), "canceled|NULL|2");
  EXPECT_EQ(SameOne("SELECT kind FROM events ORDER BY id DESC LIMIT 1", "t"), "job_canceled");
  Same("DELETE FROM jobs WHERE id = ?", [&](sql::Stmt& s) { s.Bind(1, job); });
  EXPECT_EQ(SameOne("SELECT count(*) FROM tasks", "i"), "0");
}

// Why each statement above changed: its SQLite text on PostgreSQL fails, or -- for the column
// `user` -- quietly reads something else.
TEST_F(EngineStatementsTest, TheSqliteOriginalsDoNotRunOnPostgres) {
  struct Original {
    const char* where;
    const char* sql;
    const char* error;  // a piece of PostgreSQL's message
  };
  const Original originals[] = {
      {"attempts.cpp",
       "INSERT OR IGNORE INTO task_logs (task_id, attempt, job_id, outcome, at, "
       "log) VALUES (1, 1, 1, 'lost', 1, '')",
       "syntax error"},
      {"jobs.cpp",
       "INSERT OR REPLACE INTO frame_flags (job_id, frame, reason, at) VALUES (1, 1, "
       "'x', 1)",
       "syntax error"},
      {"jobs.cpp",
       "INSERT INTO job_worker_failures (job_id, worker_id, failures) VALUES (1, 2, 1) "
       "ON CONFLICT (job_id, worker_id) DO UPDATE SET failures = failures + 1",
       "ambiguous"},
      {"costs.cpp",
       "INSERT INTO cost_days (day, cost, gpu_seconds) VALUES ('d', 1, 1) ON "
       "CONFLICT(day) DO UPDATE SET cost = cost + 1",
       "ambiguous"},
      {"tasks.cpp",
       "SELECT 1 FROM tasks WHERE EXISTS (SELECT 1 FROM json_each(live_attempts) "
       "WHERE value = 1)",
       "does not exist"},
      {"tasks.cpp", "UPDATE tasks SET live_attempts = json_insert(live_attempts, '$[#]', 1)",
       "does not exist"},
      {"queries.cpp", "SELECT total(tasks_total) FROM jobs", "does not exist"},
      {"jobs.cpp", "SELECT total(state = 'done') FROM tasks", "does not exist"},
      {"queries.cpp", "SELECT group_concat(id) FROM tasks", "does not exist"},
      {"queries.cpp", "SELECT 1 FROM jobs WHERE instr(assets, 'x') > 0", "does not exist"},
      {"queries.cpp", "SELECT id FROM tasks t INDEXED BY tasks_unfinished", "syntax error"},
      {"queries.cpp", "SELECT id FROM jobs WHERE 1", "must be type boolean"},
  };
  for (const Original& o : originals) {
    StatusOr<sql::Stmt> s = postgres_->Prepare(o.sql);
    ASSERT_TRUE(s.ok());
    const Status st = s->Run();
    EXPECT_FALSE(st.ok()) << o.where << ": " << o.sql;
    EXPECT_NE(st.message().find(o.error), std::string::npos) << o.where << ": " << st.message();
  }
  // The column `user` unquoted is the current role's name on PostgreSQL, not the column.
  ASSERT_TRUE(postgres_
                  ->Exec("INSERT INTO api_tokens (secret_hash, \"user\", role, created_at) "
                         "VALUES ('h', 'ann', 'admin', 1)")
                  .ok());
  StatusOr<sql::Stmt> s = postgres_->Prepare("SELECT user FROM api_tokens");
  ASSERT_TRUE(*s->Step());
  EXPECT_EQ(s->Text(0), "postgres");
}

}  // namespace
}  // namespace tessera::store
