// Fault injection: the scheduler's data folder (SQLite's filesystem, a small tmpfs here) fills up
// at a seed-chosen point of a rendering job and is freed a seed-chosen time later. The scheduler
// must ride it out read-only -- no exit, no retry charged, the data_full alert while it lasts --
// and resume by itself; then the checker's invariants hold as after any other fault.

#include <gtest/gtest.h>
#include <unistd.h>

#include <thread>

#include "tests/faults/fault_farm.h"
#include "tests/support/require.h"
#include "tests/support/tmpfs.h"
#include "tests/support/wal_pin.h"

namespace tessera::faults {
namespace {

using nlohmann::json;
using testing::ScopedTmpfs;
using testing::TinySceneYaml;
using testing::WaitFor;
using testing::WalPin;
using namespace std::chrono_literals;

// /healthz's "status", or "" while the scheduler does not answer (it exited).
std::string Health(FaultFarm& ff) {
  const json health = ff.farm().Get("/healthz");
  return health.is_object() ? health.value("status", "") : "";
}

// One scenario: a farm whose data folder is a small tmpfs, two workers, the job; at a seed-chosen
// number of tasks done (plus a jitter) the folder fills up, and a seed-chosen time after the
// scheduler turned read-only it is freed; then the checker, with a fault-free reference.
void FillMidJob(const std::string& scenario, const std::string& name, const std::string& split,
                int frames, int tasks) {
  TSR_REQUIRE(::geteuid() == 0, "mounting a tmpfs over the data folder needs root");
  const uint64_t seed = ScenarioSeed(scenario);
  FaultFarm ff(name, seed);
  const std::string data = ff.farm().dir() + "/data";
  ScopedTmpfs tmpfs(data, 24 << 20);
  ASSERT_TRUE(tmpfs.mounted()) << tmpfs.error();
  // Only the database's folder fills: frames go to a folder of their own.
  ff.farm().AppendSchedulerConfig("storage:\n  output_root: " + ff.farm().dir() +
                                  "/out\n  min_free_mb: 1\n");
  ASSERT_TRUE(ff.StartScheduler()) << ff.farm().SchedulerLog();
  for (const char* w : {"w1", "w2"}) ASSERT_TRUE(ff.StartWorker(w));
  ASSERT_TRUE(ff.farm().WaitForWorkers(2, 20s));
  const std::string scene =
      split.empty() ? TinySceneYaml(128, 96, 160) : TinySceneYaml(256, 192, 16);
  const std::string range = "1-" + std::to_string(frames);
  const int64_t id = ff.Submit(PathTracerJob("shot", range, split), scene);
  ASSERT_GT(id, 0);

  const int point = std::uniform_int_distribution<int>(1, tasks / 2)(ff.rng());
  const auto jitter = Between(ff.rng(), 0, 300);
  const auto full_for = Between(ff.rng(), 500, 4000);
  ASSERT_TRUE(ff.WaitForDone(id, point, 120s));
  std::this_thread::sleep_for(jitter);
  WalPin pin(data + "/tessera.db");  // the next commit needs new room
  ASSERT_TRUE(pin.ok());
  tmpfs.Fill();
  ++ff.faults().storage_faults;
  ff.faults().Add("data folder filled at " + std::to_string(ff.Done(id)) + "/" +
                  std::to_string(tasks) + " tasks done");
  ASSERT_TRUE(WaitFor([&] { return Health(ff) == "degraded"; }, 60s, 20ms))
      << ff.farm().SchedulerLog();
  ff.faults().Add("scheduler read-only");
  std::this_thread::sleep_for(full_for);
  pin.Release();
  tmpfs.FreeFiller();
  ff.faults().Add("space freed after " + std::to_string(full_for.count()) + " ms");
  ASSERT_TRUE(WaitFor([&] { return Health(ff) == "ok"; }, 30s, 20ms)) << ff.farm().SchedulerLog();
  ff.faults().Add("scheduler writes again");

  JobUnderTest t;
  t.job_id = id;
  t.name = "shot";
  t.first_frame = 1;
  t.last_frame = frames;
  t.expected_tasks = tasks;
  t.storage = StorageFault::kDataFull;
  // The reference, fault-free, once the job under test is done (the checker waits for it too).
  const json view = ff.farm().WaitForJob(id, 240s);
  EXPECT_EQ(view.value("state", ""), "done") << view.dump(2) << ff.farm().SchedulerLog();
  t.reference_name = "ref";
  t.reference_job_id = ff.Submit(PathTracerJob("ref", range, split), scene);
  EXPECT_EQ(ff.farm().WaitForJob(t.reference_job_id, 240s).value("state", ""), "done");
  ff.checker().Check(t, ff.faults(), 240s);
  ff.checker().CheckFarm();
  EXPECT_EQ(testing::IntegrityCheck(data + "/tessera.db"), "ok");
}

TEST(DataFullFaults, DataFolderFillsMidJobAndIsFreed) {
  FillMidJob("the data folder fills up mid-job and is freed", "datafull", "", 24, 24);
}

// Split frames: a frame's last part may be assembled in the pass that cannot commit; that frame
// is assembled again from its parts (kept) once the part comes again.
TEST(DataFullFaults, DataFolderFillsWhileSplitFramesAreAssembled) {
  FillMidJob("the data folder fills up while split frames are assembled", "datafullsplit",
             "tiles: 2x2\nsample_parts: 2\n", 3, 24);
}

}  // namespace
}  // namespace tessera::faults
