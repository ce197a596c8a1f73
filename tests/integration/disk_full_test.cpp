// A full disk is an operational event, not the task's failure: real daemons, with the outputs
// folder (or a worker's data folder) on a small tmpfs that the test fills and frees again.
//   - outputs full: the frame writes fail for want of room; the task is requeued uncharged, the
//     job is held (its tasks are not dispatched, other jobs keep running) under a farm-level
//     alert in the summary and on /metrics, and it finishes by itself once space is back;
//   - a worker's disk full: its failure is storage_full and uncharged, the worker gets nothing
//     new while its heartbeat says so (alert raised), and it takes tasks again once it has room.

#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "shared/images/image_io.h"
#include "tests/support/farm.h"
#include "tests/support/http_get.h"
#include "tests/support/process.h"
#include "tests/support/require.h"
#include "tests/support/tmpfs.h"

namespace tessera::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

std::string JobYaml(const std::string& name, const std::string& frames,
                    const std::string& extra = "") {
  return "name: " + name + "\nscene: scene.yaml\nframes: " + frames + "\nchunk_size: 1\n" + extra;
}

// The active alert of `kind`, or null.
json AlertOf(LocalFarm& farm, const std::string& kind) {
  const json alerts = farm.Get("/api/v1/summary").value("alerts", json::array());
  for (const json& a : alerts) {
    if (a.value("kind", "") == kind) return a;
  }
  return nullptr;
}

// The live event stream from its start, read until every one of `needles` was seen (or it
// went quiet for 3 s); returns what was read.
std::string EventsUntil(LocalFarm& farm, const std::vector<std::string>& needles) {
  httplib::Client client(farm.api_url());
  client.set_bearer_token_auth(farm.token());
  client.set_read_timeout(3, 0);
  std::string raw;
  (void)client.Get("/api/v1/events?since=0", httplib::Headers{},
                   [&](const char* data, size_t size) {
                     raw.append(data, size);
                     for (const std::string& n : needles) {
                       if (raw.find(n) == std::string::npos) return true;
                     }
                     return false;
                   });
  return raw;
}

void ExpectGoodFrames(const std::string& dir, const std::string& name, int first, int last) {
  for (int f = first; f <= last; ++f) {
    char file[64];
    std::snprintf(file, sizeof file, "%s.%04d.exr", name.c_str(), f);
    auto exr = image::Read(dir + "/" + file);
    ASSERT_TRUE(exr.ok()) << exr.status().ToString();
    EXPECT_EQ(exr->width, 64);
    EXPECT_EQ(exr->height, 48);
    double lo = 1e30, hi = -1e30;
    for (float v : exr->pixels) {
      ASSERT_TRUE(std::isfinite(v)) << file;
      lo = std::min<double>(lo, v);
      hi = std::max<double>(hi, v);
    }
    EXPECT_GT(hi - lo, 0.1) << file << " is flat";
  }
}

