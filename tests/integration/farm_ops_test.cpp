// Integration tests of running a farm (the binary's other parts: farm_test.cpp,
// farm_lease_test.cpp): priority and pause, fair share, dependencies, named limits, pools and
// tags, hardware requirements, retry, re-render and delete -- a real tessera-scheduler with real
// or scripted workers on loopback, a real SQLite file.

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "tests/support/fake_worker.h"
#include "tests/support/farm.h"

namespace tessera::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

nlohmann::json JobOp(LocalFarm& farm, int64_t id, const std::string& op, nlohmann::json body,
                     int* status) {
  return farm.Post("/api/v1/jobs/" + std::to_string(id) + "/" + op, body, status);
}

std::string FirstStart(const nlohmann::json& tasks, bool latest) {
  std::string pick;
  for (const auto& t : tasks) {
    std::string s = t["started_at"].get<std::string>();
    if (pick.empty() || (latest ? s > pick : s < pick)) pick = s;
  }
  return pick;
}

TEST(FarmOpsTest, PriorityAndPauseDecideWhatRunsFirst) {
  LocalFarm farm("ops-order");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  std::string scene = TinySceneYaml(32, 24, 2), error;
  int64_t a = farm.Submit("name: a\nscene: s\nframes: 1-3\n", scene, &error);
  int64_t b = farm.Submit("name: b\nscene: s\nframes: 1-3\n", scene, &error);
  int64_t c = farm.Submit("name: c\nscene: s\nframes: 1-2\n", scene, &error);
  ASSERT_GT(c, 0) << error;
  int status = 0;
  nlohmann::json res = JobOp(farm, b, "priority", {{"priority", 90}}, &status);
  ASSERT_EQ(status, 200) << res.dump();
  EXPECT_EQ(res["job"]["priority"], 90);
  res = JobOp(farm, c, "pause", nlohmann::json::object(), &status);
  ASSERT_EQ(status, 200) << res.dump();
  EXPECT_EQ(res["job"]["state"], "paused");

  // `why` explains what holds each task.
  auto why = [&](int64_t job) {
    int64_t task = Tasks(farm, job)[0]["id"];
    return farm.Get("/api/v1/tasks/" + std::to_string(task) + "/why")["reason"].get<std::string>();
  };
  EXPECT_NE(why(c).find("paused"), std::string::npos) << why(c);
  EXPECT_NE(why(a).find("no workers"), std::string::npos) << why(a);

  ASSERT_TRUE(farm.StartWorker("w1"));
  EXPECT_EQ(farm.WaitForJob(a, 60s)["state"], "done") << farm.SchedulerLog();
  EXPECT_EQ(farm.WaitForJob(b, 60s)["state"], "done");
  // b was raised above a, so every task of b started before any task of a.
  EXPECT_LT(FirstStart(Tasks(farm, b), /*latest=*/true), FirstStart(Tasks(farm, a), false));
  // c is paused: none of its tasks was leased.
  for (const auto& t : Tasks(farm, c)) EXPECT_EQ(t["attempt"], 0) << t.dump();
  EXPECT_EQ(farm.Get("/api/v1/jobs/" + std::to_string(c))["job"]["state"], "paused");

  res = JobOp(farm, c, "resume", nlohmann::json::object(), &status);
  ASSERT_EQ(status, 200) << res.dump();
  EXPECT_EQ(farm.WaitForJob(c, 60s)["state"], "done");
  EXPECT_NE(why(c).find("done"), std::string::npos) << why(c);
  farm.Get("/api/v1/tasks/999999/why", &status);
  EXPECT_EQ(status, 404);

  // Operations on finished or unknown jobs, and bad bodies, are refused without changes.
  JobOp(farm, c, "pause", nlohmann::json::object(), &status);
  EXPECT_EQ(status, 409);
  JobOp(farm, 999, "resume", nlohmann::json::object(), &status);
  EXPECT_EQ(status, 404);
  res = JobOp(farm, a, "priority", {{"priority", 101}}, &status);
  EXPECT_EQ(status, 400);
  EXPECT_NE(res["error"].get<std::string>().find("priority"), std::string::npos);
  JobOp(farm, a, "priority", {{"priority", "high"}}, &status);
  EXPECT_EQ(status, 400);
}

