// The scheduler's data folder (SQLite's filesystem) filling up while a job renders, with the real
// daemons: the scheduler stays up read-only (reads answered, writes 507 naming the folder, the
// data_full alert), leaves that mode by itself once space is freed, and the job then completes
// with every task done exactly once and the database intact.

#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <thread>

#include "tests/support/farm.h"
#include "tests/support/require.h"
#include "tests/support/tmpfs.h"
#include "tests/support/wal_pin.h"

namespace tessera::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;

std::string JobYaml(const std::string& name, const std::string& frames) {
  return "name: " + name + "\nscene: scene.yaml\nframes: " + frames + "\n";
}

// /healthz's "status", or "" when the scheduler does not answer (it exited).
std::string Health(LocalFarm& farm, int* status = nullptr) {
  const json health = farm.Get("/healthz", status);
  return health.is_object() ? health.value("status", "") : "";
}

bool HasAlert(const json& summary, const std::string& kind) {
  if (!summary.is_object()) return false;
  for (const json& a : summary.value("alerts", json::array())) {
    if (a.value("kind", "") == kind) return true;
  }
  return false;
}

TEST(DataFull, SchedulerTurnsReadOnlyAndResumesWhenSpaceIsFreed) {
  TSR_REQUIRE(::geteuid() == 0, "mounting a tmpfs over the data folder needs root");
  LocalFarm farm("datafull");
  const std::string data = farm.dir() + "/data";
  ScopedTmpfs tmpfs(data, 24 << 20);
  ASSERT_TRUE(tmpfs.mounted()) << tmpfs.error();
  // Frames go elsewhere: this is about the database's folder, not the outputs'.
  farm.AppendSchedulerConfig("storage:\n  output_root: " + farm.dir() + "/out\n  min_free_mb: 1\n");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  for (const char* w : {"w1", "w2"}) {
    ASSERT_TRUE(farm.StartWorkerWith(w, {"--data-dir", farm.dir() + "/" + w}));
  }
  ASSERT_TRUE(farm.WaitForWorkers(2, 30s));
  const int kFrames = 24;
  const int64_t job =
      farm.Submit(JobYaml("full", "1-" + std::to_string(kFrames)), TinySceneYaml(160, 120, 96));
  ASSERT_GT(job, 0);
  const std::string job_path = "/api/v1/jobs/" + std::to_string(job);
  ASSERT_TRUE(WaitFor([&] { return farm.Get(job_path)["job"]["tasks"].value("done", 0) >= 2; },
                      120s, 50ms));

  // The folder fills up while the job renders: a commit fails.
  WalPin pin(data + "/tessera.db");
  ASSERT_TRUE(pin.ok());
  tmpfs.Fill();
  int status = 0;
  ASSERT_TRUE(WaitFor([&] { return Health(farm, &status) == "degraded"; }, 60s, 50ms))
      << "last /healthz: " << status << "\n"
      << farm.SchedulerLog();
  // Up and read-only: /healthz still 200, reads answer, the alert says why, writes get 507.
  json health = farm.Get("/healthz", &status);
  EXPECT_EQ(status, 200);
  EXPECT_NE(health.value("reason", "").find(data), std::string::npos) << health.dump();
  json summary = farm.Get("/api/v1/summary", &status);
  EXPECT_EQ(status, 200);
  EXPECT_TRUE(HasAlert(summary, "data_full")) << summary.dump(2);
  EXPECT_EQ(farm.Get(job_path, &status)["job"]["id"], job);
  EXPECT_EQ(status, 200);
  json refused =
      farm.Post("/api/v1/jobs",
                {{"job_yaml", JobYaml("later", "1-2")}, {"scene_yaml", TinySceneYaml()}}, &status);
  EXPECT_EQ(status, 507) << refused.dump();
  EXPECT_EQ(refused.value("code", ""), "storage_full") << refused.dump();
  EXPECT_NE(refused.value("error", "").find(data), std::string::npos) << refused.dump();
  refused = farm.Post(job_path + "/priority", {{"priority", 90}}, &status);
  EXPECT_EQ(status, 507) << refused.dump();
  // It stays that way while the folder is full (checked every 2 s).
  std::this_thread::sleep_for(2500ms);
  EXPECT_EQ(Health(farm), "degraded");

  // Space is back: the scheduler leaves read-only mode by itself, and the job completes.
  pin.Release();
  tmpfs.FreeFiller();
  ASSERT_TRUE(WaitFor([&] { return Health(farm) == "ok"; }, 30s, 50ms)) << farm.SchedulerLog();
  EXPECT_FALSE(HasAlert(farm.Get("/api/v1/summary"), "data_full"));
  const json view = farm.WaitForJob(job, 180s);
  ASSERT_EQ(view.value("state", ""), "done") << view.dump(2) << "\n" << farm.SchedulerLog();
  EXPECT_EQ(view["tasks"].value("done", 0), kFrames);

  // Every task done exactly once, none charged for the full disk; every frame written.
  const json tasks = farm.Get(job_path + "/tasks?limit=1000")["tasks"];
  ASSERT_EQ(tasks.size(), static_cast<size_t>(kFrames));
  for (const json& t : tasks) {
    EXPECT_EQ(t.value("state", ""), "done") << t.dump();
    EXPECT_EQ(t.value("failures", -1), 0) << t.dump();
    const json log = farm.Get("/api/v1/tasks/" + t["id"].dump() + "/log");
    int done = 0;
    for (const json& a : log.value("attempts", json::array())) done += a["state"] == "done";
    EXPECT_EQ(done, 1) << log.dump(2);
  }
  for (int frame = 1; frame <= kFrames; ++frame) {
    char name[32];
    std::snprintf(name, sizeof name, "/full.%04d.exr", frame);
    EXPECT_TRUE(fs::exists(view.value("output_dir", "") + name)) << name;
  }
  // And writes are taken again.
  EXPECT_GT(farm.Submit(JobYaml("after", "1-2"), TinySceneYaml()), 0);
  EXPECT_EQ(IntegrityCheck(data + "/tessera.db"), "ok");
  const std::string log = farm.SchedulerLog();
  EXPECT_NE(log.find("read-only"), std::string::npos);
  EXPECT_NE(log.find("has room again"), std::string::npos);
}