TEST(DiskFullTest, FullOutputsHoldTheJobUnchargedUntilSpaceIsBack) {
  TSR_REQUIRE(::geteuid() == 0, "mounts a tmpfs over the outputs folder");
  LocalFarm farm("outputs-full");
  ScopedTmpfs out(farm.dir() + "/data/outputs/full", 4 << 20);
  ASSERT_TRUE(out.mounted()) << out.error();
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  ASSERT_TRUE(farm.StartWorker("w1"));
  ASSERT_TRUE(farm.WaitForWorkers(1, 20s)) << farm.SchedulerLog();
  out.Fill();

  std::string error;
  const int64_t held = farm.Submit(JobYaml("held", "1-3", "output: {directory: full}\n"),
                                   TinySceneYaml(64, 48, 4), &error);
  ASSERT_GT(held, 0) << error;
  json alert;
  ASSERT_TRUE(WaitFor([&] { return !(alert = AlertOf(farm, "outputs_full")).is_null(); }, 60s))
      << "no outputs_full alert\n"
      << farm.SchedulerLog();
  const json job = farm.Get("/api/v1/jobs/" + std::to_string(held))["job"];
  const std::string folder = job.value("output_dir", "");
  EXPECT_EQ(alert.value("key", ""), "outputs_full:" + folder) << alert;
  EXPECT_NE(alert.value("message", "").find("no space left on device: " + folder),
            std::string::npos)
      << alert;
  EXPECT_NE(alert.value("message", "").find("free of"), std::string::npos) << alert;

  // Held: the tasks in flight when it filled up come back too (their writes fail the same way),
  // and then nothing runs: nothing charged, nothing failed, the job and each task say why.
  EXPECT_TRUE(WaitFor(
      [&] {
        const json tasks = Tasks(farm, held);
        return std::all_of(tasks.begin(), tasks.end(),
                           [](const json& t) { return t["state"] == "queued"; });
      },
      20s))
      << Tasks(farm, held).dump(2);
  EXPECT_EQ(job["tasks"]["failed"], 0) << job.dump(2);
  EXPECT_NE(job["notice"].dump().find("no space left on device"), std::string::npos) << job;
  for (const json& t : Tasks(farm, held)) {
    EXPECT_EQ(t["failures"], 0) << t;
    EXPECT_EQ(t["state"], "queued") << t;
    const json why = farm.Get("/api/v1/tasks/" + t["id"].dump() + "/why");
    EXPECT_NE(why.value("reason", "").find("held"), std::string::npos) << why;
  }
  // The alert on /metrics, and the scheduler's one clear line.
  const std::string metrics = Metrics(farm);
  EXPECT_NE(metrics.find("tessera_alerts_active 1"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("tessera_alert_active{kind=\"outputs_full\""), std::string::npos);
  EXPECT_NE(farm.SchedulerLog().find("no space left on device: " + folder), std::string::npos);
  // `tessera status` prints it; the farm answered, so it still exits 0.
  const RunResult status =
      RunProcess({Bin("tessera"), "status"}, 30s,
                 {"TESSERA_SERVER=" + farm.api_url(), "TESSERA_TOKEN=" + farm.token()});
  EXPECT_EQ(status.exit_code, 0) << status.out << status.err;
  EXPECT_NE(status.out.find("ALERTS (1)"), std::string::npos) << status.out;
  EXPECT_NE(status.out.find("outputs_full since"), std::string::npos) << status.out;
  EXPECT_NE(status.out.find("no space left on device: " + folder), std::string::npos) << status.out;

  // Other jobs keep running meanwhile.
  const int64_t other = farm.Submit(JobYaml("other", "1-2"), TinySceneYaml(64, 48, 4), &error);
  ASSERT_GT(other, 0) << error;
  EXPECT_EQ(farm.WaitForJob(other, 60s)["state"], "done") << farm.SchedulerLog();
  EXPECT_EQ(farm.Get("/api/v1/jobs/" + std::to_string(held))["job"]["tasks"]["done"], 0);

  // Space is back: the job resumes by itself (no retry asked for) and its frames are right.
  out.FreeFiller();
  const json done = farm.WaitForJob(held, 90s);
  ASSERT_EQ(done["state"], "done") << done.dump(2) << farm.SchedulerLog();
  EXPECT_TRUE(done["notice"].is_null()) << done;
  for (const json& t : Tasks(farm, held)) {
    EXPECT_EQ(t["failures"], 0) << t;
    // One attempt failed for want of room at most: held jobs are not dispatched in a loop.
    EXPECT_LE(t["attempt"].get<int>(), 2) << t;
  }
  ExpectGoodFrames(done["output_dir"], "held", 1, 3);
  EXPECT_TRUE(WaitFor([&] { return AlertOf(farm, "outputs_full").is_null(); }, 10s));
  EXPECT_NE(Metrics(farm).find("tessera_alerts_active 0"), std::string::npos);
  const std::string events = EventsUntil(farm, {"\"outputs_full\"", "\"outputs_space_back\""});
  EXPECT_NE(events.find("\"outputs_full\""), std::string::npos) << events;
  EXPECT_NE(events.find("\"outputs_space_back\""), std::string::npos) << events;
}

TEST(DiskFullTest, AWorkersFullDiskIsNotChargedAndItGetsNothingUntilItHasRoom) {
  TSR_REQUIRE(::geteuid() == 0, "mounts a tmpfs over the worker's data folder");
  LocalFarm farm("worker-disk-full");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  ScopedTmpfs disk(farm.dir() + "/w1-data", 4 << 20);
  ASSERT_TRUE(disk.mounted()) << disk.error();
  ASSERT_TRUE(farm.StartWorkerWith("w1", {"--data-dir", disk.dir()}));
  ASSERT_TRUE(farm.WaitForWorkers(1, 20s)) << farm.SchedulerLog();
  disk.Fill();

  std::string error;
  const int64_t id = farm.Submit(JobYaml("wd", "1-2"), TinySceneYaml(64, 48, 4), &error);
  ASSERT_GT(id, 0) << error;
  json alert;
  ASSERT_TRUE(WaitFor([&] { return !(alert = AlertOf(farm, "worker_disk_full")).is_null(); }, 60s))
      << farm.SchedulerLog() << farm.WorkerLog("w1");
  EXPECT_EQ(alert.value("key", ""), "worker_disk_full:w1") << alert;
  EXPECT_NE(alert.value("message", "").find("no space left on device: " + disk.dir()),
            std::string::npos)
      << alert;
  // Its failure was storage_full and uncharged; it is not leased while its disk is full.
  EXPECT_TRUE(WaitFor(
      [&] {
        const json tasks = Tasks(farm, id);
        return std::all_of(tasks.begin(), tasks.end(),
                           [](const json& t) { return t["state"] == "queued"; });
      },
      20s))
      << Tasks(farm, id).dump(2);
  EXPECT_NE(farm.SchedulerLog().find("failed on w1 (storage_full)"), std::string::npos)
      << farm.SchedulerLog();
  for (const json& t : Tasks(farm, id)) {
    EXPECT_EQ(t["failures"], 0) << t;
    EXPECT_EQ(t["state"], "queued") << t;
    const json why = farm.Get("/api/v1/tasks/" + t["id"].dump() + "/why");
    EXPECT_NE(why["details"].dump().find("its disk is full"), std::string::npos) << why;
  }

  disk.FreeFiller();
  const json done = farm.WaitForJob(id, 90s);
  ASSERT_EQ(done["state"], "done") << done.dump(2) << farm.SchedulerLog();
  int attempts = 0;
  for (const json& t : Tasks(farm, id)) {
    EXPECT_EQ(t["failures"], 0) << t;
    attempts += t["attempt"].get<int>();
  }
  // One attempt failed on the full disk; every other one was the one that rendered it.
  EXPECT_EQ(attempts, 3) << Tasks(farm, id).dump(2);
  ExpectGoodFrames(done["output_dir"], "wd", 1, 2);
  EXPECT_TRUE(WaitFor([&] { return AlertOf(farm, "worker_disk_full").is_null(); }, 10s));
}

TEST(DiskFullTest, ABlobUploadOntoAFullFilesystemIsAnswered507WithTheReason) {
  TSR_REQUIRE(::geteuid() == 0, "mounts a tmpfs over the blob folder");
  LocalFarm farm("blobs-full");
  ScopedTmpfs blobs(farm.dir() + "/data/blobs", 1 << 20);
  ASSERT_TRUE(blobs.mounted()) << blobs.error();
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  blobs.Fill();
  httplib::Client client(farm.api_url());
  client.set_bearer_token_auth(farm.token());
  const std::string piece(256 * 1024, 'x');
  auto res = client.Put(
      "/api/v1/blobs/" + std::string(64, 'a') + "?offset=0&total=" + std::to_string(piece.size()),
      piece, "application/octet-stream");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 507) << res->body;
  const json body = json::parse(res->body, nullptr, false);
  EXPECT_EQ(body.value("code", ""), "storage_full") << res->body;
  EXPECT_NE(body.value("error", "").find("no space left on device"), std::string::npos)
      << res->body;
  EXPECT_NE(body.value("error", "").find(blobs.dir()), std::string::npos) << res->body;
}

}  // namespace
}  // namespace tessera::testing
