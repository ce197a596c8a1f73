// Every job and worker command of the `tessera` CLI, run as the real binary against a real farm
// (tokens on): what it prints, and its exit code. (Submit, wait, jobs --json, status --json,
// workers --json, plugins, cancel and `up` are in tests/e2e/cli_e2e_test.cpp; credentials in
// api_auth_test.cpp; logs, wait, status --watch and completion in api_live_test.cpp.)

#include <gtest/gtest.h>

#include <sstream>
#include <thread>

#include "scheduler/cli/commands.h"
#include "shared/base/yaml_util.h"
#include "shared/plugins/plugin_catalog.h"
#include "tests/support/farm.h"
#include "tests/support/process.h"
#include "tests/support/scenes.h"

namespace tessera::testing {
namespace {

using namespace std::chrono_literals;

bool Contains(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

class CliCommandsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(farm_.StartScheduler()) << farm_.SchedulerLog();
    ASSERT_TRUE(farm_.StartWorker("w1"));
    ASSERT_TRUE(farm_.WaitForWorkers(1, 20s));
    env_ = {"TESSERA_SERVER=" + farm_.api_url(), "TESSERA_TOKEN=" + farm_.token()};
  }
  RunResult Run(std::vector<std::string> args) {
    args.insert(args.begin(), Bin("tessera"));
    return RunProcess(args, 60s, env_);
  }
  // Submits through the CLI; returns the job id it printed.
  std::string Submit(const std::string& name, const std::string& job_yaml) {
    const std::string file = farm_.dir() + "/" + name + ".yaml";
    WriteFile(file, job_yaml);
    // A second or so per frame on one core: slow enough to pause a job while it runs.
    WriteFile(farm_.dir() + "/scene.yaml", TinySceneYaml(320, 240, 256));
    RunResult r = Run({"submit", file});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out.substr(0, r.out.find_first_not_of("0123456789"));
  }

