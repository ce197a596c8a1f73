// Open Job Description templates through a real farm: `tessera submit template.yaml -p ...`
// against a real scheduler and two real workers on loopback. Every task runs its session on a
// worker -- embedded files written, the job environment entered (its variables set, its onEnter
// run), onRun, onExit -- and the second step starts only once the first is done. Templates that
// break the specification, or use what Tessera does not support, are refused by name with
// nothing stored.

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <string>
#include <thread>

#include "tests/support/farm.h"
#include "tests/support/process.h"

namespace tessera::testing {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

const char* kTemplate = R"(specificationVersion: jobtemplate-2023-09
name: "shot {{Param.Shot}}"
parameterDefinitions:
  - {name: Shot, type: STRING, default: sh010, allowedValues: [sh010, sh020]}
  - {name: Frames, type: STRING, default: "1-3"}
  - {name: Out, type: PATH, objectType: DIRECTORY, dataFlow: OUT}
jobEnvironments:
  - name: Setup
    variables: {SHOT: "{{Param.Shot}}"}
    script:
      actions:
        onEnter: {command: sh, args: ["{{Env.File.Trace}}", enter]}
        onExit: {command: sh, args: ["{{Env.File.Trace}}", exit]}
      embeddedFiles:
        - {name: Trace, type: TEXT, data: "echo \"$1 $SHOT\" >> '{{Param.Out}}/trace'\n"}
steps:
  - name: Render
    parameterSpace:
      taskParameterDefinitions:
        - {name: Frame, type: INT, range: "{{Param.Frames}}"}
        - {name: Cam, type: STRING, range: [left, right]}
      combination: "Frame * Cam"
    hostRequirements:
      amounts: [{name: amount.worker.vcpu, min: 1}]
    script:
      actions:
        onRun: {command: sh, args: ["{{Task.File.Run}}"]}
      embeddedFiles:
        - name: Run
          type: TEXT
          data: |
            echo "openjd_progress: 50"
            echo "$SHOT {{Task.Param.Frame}} {{Task.Param.Cam}}" > "{{Param.Out}}/{{Task.Param.Frame}}-{{Task.Param.Cam}}"
  - name: Check
    dependencies: [{dependsOn: Render}]
    script:
      actions:
        onRun: {command: sh, args: ["{{Task.File.Check}}"]}
      embeddedFiles:
        - name: Check
          type: TEXT
          data: "test $(ls '{{Param.Out}}' | grep -c -- -) -eq 6 && echo ok > '{{Param.Out}}/checked'\n"
)";

int Count(const std::string& text, const std::string& line) {
  std::istringstream in(text);
  int n = 0;
  for (std::string l; std::getline(in, l);) n += l == line;
  return n;
}

class OpenJdFarmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    farm_.set_command_programs({"sh"});
    ASSERT_TRUE(farm_.StartScheduler()) << farm_.SchedulerLog();
    ASSERT_TRUE(farm_.StartWorker("w1"));
    ASSERT_TRUE(farm_.StartWorker("w2"));
    ASSERT_TRUE(farm_.WaitForWorkers(2, 30s));
    env_ = {"TESSERA_SERVER=" + farm_.api_url(), "TESSERA_TOKEN=" + farm_.token()};
    out_ = farm_.dir() + "/out";
    fs::create_directories(out_);
    template_ = farm_.dir() + "/template.yaml";
    WriteFile(template_, kTemplate);
  }
  RunResult Cli(std::vector<std::string> args) {
    args.insert(args.begin(), Bin("tessera"));
    return RunProcess(args, 60s, env_);
  }

  LocalFarm farm_{"openjd"};
  std::vector<std::string> env_;
  std::string out_, template_;
};

