// tessera-bench store-engines: durable commits per second through the store's SQL layer
// (scheduler/store/sql/sql_engine.h) on SQLite and on PostgreSQL, in the same run on the same disk:
//   - single-row commits: BEGIN, one UPDATE of a task row by id, COMMIT;
//   - group commits: BEGIN, 100 such UPDATEs, COMMIT (what one broker pass writes at most).
// Both durable: SQLite with synchronous=FULL (an fsync per commit, as PostgreSQL's default) and,
// for reference, the store's default NORMAL (WAL: durable across a crash of the process, not of
// the machine); PostgreSQL with fsync and synchronous_commit on. The engines take turns in
// rounds and each figure is the median of its rounds: the machine is shared and noisy.
// PostgreSQL is the test server of tests/support (a local Unix socket), or --postgres URL.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "scheduler/store/postgres/postgres.h"
#include "scheduler/store/sql/store_url.h"
#include "scheduler/store/sqlite/sqlite_engine.h"
#include "tests/bench/bench.h"
#include "tests/support/postgres_server.h"

namespace tessera::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kRows = 10000;

Status Fill(store::sql::Db& db) {
  const bool pg = db.engine() == store::sql::Engine::kPostgres;
  TSR_RETURN_IF_ERROR(db.Exec("DROP TABLE IF EXISTS bench_tasks"));
  TSR_RETURN_IF_ERROR(db.Exec(std::string("CREATE TABLE bench_tasks (id ") +
                              (pg ? "BIGINT PRIMARY KEY" : "INTEGER PRIMARY KEY") +
                              ", state TEXT NOT NULL, attempt BIGINT NOT NULL, at BIGINT)"));
  store::sql::Transaction tx(db);
  TSR_RETURN_IF_ERROR(tx.begin_status());
  for (int i = 1; i <= kRows; ++i) {
    TSR_ASSIGN_OR_RETURN(store::sql::Stmt s, db.Prepare("INSERT INTO bench_tasks (id, state, "
                                                        "attempt) VALUES (?, 'queued', 0)"));
    TSR_RETURN_IF_ERROR(s.Bind(1, i).Run());
  }
  return tx.Commit();
}

// Commits per second for `seconds`, each commit `statements` UPDATEs.
StatusOr<double> CommitsPerSecond(store::sql::Db& db, int statements, double seconds, int* next) {
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration<double>(seconds);
  int commits = 0;
  while (Clock::now() < end) {
    store::sql::Transaction tx(db);
    TSR_RETURN_IF_ERROR(tx.begin_status());
    for (int i = 0; i < statements; ++i) {
      TSR_ASSIGN_OR_RETURN(store::sql::Stmt s,
                           db.Prepare("UPDATE bench_tasks SET state = ?2, attempt = attempt + 1, "
                                      "at = ?3 WHERE id = ?1"));
      const int id = (*next)++ % kRows + 1;
      TSR_RETURN_IF_ERROR(s.Bind(1, id).Bind(2, (id % 2) ? "running" : "done").Bind(3, id).Run());
    }
    TSR_RETURN_IF_ERROR(tx.Commit());
    ++commits;
  }
  return commits / std::chrono::duration<double>(Clock::now() - start).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

struct Engine {
  std::string name;
  std::unique_ptr<store::sql::Db> db;
  std::vector<double> single, group;
  int next = 0;
};

}  // namespace