TEST(FarmOpsTest, EqualPriorityJobsShareTheFarm) {
  LocalFarm farm("fair");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  std::string scene = TinySceneYaml(32, 24, 2), error;
  int64_t big = farm.Submit("name: big\nscene: s\nframes: 1-6\n", scene, &error);
  int64_t small = farm.Submit("name: small\nscene: s\nframes: 1-2\n", scene, &error);
  ASSERT_GT(small, 0) << error;
  ASSERT_TRUE(farm.StartWorker("w1"));
  ASSERT_EQ(farm.WaitForJob(big, 60s)["state"], "done") << farm.SchedulerLog();
  ASSERT_EQ(farm.WaitForJob(small, 60s)["state"], "done");
  // Submitted second, the small job is not made to wait for the whole big one: the two
  // alternate, so it is finished before the big job's third task starts.
  std::vector<std::string> big_starts;
  for (const auto& t : Tasks(farm, big)) big_starts.push_back(t["started_at"]);
  std::sort(big_starts.begin(), big_starts.end());
  EXPECT_LT(FirstStart(Tasks(farm, small), /*latest=*/true), big_starts[2]);
}

TEST(FarmOpsTest, JobWaitsForTheJobItDependsOn) {
  LocalFarm farm("deps");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  std::string scene = TinySceneYaml(32, 24, 2), error;
  int64_t render = farm.Submit("name: render\nscene: s\nframes: 1-3\n", scene, &error);
  ASSERT_GT(render, 0) << error;
  int64_t comp = farm.Submit("name: comp\nscene: s\nframes: 1-2\npriority: 90\ndepends_on: [" +
                                 std::to_string(render) + "]\n",
                             scene, &error);
  ASSERT_GT(comp, 0) << error;
  EXPECT_EQ(farm.Submit("name: x\nscene: s\nframes: 1\ndepends_on: [4242]\n", scene, &error), -1);
  EXPECT_NE(error.find("depends_on[0]"), std::string::npos) << error;

  int64_t task = Tasks(farm, comp)[0]["id"];
  std::string reason =
      farm.Get("/api/v1/tasks/" + std::to_string(task) + "/why")["reason"].get<std::string>();
  EXPECT_NE(reason.find("waiting for job"), std::string::npos) << reason;

  ASSERT_TRUE(farm.StartWorker("w1"));
  ASSERT_EQ(farm.WaitForJob(comp, 60s)["state"], "done") << farm.SchedulerLog();
  // Despite its higher priority, comp started only after render had finished.
  std::string render_finished = farm.WaitForJob(render, 5s)["finished_at"];
  EXPECT_GE(FirstStart(Tasks(farm, comp), /*latest=*/false), render_finished);
  EXPECT_EQ(farm.Get("/api/v1/jobs/" + std::to_string(comp))["job"]["depends_on"][0], render);
}

TEST(FarmOpsTest, NamedLimitCapsConcurrentTasks) {
  LocalFarm farm("limits");
  farm.AppendSchedulerConfig("limits:\n  license: 1\n");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  std::string scene = TinySceneYaml(), error;
  EXPECT_EQ(farm.Submit("name: x\nscene: s\nframes: 1\nlimits: [nuke]\n", scene, &error), -1);
  EXPECT_NE(error.find("limits[0]"), std::string::npos) << error;

  std::vector<std::unique_ptr<FakeWorker>> fakes;
  for (const char* name : {"f1", "f2"}) {
    fakes.push_back(std::make_unique<FakeWorker>(farm.broker_endpoint(), name));
    ASSERT_TRUE(fakes.back()->WaitFor(protocol::MessageType::kWelcome, 5s));
  }
  int64_t id = farm.Submit("name: lic\nscene: s\nframes: 1-2\nlimits: [license]\n", scene, &error);
  ASSERT_GT(id, 0) << error;
  // Whoever gets the first task holds the only license ...
  std::optional<protocol::Envelope> first;
  size_t holder = 0;
  for (int round = 0; round < 20 && !first; ++round) {
    for (holder = 0; holder < 2 && !first; ++holder) {
      first = fakes[holder]->WaitFor(protocol::MessageType::kAssign, 100ms);
    }
  }
  ASSERT_TRUE(first.has_value());
  --holder;
  auto a = *first->As<protocol::Assign>();
  fakes[holder]->running = {{a.task_id, a.attempt}};
  // ... so the other, idle worker is given nothing ...
  EXPECT_FALSE(fakes[1 - holder]->WaitFor(protocol::MessageType::kAssign, 1000ms).has_value());
  int64_t task = Tasks(farm, id)[1]["id"];
  std::string reason =
      farm.Get("/api/v1/tasks/" + std::to_string(task) + "/why")["reason"].get<std::string>();
  EXPECT_NE(reason.find("license (1 of 1 in use)"), std::string::npos) << reason;
  // ... until the holder finishes.
  const float pixel[4] = {0.5f, 0.5f, 0.5f, 1.0f};
  fakes[holder]->SendWithPayload(
      protocol::MessageType::kFrameResult,
      protocol::FrameResult{a.task_id, a.attempt, a.frame_start, 1, 1, 4, 0.0, "fake", {}},
      zmq::message_t(pixel, sizeof(pixel)));
  fakes[holder]->Send(protocol::MessageType::kTaskDone, protocol::TaskDone{a.task_id, a.attempt});
  fakes[holder]->running.clear();
  bool second = false;
  for (int round = 0; round < 20 && !second; ++round) {
    for (auto& f : fakes) second = second || f->WaitFor(protocol::MessageType::kAssign, 100ms);
  }
  EXPECT_TRUE(second) << farm.SchedulerLog();
}

