// The attempt history through a real scheduler and real workers: a frame the scheduler cannot
// write after the worker reported the task done is recorded as that attempt's failure (class
// output_write, with the error) in the API, `tessera logs` and /metrics; a retry keeps the
// task's failure total; a killed worker's attempt is lost, and the next one is the task's one
// done attempt.

#include <gtest/gtest.h>
#include <httplib.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/support/farm.h"
#include "tests/support/process.h"

namespace tessera::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;

bool Contains(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

std::string Scrape(const LocalFarm& farm) {
  httplib::Client cli(farm.api_url());
  cli.set_connection_timeout(2);
  cli.set_read_timeout(10);
  if (!farm.token().empty()) cli.set_bearer_token_auth(farm.token().c_str());
  auto res = cli.Get("/metrics");
  return res && res->status == 200 ? res->body : "";
}

// The value of one sample of /metrics (-1 when it is not there).
double Sample(const std::string& metrics, const std::string& series) {
  std::istringstream lines(metrics);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return -1;
}

// "name.####" -> "name.0001"
std::string FrameFileStem(const std::string& pattern, int frame) {
  const size_t first = pattern.find('#');
  if (first == std::string::npos) return pattern;
  const size_t width = pattern.find_last_of('#') - first + 1;
  std::string number = std::to_string(frame);
  if (number.size() < width) number.insert(0, width - number.size(), '0');
  return pattern.substr(0, first) + number + pattern.substr(first + width);
}

json TaskLog(LocalFarm& farm, int64_t task_id) {
  return farm.Get("/api/v1/tasks/" + std::to_string(task_id) + "/log");
}

RunResult Cli(const LocalFarm& farm, std::vector<std::string> args) {
  args.insert(args.begin(), Bin("tessera"));
  return RunProcess(args, 60s,
                    {"TESSERA_SERVER=" + farm.api_url(), "TESSERA_TOKEN=" + farm.token()});
}

// Submits the job before any worker is there and puts a folder where its frame 1's files go
// (root may write anywhere, so permissions would not do): every write of that frame fails.
// Returns the job id; `blocks` receives the folders.
int64_t SubmitBlocked(LocalFarm& farm, const std::string& job_yaml, std::vector<fs::path>* blocks) {
  std::string error;
  const int64_t job = farm.Submit(job_yaml, TinySceneYaml(32, 24, 2), &error);
  EXPECT_GT(job, 0) << error;
  const json view = farm.Get("/api/v1/jobs/" + std::to_string(job))["job"];
  EXPECT_FALSE(view["output_formats"].empty()) << view.dump();
  for (const json& format : view["output_formats"]) {
    const fs::path block =
        fs::path(view["output_dir"].get<std::string>()) /
        (FrameFileStem(view["output_pattern"], 1) + "." + format.get<std::string>());
    fs::create_directories(block / "keep");
    blocks->push_back(block);
  }
  return job;
}

TEST(AttemptsTest, AFrameTheSchedulerCannotWriteIsThatAttemptsFailure) {
  LocalFarm farm("attempts-write");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  std::vector<fs::path> blocks;
  const int64_t job =
      SubmitBlocked(farm, "name: blocked\nscene: scene.yaml\nframes: 1\nmax_retries: 1\n", &blocks);
  ASSERT_TRUE(farm.StartWorker("w1"));
  const json failed = farm.WaitForJob(job, 60s);
  ASSERT_EQ(failed["state"], "failed") << failed.dump(2);

  const int64_t task = Tasks(farm, job)[0]["id"];
  json log = TaskLog(farm, task);
  ASSERT_EQ(log["attempts"].size(), 2u) << log.dump(2);
  for (const json& a : log["attempts"]) {
    EXPECT_EQ(a["outcome"], "failed") << a.dump(2);
    EXPECT_EQ(a["failure_class"], "output_write") << a.dump(2);
    EXPECT_TRUE(Contains(a["message"].get<std::string>(), "cannot write frame 1")) << a.dump(2);
    EXPECT_EQ(a["charged"], true);
    EXPECT_EQ(a["worker"], "w1");
    EXPECT_FALSE(a["started_at"].is_null());
    EXPECT_FALSE(a["ended_at"].is_null());
  }
  EXPECT_EQ(log["failures"], 2);
  EXPECT_EQ(log["failures_total"], 2);

  const std::string cause = log["attempts"][0]["message"];
  RunResult logs = Cli(farm, {"logs", std::to_string(task)});
  EXPECT_EQ(logs.exit_code, 0) << logs.err;
  EXPECT_TRUE(Contains(logs.out, "attempt 1: failed (output_write) on w1: " + cause)) << logs.out;
  EXPECT_TRUE(Contains(logs.out, "attempt 2: failed (output_write) on w1: ")) << logs.out;
  EXPECT_FALSE(Contains(logs.out, ": done")) << logs.out;

  // Unblocked and retried: a fresh budget, the same total, and one done attempt.
  for (const fs::path& block : blocks) fs::remove_all(block);
  RunResult retry = Cli(farm, {"retry", std::to_string(job)});
  ASSERT_EQ(retry.exit_code, 0) << retry.err;
  ASSERT_EQ(farm.WaitForJob(job, 60s)["state"], "done");
  log = TaskLog(farm, task);
  ASSERT_EQ(log["attempts"].size(), 3u) << log.dump(2);
  EXPECT_EQ(log["attempts"][2]["outcome"], "done");
  EXPECT_EQ(log["attempts"][0]["outcome"], "failed") << "the retry rewrites no history";
  EXPECT_EQ(log["failures"], 0);
  EXPECT_EQ(log["failures_total"], 2);
  EXPECT_EQ(Tasks(farm, job)[0]["failures_total"], 2);

  // /metrics counts what the store holds.
  const std::string metrics = Scrape(farm);
  EXPECT_EQ(Sample(metrics, R"(tessera_attempts_total{outcome="failed",class="output_write"})"), 2)
      << metrics;
  EXPECT_EQ(Sample(metrics, R"(tessera_attempts_total{outcome="done"})"), 1) << metrics;
}

TEST(AttemptsTest, AnAssemblyThatFailsAfterTaskDoneTurnsThatAttemptIntoAFailure) {
  LocalFarm farm("attempts-assemble");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  // A split frame is written once its last part's worker has reported done: the write that
  // fails comes after TASK_DONE, every time.
  std::vector<fs::path> blocks;
  const int64_t job = SubmitBlocked(
      farm, "name: tiled\nscene: scene.yaml\nframes: 1\ntiles: 2x1\nmax_retries: 1\n", &blocks);
  ASSERT_TRUE(farm.StartWorker("w1"));
  ASSERT_EQ(farm.WaitForJob(job, 60s)["state"], "failed");

  json failed_task;
  for (const json& t : Tasks(farm, job)) {
    if (t["state"] == "failed") failed_task = t;
  }
  ASSERT_TRUE(failed_task.is_object()) << Tasks(farm, job).dump(2);
  const int64_t task = failed_task["id"];
  json log = TaskLog(farm, task);
  ASSERT_EQ(log["attempts"].size(), 1u) << log.dump(2);
  const json& a = log["attempts"][0];
  EXPECT_EQ(a["outcome"], "failed") << "the worker said done, but the frame never was";
  EXPECT_EQ(a["failure_class"], "output_write") << a.dump(2);
  const std::string cause = a["message"];
  EXPECT_TRUE(Contains(cause, "frame 1 could not be assembled")) << cause;
  EXPECT_EQ(a["worker"], "w1");
  EXPECT_EQ(a["charged"], true);
  EXPECT_FALSE(a["log"].get<std::string>().empty()) << "its TASK_DONE brought the log";
  EXPECT_EQ(log["failures_total"], 1);
  RunResult logs = Cli(farm, {"logs", std::to_string(task)});
  EXPECT_EQ(logs.exit_code, 0) << logs.err;
  EXPECT_TRUE(Contains(logs.out, "attempt 1: failed (output_write) on w1: " + cause)) << logs.out;

  // Retried once the path is free: the part renders again and the frame is written.
  for (const fs::path& block : blocks) fs::remove_all(block);
  ASSERT_EQ(Cli(farm, {"retry", std::to_string(job)}).exit_code, 0);
  ASSERT_EQ(farm.WaitForJob(job, 60s)["state"], "done");
  log = TaskLog(farm, task);
  ASSERT_EQ(log["attempts"].size(), 2u) << log.dump(2);
  EXPECT_EQ(log["attempts"][0]["outcome"], "failed");
  EXPECT_EQ(log["attempts"][1]["outcome"], "done");
  EXPECT_EQ(log["failures"], 0);
  EXPECT_EQ(log["failures_total"], 1);
  for (const json& t : Tasks(farm, job)) {
    int done = 0;
    const json attempts = TaskLog(farm, t["id"])["attempts"];
    for (const json& at : attempts) done += at["outcome"] == "done";
    EXPECT_EQ(done, 1) << t.dump(2);
  }
}

TEST(AttemptsTest, AKilledWorkersAttemptIsLostAndTheNextOneIsDone) {
  LocalFarm farm("attempts-kill");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  ASSERT_TRUE(farm.StartWorker("w1"));
  ASSERT_TRUE(farm.WaitForWorkers(1, 20s));
  std::string error;
  // Slow enough (a few seconds) to be killed while it renders.
  const int64_t job = farm.Submit("name: slow\nscene: scene.yaml\nframes: 1\n",
                                  TinySceneYaml(160, 120, 512), &error);
  ASSERT_GT(job, 0) << error;
  int64_t task = 0;
  ASSERT_TRUE(WaitFor(
      [&] {
        const json tasks = Tasks(farm, job);
        if (tasks.empty() || tasks[0]["state"] != "running") return false;
        task = tasks[0]["id"];
        const json log = TaskLog(farm, task);
        return !log["attempts"].empty() && log["attempts"][0]["outcome"] == "running";
      },
      20s))
      << Tasks(farm, job).dump(2);
  farm.worker("w1").Signal(SIGKILL);
  ASSERT_TRUE(farm.StartWorker("w2"));
  ASSERT_EQ(farm.WaitForJob(job, 90s)["state"], "done");

  const json log = TaskLog(farm, task);
  ASSERT_EQ(log["attempts"].size(), 2u) << log.dump(2);
  EXPECT_EQ(log["attempts"][0]["outcome"], "lost") << log.dump(2);
  EXPECT_EQ(log["attempts"][0]["worker"], "w1");
  EXPECT_EQ(log["attempts"][0]["charged"], false);
  EXPECT_TRUE(Contains(log["attempts"][0]["message"].get<std::string>(), "w1 lost")) << log.dump(2);
  EXPECT_EQ(log["attempts"][1]["outcome"], "done");
  EXPECT_EQ(log["attempts"][1]["worker"], "w2");
  EXPECT_EQ(log["failures_total"], 0);
  RunResult logs = Cli(farm, {"logs", std::to_string(task)});
  EXPECT_TRUE(Contains(logs.out, "attempt 1: lost on w1: worker w1 lost")) << logs.out;
  EXPECT_TRUE(Contains(logs.out, "attempt 2: done on w2")) << logs.out;
}

}  // namespace
}  // namespace tessera::testing
