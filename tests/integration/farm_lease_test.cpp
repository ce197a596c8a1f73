// Integration tests of task leases and crash safety (the binary's other parts: farm_test.cpp,
// farm_ops_test.cpp): assignments a worker does not hold, task timeouts, stalled progress,
// blocklisting, acknowledgements, stale attempts, and a scheduler killed during a 10,000-task
// job -- a real tessera-scheduler with real or scripted workers on loopback.

#include <gtest/gtest.h>

#include <filesystem>

#include "tests/support/fake_worker.h"
#include "tests/support/farm.h"

namespace tessera::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using protocol::MessageType;

TEST(LeaseTest, AssignmentTheWorkerDoesNotHoldIsRequeuedUncharged) {
  LocalFarm farm("lost");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  FakeWorker fake(farm.broker_endpoint(), "forgetful");
  ASSERT_TRUE(fake.WaitFor(MessageType::kWelcome, 5s));
  std::string error;
  int64_t id = farm.Submit("name: lost\nscene: s\nframes: 1\n", TinySceneYaml(), &error);
  ASSERT_GT(id, 0) << error;
  auto first = fake.WaitFor(MessageType::kAssign, 5s);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->As<protocol::Assign>()->attempt, 1);
  // Its heartbeats never mention the task: the lease is void after two heartbeats' grace and
  // the task comes back, as a new attempt, without costing it a retry.
  auto second = fake.WaitFor(MessageType::kAssign, 5s);
  ASSERT_TRUE(second.has_value()) << farm.SchedulerLog();
  EXPECT_EQ(second->As<protocol::Assign>()->attempt, 2);
  nlohmann::json task = Tasks(farm, id)[0];
  EXPECT_EQ(task["failures"], 0);
}

TEST(LeaseTest, TaskThatRunsPastItsTimeoutIsStoppedAndCharged) {
  LocalFarm farm("timeout");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  FakeWorker fake(farm.broker_endpoint(), "hung");
  ASSERT_TRUE(fake.WaitFor(MessageType::kWelcome, 5s));
  std::string error;
  int64_t id = farm.Submit("name: hang\nscene: s\nframes: 1\ntask_timeout: 1\nmax_retries: 0\n",
                           TinySceneYaml(), &error);
  ASSERT_GT(id, 0) << error;
  auto assign = fake.WaitFor(MessageType::kAssign, 5s);
  ASSERT_TRUE(assign.has_value());
  auto a = assign->As<protocol::Assign>();
  fake.running = {{a->task_id, a->attempt}};  // "still rendering", forever
  auto cancel = fake.WaitFor(MessageType::kCancel, 5s);
  ASSERT_TRUE(cancel.has_value()) << "the timed-out render must be told to stop";
  EXPECT_EQ(cancel->As<protocol::Cancel>()->attempt, a->attempt);
  nlohmann::json job = farm.WaitForJob(id, 10s);
  EXPECT_EQ(job["state"], "failed");
  EXPECT_NE(job["error"].get<std::string>().find("timed out"), std::string::npos) << job.dump();
}

TEST(LeaseTest, TaskThatStopsReportingProgressFails) {
  LocalFarm farm("stalled");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  FakeWorker fake(farm.broker_endpoint(), "stalled");
  ASSERT_TRUE(fake.WaitFor(MessageType::kWelcome, 5s));
  std::string error;
  int64_t id =
      farm.Submit("name: stall\nscene: s\nframes: 1\nprogress_timeout: 1\nmax_retries: 0\n",
                  TinySceneYaml(), &error);
  ASSERT_GT(id, 0) << error;
  auto assign = fake.WaitFor(MessageType::kAssign, 5s);
  ASSERT_TRUE(assign.has_value());
  auto a = assign->As<protocol::Assign>();
  fake.running = {{a->task_id, a->attempt}};
  // Progress keeps it alive for a while; then it goes quiet (still heartbeating).
  for (int i = 0; i < 3; ++i) {
    fake.Send(MessageType::kProgress, protocol::Progress{a->task_id, a->attempt, 0.1 * i, ""});
    fake.WaitFor(MessageType::kCancel, 600ms);
  }
  EXPECT_EQ(Tasks(farm, id)[0]["state"], "running") << "progress every 0.6 s is enough";
  ASSERT_TRUE(fake.WaitFor(MessageType::kCancel, 5s).has_value());
  nlohmann::json job = farm.WaitForJob(id, 10s);
  EXPECT_EQ(job["state"], "failed");
  EXPECT_NE(job["error"].get<std::string>().find("no progress"), std::string::npos) << job.dump();
}