TEST(FarmOpsTest, PoolsAndTagsChooseTheWorkers) {
  LocalFarm farm("pools");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  // The real worker first: the fake one heartbeats only while the test waits on it, so it must
  // not sit idle while a worker process starts on a busy machine.
  ASSERT_TRUE(farm.StartWorker("cpu-box"));
  ASSERT_TRUE(farm.WaitForWorkers(1, 60s)) << farm.WorkerLog("cpu-box");
  FakeWorker gpu_box(farm.broker_endpoint(), "gpu-box", {"gpu"}, {"cuda12"});
  ASSERT_TRUE(gpu_box.WaitFor(protocol::MessageType::kWelcome, 5s));

  std::string scene = TinySceneYaml(), error;
  int64_t gpu_job =
      farm.Submit("name: g\nscene: s\nframes: 1-2\npools: [gpu]\ntags: [cuda12]\n", scene, &error);
  ASSERT_GT(gpu_job, 0) << error;
  auto assign = gpu_box.WaitFor(protocol::MessageType::kAssign, 5s);
  ASSERT_TRUE(assign.has_value()) << "the job's pool is served by gpu-box only";
  gpu_box.running = {
      {assign->As<protocol::Assign>()->task_id, assign->As<protocol::Assign>()->attempt}};
  gpu_box.WaitFor(protocol::MessageType::kCancel, 1000ms);  // heartbeat a while
  for (const auto& t : Tasks(farm, gpu_job)) {
    EXPECT_NE(t["worker_name"], "cpu-box") << "cpu-box is idle but not in pool gpu";
  }

  int64_t houdini = farm.Submit("name: h\nscene: s\nframes: 1\ntags: [houdini]\n", scene, &error);
  ASSERT_GT(houdini, 0) << error;
  int64_t task = Tasks(farm, houdini)[0]["id"];
  std::string reason =
      farm.Get("/api/v1/tasks/" + std::to_string(task) + "/why")["reason"].get<std::string>();
  EXPECT_NE(reason.find("no connected worker can run"), std::string::npos) << reason;

  int64_t anywhere = farm.Submit("name: a\nscene: s\nframes: 1\n", scene, &error);
  EXPECT_EQ(farm.WaitForJob(anywhere, 30s)["state"], "done") << "a job without pools runs anywhere";
  const nlohmann::json workers = farm.Get("/api/v1/workers")["workers"];
  for (const auto& w : workers) {
    if (w["name"] == "gpu-box") {
      EXPECT_EQ(w["tags"][0], "cuda12");
    }
    if (w["name"] == "cpu-box") {
      EXPECT_EQ(w["pools"][0], "default");
    }
  }
}