// storage.min_free_mb: below the floor, new jobs and blob uploads are refused with 507 naming the
// folder and the room left, while the scheduler otherwise works (here the floor is above any
// disk's size, so the real data folder is below it).
TEST(DataFull, FloorRefusesSubmissionsAndUploadsBeforeTheDiskIsFull) {
  LocalFarm farm("datafloor");
  farm.AppendSchedulerConfig("storage:\n  min_free_mb: 1073741824\n");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  const std::string data = fs::canonical(farm.dir() + "/data").string();
  int status = 0;
  const json refused =
      farm.Post("/api/v1/jobs",
                {{"job_yaml", JobYaml("floor", "1-2")}, {"scene_yaml", TinySceneYaml()}}, &status);
  EXPECT_EQ(status, 507) << refused.dump();
  EXPECT_EQ(refused.value("code", ""), "storage_full") << refused.dump();
  const std::string error = refused.value("error", "");
  EXPECT_NE(error.find("storage.min_free_mb"), std::string::npos) << error;
  EXPECT_NE(error.find(data), std::string::npos) << error;
  EXPECT_NE(error.find(" free of "), std::string::npos) << error;  // the room left
  EXPECT_TRUE(farm.Get("/api/v1/jobs")["jobs"].empty());

  httplib::Client client(farm.api_url());
  const std::string body = "asset bytes";
  const std::string hash(64, 'a');
  auto put =
      client.Put("/api/v1/blobs/" + hash + "?offset=0&total=" + std::to_string(body.size()),
                 {{"Authorization", "Bearer " + farm.token()}}, body, "application/octet-stream");
  ASSERT_TRUE(put);
  EXPECT_EQ(put->status, 507) << put->body;
  EXPECT_NE(put->body.find("storage.min_free_mb"), std::string::npos) << put->body;
  // Not read-only: reads and other writes go on.
  EXPECT_EQ(Health(farm), "ok");
  farm.Post("/api/v1/tokens", {{"user", "ann"}, {"role", "viewer"}}, &status);
  EXPECT_EQ(status, 201);
}

}  // namespace
}  // namespace tessera::testing
