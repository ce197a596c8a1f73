// Shares of a GPU on a real farm: a real scheduler and a real worker with simulated GPUs
// (worker.simulate_gpus) cut into slots (worker.gpu_sharing: shared). The tasks are `command`
// renders that wait for a file the test creates, so the test decides when they end and sees
// every state in between through the API.

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "shared/images/image_io.h"
#include "tests/support/fake_worker.h"
#include "tests/support/farm.h"
#include "tests/support/process.h"

namespace tessera::testing {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

// A farm whose one worker has `gpus` simulated GPUs of `slots_per_gpu` slots, and a command
// that waits for `gate()` to exist, then leaves a PNG for its frame.
class GpuShareFarm {
 public:
  GpuShareFarm(const std::string& name, int gpus, int slots_per_gpu) : farm_(name) {
    const std::string png = farm_.dir() + "/frame.png";
    image::ImageBuffer image{4, 4, 3, std::vector<float>(4 * 4 * 3, 0.5f), {}};
    EXPECT_TRUE(image::WriteSrgb8(png, image).ok());
    script_ = farm_.dir() + "/wait-then-copy.sh";
    WriteFile(script_, "#!/bin/sh\nwhile [ ! -e '" + gate() + "' ]; do /bin/sleep 0.1; done\n" +
                           "/bin/cp '" + png + "' \"$1/$(printf 'frame_%06d.png' \"$2\")\"\n");
    ::chmod(script_.c_str(), 0755);
    farm_.set_command_programs({script_});
    const std::string config = farm_.dir() + "/worker.yaml";
    WriteFile(config, "worker:\n  simulate_gpus: " + std::to_string(gpus) +
                          "\n  gpu_sharing: shared\n  slots_per_gpu: " +
                          std::to_string(slots_per_gpu) + "\n");
    started_ = farm_.StartScheduler() && farm_.StartWorkerWith("gpus", {"--config", config}) &&
               farm_.WaitForWorkers(1, 30s);
  }

  bool started() const { return started_; }
  LocalFarm& farm() { return farm_; }
  std::string gate() const { return farm_.dir() + "/gate"; }
  void OpenGate() { WriteFile(gate(), "go\n"); }

  int64_t Submit(const std::string& name, const std::string& frames, const std::string& resources) {
    std::string error;
    const int64_t id =
        farm_.Submit("name: " + name + "\nrenderer: command\nframes: " + frames +
                         "\nmax_retries: 0\nresources: " + resources + "\noutput: {pattern: '" +
                         name + ".####', formats: [png]}\nsettings: {program: " + script_ +
                         ", outputs: images, argv: ['{output_dir}', '{frame_start}']}\n",
                     "", &error);
    EXPECT_GT(id, 0) << error;
    return id;
  }

  int Running(int64_t job) {
    int running = 0;
    for (const json& t : Tasks(farm_, job)) running += t["state"] == "running";
    return running;
  }

  // The worker's per-GPU view from GET /api/v1/workers.
  json GpuUse() {
    const json workers = farm_.Get("/api/v1/workers")["workers"];
    return workers.empty() ? json::array() : workers[0]["gpu_use"];
  }