  LocalFarm farm_{"cli-commands"};
  std::vector<std::string> env_;
};

TEST_F(CliCommandsTest, JobOperationsPrintTheNewStateAndFailWithExitCodes) {
  // A paused job's queued tasks wait; pause, priority and resume say what changed.
  const std::string id = Submit("held", "name: held\nscene: scene.yaml\nframes: 1-2\n");
  ASSERT_FALSE(id.empty());
  RunResult paused = Run({"pause", id});
  EXPECT_EQ(paused.exit_code, 0) << paused.err;
  EXPECT_TRUE(Contains(paused.out, "job " + id + " (held): paused")) << paused.out;
  RunResult prio = Run({"priority", id, "80"});
  EXPECT_TRUE(Contains(prio.out, "priority 80")) << prio.out;
  EXPECT_EQ(Run({"priority", id, "101"}).exit_code, 2);  // out of range, nothing sent
  RunResult resumed = Run({"resume", id});
  EXPECT_EQ(resumed.exit_code, 0) << resumed.err;
  ASSERT_EQ(Run({"wait", id, "--quiet", "--timeout", "60"}).exit_code, 0);

  // Text tables: jobs (with filters), status with tasks, workers.
  RunResult jobs = Run({"jobs", "--state", "done"});
  EXPECT_TRUE(Contains(jobs.out, "ID") && Contains(jobs.out, "held")) << jobs.out;
  EXPECT_TRUE(Contains(Run({"jobs", "--user", "nobody"}).out, "No jobs.")) << "user filter";
  // Tables fit the terminal ($COLUMNS here): long cells are cut, nothing wraps.
  env_.push_back("COLUMNS=48");
  RunResult narrow = Run({"jobs"});
  env_.pop_back();
  EXPECT_TRUE(Contains(narrow.out, "~")) << narrow.out;
  std::istringstream lines(narrow.out);
  for (std::string line; std::getline(lines, line);) EXPECT_LE(line.size(), 48u) << line;
  RunResult status = Run({"status", id, "--tasks"});
  EXPECT_TRUE(Contains(status.out, "state      done")) << status.out;
  EXPECT_TRUE(Contains(status.out, "WORKER")) << status.out;
  EXPECT_TRUE(Contains(status.out, "w1")) << status.out;
  RunResult workers = Run({"workers"});
  EXPECT_TRUE(Contains(workers.out, "w1") && Contains(workers.out, "idle")) << workers.out;

  // Re-render one frame; then why, for a done task.
  RunResult again = Run({"rerender", id, "2"});
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_TRUE(Contains(again.out, "1 task(s) requeued")) << again.out;
  ASSERT_EQ(Run({"wait", id, "--quiet", "--timeout", "60"}).exit_code, 0);
  const int64_t task = farm_.Get("/api/v1/jobs/" + id + "/tasks")["tasks"][0]["id"];
  RunResult why = Run({"why", std::to_string(task)});
  EXPECT_EQ(why.exit_code, 0) << why.err;
  EXPECT_TRUE(Contains(why.out, "task " + std::to_string(task) + " (done)")) << why.out;
  EXPECT_EQ(Run({"why", "999999"}).exit_code, 1);

  // Retry brings a failed job's tasks back; delete removes a finished job.
  const std::string bad = Submit("bad",
                                 "name: bad\nrenderer: command\nframes: 1\nmax_retries: 0\n"
                                 "settings: {program: 'false'}\n");
  EXPECT_EQ(Run({"wait", bad, "--quiet", "--timeout", "60"}).exit_code, 1);
  RunResult retry = Run({"retry", bad});
  EXPECT_EQ(retry.exit_code, 0) << retry.err;
  EXPECT_TRUE(Contains(retry.out, "1 task(s) requeued")) << retry.out;
  EXPECT_EQ(Run({"wait", bad, "--quiet", "--timeout", "60"}).exit_code, 1);
  RunResult deleted = Run({"delete", bad});
  EXPECT_EQ(deleted.exit_code, 0) << deleted.err;
  EXPECT_TRUE(Contains(deleted.out, "job " + bad + " deleted")) << deleted.out;
  RunResult gone = Run({"status", bad});
  EXPECT_EQ(gone.exit_code, 1);
  EXPECT_TRUE(Contains(gone.err, "does not exist")) << gone.err;
  // A running or queued job cannot be deleted: the API's 409, exit 1. (No worker is in pool
  // `nowhere`, so this one stays queued.)
  const std::string live =
      Submit("live", "name: live\nscene: scene.yaml\nframes: 1\npools: [nowhere]\n");
  RunResult refused = Run({"delete", live});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_TRUE(Contains(refused.err, "cancel it before deleting it")) << refused.err;
}

TEST_F(CliCommandsTest, OutputsListsAndFetchDownloadsTheFramesByteForByte) {
  std::string error;
  const int64_t job =
      farm_.Submit("name: fetched\nscene: scene.yaml\nframes: 1-3\noutput: {formats: [exr, png]}\n",
                   TinySceneYaml(48, 32, 2), &error);
  ASSERT_GT(job, 0) << error;
  const nlohmann::json done = farm_.WaitForJob(job, 60s);
  ASSERT_EQ(done["state"], "done") << done.dump(2);
  const std::string id = std::to_string(job);

  RunResult list = Run({"outputs", id});
  EXPECT_EQ(list.exit_code, 0) << list.err;
  EXPECT_TRUE(Contains(list.out, "fetched.0002.exr")) << list.out;
  EXPECT_TRUE(Contains(list.out, "6 files")) << list.out;

  // Into a folder that does not exist yet; every file arrives exactly as the scheduler wrote it.
  const std::string dir = farm_.dir() + "/fetched/here";
  RunResult fetch = Run({"fetch", id, dir});
  EXPECT_EQ(fetch.exit_code, 0) << fetch.err;
  EXPECT_TRUE(Contains(fetch.out, "fetched 6 files")) << fetch.out;
  for (int f = 1; f <= 3; ++f) {
    for (const char* ext : {"exr", "png"}) {
      const std::string name = "fetched.000" + std::to_string(f) + "." + ext;
      EXPECT_EQ(ReadFile(dir + "/" + name),
                ReadFile(done["output_dir"].get<std::string>() + "/" + name))
          << name;
    }
  }
  // Again: nothing to download; a file cut short is fetched anew.
  WriteFile(dir + "/fetched.0001.png", "cut");
  RunResult again = Run({"fetch", id, dir});
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_TRUE(Contains(again.out, "fetched 1 files")) << again.out;
  EXPECT_TRUE(Contains(again.out, "5 already there")) << again.out;
  EXPECT_EQ(ReadFile(dir + "/fetched.0001.png"),
            ReadFile(done["output_dir"].get<std::string>() + "/fetched.0001.png"));
  EXPECT_EQ(Run({"fetch", "999999", dir}).exit_code, 1);
  EXPECT_EQ(Run({"outputs", "999999"}).exit_code, 1);
}

TEST_F(CliCommandsTest, WorkerCommandsDrainAndNameUnknownWorkers) {
  // revoke and readmit act on enrolled keys: on this loopback farm w1 never enrolled one.
  RunResult revoke = Run({"worker", "revoke", "w1"});
  EXPECT_EQ(revoke.exit_code, 1);
  EXPECT_TRUE(Contains(revoke.err, "no worker named w1 has enrolled")) << revoke.err;
  EXPECT_EQ(Run({"worker", "readmit", "w1"}).exit_code, 1);
  EXPECT_EQ(Run({"worker", "drain", "ghost"}).exit_code, 1);
  // Disabled: connected, but a job waits for it; enabled, the job runs. It holds across a
  // reconnect.
  RunResult disabled = Run({"worker", "disable", "w1"});
  EXPECT_EQ(disabled.exit_code, 0) << disabled.err;
  EXPECT_TRUE(Contains(disabled.out, "worker w1 disabled")) << disabled.out;
  EXPECT_TRUE(Contains(Run({"workers"}).out, "idle (disabled)"));
  EXPECT_EQ(farm_.Get("/api/v1/workers/w1")["worker"]["disabled"], true);
  ASSERT_TRUE(farm_.StartWorker("w1"));  // restarted: registers again
  ASSERT_TRUE(farm_.WaitForWorkers(1, 20s));
  std::string error;
  const int64_t job = farm_.Submit("name: held\nrenderer: noop\nframes: 1-2\n", "", &error);
  ASSERT_GT(job, 0) << error;
  std::this_thread::sleep_for(1s);
  EXPECT_EQ(farm_.Get("/api/v1/jobs/" + std::to_string(job))["job"]["state"], "queued");
  EXPECT_EQ(Run({"worker", "enable", "w1"}).exit_code, 0);
  EXPECT_EQ(farm_.WaitForJob(job, 30s).value("state", ""), "done");
  EXPECT_EQ(Run({"worker", "disable", "ghost"}).exit_code, 1);
  int status = 0;
  farm_.Get("/api/v1/workers/ghost", &status);
  EXPECT_EQ(status, 404);
  // Draining: it says so, and the worker leaves once idle.
  RunResult drain = Run({"worker", "drain", "w1"});
  EXPECT_EQ(drain.exit_code, 0) << drain.err;
  EXPECT_TRUE(Contains(drain.out, "worker w1 is draining")) << drain.out;
  EXPECT_TRUE(WaitFor([&] { return !farm_.worker("w1").running(); }, 30s));
}

TEST_F(CliCommandsTest, SubmitDefaultsTheUserToTheTokensUser) {
  // A submitter token for ana, used from a login named otherwise: the job is ana's (the farm
  // refuses a submitter's job for anyone else, so $USER as the default always failed).
  int status = 0;
  nlohmann::json created = farm_.Post(
      "/api/v1/tokens", {{"user", "ana"}, {"role", "submitter"}, {"note", "cli test"}}, &status);
  ASSERT_EQ(status, 201) << created.dump();
  const std::string file = farm_.dir() + "/mine.yaml";
  WriteFile(file, "name: mine\nrenderer: noop\nframes: 1\n");
  RunResult r = RunProcess({Bin("tessera"), "submit", file}, 60s,
                           {"TESSERA_SERVER=" + farm_.api_url(),
                            "TESSERA_TOKEN=" + created["token"].get<std::string>(), "USER=bob"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string id = r.out.substr(0, r.out.find_first_not_of("0123456789"));
  ASSERT_FALSE(id.empty()) << r.out;
  EXPECT_EQ(farm_.Get("/api/v1/jobs/" + id)["job"]["user"], "ana");
  // A job file that names its user still wins (and is refused for another user's token).
  WriteFile(file, "name: theirs\nrenderer: noop\nframes: 1\nuser: bob\n");
  r = RunProcess({Bin("tessera"), "submit", file}, 60s,
                 {"TESSERA_SERVER=" + farm_.api_url(),
                  "TESSERA_TOKEN=" + created["token"].get<std::string>(), "USER=ana"});
  EXPECT_EQ(r.exit_code, 4) << r.out << r.err;
  EXPECT_TRUE(Contains(r.err, "this token submits as 'ana', not 'bob'")) << r.err;
}

TEST_F(CliCommandsTest, SubmitDryRunChecksOnTheSchedulerAndStoresNothing) {
  WriteFile(farm_.dir() + "/scene.yaml", TinySceneYaml(64, 48, 4));
  const std::string file = farm_.dir() + "/preview.yaml";
  WriteFile(file, "name: preview\nscene: scene.yaml\nframes: 1-10\nchunk_size: 3\n");
  RunResult r = Run({"submit", "--dry-run", file});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "job 'preview' (pathtracer") && Contains(r.out, "frames 1-10 (10)") &&
              Contains(r.out, "chunk 3, 1 part(s) per frame -> 4 task(s)") &&
              Contains(r.out, "nothing was stored"))
      << r.out;
  RunResult as_json = Run({"submit", "--dry-run", "--json", file});
  ASSERT_EQ(as_json.exit_code, 0) << as_json.err;
  const nlohmann::json reply = nlohmann::json::parse(as_json.out, nullptr, false);
  ASSERT_TRUE(reply.is_object()) << as_json.out;
  EXPECT_EQ(reply["dry_run"], true);
  EXPECT_EQ(reply["job"]["tasks"], 4);
  // What only the scheduler knows is checked too: its named limits, the jobs one depends on.
  WriteFile(file, "name: preview\nscene: scene.yaml\nframes: 1-10\nlimits: [nuke]\n");
  r = Run({"submit", "--dry-run", file});
  EXPECT_EQ(r.exit_code, 2) << r.out;  // invalid input, as for a real submission
  EXPECT_TRUE(Contains(r.err, "limits[0]: no limit named 'nuke'")) << r.err;
  int status = 0;
  farm_.Post("/api/v1/jobs?dry_run=maybe", {{"job_yaml", "name: x\nrenderer: noop\nframes: 1\n"}},
             &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(farm_.Get("/api/v1/jobs")["jobs"].size(), 0u) << "a dry run stores nothing";
}

// A job file with steps: the CLI reads each step's scene (relative to the job file), a dry run
// lists the steps and their tasks, the job is submitted once, and `tessera status` shows a row
// per step with what it waits for.
TEST_F(CliCommandsTest, JobsWithStepsAreSubmittedCheckedAndShownStepByStep) {
  WriteFile(farm_.dir() + "/scene.yaml", TinySceneYaml(32, 24, 1));
  const std::string file = farm_.dir() + "/shot.yaml";
  WriteFile(file,
            "name: shot\nframes: 1-4\nsteps:\n"
            "  - {name: sim, renderer: noop, chunk_size: 2}\n"
            "  - {name: render, scene: scene.yaml, depends_on: [{step: sim, per_frame: true}]}\n");
  RunResult r = Run({"submit", "--dry-run", file});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "job 'shot'") && Contains(r.out, "2 step(s) -> 6 task(s)") &&
              Contains(r.out, "step sim (noop): frames 1-4, chunk 2 -> 2 task(s)") &&
              Contains(r.out,
                       "step render (pathtracer): frames 1-4, chunk 1 -> 4 task(s); "
                       "after sim (per frame)"))
      << r.out;
  EXPECT_EQ(farm_.Get("/api/v1/jobs?steps=true")["jobs"].size(), 0u) << "a dry run stores nothing";
  r = Run({"submit", file});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string id = r.out.substr(0, r.out.find('\n'));
  r = Run({"status", id});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "STEP") && Contains(r.out, "sim (per frame)") &&
              Contains(r.out, "render") && Contains(r.out, "pathtracer"))
      << r.out;
  // A mistake in a step is named before anything is sent.
  WriteFile(file,
            "name: shot\nframes: 1-4\nsteps:\n  - {name: a, renderer: noop}\n"
            "  - {name: b, renderer: noop, depends_on: [{step: c}]}\n");
  r = Run({"submit", file});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(Contains(r.err, "steps[1].depends_on[0].step: no step named 'c' (a, b)")) << r.err;
}

