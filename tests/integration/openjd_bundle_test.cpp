// Open Job Description around a job, through a real farm (a scheduler and a worker on loopback,
// the CLI): a job bundle runs without shared storage (its inputs uploaded, each step finding
// what the steps before it returned, the outputs coming back), the farm's and the submitter's
// environment templates wrap a job (with openjd_env / openjd_unset_env), path mapping rules
// reach the worker, a task's openjd_status is its status line, an onEnter that never ends is
// stopped at the farm's bound, and a bundle with a link among its inputs is refused with nothing
// stored.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <thread>

#include "tests/support/farm.h"
#include "tests/support/process.h"

namespace tessera::testing {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

// Two steps like a studio's data job: Init reads the bundle's sample data with a bundled script
// and writes into the workspace; Process, after it, reads that and writes its own result.
const char* kBundleTemplate = R"(specificationVersion: jobtemplate-2023-09
name: "Bundle {{Param.Tag}}"
parameterDefinitions:
  - {name: Tag, type: STRING}
  - {name: InputCsv, type: PATH, objectType: FILE, dataFlow: IN, default: sample/data.csv}
  - {name: Scripts, type: PATH, objectType: DIRECTORY, dataFlow: IN, default: scripts,
     userInterface: {control: HIDDEN}}
  - {name: Workspace, type: PATH, objectType: DIRECTORY, dataFlow: OUT, default: workspace,
     userInterface: {control: CHOOSE_DIRECTORY, label: Workspace}}
steps:
  - name: Init
    script:
      actions:
        onRun: {command: sh, args: ["{{Param.Scripts}}/init.sh", "{{Param.InputCsv}}", "{{Param.Workspace}}"]}
  - name: Process
    dependencies: [{dependsOn: Init}]
    script:
      actions:
        onRun: {command: sh, args: ["{{Param.Scripts}}/process.sh", "{{Param.Workspace}}", "{{Param.Tag}}"]}
)";

class OpenJdBundleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    farm_.set_command_programs({"sh", "sleep"});
    env_ = {"TESSERA_SERVER=" + farm_.api_url(), "TESSERA_TOKEN=" + farm_.token()};
  }
  bool Start(const std::string& scheduler_config = "") {
    if (!scheduler_config.empty()) farm_.AppendSchedulerConfig(scheduler_config);
    if (!farm_.StartScheduler()) return false;
    env_ = {"TESSERA_SERVER=" + farm_.api_url(), "TESSERA_TOKEN=" + farm_.token()};
    return true;
  }
  bool StartWorker() { return farm_.StartWorker("w1") && farm_.WaitForWorkers(1, 30s); }
  RunResult Cli(std::vector<std::string> args) {
    args.insert(args.begin(), Bin("tessera"));
    return RunProcess(args, 60s, env_);
  }
  int64_t SubmittedId(const RunResult& r) {
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    return r.exit_code == 0 ? std::stoll(r.out) : -1;
  }
  // Every task log of a job (its steps' too).
  std::string Logs(int64_t id) {
    nlohmann::json job = farm_.Get("/api/v1/jobs/" + std::to_string(id))["job"];
    std::string logs;
    nlohmann::json steps = job.contains("steps") ? job["steps"] : nlohmann::json::array({job});
    for (const nlohmann::json& step : steps) {
      const nlohmann::json tasks = farm_.Get("/api/v1/jobs/" + step["id"].dump() + "/tasks");
      for (const nlohmann::json& t : tasks["tasks"]) {
        logs += farm_.Get("/api/v1/tasks/" + t["id"].dump() + "/log").dump();
      }
    }
    return logs;
  }

  LocalFarm farm_{"openjd-bundle"};
  std::vector<std::string> env_;
};