TEST(LeaseTest, WorkerThatKeepsFailingAJobIsBlocklistedForIt) {
  LocalFarm farm("blocklist");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  FakeWorker bad(farm.broker_endpoint(), "bad");
  ASSERT_TRUE(bad.WaitFor(MessageType::kWelcome, 5s));
  std::string error;
  int64_t id = farm.Submit("name: bl\nscene: s\nframes: 1\nmax_retries: 10\nblocklist_after: 2\n",
                           TinySceneYaml(), &error);
  ASSERT_GT(id, 0) << error;
  for (int i = 0; i < 2; ++i) {
    auto assign = bad.WaitFor(MessageType::kAssign, 5s);
    ASSERT_TRUE(assign.has_value()) << "failure " << i;
    auto a = assign->As<protocol::Assign>();
    bad.Send(MessageType::kTaskFailed,
             protocol::TaskFailed{a->task_id, a->attempt, "GPU fell off"});
  }
  EXPECT_FALSE(bad.WaitFor(MessageType::kAssign, 1500ms).has_value())
      << "a blocklisted worker gets no more of the job's tasks";
  EXPECT_EQ(Tasks(farm, id)[0]["state"], "queued");
  int64_t task = Tasks(farm, id)[0]["id"];
  std::string reason =
      farm.Get("/api/v1/tasks/" + std::to_string(task) + "/why")["reason"].get<std::string>();
  EXPECT_NE(reason.find("blocklisted"), std::string::npos) << reason;

  ASSERT_TRUE(farm.StartWorker("good"));
  nlohmann::json job = farm.WaitForJob(id, 60s);
  EXPECT_EQ(job["state"], "done") << farm.SchedulerLog();
  EXPECT_EQ(Tasks(farm, id)[0]["failures"], 2);
  EXPECT_EQ(Tasks(farm, id)[0]["worker_name"], "good");
}

// A worker that reads acknowledgements inside assignments gets them there: one message per task
// instead of two. At the end of the job, and for workers that do not, they come alone.
TEST(LeaseTest, AcknowledgementsRideOnTheNextAssignmentForWorkersThatReadThem) {
  LocalFarm farm("acks");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  FakeWorker modern(farm.broker_endpoint(), "modern", {"default"}, {}, {}, 1,
                    {protocol::kFeatureAcksInAssign});
  ASSERT_TRUE(modern.WaitFor(MessageType::kWelcome, 5s));
  std::string error;
  int64_t id = farm.Submit("name: acks\nrenderer: noop\nframes: 1-3\n", "", &error);
  ASSERT_GT(id, 0) << error;
  std::optional<protocol::Assign> a = modern.NextAssign(5s);
  ASSERT_TRUE(a.has_value());
  EXPECT_TRUE(a->acks.empty());
  for (int i = 0; i < 2; ++i) {
    modern.running = {{a->task_id, a->attempt}};
    modern.Done(*a);
    std::optional<protocol::Envelope> next = modern.Next(5s);
    ASSERT_TRUE(next.has_value());
    ASSERT_EQ(next->type, MessageType::kAssign)
        << "no separate RESULT_ACK before the next task, got " << MessageTypeName(next->type);
    protocol::Assign following = *next->As<protocol::Assign>();
    EXPECT_EQ(following.acks, (std::vector<protocol::TaskRef>{{a->task_id, a->attempt}}));
    a = following;
  }
  modern.running = {{a->task_id, a->attempt}};
  modern.Done(*a);
  std::optional<protocol::Envelope> last = modern.Next(5s);
  ASSERT_TRUE(last.has_value());
  ASSERT_EQ(last->type, MessageType::kResultAck) << "no next task: the acknowledgement goes alone";
  EXPECT_EQ(last->As<protocol::ResultAck>()->task_id, a->task_id);
  modern.running.clear();
  EXPECT_EQ(farm.WaitForJob(id, 10s)["tasks"]["done"], 3);

  // A worker that does not say it reads them gets RESULT_ACK messages, as always.
  FakeWorker classic(farm.broker_endpoint(), "classic", {"old"});
  ASSERT_TRUE(classic.WaitFor(MessageType::kWelcome, 5s));
  id = farm.Submit("name: classic\nrenderer: noop\nframes: 1-2\npools: [old]\n", "", &error);
  ASSERT_GT(id, 0) << error;
  for (int i = 0; i < 2; ++i) {
    a = classic.NextAssign(5s);
    ASSERT_TRUE(a.has_value());
    EXPECT_TRUE(a->acks.empty());
    classic.running = {{a->task_id, a->attempt}};
    classic.Done(*a);
    std::optional<protocol::Envelope> ack = classic.WaitFor(MessageType::kResultAck, 5s);
    ASSERT_TRUE(ack.has_value());
    EXPECT_EQ(ack->As<protocol::ResultAck>()->task_id, a->task_id);
    classic.running.clear();
  }
  EXPECT_EQ(farm.WaitForJob(id, 10s)["tasks"]["done"], 2);
}

