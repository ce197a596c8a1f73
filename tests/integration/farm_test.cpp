// Integration tests: a real tessera-scheduler and real tessera-worker processes on loopback,
// a real SQLite file, real image files.

#include "tests/support/farm.h"

#include <OpenImageIO/imageio.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <set>

#include "shared/image_io.h"
#include "tests/support/fake_worker.h"

namespace tessera::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::string JobYaml(const std::string& name, const std::string& frames, int chunk = 1) {
  return "name: " + name + "\nscene: scene.yaml\nframes: " + frames +
         "\nchunk_size: " + std::to_string(chunk) + "\n";
}

nlohmann::json Tasks(LocalFarm& farm, int64_t job) {
  return farm.Get("/api/v1/jobs/" + std::to_string(job) + "/tasks")["tasks"];
}

// Mean and spread of an image's RGB, for "the picture is not empty" checks.
struct PixelStats {
  double mean = 0, min = 1e30, max = -1e30;
  bool finite = true;
};
PixelStats Stats(const image::ImageBuffer& img) {
  PixelStats s;
  size_t n = 0;
  for (size_t i = 0; i < img.pixels.size(); ++i) {
    if (img.channels == 4 && i % 4 == 3) continue;
    float v = img.pixels[i];
    s.finite &= std::isfinite(v);
    s.mean += v;
    s.min = std::min<double>(s.min, v);
    s.max = std::max<double>(s.max, v);
    ++n;
  }
  s.mean /= std::max<size_t>(n, 1);
  return s;
}

TEST(FarmTest, TwoWorkersRenderFourFrameJobIntoExrAndPng) {
  LocalFarm farm("farm");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  ASSERT_TRUE(farm.StartWorker("w1"));
  ASSERT_TRUE(farm.StartWorker("w2"));
  ASSERT_TRUE(farm.WaitForWorkers(2, 20s)) << farm.SchedulerLog();

  std::string error;
  int64_t id = farm.Submit(JobYaml("tiny", "1-4"), TinySceneYaml(64, 48, 4), &error);
  ASSERT_GT(id, 0) << error;
  nlohmann::json job = farm.WaitForJob(id, 90s);
  ASSERT_EQ(job["state"], "done") << job.dump(2) << farm.SchedulerLog();
  EXPECT_EQ(job["tasks"]["done"], 4);
  EXPECT_DOUBLE_EQ(job["progress"].get<double>(), 1.0);

  std::set<std::string> workers_used;
  for (const auto& t : Tasks(farm, id)) {
    EXPECT_EQ(t["state"], "done");
    workers_used.insert(t["worker_name"].get<std::string>());
  }
  EXPECT_EQ(workers_used.size(), 2u) << "both workers should have rendered frames";

  const std::string out = job["output_dir"];
  std::vector<image::ImageBuffer> frames;
  for (int f = 1; f <= 4; ++f) {
    char name[32];
    std::snprintf(name, sizeof(name), "tiny.%04d", f);
    auto exr = image::Read(out + "/" + name + ".exr");
    ASSERT_TRUE(exr.ok()) << exr.status().ToString();
    EXPECT_EQ(exr->width, 64);
    EXPECT_EQ(exr->height, 48);
    PixelStats s = Stats(*exr);
    EXPECT_TRUE(s.finite);
    EXPECT_GT(s.mean, 0.05) << "frame " << f << " is almost black";
    EXPECT_GT(s.max - s.min, 0.1) << "frame " << f << " is flat";
    auto png = image::Read(out + "/" + name + ".png");
    ASSERT_TRUE(png.ok()) << png.status().ToString();
    EXPECT_EQ(png->width, 64);
    EXPECT_EQ(png->height, 48);
    EXPECT_GT(Stats(*png).max - Stats(*png).min, 0.1);
    frames.push_back(std::move(*exr));
  }
  EXPECT_NE(frames[0].pixels, frames[3].pixels) << "the camera is animated; frames must differ";

  nlohmann::json summary = farm.Get("/api/v1/summary");
  EXPECT_EQ(summary["jobs"]["done"], 1);
  EXPECT_EQ(summary["tasks"]["done"], 4);
  EXPECT_EQ(summary["workers"]["total"], 2);
}

