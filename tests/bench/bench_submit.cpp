// tessera-bench submit: how long a large job takes to be durably accepted through the real HTTP
// API (validate, expand, one transaction, answer), against the baseline of inserting the same
// number of bare task rows into SQLite in one transaction on the same disk.
// Goal (DESIGN.md): a 100,000-task job durably accepted in <= 1 s. With --openjd: the same
// number of tasks as an Open Job Description template (one step, an INT range over the tasks,
// translated by the scheduler), against the Tessera job file of the same size in the same run;
// goal: a 10,000-task template accepted in under 1 s.

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "scheduler/api/http_api.h"
#include "scheduler/broker/broker.h"
#include "scheduler/store/sql/store_url.h"
#include "scheduler/store/sqlite/sqlite.h"
#include "scheduler/store/store.h"
#include "tests/bench/bench.h"
#include "tests/bench/sim_fleet.h"
#include "tests/support/postgres_server.h"

namespace tessera::bench {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr const char* kScene = R"(width: 8
height: 8
samples: 1
max_depth: 1
background: {color: [1, 1, 1]}
camera: {keyframes: [{frame: 1, position: [0, 0, 5], look_at: [0, 0, 0], fov: 40}]}
materials: {m: {type: diffuse, color: [0.5, 0.5, 0.5]}}
objects: [{type: sphere, center: [0, 0, 0], radius: 1, material: m}]
)";

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// Baseline: the same number of rows into a bare table, one prepared statement, one transaction.
StatusOr<double> BareInsertSeconds(const std::string& dir, int tasks) {
  TSR_ASSIGN_OR_RETURN(auto db, store::Db::Open(dir + "/bare.db", false));
  TSR_RETURN_IF_ERROR(db->Exec(
      "CREATE TABLE t (id INTEGER PRIMARY KEY, job INTEGER, idx INTEGER, a INTEGER, b INTEGER, "
      "state TEXT)"));
  auto start = Clock::now();
  store::Transaction tx(*db);
  TSR_RETURN_IF_ERROR(tx.begin_status());
  for (int i = 0; i < tasks; ++i) {
    TSR_ASSIGN_OR_RETURN(store::Stmt s, db->Prepare("INSERT INTO t (job, idx, a, b, state) "
                                                    "VALUES (1, ?, ?, ?, 'queued')"));
    TSR_RETURN_IF_ERROR(s.Bind(1, i).Bind(2, i + 1).Bind(3, i + 1).Run());
  }
  TSR_RETURN_IF_ERROR(tx.Commit());
  return Seconds(start);
}

}  // namespace