TEST(LeaseTest, StaleMessagesFromAnOldAttemptAreIgnored) {
  LocalFarm farm("stale");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  FakeWorker fake(farm.broker_endpoint(), "slowpoke");
  ASSERT_TRUE(fake.WaitFor(MessageType::kWelcome, 5s));
  std::string error;
  int64_t id = farm.Submit("name: st\nscene: s\nframes: 1\n", TinySceneYaml(), &error);
  ASSERT_GT(id, 0) << error;
  auto first = fake.WaitFor(MessageType::kAssign, 5s);
  ASSERT_TRUE(first.has_value());
  auto a1 = *first->As<protocol::Assign>();
  // Attempt 1 is lost (never listed), attempt 2 arrives; a late DONE for attempt 1 changes
  // nothing.
  auto second = fake.WaitFor(MessageType::kAssign, 5s);
  ASSERT_TRUE(second.has_value());
  auto a2 = *second->As<protocol::Assign>();
  fake.running = {{a2.task_id, a2.attempt}};
  fake.Send(MessageType::kTaskDone, protocol::TaskDone{a1.task_id, a1.attempt});
  fake.Send(MessageType::kTaskFailed, protocol::TaskFailed{a1.task_id, a1.attempt, "late"});
  fake.WaitFor(MessageType::kAssign, 500ms);  // keeps heartbeating meanwhile
  nlohmann::json task = Tasks(farm, id)[0];
  EXPECT_EQ(task["state"], "running");
  EXPECT_EQ(task["attempt"], a2.attempt);
  EXPECT_EQ(task["failures"], 0);
  EXPECT_NE(farm.SchedulerLog().find("not a current lease"), std::string::npos);
}

}  // namespace
}  // namespace tessera::testing

namespace tessera::testing {
namespace {

using namespace std::chrono_literals;

// kill -9 of the scheduler in the middle of a 10,000-task job: after a restart every task ends
// exactly once, the job's counters agree with its tasks, and every frame is on disk.
TEST(CrashTest, SchedulerKilledDuringTenThousandTaskJobLosesNothing) {
  LocalFarm farm("crash");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  const int kTasks = 10000;
  std::string error;
  int64_t id = farm.Submit(
      "name: many\nscene: s\nframes: 1-" + std::to_string(kTasks) + "\noutput:\n  formats: [png]\n",
      TinySceneYaml(1, 1, 1), &error);
  ASSERT_GT(id, 0) << error;
  ASSERT_TRUE(farm.StartWorker("w1"));
  ASSERT_TRUE(farm.StartWorker("w2"));
  auto done_count = [&] {
    auto job = farm.Get("/api/v1/jobs/" + std::to_string(id));
    return job.is_object() ? job["job"]["tasks"]["done"].get<int>() : -1;
  };
  ASSERT_TRUE(WaitFor([&] { return done_count() >= kTasks / 5; }, 120s)) << farm.SchedulerLog();
  farm.KillScheduler(SIGKILL);
  ASSERT_TRUE(farm.StartScheduler(/*reuse_ports=*/true)) << farm.SchedulerLog();

  nlohmann::json job = farm.WaitForJob(id, 240s);
  ASSERT_EQ(job["state"], "done") << job.dump(2);
  EXPECT_EQ(job["tasks"]["done"], kTasks);
  EXPECT_EQ(job["tasks"]["queued"], 0);
  EXPECT_EQ(job["tasks"]["running"], 0);
  nlohmann::json tasks = Tasks(farm, id);
  ASSERT_EQ(tasks.size(), static_cast<size_t>(kTasks));
  int done = 0;
  for (const auto& t : tasks) done += t["state"] == "done";
  EXPECT_EQ(done, kTasks) << "counters and rows agree";
  const std::string out = job["output_dir"];
  size_t files = 0;
  // Only finished frames are visible: a write the crash interrupted left at most a hidden
  // temporary file, never a partial frame under a frame's name.
  for (const auto& e : fs::directory_iterator(out)) {
    if (e.path().filename().string()[0] == '.') continue;
    EXPECT_EQ(e.path().extension(), ".png") << e.path();
    ++files;
  }
  EXPECT_EQ(files, static_cast<size_t>(kTasks));
}

}  // namespace
}  // namespace tessera::testing