TEST(FarmTest, EveryOutputFormatAndFloatOrHalfExr) {
  LocalFarm farm("formats");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  ASSERT_TRUE(farm.StartWorker("w1"));
  std::string error;
  const int64_t full =
      farm.Submit(JobYaml("full", "1") + "output: {formats: [exr, png, jpg, tif], exr: float}\n",
                  TinySceneYaml(32, 24, 2), &error);
  ASSERT_GT(full, 0) << error;
  const int64_t half = farm.Submit(JobYaml("half", "1"), TinySceneYaml(32, 24, 2), &error);
  ASSERT_GT(half, 0) << error;
  const nlohmann::json a = farm.WaitForJob(full, 60s), b = farm.WaitForJob(half, 60s);
  ASSERT_EQ(a["state"], "done") << a.dump(2);
  ASSERT_EQ(b["state"], "done") << b.dump(2);
  EXPECT_EQ(a["output_exr"], "float");
  EXPECT_EQ(b["output_exr"], "half");
  // The EXR's channels are stored as asked; the 8-bit formats are what their names say.
  const auto pixel_type = [](const std::string& path) {
    auto in = OIIO::ImageInput::open(path);
    return in ? in->spec().format : OIIO::TypeDesc(OIIO::TypeDesc::UNKNOWN);
  };
  const std::string out = a["output_dir"];
  EXPECT_EQ(pixel_type(out + "/full.0001.exr"), OIIO::TypeDesc::FLOAT);
  EXPECT_EQ(pixel_type(b["output_dir"].get<std::string>() + "/half.0001.exr"),
            OIIO::TypeDesc::HALF);
  for (const char* ext : {"png", "jpg", "tif"}) {
    EXPECT_EQ(pixel_type(out + "/full.0001." + ext), OIIO::TypeDesc::UINT8) << ext;
    auto image = image::Read(out + "/full.0001." + ext);
    ASSERT_TRUE(image.ok()) << ext << ": " << image.status().ToString();
    EXPECT_EQ(image->width, 32) << ext;
  }
  EXPECT_EQ(farm.Submit(JobYaml("bad", "1") + "output: {exr: double}\n", TinySceneYaml(), &error),
            -1);
  EXPECT_NE(error.find("output.exr"), std::string::npos) << error;
}

TEST(FarmTest, KilledWorkerTaskIsRequeuedAndJobCompletes) {
  LocalFarm farm("kill");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  ASSERT_TRUE(farm.StartWorker("victim"));
  ASSERT_TRUE(farm.WaitForWorkers(1, 20s));

  // One task that takes a few seconds on one core, so it is surely mid-render when killed.
  std::string error;
  int64_t id = farm.Submit(JobYaml("slow", "1-2", 2), TinySceneYaml(160, 120, 96), &error);
  ASSERT_GT(id, 0) << error;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto tasks = Tasks(farm, id);
        return tasks.size() == 1 && tasks[0]["state"] == "running" &&
               tasks[0]["worker_name"] == "victim";
      },
      20s));
  farm.worker("victim").Signal(SIGKILL);
  ASSERT_TRUE(farm.worker("victim").Wait(5s).has_value());

  // The lease comes back to the queue once heartbeats stop (200 ms x 5 here) ...
  ASSERT_TRUE(WaitFor([&] { return Tasks(farm, id)[0]["state"] == "queued"; }, 10s))
      << farm.SchedulerLog();
  nlohmann::json task = Tasks(farm, id)[0];
  EXPECT_EQ(task["failures"], 0) << "a lost worker is not the task's fault";
  EXPECT_NE(task["message"].get<std::string>().find("lost"), std::string::npos);

  // ... and a new worker finishes the job.
  ASSERT_TRUE(farm.StartWorker("rescuer", 2));
  nlohmann::json job = farm.WaitForJob(id, 120s);
  ASSERT_EQ(job["state"], "done") << job.dump(2) << farm.SchedulerLog();
  task = Tasks(farm, id)[0];
  EXPECT_EQ(task["attempt"], 2);
  EXPECT_EQ(task["worker_name"], "rescuer");
  EXPECT_TRUE(fs::exists(job["output_dir"].get<std::string>() + "/slow.0002.exr"));

  nlohmann::json workers;
  EXPECT_TRUE(WaitFor(
      [&] {
        workers = farm.Get("/api/v1/workers")["workers"];
        for (const auto& w : workers) {
          if (w["name"] == "victim") return w["state"] == "offline";
        }
        return false;
      },
      5s))
      << "the killed worker must be shown offline: " << workers.dump(2);
}