TEST(FarmOpsTest, ResourceRequirementsMatchTheHardware) {
  // 1 s heartbeats: the fake worker only beats while it waits for a message, and starting the
  // real worker can take longer than 200 ms x liveness on a loaded machine.
  LocalFarm farm("resources", /*heartbeat_ms=*/1000);
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  FakeWorker h200(farm.broker_endpoint(), "h200", {"default"}, {},
                  {{0, "NVIDIA H200", 143771, 9, 0}});
  ASSERT_TRUE(h200.WaitFor(protocol::MessageType::kWelcome, 5s));
  ASSERT_TRUE(farm.StartWorker("cpu-box"));
  ASSERT_TRUE(farm.WaitForWorkers(2, 20s));

  std::string scene = TinySceneYaml(), error;
  int64_t big = farm.Submit(
      "name: big\nscene: s\nframes: 1\nresources:\n  gpus: 1\n  gpu_memory_mb: 80000\n"
      "  compute_capability: 9.0\n",
      scene, &error);
  ASSERT_GT(big, 0) << error;
  EXPECT_TRUE(h200.WaitFor(protocol::MessageType::kAssign, 5s).has_value())
      << "only the H200 worker has a GPU with 80 GB and compute 9.0";

  int64_t future = farm.Submit(
      "name: future\nscene: s\nframes: 1\nresources:\n  compute_capability: 10.0\n  gpus: 1\n",
      scene, &error);
  ASSERT_GT(future, 0) << error;
  int64_t task = Tasks(farm, future)[0]["id"];
  nlohmann::json why = farm.Get("/api/v1/tasks/" + std::to_string(task) + "/why");
  EXPECT_NE(why["reason"].get<std::string>().find("no connected worker can run"), std::string::npos)
      << why.dump();
  EXPECT_NE(why["details"].dump().find("h200: has 0 GPU(s) with >= 0 MB and compute >= 10.0"),
            std::string::npos)
      << why.dump();
  // Not left waiting silently: the job itself says why nothing runs it.
  nlohmann::json job = farm.Get("/api/v1/jobs/" + std::to_string(future))["job"];
  EXPECT_NE(job["notice"].dump().find("no connected worker can run this job"), std::string::npos)
      << job.dump();

  EXPECT_EQ(farm.Submit("name: x\nscene: s\nframes: 1\nresources:\n  gpus: -1\n", scene, &error),
            -1);
  EXPECT_NE(error.find("resources.gpus"), std::string::npos) << error;
  EXPECT_EQ(farm.Submit("name: x\nscene: s\nframes: 1\nresources:\n  vram: 8\n", scene, &error),
            -1);
  EXPECT_NE(error.find("resources.vram"), std::string::npos) << error;
}

TEST(FarmOpsTest, RetryRerenderAndDelete) {
  LocalFarm farm("ops-retry");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  std::string error;
  // Its output directory is replaced by a plain file, so writing frames fails and, with no
  // retries allowed, the task fails for good.
  int64_t id =
      farm.Submit("name: r\nscene: s\nframes: 1-2\nmax_retries: 0\noutput:\n  directory: blocked\n",
                  TinySceneYaml(32, 24, 2), &error);
  ASSERT_GT(id, 0) << error;
  std::string out = farm.Get("/api/v1/jobs/" + std::to_string(id))["job"]["output_dir"];
  fs::remove_all(out);
  WriteFile(out, "not a directory");
  ASSERT_TRUE(farm.StartWorker("w1"));
  nlohmann::json job = farm.WaitForJob(id, 60s);
  ASSERT_EQ(job["state"], "failed") << job.dump(2);
  EXPECT_NE(job["error"].get<std::string>().find("write"), std::string::npos) << job["error"];

  int status = 0;
  farm.Post("/api/v1/jobs/" + std::to_string(id) + "/cancel", nlohmann::json::object(), &status);
  EXPECT_EQ(status, 409) << "a failed job is finished";
  fs::remove(out);
  nlohmann::json res = JobOp(farm, id, "retry", nlohmann::json::object(), &status);
  ASSERT_EQ(status, 200) << res.dump();
  EXPECT_EQ(res["tasks_requeued"], 2);
  job = farm.WaitForJob(id, 60s);
  ASSERT_EQ(job["state"], "done") << job.dump(2) << farm.SchedulerLog();
  EXPECT_TRUE(job["error"].is_null()) << "a retried job that succeeds carries no stale error";
  EXPECT_TRUE(fs::exists(out + "/r.0002.exr"));

  // Re-render frame 2 only.
  res = JobOp(farm, id, "rerender", {{"frames", "2"}}, &status);
  ASSERT_EQ(status, 200) << res.dump();
  EXPECT_EQ(res["tasks_requeued"], 1);
  ASSERT_EQ(farm.WaitForJob(id, 60s)["state"], "done");
  nlohmann::json tasks = Tasks(farm, id);
  EXPECT_EQ(tasks[0]["attempt"], 2) << "frame 1: failed once, retried once";
  EXPECT_EQ(tasks[1]["attempt"], 3) << "frame 2: failed, retried, re-rendered";
  JobOp(farm, id, "rerender", {{"frames", "x-y"}}, &status);
  EXPECT_EQ(status, 400);

  // Delete: the records go, the frames stay.
  int64_t running =
      farm.Submit("name: busy\nscene: s\nframes: 1-500\n", TinySceneYaml(160, 120, 256), &error);
  ASSERT_GT(running, 0) << error;
  EXPECT_EQ(farm.Delete("/api/v1/jobs/" + std::to_string(running)), 409);
  EXPECT_EQ(farm.Delete("/api/v1/jobs/" + std::to_string(id)), 200);
  farm.Get("/api/v1/jobs/" + std::to_string(id), &status);
  EXPECT_EQ(status, 404);
  EXPECT_TRUE(fs::exists(out + "/r.0001.png"));
}

}  // namespace
}  // namespace tessera::testing