TEST_F(OpenJdBundleTest, ABundleRunsWithoutSharedStorageAndItsOutputsComeBack) {
  ASSERT_TRUE(Start()) << farm_.SchedulerLog();
  const std::string bundle = farm_.dir() + "/bundle";
  fs::create_directories(bundle + "/sample");
  fs::create_directories(bundle + "/scripts");
  WriteFile(bundle + "/template.yaml", kBundleTemplate);
  WriteFile(bundle + "/parameter_values.yaml",
            "parameterValues:\n  - {name: Tag, value: sh010}\n"
            "  - {name: \"deadline:priority\", value: 70}\n");
  WriteFile(bundle + "/sample/data.csv", "frame,seconds\n1,12\n");
  WriteFile(bundle + "/scripts/init.sh",
            "mkdir -p \"$2\" && sed -n 2p \"$1\" > \"$2/first.txt\"\n");
  WriteFile(bundle + "/scripts/process.sh",
            "test -f \"$1/first.txt\" || exit 3\n"
            "echo \"$2 $(cat \"$1/first.txt\")\" > \"$1/processed.txt\"\n");
  const int64_t id = SubmittedId(Cli({"submit", bundle}));
  ASSERT_GT(id, 0);
  // The bundle is gone from this machine before any task runs: the worker has only what was
  // uploaded.
  fs::rename(bundle, farm_.dir() + "/bundle-moved-away");
  ASSERT_TRUE(StartWorker());
  const nlohmann::json job = farm_.WaitForJob(id, 120s);
  ASSERT_EQ(job["state"], "done") << job.dump() << Logs(id) << farm_.WorkerLog("w1");
  EXPECT_EQ(job["priority"], 70);  // deadline:priority from parameter_values
  EXPECT_NE(Logs(id).find("Job: Bundle sh010"), std::string::npos) << Logs(id);
  // Each step's returned files, under the output folder's name in its step's folder.
  const std::string fetched = farm_.dir() + "/fetched";
  RunResult r = Cli({"fetch", std::to_string(id), fetched});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(ReadFile(fetched + "/Init/workspace/first.txt"), "1,12\n");
  EXPECT_EQ(ReadFile(fetched + "/Process/workspace/processed.txt"), "sh010 1,12\n");
  // Process found Init's file where a shared workspace would have had it, and did not send it
  // back as its own.
  EXPECT_FALSE(fs::exists(fetched + "/Process/workspace/first.txt"));
}