 private:
  LocalFarm farm_;
  std::string script_;
  bool started_ = false;
};

// What must hold in every state a GPU is seen in: no more slots used than it has, what its tasks
// hold adds up to its use, and a GPU held whole holds that one task and nothing else.
void ExpectNotOverCommitted(const json& gpus) {
  for (const json& gpu : gpus) {
    const int slots = gpu["slots"];
    const int used = gpu["slots_used"];
    EXPECT_LE(used, slots) << gpu.dump();
    double held = 0;
    for (const json& t : gpu["tasks"]) held += t["share"].get<double>();
    if (gpu["whole"] == true) {
      EXPECT_EQ(gpu["tasks"].size(), 1u) << "a GPU held whole holds one task: " << gpu.dump();
      EXPECT_EQ(gpu["free_share"], 0.0) << gpu.dump();
    } else {
      EXPECT_NEAR(held * slots, used, 1e-9) << gpu.dump();
      EXPECT_NEAR(gpu["free_share"].get<double>(), 1.0 - held, 1e-9) << gpu.dump();
    }
    EXPECT_LE(held, 1.0 + 1e-9) << gpu.dump();
  }
}

TEST(GpuShareFarmTest, SixteenQuarterSharesRunAtOnceOnFourGpus) {
  GpuShareFarm f("gpu-share-16", /*gpus=*/4, /*slots_per_gpu=*/4);
  ASSERT_TRUE(f.started()) << f.farm().SchedulerLog();
  const json worker = f.farm().Get("/api/v1/workers")["workers"][0];
  EXPECT_EQ(worker["slots_per_gpu"], 4) << worker.dump();
  const int64_t job = f.Submit("quarters", "1-16", "{gpu_share: 0.25}");
  ASSERT_GT(job, 0);
  EXPECT_TRUE(WaitFor([&] { return f.Running(job) == 16; }, 60s, 100ms))
      << "all 16 run together; running: " << f.Running(job) << "\n"
      << f.farm().SchedulerLog();
  const json gpus = f.GpuUse();
  ASSERT_EQ(gpus.size(), 4u) << gpus.dump();
  ExpectNotOverCommitted(gpus);
  for (const json& gpu : gpus) {
    EXPECT_EQ(gpu["tasks"].size(), 4u) << "four quarters on each GPU: " << gpu.dump();
    EXPECT_EQ(gpu["free_share"], 0.0) << gpu.dump();
    EXPECT_EQ(gpu["whole"], false);
  }
  // Each task knows its GPU: the one the API lists it on.
  std::map<int64_t, int> gpu_of;
  for (const json& gpu : gpus) {
    for (const json& t : gpu["tasks"]) gpu_of[t["task_id"].get<int64_t>()] = gpu["index"];
  }
  EXPECT_EQ(gpu_of.size(), 16u);
  // `tessera workers` shows the same per GPU: its slots, free share and tasks with their shares.
  const RunResult cli =
      RunProcess({Bin("tessera"), "workers"}, 60s,
                 {"TESSERA_SERVER=" + f.farm().api_url(), "TESSERA_TOKEN=" + f.farm().token()});
  EXPECT_EQ(cli.exit_code, 0) << cli.err;
  EXPECT_NE(cli.out.find("FREE"), std::string::npos) << cli.out;
  EXPECT_NE(cli.out.find("4/4"), std::string::npos) << cli.out;
  const int64_t some_task = gpu_of.begin()->first;
  EXPECT_NE(cli.out.find(std::to_string(some_task) + " (0.25)"), std::string::npos) << cli.out;
  f.OpenGate();
  EXPECT_EQ(f.farm().WaitForJob(job, 120s)["state"], "done") << f.farm().SchedulerLog();
  for (const json& gpu : f.GpuUse()) {
    EXPECT_TRUE(gpu["tasks"].empty()) << "every share is given back: " << gpu.dump();
    EXPECT_EQ(gpu["slots_used"], 0);
  }
}

TEST(GpuShareFarmTest, SharesAndAWholeTaskNeverOverCommitTwoGpus) {
  GpuShareFarm f("gpu-share-mixed", /*gpus=*/2, /*slots_per_gpu=*/4);
  ASSERT_TRUE(f.started()) << f.farm().SchedulerLog();
  const int64_t shares = f.Submit("shares", "1-5", "{gpu_share: 0.25}");
  ASSERT_GT(shares, 0);
  std::vector<json> seen;
  auto observe = [&] {
    seen.push_back(f.GpuUse());
    return seen.back();
  };
  // Four quarters fill one GPU before the fifth opens the other.
  ASSERT_TRUE(WaitFor([&] { return f.Running(shares) == 5; }, 60s, 100ms))
      << f.farm().SchedulerLog();
  json gpus = observe();
  ASSERT_EQ(gpus.size(), 2u);
  std::multiset<size_t> per_gpu = {gpus[0]["tasks"].size(), gpus[1]["tasks"].size()};
  EXPECT_EQ(per_gpu, (std::multiset<size_t>{4, 1})) << gpus.dump();

  // The whole task has no GPU free of shares: it waits, and `why` says what each GPU has.
  const int64_t whole = f.Submit("whole", "1", "{gpus: 1}");
  ASSERT_GT(whole, 0);
  const json whole_tasks = Tasks(f.farm(), whole);
  ASSERT_EQ(whole_tasks.size(), 1u);
  const int64_t whole_task = whole_tasks[0]["id"];
  std::string why;
  EXPECT_TRUE(WaitFor(
      [&] {
        why = f.farm()
                  .Get("/api/v1/tasks/" + std::to_string(whole_task) + "/why")["reason"]
                  .get<std::string>();
        return why.find("GPU") != std::string::npos;
      },
      10s, 100ms))
      << why;
  EXPECT_NE(why.find("GPUs of gpus: 0 has "), std::string::npos) << why;
  EXPECT_NE(why.find("the task needs a whole GPU"), std::string::npos) << why;
  for (int i = 0; i < 5; ++i) {
    ExpectNotOverCommitted(observe());
    EXPECT_EQ(f.Running(whole), 0) << "never on a GPU that holds shares";
  }

  // Every state from here to the end keeps slots, shares and whole GPUs apart.
  f.OpenGate();
  ASSERT_TRUE(WaitFor(
      [&] {
        const json now = observe();
        ExpectNotOverCommitted(now);
        // Two GPUs of four slots: a GPU held whole takes all four, shares their own. Counted
        // from the broker's GPU view, not from task states: a share whose render has ended
        // frees its slots at once but is still "running" in the store until its frame is
        // written, so a count of states can see it beside the whole task that took its GPU.
        int slots_held = 0;
        for (const json& gpu : now) {
          slots_held += gpu["whole"] == true ? 4 : gpu["slots_used"].get<int>();
        }
        EXPECT_LE(slots_held, 8) << now.dump();
        return f.farm().Get("/api/v1/jobs/" + std::to_string(whole))["job"]["state"] == "done" &&
               f.farm().Get("/api/v1/jobs/" + std::to_string(shares))["job"]["state"] == "done";
      },
      120s, 50ms))
      << f.farm().SchedulerLog();
  EXPECT_GE(seen.size(), 8u);
  for (const json& gpu : f.GpuUse()) EXPECT_TRUE(gpu["tasks"].empty()) << gpu.dump();
}

// Each lease gives back exactly the room it took, keyed by (task, attempt): a cancelled share
// keeps its slots while the worker still renders it, and frees them once it has stopped.
TEST(GpuShareFarmTest, ACancelledShareHoldsItsSlotsUntilItsRenderStops) {
  LocalFarm farm("gpu-share-release");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  FakeWorker node(farm.broker_endpoint(), "node", {"default"}, {}, {{0, "NVIDIA L4", 22563, 8, 9}},
                  /*slots=*/8, {}, /*slots_per_gpu=*/4);
  std::string error;
  const int64_t a = farm.Submit(
      "name: a\nrenderer: noop\nframes: 1-2\nresources: {gpu_share: 0.5}\n", "", &error);
  ASSERT_GT(a, 0) << error;
  auto first = node.NextAssign(5s);
  ASSERT_TRUE(first.has_value());
  node.running = {{first->task_id, first->attempt}};
  auto second = node.NextAssign(5s);
  ASSERT_TRUE(second.has_value());
  node.running.push_back({second->task_id, second->attempt});
  EXPECT_EQ(first->gpus, std::vector<int>{0});
  EXPECT_EQ(second->gpus, std::vector<int>{0}) << "two halves share GPU 0";

  const int64_t b =
      farm.Submit("name: b\nrenderer: noop\nframes: 1\nresources: {gpu_share: 0.5}\n", "", &error);
  ASSERT_GT(b, 0) << error;
  EXPECT_FALSE(node.NextAssign(1s).has_value()) << "GPU 0 is full: a third half waits";
  int status = 0;
  farm.Post("/api/v1/jobs/" + std::to_string(a) + "/cancel", json::object(), &status);
  ASSERT_EQ(status, 200);
  EXPECT_FALSE(node.NextAssign(1s).has_value())
      << "the cancelled halves still render (the heartbeats list them): their slots stay held";
  node.running = {{second->task_id, second->attempt}};  // the first has stopped
  auto third = node.NextAssign(5s);
  ASSERT_TRUE(third.has_value()) << "the first half's slots are free again";
  EXPECT_EQ(third->gpus, std::vector<int>{0});
  const json gpu = farm.Get("/api/v1/workers/node")["worker"]["gpu_use"][0];
  std::set<std::pair<int64_t, int>> held;
  for (const json& t : gpu["tasks"])
    held.insert({t["task_id"].get<int64_t>(), t["attempt"].get<int>()});
  EXPECT_EQ(held, (std::set<std::pair<int64_t, int>>{{second->task_id, second->attempt},
                                                     {third->task_id, third->attempt}}))
      << gpu.dump();
  node.running = {{third->task_id, third->attempt}};
  node.Done(*third);
  EXPECT_EQ(farm.WaitForJob(b, 10s)["state"], "done");
}

}  // namespace
}  // namespace tessera::testing