TEST_F(OpenJdFarmTest, ATemplatesStepsRunTheirSessionsInOrder) {
  RunResult r = Cli({"submit", template_, "-p", "Out=" + out_, "-p", "Frames=1-3"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string id = r.out.substr(0, r.out.find_first_not_of("0123456789"));
  ASSERT_FALSE(id.empty()) << r.out;
  const nlohmann::json job = farm_.WaitForJob(std::stoll(id), 120s);
  ASSERT_EQ(job["state"], "done") << job.dump() << farm_.SchedulerLog();
  EXPECT_EQ(job["name"], "shot-sh010");
  // Render: Frame * Cam is 3 x 2 tasks, each with its own values and the environment's variable.
  const nlohmann::json steps = job["steps"];
  ASSERT_EQ(steps.size(), 2u) << steps.dump();
  EXPECT_EQ(steps[0]["step"], "Render");
  EXPECT_EQ(steps[0]["tasks"]["total"], 6) << steps[0].dump();
  EXPECT_EQ(steps[1]["tasks"]["total"], 1) << steps[1].dump();
  for (int frame = 1; frame <= 3; ++frame) {
    for (const char* cam : {"left", "right"}) {
      const std::string file = out_ + "/" + std::to_string(frame) + "-" + cam;
      EXPECT_EQ(ReadFile(file), "sh010 " + std::to_string(frame) + " " + cam + "\n") << file;
    }
  }
  // Check ran after every Render task (it counts their files), and every one of the 7 sessions
  // entered and left the job environment.
  EXPECT_EQ(ReadFile(out_ + "/checked"), "ok\n");
  const std::string trace = ReadFile(out_ + "/trace");
  EXPECT_EQ(Count(trace, "enter sh010"), 7) << trace;
  EXPECT_EQ(Count(trace, "exit sh010"), 7) << trace;
  // The task log shows the task's parameter values and what ran.
  const nlohmann::json tasks = farm_.Get("/api/v1/jobs/" + steps[0]["id"].dump() + "/tasks");
  ASSERT_FALSE(tasks["tasks"].empty());
  const std::string log =
      farm_.Get("/api/v1/tasks/" + tasks["tasks"][0]["id"].dump() + "/log").dump();
  EXPECT_NE(log.find("Frame=1, Cam=left"), std::string::npos) << log;
}

TEST_F(OpenJdFarmTest, TemplatesBeyondTheSpecOrTesseraAreRefusedByNameWithNothingStored) {
  auto post = [&](const std::string& text, const nlohmann::json& parameters, int* status) {
    nlohmann::json body = {{"job_yaml", text}, {"parameters", parameters}};
    return farm_.Post("/api/v1/jobs", body, status).dump();
  };
  int status = 0;
  std::string text = kTemplate;
  // An extension is refused by name, never ignored.
  std::string reply = post("extensions: [TASK_CHUNKING]\n" + text, {{"Out", out_}}, &status);
  EXPECT_EQ(status, 400);
  EXPECT_NE(reply.find("TASK_CHUNKING is not supported"), std::string::npos) << reply;
  // A parameter without a default must be given; given ones are checked against their rules.
  reply = post(text, nlohmann::json::object(), &status);
  EXPECT_EQ(status, 400);
  EXPECT_NE(reply.find("Out"), std::string::npos) << reply;
  reply = post(text, {{"Out", out_}, {"Shot", "sh999"}}, &status);
  EXPECT_EQ(status, 400);
  EXPECT_NE(reply.find("sh999"), std::string::npos) << reply;
  // Host requirements Tessera cannot meet are refused, naming them.
  std::string windows = text;
  windows.replace(windows.find("amounts:"), 0,
                  "attributes: [{name: attr.worker.os.family, anyOf: [windows]}]\n      ");
  reply = post(windows, {{"Out", out_}}, &status);
  EXPECT_EQ(status, 400);
  EXPECT_NE(reply.find("attr.worker.os.family"), std::string::npos) << reply;
  // Parameters are for templates only, in the API and the CLI.
  reply = farm_
              .Post("/api/v1/jobs",
                    {{"job_yaml", "name: x\nrenderer: noop\nframes: 1\n"},
                     {"parameters", {{"A", "1"}}}},
                    &status)
              .dump();
  EXPECT_EQ(status, 400);
  EXPECT_NE(reply.find("body: parameters"), std::string::npos) << reply;
  const std::string job_file = farm_.dir() + "/job.yaml";
  WriteFile(job_file, "name: x\nrenderer: noop\nframes: 1\n");
  RunResult r = Cli({"submit", job_file, "-p", "A=1"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("-p, --env, --path-mapping-rules, --priority, --max-retries, --project "
                       "and --pool are for Open Job Description templates"),
            std::string::npos)
      << r.err;
  r = Cli({"submit", template_, "-p", "Out"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("expected Name=Value"), std::string::npos) << r.err;
  EXPECT_TRUE(farm_.Get("/api/v1/jobs")["jobs"].empty());
  // A dry run checks on the scheduler too, and stores nothing.
  r = Cli({"submit", "--dry-run", template_, "-p", "Out=" + out_});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Render"), std::string::npos) << r.out;
  EXPECT_TRUE(farm_.Get("/api/v1/jobs")["jobs"].empty());
}

TEST_F(OpenJdFarmTest, CommandsOffTheWorkersAllowListFailTheTask) {
  std::string text = kTemplate;
  const std::string run = "onRun: {command: sh, args: [\"{{Task.File.Run}}\"]}";
  text.replace(text.find(run), run.size(), "onRun: {command: python3, args: [\"-c\", \"1\"]}");
  int status = 0;
  nlohmann::json reply =
      farm_.Post("/api/v1/jobs",
                 {{"job_yaml", text}, {"parameters", {{"Out", out_}, {"Frames", "1"}}}}, &status);
  ASSERT_EQ(status, 201) << reply.dump();
  const int64_t id = reply["job"]["id"].get<int64_t>();
  const std::string step =
      farm_.Get("/api/v1/jobs/" + std::to_string(id))["job"]["steps"][0]["id"].dump();
  // Each attempt fails on the worker with the reason (and the job environment was still left:
  // its onExit ran after the failed onRun).
  std::string tasks;
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (std::chrono::steady_clock::now() < deadline) {
    tasks = farm_.Get("/api/v1/jobs/" + step + "/tasks").dump();
    if (tasks.find("is not a program this worker allows") != std::string::npos) break;
    std::this_thread::sleep_for(200ms);
  }
  EXPECT_NE(tasks.find("onRun.command: 'python3' is not a program this worker allows"),
            std::string::npos)
      << tasks;
  const std::string trace = ReadFile(out_ + "/trace");
  EXPECT_GE(Count(trace, "exit sh010"), 1) << trace;
}

}  // namespace
}  // namespace tessera::testing