TEST(FarmTest, SchedulerKilledMidJobRestartsAndFinishesTheJob) {
  LocalFarm farm("restart");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  std::string error;
  int64_t id = farm.Submit(JobYaml("resume", "1-6"), TinySceneYaml(64, 48, 16), &error);
  ASSERT_GT(id, 0) << error;
  ASSERT_TRUE(farm.StartWorker("w1"));
  ASSERT_TRUE(WaitFor(
      [&] {
        auto job = farm.Get("/api/v1/jobs/" + std::to_string(id));
        return job.is_object() && job["job"]["tasks"]["done"].get<int>() >= 2;
      },
      60s));
  farm.KillScheduler(SIGKILL);
  ASSERT_TRUE(farm.StartScheduler(/*reuse_ports=*/true)) << farm.SchedulerLog();

  // The worker reconnects by itself; nothing acknowledged before the crash is lost.
  nlohmann::json job = farm.WaitForJob(id, 120s);
  ASSERT_EQ(job["state"], "done") << job.dump(2) << farm.SchedulerLog();
  EXPECT_EQ(job["tasks"]["done"], 6);
  for (int f = 1; f <= 6; ++f) {
    char name[32];
    std::snprintf(name, sizeof(name), "/resume.%04d.png", f);
    EXPECT_TRUE(fs::exists(job["output_dir"].get<std::string>() + name)) << name;
  }
}

TEST(FarmTest, CancelStopsRunningTasksAndFreesTheWorker) {
  LocalFarm farm("cancel");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  ASSERT_TRUE(farm.StartWorker("w1"));
  ASSERT_TRUE(farm.WaitForWorkers(1, 20s));
  std::string error;
  int64_t long_job = farm.Submit(JobYaml("long", "1-500"), TinySceneYaml(160, 120, 256), &error);
  ASSERT_GT(long_job, 0) << error;
  ASSERT_TRUE(WaitFor([&] { return Tasks(farm, long_job)[0]["state"] == "running"; }, 20s));

  int status = 0;
  nlohmann::json res = farm.Post("/api/v1/jobs/" + std::to_string(long_job) + "/cancel",
                                 nlohmann::json::object(), &status);
  ASSERT_EQ(status, 200) << res.dump();
  EXPECT_EQ(res["job"]["state"], "canceled");
  EXPECT_EQ(res["job"]["tasks"]["canceled"], 500);

  // The worker drops the canceled render and takes the next job promptly.
  int64_t next = farm.Submit(JobYaml("next", "1"), TinySceneYaml(32, 24, 2), &error);
  ASSERT_GT(next, 0) << error;
  EXPECT_EQ(farm.WaitForJob(next, 30s)["state"], "done") << farm.SchedulerLog();
  // The canceled render held its slot until the worker's heartbeat showed it stopped, so the
  // new task was never bounced off a busy worker (which would have cost it a retry).
  EXPECT_EQ(Tasks(farm, next)[0]["attempt"], 1);
  EXPECT_EQ(Tasks(farm, next)[0]["failures"], 0);

  farm.Post("/api/v1/jobs/" + std::to_string(long_job) + "/cancel", nlohmann::json::object(),
            &status);
  EXPECT_EQ(status, 409) << "canceling twice is a conflict, not a success";
}

TEST(FarmTest, BadSubmissionsAreRejectedAndStoreNothing) {
  LocalFarm farm("bad");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  std::string scene = TinySceneYaml();
  struct Case {
    std::string job, scene, field;
  } cases[] = {
      {JobYaml("x", "5-1"), scene, "frames"},
      {JobYaml("x", "1-200000"), scene, "frames"},
      {JobYaml("x", "1-2") + "colour: red\n", scene, "colour"},
      {"name: x\nscene: s.yaml\n", scene, "frames"},
      {"name: x\nscene: s.yaml\nframes: 1-2\nchunk_size: abc\n", scene, "chunk_size"},
      {JobYaml("x", "1-2") + "chunk_size: 2\n", scene, "chunk_size"},  // duplicate key
      {JobYaml("x", "1-2") + "output:\n  directory: ../../etc\n", scene, "output.directory"},
      {JobYaml("x", "1-2") + "output:\n  directory: /etc\n", scene, "output.directory"},
      {JobYaml("x", "1-2"), TinySceneYaml(0, 48, 4), "width"},
      {JobYaml("x", "1-2"), TinySceneYaml(64, 48, -1), "samples"},
      {JobYaml("x", "1-2"), "width: [", "scene"},
  };
  for (const Case& c : cases) {
    std::string error;
    EXPECT_EQ(farm.Submit(c.job, c.scene, &error), -1) << c.job;
    EXPECT_NE(error.find(c.field), std::string::npos)
        << "error '" << error << "' should name " << c.field;
  }
  int status = 0;
  farm.Post("/api/v1/jobs", "not an object", &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(farm.Get("/api/v1/jobs")["jobs"].size(), 0u) << "nothing may be stored";
  farm.Get("/api/v1/jobs/12345", &status);
  EXPECT_EQ(status, 404);
  farm.Get("/api/v1/jobs/abc", &status);
  EXPECT_EQ(status, 400);
}

}  // namespace
}  // namespace tessera::testing

namespace tessera::testing {
namespace {

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

namespace tessera::testing {
namespace {

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