TEST_F(OpenJdBundleTest, ABundleWithALinkAmongItsInputsIsRefusedWithNothingStored) {
  ASSERT_TRUE(Start()) << farm_.SchedulerLog();
  const std::string bundle = farm_.dir() + "/bundle";
  fs::create_directories(bundle + "/sample");
  fs::create_directories(bundle + "/scripts");
  WriteFile(bundle + "/template.yaml", kBundleTemplate);
  WriteFile(bundle + "/sample/data.csv", "x\n");
  WriteFile(bundle + "/scripts/init.sh", "true\n");
  // A link could send any file of the submitter's machine to the farm.
  fs::create_symlink("/etc/passwd", bundle + "/scripts/process.sh");
  RunResult r = Cli({"submit", bundle, "-p", "Tag=t"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("scripts/process.sh: a link; a job's attached files are plain files and "
                       "folders"),
            std::string::npos)
      << r.err;
  fs::remove(bundle + "/scripts/process.sh");
  WriteFile(bundle + "/scripts/bad name?.sh", "true\n");
  r = Cli({"submit", bundle, "-p", "Tag=t"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("bad name?.sh"), std::string::npos) << r.err;
  EXPECT_TRUE(farm_.Get("/api/v1/jobs")["jobs"].empty());
}

TEST_F(OpenJdBundleTest, EnvironmentTemplatesOfTheFarmAndTheSubmitterWrapTheJob) {
  const std::string farm_env = farm_.dir() + "/farm-env.yaml";
  WriteFile(farm_env,
            "specificationVersion: environment-2023-09\n"
            "parameterDefinitions: [{name: Site, type: STRING, default: paris}]\n"
            "environment:\n  name: Farm\n  variables: {SITE: \"{{Param.Site}}\", GONE: x}\n"
            "  script:\n    actions:\n      onEnter:\n        command: sh\n        args: [-c, "
            "\"echo 'openjd_env: FROM_FARM=entered'; echo 'openjd_unset_env: GONE'\"]\n");
  ASSERT_TRUE(Start("openjd:\n  environments: [{file: " + farm_env + "}]\n"))
      << farm_.SchedulerLog();
  ASSERT_TRUE(StartWorker());
  const std::string own_env = farm_.dir() + "/own-env.yaml";
  WriteFile(own_env,
            "specificationVersion: environment-2023-09\nenvironment:\n  name: Mine\n"
            "  variables: {MINE: \"site is $SITE\"}\n");
  const std::string tpl = farm_.dir() + "/env.template.yaml";
  WriteFile(tpl,
            "specificationVersion: jobtemplate-2023-09\nname: envs\n"
            "jobEnvironments: [{name: Job, variables: {JOB: j}}]\nsteps:\n  - name: s\n"
            "    script:\n      actions:\n        onRun:\n          command: sh\n"
            "          args: [-c, \"echo SITE=$SITE FROM_FARM=$FROM_FARM MINE=$MINE JOB=$JOB "
            "GONE=${GONE:-unset}\"]\n");
  // The farm's environment template is the farm's: the CLI lists it too, as the farm will.
  const nlohmann::json listed = farm_.Get("/api/v1/openjd/environments");
  ASSERT_EQ(listed["environments"].size(), 1u) << listed.dump();
  EXPECT_EQ(listed["environments"][0]["name"], "Farm");
  const int64_t id = SubmittedId(Cli({"submit", tpl, "--env", own_env, "-p", "Site=lyon"}));
  ASSERT_GT(id, 0);
  const nlohmann::json job = farm_.WaitForJob(id, 60s);
  ASSERT_EQ(job["state"], "done") << job.dump() << Logs(id);
  const std::string logs = Logs(id);
  EXPECT_NE(logs.find("SITE=lyon FROM_FARM=entered MINE=site is $SITE JOB=j GONE=unset"),
            std::string::npos)
      << logs;
  // An environment template that is not one, or that names a parameter it does not define, is
  // refused by the CLI with its file and field.
  WriteFile(own_env,
            "specificationVersion: environment-2023-09\nenvironment:\n  name: Bad\n"
            "  variables: {X: \"{{Param.Nope}}\"}\n");
  RunResult r = Cli({"submit", tpl, "--env", own_env});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("environment.variables.X: {{Param.Nope}}: no job parameter named 'Nope'"),
            std::string::npos)
      << r.err;
}

TEST_F(OpenJdBundleTest, StatusLinesRulesAndAnEndlessOnEnter) {
  ASSERT_TRUE(Start("openjd:\n  environment_timeout_s: 2\n")) << farm_.SchedulerLog();
  ASSERT_TRUE(StartWorker());
  const std::string out = farm_.dir() + "/mapped";
  fs::create_directories(out);
  const std::string rules = farm_.dir() + "/rules.json";
  WriteFile(rules,
            "{\"version\": \"pathmapping-1.0\", \"path_mapping_rules\": [{"
            "\"source_path_format\": \"WINDOWS\", \"source_path\": \"P:\\\\proj\", "
            "\"destination_path\": \"" +
                out + "\"}]}");
  const std::string tpl = farm_.dir() + "/status.template.yaml";
  WriteFile(
      tpl,
      "specificationVersion: jobtemplate-2023-09\nname: status\n"
      "parameterDefinitions: [{name: Dir, type: PATH}]\nsteps:\n  - name: s\n"
      "    script:\n      actions:\n        onRun:\n          command: sh\n"
      "          args: [-c, \"echo 'openjd_status: loading assets'; touch '{{Param.Dir}}/here'; "
      "sleep 3\"]\n");
  fs::create_directories(out + "/sh010");
  const int64_t id =
      SubmittedId(Cli({"submit", tpl, "-p", "Dir=P:\\proj\\sh010", "--path-mapping-rules", rules}));
  ASSERT_GT(id, 0);
  const std::string step =
      farm_.Get("/api/v1/jobs/" + std::to_string(id))["job"]["steps"][0]["id"].dump();
  std::string line;
  for (auto until = std::chrono::steady_clock::now() + 30s;
       line != "loading assets" && std::chrono::steady_clock::now() < until;
       std::this_thread::sleep_for(100ms)) {
    const nlohmann::json tasks = farm_.Get("/api/v1/jobs/" + step + "/tasks")["tasks"];
    if (!tasks.empty()) line = tasks[0].value("status_line", "");
  }
  EXPECT_EQ(line, "loading assets");
  RunResult r = Cli({"status", step, "--tasks"});
  EXPECT_NE(r.out.find("loading assets"), std::string::npos) << r.out;
  ASSERT_EQ(farm_.WaitForJob(id, 60s)["state"], "done") << Logs(id);
  // The Windows path reached the worker as its own, through the job's rule.
  EXPECT_TRUE(fs::exists(out + "/sh010/here")) << Logs(id);

  // An onEnter without a timeout of its own ends at the farm's bound, naming the environment.
  const std::string endless = farm_.dir() + "/endless.template.yaml";
  WriteFile(endless,
            "specificationVersion: jobtemplate-2023-09\nname: endless\n"
            "jobEnvironments:\n  - name: Setup\n    script: {actions: {onEnter: {command: sleep, "
            "args: [\"60\"]}}}\nsteps:\n  - name: s\n    script: {actions: {onRun: {command: sh, "
            "args: [-c, \"true\"]}}}\n");
  const int64_t stuck = SubmittedId(Cli({"submit", endless, "--max-retries", "0"}));
  ASSERT_GT(stuck, 0);
  const nlohmann::json failed = farm_.WaitForJob(stuck, 60s);
  EXPECT_EQ(failed["state"], "failed") << failed.dump();
  EXPECT_NE(Logs(stuck).find("environment Setup onEnter: sleep was stopped at its timeout"),
            std::string::npos)
      << Logs(stuck);
}

}  // namespace
}  // namespace tessera::testing
