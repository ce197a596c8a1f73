// Scheduling policy on a real farm: a real tessera-scheduler on loopback with scripted workers
// (tests/support/fake_worker.h) speaking the real protocol, and real workers where a test says
// so. Noop jobs keep the tests about scheduling, not rendering.

#include <gtest/gtest.h>

#include <set>

#include "tests/support/fake_worker.h"
#include "tests/support/farm.h"

namespace tessera::testing {
namespace {

using namespace std::chrono_literals;
using protocol::MessageType;

std::string Why(LocalFarm& farm, int64_t task) {
  return farm.Get("/api/v1/tasks/" + std::to_string(task) + "/why")["reason"].get<std::string>();
}

int64_t SubmitNoop(LocalFarm& farm, const std::string& yaml) {
  std::string error;
  int64_t id = farm.Submit("renderer: noop\n" + yaml, "", &error);
  EXPECT_GT(id, 0) << error;
  return id;
}

TEST(PolicyFarmTest, NoopJobRunsOnARealWorker) {
  LocalFarm farm("noop");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  ASSERT_TRUE(farm.StartWorker("w1"));
  int64_t id = SubmitNoop(farm, "name: check\nframes: 1-5\n");
  nlohmann::json job = farm.WaitForJob(id, 30s);
  EXPECT_EQ(job["state"], "done") << farm.SchedulerLog();
  EXPECT_EQ(job["renderer"], "noop");
  EXPECT_EQ(job["tasks"]["done"], 5);
}

TEST(PolicyFarmTest, FramesWaitForTheSameFramesOfTheJobTheyDependOn) {
  LocalFarm farm("frame-deps");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  int64_t render = SubmitNoop(farm, "name: render\nframes: 1-2\n");
  // comp has the higher priority, but its frame N waits for render's frame N.
  int64_t comp = SubmitNoop(farm, "name: comp\nframes: 1-2\npriority: 90\nframe_depends_on: [" +
                                      std::to_string(render) + "]\n");
  int64_t comp_task_1 = Tasks(farm, comp)[0]["id"];
  EXPECT_NE(Why(farm, comp_task_1).find("waiting for frame 1 of job " + std::to_string(render)),
            std::string::npos)
      << Why(farm, comp_task_1);

  FakeWorker w(farm.broker_endpoint(), "w");
  std::vector<std::pair<int64_t, int>> order;  // (job, frame) in dispatch order
  for (int i = 0; i < 4; ++i) {
    auto a = w.NextAssign(5s);
    ASSERT_TRUE(a.has_value()) << "assignment " << i << "\n" << farm.SchedulerLog();
    order.emplace_back(a->job_id, a->frame_start);
    w.Done(*a);
  }
  const std::vector<std::pair<int64_t, int>> expected = {
      {render, 1}, {comp, 1}, {render, 2}, {comp, 2}};
  EXPECT_EQ(order, expected) << "comp frame 1 runs as soon as render frame 1 is done, before "
                                "render frame 2; comp frame 2 waits for render frame 2";
  EXPECT_EQ(farm.WaitForJob(comp, 10s)["state"], "done");
  EXPECT_EQ(farm.Get("/api/v1/jobs/" + std::to_string(comp))["job"]["frame_depends_on"][0], render);
}

TEST(PolicyFarmTest, TaskFailsAfterFailingOnEnoughDifferentWorkers) {
  LocalFarm farm("fail-after-workers");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  int64_t id = SubmitNoop(farm, "name: f\nframes: 1\nmax_retries: 10\nfail_after_workers: 2\n");
  for (const char* name : {"a", "b"}) {
    FakeWorker w(farm.broker_endpoint(), name);
    auto a = w.NextAssign(5s);
    ASSERT_TRUE(a.has_value()) << name;
    w.Send(MessageType::kTaskFailed, protocol::TaskFailed{a->task_id, a->attempt, "segfault"});
    w.WaitFor(MessageType::kAssign, 300ms);  // let the failure land before leaving
    w.Send(MessageType::kGoodbye, nlohmann::json::object());
  }
  nlohmann::json job = farm.WaitForJob(id, 10s);
  EXPECT_EQ(job["state"], "failed");
  nlohmann::json task = Tasks(farm, id)[0];
  EXPECT_EQ(task["failures"], 2) << "10 retries were allowed, 2 workers were enough";
  EXPECT_NE(task["message"].get<std::string>().find("failed on 2 different workers"),
            std::string::npos)
      << task.dump();
}

TEST(PolicyFarmTest, BlocklistSurvivesASchedulerRestart) {
  LocalFarm farm("blocklist-restart");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  int64_t id = SubmitNoop(farm, "name: b\nframes: 1\nmax_retries: 10\nblocklist_after: 1\n");
  {
    FakeWorker bad(farm.broker_endpoint(), "bad");
    auto a = bad.NextAssign(5s);
    ASSERT_TRUE(a.has_value());
    bad.Send(MessageType::kTaskFailed, protocol::TaskFailed{a->task_id, a->attempt, "no VRAM"});
    EXPECT_FALSE(bad.NextAssign(1s).has_value());
  }
  farm.KillScheduler();
  ASSERT_TRUE(farm.StartScheduler(/*reuse_ports=*/true)) << farm.SchedulerLog();
  FakeWorker bad(farm.broker_endpoint(), "bad");
  EXPECT_FALSE(bad.NextAssign(1500ms).has_value()) << "still blocklisted after the restart";
  int64_t task = Tasks(farm, id)[0]["id"];
  EXPECT_NE(Why(farm, task).find("no connected worker can run this job"), std::string::npos)
      << Why(farm, task);
  nlohmann::json job = farm.Get("/api/v1/jobs/" + std::to_string(id))["job"];
  EXPECT_NE(job["notice"].dump().find("blocklisted"), std::string::npos) << job.dump();

  FakeWorker good(farm.broker_endpoint(), "good");
  auto a = good.NextAssign(5s);
  ASSERT_TRUE(a.has_value());
  good.Done(*a);
  EXPECT_EQ(farm.WaitForJob(id, 10s)["state"], "done");
  EXPECT_TRUE(farm.Get("/api/v1/jobs/" + std::to_string(id))["job"]["notice"].is_null())
      << "the notice clears once a worker can run the job";
}

TEST(PolicyFarmTest, MultiGpuWorkerRunsOneTaskPerGpu) {
  LocalFarm farm("gpu-pinning");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  FakeWorker node(farm.broker_endpoint(), "node", {"default"}, {},
                  {{0, "NVIDIA H200", 143771, 9, 0}, {1, "NVIDIA H200", 143771, 9, 0}},
                  /*slots=*/4);
  int64_t id = SubmitNoop(farm, "name: g\nframes: 1-3\n");
  auto first = node.NextAssign(5s);
  ASSERT_TRUE(first.has_value());
  node.running = {{first->task_id, first->attempt}};  // its heartbeats list what it holds
  auto second = node.NextAssign(5s);
  ASSERT_TRUE(second.has_value());
  std::set<int> gpus = {first->gpus.at(0), second->gpus.at(0)};
  EXPECT_EQ(gpus, (std::set<int>{0, 1})) << "each running task has its own GPU";
  node.running = {{first->task_id, first->attempt}, {second->task_id, second->attempt}};
  EXPECT_FALSE(node.NextAssign(1s).has_value())
      << "four slots, but only two GPUs: the third task waits";
  node.Done(*first);
  node.running = {{second->task_id, second->attempt}};
  auto third = node.NextAssign(5s);
  ASSERT_TRUE(third.has_value());
  EXPECT_EQ(third->gpus, first->gpus) << "the freed GPU is reused";
  node.Done(*second);
  node.Done(*third);
  EXPECT_EQ(farm.WaitForJob(id, 10s)["state"], "done");
}

TEST(PolicyFarmTest, TasksRunningAtOnceShareTheWorkersCores) {
  LocalFarm farm("cpu-room");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  FakeWorker node(farm.broker_endpoint(), "node", {"default"}, {}, {}, /*slots=*/8);
  node.registration().cpu_cores = 8;
  node.registration().ram_mb = 32000;
  node.Register();
  ASSERT_TRUE(farm.WaitForWorkers(1, 10s));
  const int64_t heavy = SubmitNoop(farm, "name: heavy\nframes: 1-3\nresources: {cpu_cores: 4}\n");
  auto first = node.NextAssign(5s);
  ASSERT_TRUE(first.has_value()) << farm.SchedulerLog();
  EXPECT_EQ(first->cpu_cores, 4) << "the render is told its cores";
  node.running = {{first->task_id, first->attempt}};
  auto second = node.NextAssign(5s);
  ASSERT_TRUE(second.has_value());
  node.running.push_back({second->task_id, second->attempt});
  EXPECT_FALSE(node.NextAssign(1s).has_value())
      << "eight slots, but two tasks of 4 cores fill its 8 cores: the third waits";
  int64_t waiting = 0;
  for (const nlohmann::json& t : Tasks(farm, heavy)) {
    if (t["state"] == "queued") waiting = t["id"];
  }
  ASSERT_GT(waiting, 0);
  EXPECT_NE(Why(farm, waiting).find("node has 0 of 8 CPU cores free, the task needs 4"),
            std::string::npos)
      << Why(farm, waiting);
  // A task declaring no cores takes only a slot: it runs beside them.
  const int64_t light = SubmitNoop(farm, "name: light\nframes: 1\n");
  auto beside = node.NextAssign(5s);
  ASSERT_TRUE(beside.has_value());
  EXPECT_EQ(beside->job_id, light);
  node.running.push_back({beside->task_id, beside->attempt});
  // Finishing a 4-core task frees its cores for the third.
  node.Done(*first);
  node.running.erase(node.running.begin());
  auto third = node.NextAssign(5s);
  ASSERT_TRUE(third.has_value());
  EXPECT_EQ(third->task_id, waiting);
  node.Done(*second);
  node.Done(*beside);
  node.Done(*third);
  EXPECT_EQ(farm.WaitForJob(heavy, 10s)["state"], "done");
  EXPECT_EQ(farm.WaitForJob(light, 10s)["state"], "done");
}

TEST(PolicyFarmTest, ProjectCapLimitsItsRunningTasks) {
  // Slow heartbeats: a fake worker's beat sent just before it reads a fresh assignment must not
  // make the lease look lost while the test polls the other worker.
  LocalFarm farm("project-cap", /*heartbeat_ms=*/1000);
  farm.AppendSchedulerConfig("projects:\n  small: {weight: 1, max_running: 1}\n");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  FakeWorker a(farm.broker_endpoint(), "a");
  FakeWorker b(farm.broker_endpoint(), "b");
  ASSERT_TRUE(a.WaitFor(MessageType::kWelcome, 5s) && b.WaitFor(MessageType::kWelcome, 5s));
  // Polls both workers in turn (each heartbeats while polled) until one is assigned a task.
  auto next_of_either = [&](std::chrono::milliseconds timeout, FakeWorker** who) {
    for (auto deadline = std::chrono::steady_clock::now() + timeout;
         std::chrono::steady_clock::now() < deadline;) {
      for (FakeWorker* w : {&a, &b}) {
        if (auto assign = w->NextAssign(100ms)) {
          w->running = {{assign->task_id, assign->attempt}};
          *who = w;
          return assign;
        }
      }
    }
    return std::optional<protocol::Assign>();
  };
  int64_t id = SubmitNoop(farm, "name: p\nframes: 1-2\nproject: small\nuser: ana\n");
  FakeWorker* first_worker = nullptr;
  auto first = next_of_either(3s, &first_worker);
  ASSERT_TRUE(first.has_value());
  FakeWorker* other = nullptr;
  EXPECT_FALSE(next_of_either(1s, &other).has_value())
      << "a second worker is free, but project small may run only one task";
  nlohmann::json tasks = Tasks(farm, id);
  int64_t waiting = tasks[0]["state"] == "queued" ? tasks[0]["id"] : tasks[1]["id"];
  EXPECT_NE(Why(farm, waiting).find("project small is at its cap of 1"), std::string::npos)
      << Why(farm, waiting);
  nlohmann::json job = farm.Get("/api/v1/jobs/" + std::to_string(id))["job"];
  EXPECT_EQ(job["project"], "small");
  EXPECT_EQ(job["user"], "ana");

  first_worker->Done(*first);
  first_worker->running.clear();
  FakeWorker* second_worker = nullptr;
  auto second = next_of_either(3s, &second_worker);
  ASSERT_TRUE(second.has_value()) << "the second task runs once the first is done";
  second_worker->Done(*second);
  EXPECT_EQ(farm.WaitForJob(id, 10s)["state"], "done");
}

TEST(PolicyFarmTest, StragglerGetsABackupCopyAndTheFirstResultWins) {
  LocalFarm farm("backups");
  farm.AppendSchedulerConfig("  backup_factor: 1.5\n  backup_min_seconds: 0.5\n");  // broker:
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  FakeWorker slow(farm.broker_endpoint(), "slow");
  ASSERT_TRUE(slow.WaitFor(MessageType::kWelcome, 5s));
  int64_t id = SubmitNoop(farm, "name: s\nframes: 1-2\n");
  auto original = slow.NextAssign(5s);
  ASSERT_TRUE(original.has_value());
  slow.running = {{original->task_id, original->attempt}};  // it holds the task and stalls

  FakeWorker fast(farm.broker_endpoint(), "fast");
  auto other = fast.NextAssign(5s);
  ASSERT_TRUE(other.has_value());
  EXPECT_NE(other->task_id, original->task_id);
  fast.Done(*other);  // the job's mean task time is now a few milliseconds

  // Nothing is queued any more and the slow task runs far past the mean: a backup copy of it,
  // as the next attempt, goes to the idle fast worker.
  auto backup = fast.NextAssign(5s);
  ASSERT_TRUE(backup.has_value()) << farm.SchedulerLog();
  EXPECT_EQ(backup->task_id, original->task_id);
  EXPECT_EQ(backup->attempt, original->attempt + 1);
  EXPECT_NE(Why(farm, backup->task_id).find("as a backup copy on worker fast"), std::string::npos)
      << Why(farm, backup->task_id);
  fast.Done(*backup);

  auto cancel = slow.WaitFor(MessageType::kCancel, 5s);
  ASSERT_TRUE(cancel.has_value()) << "the losing copy is told to stop";
  EXPECT_EQ(cancel->As<protocol::Cancel>()->attempt, original->attempt);
  nlohmann::json job = farm.WaitForJob(id, 10s);
  EXPECT_EQ(job["state"], "done");
  EXPECT_EQ(job["tasks"]["done"], 2);
  nlohmann::json tasks = Tasks(farm, id);
  nlohmann::json straggler = tasks[0]["id"] == original->task_id ? tasks[0] : tasks[1];
  EXPECT_EQ(straggler["worker_name"], "fast");
  EXPECT_EQ(straggler["failures"], 0) << "losing a race is not a failure";
  // A late result from the losing copy changes nothing.
  slow.Done(*original);
  slow.running.clear();
  slow.WaitFor(MessageType::kAssign, 300ms);
  EXPECT_EQ(farm.Get("/api/v1/jobs/" + std::to_string(id))["job"]["tasks"]["done"], 2);
}

TEST(PolicyFarmTest, WorkerReattachesItsTaskAfterASchedulerRestart) {
  // Slow heartbeats: interrupted tasks wait 5 s for their worker before anyone else gets them.
  LocalFarm farm("reattach", /*heartbeat_ms=*/1000);
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  FakeWorker w(farm.broker_endpoint(), "w");
  int64_t id = SubmitNoop(farm, "name: r\nframes: 1\n");
  auto a = w.NextAssign(5s);
  ASSERT_TRUE(a.has_value());
  w.running = {{a->task_id, a->attempt}};

  farm.KillScheduler();
  ASSERT_TRUE(farm.StartScheduler(/*reuse_ports=*/true)) << farm.SchedulerLog();
  FakeWorker other(farm.broker_endpoint(), "other");
  EXPECT_FALSE(other.NextAssign(500ms).has_value())
      << "the interrupted task waits for its own worker to come back";
  w.Register();  // what a real worker does on its next contact with the restarted scheduler
  ASSERT_TRUE(w.WaitFor(MessageType::kWelcome, 5s));
  nlohmann::json task = Tasks(farm, id)[0];
  EXPECT_EQ(task["state"], "running");
  EXPECT_EQ(task["attempt"], a->attempt) << "it carries on under the same lease";
  EXPECT_EQ(task["worker_name"], "w");
  w.Done(*a);
  nlohmann::json job = farm.WaitForJob(id, 10s);
  EXPECT_EQ(job["state"], "done");
  EXPECT_EQ(Tasks(farm, id)[0]["attempt"], a->attempt);
  EXPECT_FALSE(other.NextAssign(200ms).has_value());

  // A worker reporting a task that is no longer its lease is told to stop it.
  FakeWorker stale(farm.broker_endpoint(), "stale");
  stale.running = {{a->task_id, a->attempt}};
  stale.Register();
  auto cancel = stale.WaitFor(MessageType::kCancel, 5s);
  ASSERT_TRUE(cancel.has_value());
  EXPECT_EQ(cancel->As<protocol::Cancel>()->task_id, a->task_id);
}

}  // namespace
}  // namespace tessera::testing