TEST_F(CliCommandsTest, WhatHoldsAJobIsSaidOnceByWaitAndShownPerStepByStatus) {
  // Flags that name the farm may come before the command as well as after it.
  std::vector<std::string> no_env;
  RunResult r = RunProcess(
      {Bin("tessera"), "--server", farm_.api_url(), "--token", farm_.token(), "--json", "jobs"},
      60s, no_env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(nlohmann::json::parse(r.out).contains("jobs")) << r.out;

  // A step no connected worker can run (a tag nobody has): the wait says so once, and goes on.
  const std::string file = farm_.dir() + "/held.yaml";
  WriteFile(file,
            "name: held\nframes: 1\nsteps:\n  - {name: prep, renderer: noop}\n"
            "  - {name: comp, renderer: noop, tags: [nowhere], depends_on: [{step: prep}]}\n");
  r = Run({"submit", file});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string id = r.out.substr(0, r.out.find('\n'));
  r = Run({"wait", id, "--timeout", "4"});
  EXPECT_NE(r.exit_code, 0) << "the job cannot finish";
  const std::string said = "job " + id + ": step comp: no connected worker can run this job";
  EXPECT_TRUE(Contains(r.err, said)) << r.err;
  EXPECT_EQ(r.err.find(said), r.err.rfind(said)) << "said once: " << r.err;
  EXPECT_TRUE(Contains(r.err, "lacks the tag 'nowhere'")) << r.err;
  r = Run({"status", id});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "notice     step comp: no connected worker can run this job"))
      << r.out;
}

