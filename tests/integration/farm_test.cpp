// Integration tests: a real tessera-scheduler and real tessera-worker processes on loopback,
// a real SQLite file, real image files. The binary's parts:
//  - farm_test.cpp: rendering jobs end to end (formats, images), workers and the scheduler
//    killed mid-job, cancel, rejected submissions;
//  - farm_ops_test.cpp: running a farm: priority, pause, dependencies, limits, pools and tags,
//    hardware requirements, retry, re-render and delete;
//  - farm_lease_test.cpp: task leases (timeouts, stalls, blocklists, acknowledgements, stale
//    attempts) and a scheduler killed during a 10,000-task job.

#include "tests/support/farm.h"

#include <OpenImageIO/imageio.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <set>

#include "shared/images/image_io.h"

namespace tessera::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::string JobYaml(const std::string& name, const std::string& frames, int chunk = 1) {
  return "name: " + name + "\nscene: scene.yaml\nframes: " + frames +
         "\nchunk_size: " + std::to_string(chunk) + "\n";
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