void AddSubmitCommand(CLI::App& app) {
  auto tasks = std::make_shared<int>(100000);
  CLI::App* cmd = app.add_subcommand("submit", "time to durably accept one large job over HTTP");
  cmd->add_option("--tasks", *tasks, "tasks (frames, chunk 1) in the job")
      ->check(CLI::Range(1, 100000));
  auto openjd = std::make_shared<bool>(false);
  cmd->add_flag("--openjd", *openjd,
                "also submit the tasks as an OpenJD template (against the Tessera job file)");
  auto postgres = std::make_shared<bool>(false);
  cmd->add_flag("--postgres", *postgres,
                "the scheduler's store on PostgreSQL (a server of the bench's own) instead of "
                "SQLite");
  cmd->callback([tasks, openjd, postgres] {
    std::string dir = (fs::temp_directory_path() / "tessera-bench-submit").string();
    fs::remove_all(dir);
    fs::create_directories(dir);
    auto bare = BareInsertSeconds(dir, *tasks);
    if (!bare.ok()) throw CLI::RuntimeError(bare.status().ToString(), 1);

    std::unique_ptr<testing::PostgresServer> server;
    std::optional<store::StoreUrl> url;
    if (*postgres) {
      StatusOr<std::unique_ptr<testing::PostgresServer>> started = testing::PostgresServer::Start();
      if (!started.ok()) throw CLI::RuntimeError(started.status().ToString(), 1);
      server = std::move(*started);
      StatusOr<std::string> db = server->CreateDatabase();
      if (!db.ok()) throw CLI::RuntimeError(db.status().ToString(), 1);
      StatusOr<store::StoreUrl> parsed = store::ParseStoreUrl(server->ConnInfo(*db));
      if (!parsed.ok()) throw CLI::RuntimeError(parsed.status().ToString(), 1);
      url = *parsed;
    }
    auto store = OpenStore(dir + "/farm", url ? &*url : nullptr);
    broker::Broker broker(*store, LoopbackBroker(), tessera::Clock::Real());
    StartBroker(broker);
    api::ApiOptions aopts;
    aopts.port = 0;
    aopts.output_root = dir + "/outputs";
    fs::create_directories(aopts.output_root);
    security::ApiAuth auth(*store, /*enabled=*/true);
    auto submitter = auth.Create("bench", security::Role::kSubmitter, "submit bench", 0);
    if (!submitter.ok()) throw CLI::RuntimeError(submitter.status().ToString(), 1);
    api::HttpApi http(*store, broker, auth, aopts);
    auto port = http.Start();
    if (!port.ok()) throw CLI::RuntimeError(port.status().ToString(), 1);

    nlohmann::json body = {
        {"job_yaml", "name: big\nscene: s.yaml\nframes: 1-" + std::to_string(*tasks) + "\n"},
        {"scene_yaml", kScene}};
    httplib::Client cli("127.0.0.1", *port);
    cli.set_read_timeout(120);
    cli.set_bearer_token_auth(submitter->token);
    auto start = Clock::now();
    auto res = cli.Post("/api/v1/jobs", body.dump(), "application/json");
    double submit_s = Seconds(start);
    if (!res || res->status != 201) {
      throw CLI::RuntimeError("submit failed: " + (res ? res->body : std::string("no answer")), 1);
    }
    std::printf(
        "%d-task job accepted in %.3f s (store: %s); bare SQLite insert of as many rows: "
        "%.3f s\n",
        *tasks, submit_s, *postgres ? "PostgreSQL" : "SQLite", *bare);
    double template_s = 0;
    if (*openjd) {
      // A task parameter has at most 1,024 values (the specification's limit): the tasks are
      // shots x frames, up to 1,000 frames a shot.
      const int frames = std::min(*tasks, 1000);
      const int shots = std::max(1, *tasks / frames);
      const std::string text =
          "specificationVersion: jobtemplate-2023-09\nname: big-template\n"
          "parameterDefinitions: [{name: Frames, type: STRING}, {name: Shots, type: STRING}]\n"
          "steps:\n  - name: Work\n    parameterSpace:\n      taskParameterDefinitions:\n"
          "        - {name: Shot, type: INT, range: \"{{Param.Shots}}\"}\n"
          "        - {name: Frame, type: INT, range: \"{{Param.Frames}}\"}\n"
          "    script: {actions: {onRun: {command: 'true', args: [\"{{Task.Param.Shot}}\", "
          "\"{{Task.Param.Frame}}\"]}}}\n";
      nlohmann::json job = {
          {"job_yaml", text},
          {"parameters",
           {{"Frames", "1-" + std::to_string(frames)}, {"Shots", "1-" + std::to_string(shots)}}}};
      start = Clock::now();
      res = cli.Post("/api/v1/jobs", job.dump(), "application/json");
      template_s = Seconds(start);
      if (!res || res->status != 201) {
        throw CLI::RuntimeError(
            "template submit failed: " + (res ? res->body : std::string("no answer")), 1);
      }
      std::printf("%d-task OpenJD template accepted in %.3f s (%.2f x the job file)\n",
                  shots * frames, template_s, template_s / submit_s);
    }
    http.Stop();
    broker.Stop();
    PrintFigures({{"tasks", std::to_string(*tasks)},
                  {"submit_s", Fixed(submit_s, 3)},
                  {"bare_insert_s", Fixed(*bare, 3)},
                  {"ratio", Fixed(submit_s / *bare, 2)},
                  {"openjd_submit_s", *openjd ? Fixed(template_s, 3) : "-"},
                  {"openjd_vs_job_file", *openjd ? Fixed(template_s / submit_s, 2) : "-"},
                  {"target_s", "1.0"}});
    fs::remove_all(dir);
  });
}

}  // namespace tessera::bench
