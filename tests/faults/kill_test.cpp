// Fault injection: kill -9 of the scheduler and of workers at points chosen by the scenario's
// seed (while it accepts a large job, while it dispatches, while it assembles split frames),
// then restarts, and the checker's invariants once the job has finished.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <thread>

#include "tests/faults/fault_farm.h"

namespace tessera::faults {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::TinySceneYaml;
using testing::WaitFor;
using namespace std::chrono_literals;

// Renders the same job again, fault-free, on the same farm (every worker up) and returns its id.
int64_t RenderReference(FaultFarm& ff, int64_t job, const std::string& job_yaml_as_ref,
                        const std::string& scene) {
  // The job under test first: its frames must not share the workers with the reference.
  const json view = ff.farm().WaitForJob(job, 240s);
  EXPECT_EQ(view.value("state", ""), "done") << view.dump(2);
  const int64_t ref = ff.Submit(job_yaml_as_ref, scene);
  const json r = ff.farm().WaitForJob(ref, 240s);
  EXPECT_EQ(r.value("state", ""), "done") << r.dump(2);
  return ref;
}

// Faults on a running job: at seed-chosen progress points (tasks done) plus a jitter, either the
// scheduler or one of the workers is killed -9, stays down for a seed-chosen time and is
// started again. Returns when every planned fault happened (or the job ended first).
void KillAtRandomPoints(FaultFarm& ff, int64_t job, int total, int faults,
                        const std::vector<std::string>& workers, int jitter_ms) {
  std::vector<int> points;
  for (int i = 0; i < faults; ++i) {
    points.push_back(std::uniform_int_distribution<int>(1, total - 1)(ff.rng()));
  }
  std::sort(points.begin(), points.end());
  for (int point : points) {
    const bool scheduler = std::uniform_int_distribution<int>(0, 1)(ff.rng()) == 0;
    const std::string victim =
        workers[std::uniform_int_distribution<size_t>(0, workers.size() - 1)(ff.rng())];
    const auto jitter = Between(ff.rng(), 0, jitter_ms);
    const auto down = Between(ff.rng(), 0, 1500);
    if (!ff.WaitForDone(job, point, 120s)) break;
    std::this_thread::sleep_for(jitter);
    const json counts = ff.Counts(job);
    const std::string when = "at " + std::to_string(counts.value("done", -1)) + "/" +
                             std::to_string(total) + " tasks done, " +
                             std::to_string(counts.value("running", -1)) + " running";
    if (scheduler) {
      ff.KillScheduler(when);
      std::this_thread::sleep_for(down);
      ASSERT_TRUE(ff.RestartScheduler()) << ff.farm().SchedulerLog();
    } else {
      ff.KillWorker(victim, when);
      std::this_thread::sleep_for(down);
      ASSERT_TRUE(ff.StartWorker(victim));
      ff.faults().Add("worker " + victim + " restarted");
    }
  }
}

TEST(KillFaults, SchedulerKilledWhileItAcceptsALargeJob) {
  const uint64_t seed = ScenarioSeed("kill -9 of the scheduler during the submit of a large job");
  FaultFarm ff("submit", seed);
  ASSERT_TRUE(ff.StartScheduler()) << ff.farm().SchedulerLog();
  const int kTasks = 10000;
  const std::string job = "name: big\nrenderer: noop\nframes: 1-" + std::to_string(kTasks) + "\n";

  // The kill lands somewhere in the first 70 ms of the request: before, during or just after the
  // transaction that stores the job (the answer comes after about 55 ms here).
  std::atomic<int64_t> acknowledged{0};
  std::atomic<bool> answered{false};
  std::atomic<int64_t> answered_after_ms{-1};
  const auto sent = std::chrono::steady_clock::now();
  std::thread submit([&] {
    std::string error;
    acknowledged = ff.farm().Submit(job, "", &error);
    answered_after_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::steady_clock::now() - sent)
                            .count();
    answered = true;
  });
  const auto kill_after = Between(ff.rng(), 0, 70);
  std::this_thread::sleep_for(kill_after);
  const bool during = !answered;
  ff.KillScheduler(
      std::to_string(kill_after.count()) + " ms into the submit" +
      (during ? ", while it was in flight"
              : ", after it was answered (" + std::to_string(answered_after_ms) + " ms)"));
  submit.join();
  ASSERT_TRUE(ff.RestartScheduler()) << ff.farm().SchedulerLog();

  // Durable before acknowledged, and all or nothing: an acknowledged job is there whole; an
  // unacknowledged one is there whole or not at all.
  const json jobs = ff.farm().Get("/api/v1/jobs")["jobs"];
  ASSERT_TRUE(jobs.is_array()) << jobs;
  ASSERT_LE(jobs.size(), 1u) << jobs.dump(2);
  if (acknowledged > 0) {
    ASSERT_EQ(jobs.size(), 1u) << "job " << acknowledged << " was acknowledged, then lost";
  }
  int64_t id = 0;
  if (jobs.empty()) {
    ff.faults().Add("the unacknowledged job was not stored: submitted again");
    id = ff.Submit(job, "");
    ASSERT_GT(id, 0);
  } else {
    id = jobs[0]["id"].get<int64_t>();
    EXPECT_EQ(jobs[0]["tasks"]["total"], kTasks) << "a job is stored whole or not at all";
    ff.faults().Add("the job was stored whole (" +
                    std::string(acknowledged > 0 ? "acknowledged" : "unacknowledged") + ")");
  }
  ASSERT_TRUE(ff.StartWorker("w1"));
  ASSERT_TRUE(ff.StartWorker("w2"));
  // And once more while it dispatches, at a seed-chosen point.
  KillAtRandomPoints(ff, id, kTasks, 1, {"w1", "w2"}, 50);