// `tessera submit` reads a job file once: one YAML parse says what it is and gives its checked
// spec (each step's too), and a scene is parsed once. Run in process (the tessera_cli library)
// to count the documents parsed: a job, a job with steps and an OpenJD template.
TEST_F(CliCommandsTest, SubmitParsesTheJobFileOnceAndEachSceneOnce) {
  cli::ClientOptions options;
  options.connection.server = farm_.api_url();
  options.connection.token = farm_.token();
  // What a CLI reads once whatever it submits: the renderers it knows.
  ASSERT_FALSE(plugin::BuiltinPlugins().empty());
  const auto documents_parsed = [&](const std::string& name, const std::string& text) {
    const std::string file = farm_.dir() + "/" + name;
    WriteFile(file, text);
    const int64_t before = yaml::DocumentsParsedOnThisThread();
    EXPECT_EQ(cli::RunSubmit(options, file, cli::SubmitOptions()), cli::kExitOk) << name;
    return yaml::DocumentsParsedOnThisThread() - before;
  };
  WriteFile(farm_.dir() + "/scene.yaml", TinySceneYaml(16, 12, 1));
  EXPECT_EQ(documents_parsed("noop.yaml", "name: a\nrenderer: noop\nframes: 1-3\n"), 1);
  // The job file, then its scene.
  EXPECT_EQ(documents_parsed("render.yaml", "name: b\nscene: scene.yaml\nframes: 1\n"), 2);
  EXPECT_EQ(documents_parsed("steps.yaml",
                             "name: c\nframes: 1-4\nsteps:\n"
                             "  - {name: sim, renderer: noop, chunk_size: 2}\n"
                             "  - {name: more, renderer: noop}\n"
                             "  - {name: render, scene: scene.yaml, frames: '1',\n"
                             "     depends_on: [{step: sim}]}\n"),
            2);
  EXPECT_EQ(documents_parsed("template.yaml",
                             "specificationVersion: jobtemplate-2023-09\nname: d\n"
                             "parameterDefinitions: [{name: N, type: STRING, default: '1-3'}]\n"
                             "steps:\n  - name: Run\n    parameterSpace:\n"
                             "      taskParameterDefinitions:\n"
                             "        - {name: I, type: INT, range: '{{Param.N}}'}\n"
                             "    script: {actions: {onRun: {command: /bin/true}}}\n"),
            1);
}

}  // namespace
}  // namespace tessera::testing