void AddStoreEnginesCommand(CLI::App& app) {
  auto seconds = std::make_shared<double>(2.0);
  auto rounds = std::make_shared<int>(3);
  auto group = std::make_shared<int>(100);
  auto postgres_url = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "store-engines", "durable single-row and group commits per second, SQLite vs PostgreSQL");
  cmd->add_option("--seconds", *seconds, "seconds per measurement")->check(CLI::Range(0.2, 60.0));
  cmd->add_option("--rounds", *rounds, "rounds, engines taking turns")->check(CLI::Range(1, 20));
  cmd->add_option("--group", *group, "UPDATEs per group commit")->check(CLI::Range(2, 10000));
  cmd->add_option("--postgres", *postgres_url,
                  "a PostgreSQL store URL to measure (default: a server of the bench's own)");
  cmd->callback([=] {
    TempDir dir("tessera-bench-store-engines");
    std::unique_ptr<testing::PostgresServer> server;
    std::string url = *postgres_url;
    if (url.empty()) {
      StatusOr<std::unique_ptr<testing::PostgresServer>> started = testing::PostgresServer::Start();
      if (!started.ok()) throw CLI::RuntimeError(started.status().ToString(), 1);
      server = std::move(*started);
      StatusOr<std::string> db = server->CreateDatabase();
      if (!db.ok()) throw CLI::RuntimeError(db.status().ToString(), 1);
      url = server->ConnInfo(*db);
    }
    std::vector<Engine> engines;
    for (const char* sync : {"FULL", "NORMAL"}) {
      auto db = store::sql::SqliteDb::Open(dir.path() + "/" + sync + ".db", false, sync);
      if (!db.ok()) throw CLI::RuntimeError(db.status().ToString(), 1);
      engines.push_back({std::string("sqlite_") + sync, std::move(*db), {}, {}});
    }
    StatusOr<store::StoreUrl> parsed = store::ParseStoreUrl(url, "--postgres");
    if (!parsed.ok()) throw CLI::RuntimeError(parsed.status().ToString(), 1);
    auto pg = store::sql::PostgresDb::Connect(*parsed);
    if (!pg.ok()) throw CLI::RuntimeError(pg.status().ToString(), 1);
    engines.push_back({"postgres", std::move(*pg), {}, {}});
    for (Engine& e : engines) {
      if (Status s = Fill(*e.db); !s.ok()) throw CLI::RuntimeError(e.name + ": " + s.ToString(), 1);
    }
    std::printf(
        "store-engines: %d round(s) of %.1f s per engine and kind; group = %d UPDATEs; "
        "PostgreSQL at %s\n",
        *rounds, *seconds, *group, parsed->Redacted().c_str());
    for (int round = 0; round < *rounds; ++round) {
      for (Engine& e : engines) {
        StatusOr<double> single = CommitsPerSecond(*e.db, 1, *seconds, &e.next);
        StatusOr<double> grouped = CommitsPerSecond(*e.db, *group, *seconds, &e.next);
        if (!single.ok() || !grouped.ok()) {
          throw CLI::RuntimeError(
              e.name + ": " + (single.ok() ? grouped.status() : single.status()).ToString(), 1);
        }
        e.single.push_back(*single);
        e.group.push_back(*grouped);
        std::printf(
            "  round %d %-14s single-row %8.0f commits/s   group %7.0f commits/s "
            "(%8.0f rows/s)\n",
            round + 1, e.name.c_str(), *single, *grouped, *grouped * *group);
        std::fflush(stdout);
      }
    }
    const double sqlite_single = Median(engines[0].single), sqlite_group = Median(engines[0].group);
    const double normal_single = Median(engines[1].single), normal_group = Median(engines[1].group);
    const double pg_single = Median(engines[2].single), pg_group = Median(engines[2].group);
    PrintFigures({{"sqlite_full_commits_per_s", Fixed(sqlite_single)},
                  {"sqlite_normal_commits_per_s", Fixed(normal_single)},
                  {"pg_commits_per_s", Fixed(pg_single)},
                  {"pg_vs_sqlite_full_single", Fixed(pg_single / sqlite_single, 2)},
                  {"sqlite_full_group_per_s", Fixed(sqlite_group)},
                  {"sqlite_normal_group_per_s", Fixed(normal_group)},
                  {"pg_group_per_s", Fixed(pg_group)},
                  {"pg_vs_sqlite_full_group", Fixed(pg_group / sqlite_group, 2)},
                  {"pg_vs_sqlite_normal_group", Fixed(pg_group / normal_group, 2)}});
  });
}

}  // namespace tessera::bench