  JobUnderTest t;
  t.job_id = id;
  t.name = "big";
  t.expected_tasks = kTasks;
  ff.checker().Check(t, ff.faults(), 240s);
  ff.checker().CheckFarm();
}

TEST(KillFaults, SchedulerAndWorkersKilledWhileTheyDispatchAndRender) {
  const uint64_t seed = ScenarioSeed("kill -9 of the scheduler and workers during dispatch");
  FaultFarm ff("dispatch", seed);
  ASSERT_TRUE(ff.StartScheduler()) << ff.farm().SchedulerLog();
  const std::vector<std::string> workers = {"w1", "w2", "w3"};
  for (const std::string& w : workers) ASSERT_TRUE(ff.StartWorker(w));
  ASSERT_TRUE(ff.farm().WaitForWorkers(3, 20s));
  const std::string scene = TinySceneYaml(128, 96, 160);  // about 0.5 s a frame
  const int kFrames = 36;
  const std::string frames = "1-" + std::to_string(kFrames);
  const int64_t id = ff.Submit(PathTracerJob("shot", frames), scene);
  ASSERT_GT(id, 0);
  KillAtRandomPoints(ff, id, kFrames, 5, workers, 150);

  JobUnderTest t;
  t.job_id = id;
  t.name = "shot";
  t.first_frame = 1;
  t.last_frame = kFrames;
  t.expected_tasks = kFrames;
  t.reference_name = "ref";
  t.reference_job_id = RenderReference(ff, id, PathTracerJob("ref", frames), scene);
  ff.checker().Check(t, ff.faults(), 240s);
  ff.checker().CheckFarm();
}

TEST(KillFaults, KilledWhileSplitFramesAreStoredAndAssembled) {
  const uint64_t seed = ScenarioSeed("kill -9 during split-frame assembly (tiles, sample parts)");
  FaultFarm ff("assembly", seed);
  ASSERT_TRUE(ff.StartScheduler()) << ff.farm().SchedulerLog();
  const std::vector<std::string> workers = {"w1", "w2"};
  for (const std::string& w : workers) ASSERT_TRUE(ff.StartWorker(w));
  ASSERT_TRUE(ff.farm().WaitForWorkers(2, 20s));
  const std::string scene = TinySceneYaml(256, 192, 16);
  const std::string split = "tiles: 2x2\nsample_parts: 2\n";
  const int kFrames = 3, kParts = 8;
  const int64_t id = ff.Submit(PathTracerJob("split", "1-3", split), scene);
  ASSERT_GT(id, 0);

  const std::string out =
      ff.farm().Get("/api/v1/jobs/" + std::to_string(id))["job"].value("output_dir", "");
  ASSERT_FALSE(out.empty());

  // A frame is assembled when its last part arrives, and its last part is recorded done only
  // once the frame is written (EXR, then PNG, then thumbnail). Two seed-chosen frames: the
  // scheduler is killed the moment that frame's EXR appears, plus 0-20 ms (mid-PNG, mid-commit
  // or just after); and a worker is killed at a seed-chosen part.
  std::vector<int> frames = {1, 2, 3};
  std::shuffle(frames.begin(), frames.end(), ff.rng());
  frames.resize(2);
  const int worker_point = std::uniform_int_distribution<int>(1, kFrames * kParts - 1)(ff.rng());
  ASSERT_TRUE(ff.WaitForDone(id, worker_point, 120s));
  const std::string victim = workers[worker_point % workers.size()];
  ff.KillWorker(victim, "at " + std::to_string(ff.Done(id)) + " parts done");
  ASSERT_TRUE(ff.StartWorker(victim));
  for (int frame : frames) {
    char name[32];
    std::snprintf(name, sizeof name, "/split.%04d.exr", frame);
    const bool seen = WaitFor([&] { return fs::exists(out + name); }, 120s, 1ms);
    const auto jitter = Between(ff.rng(), 0, 20);
    std::this_thread::sleep_for(jitter);
    ff.KillScheduler(std::string(seen ? "" : "(EXR never seen) ") + std::to_string(jitter.count()) +
                     " ms after frame " + std::to_string(frame) + "'s EXR appeared (" +
                     std::to_string(ff.Done(id)) + " parts done)");
    std::this_thread::sleep_for(Between(ff.rng(), 0, 1000));
    ASSERT_TRUE(ff.RestartScheduler()) << ff.farm().SchedulerLog();
  }

  JobUnderTest t;
  t.job_id = id;
  t.name = "split";
  t.first_frame = 1;
  t.last_frame = kFrames;
  t.expected_tasks = kFrames * kParts;
  t.reference_name = "ref";
  // The reference is the frame rendered whole, fault-free.
  t.reference_job_id = RenderReference(ff, id, PathTracerJob("ref", "1-3"), scene);
  ff.checker().Check(t, ff.faults(), 240s);
  ff.checker().CheckFarm();
}

}  // namespace
}  // namespace tessera::faults
