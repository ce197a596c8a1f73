// Fault injection: the outputs filesystem fills up (or turns read-only) in the middle of a job,
// at a point chosen by the scenario's seed, and comes back after a seed-chosen time. A full disk
// is an operational fault: the checker asserts nothing was charged, the job's outputs_full and
// outputs_space_back events, no alert left, the API up throughout, and every frame bit-identical
// to a reference rendered on the same farm -- with nobody asking for a retry.

#include <gtest/gtest.h>
#include <unistd.h>

#include <thread>

#include "tests/faults/fault_farm.h"
#include "tests/support/require.h"
#include "tests/support/tmpfs.h"

namespace tessera::faults {
namespace {

using nlohmann::json;
using testing::ScopedTmpfs;
using testing::TinySceneYaml;
using testing::WaitFor;
using namespace std::chrono_literals;

// The active outputs_full alert's message, or "".
std::string OutputsAlert(LocalFarm& farm) {
  for (const json& a : farm.Get("/api/v1/summary").value("alerts", json::array())) {
    if (a.value("kind", "") == "outputs_full") return a.value("message", "");
  }
  return "";
}

// The scenario: a job of `frames` frames (with `split`: tiles and sample parts, `parts` tasks a
// frame) writing into a small tmpfs that fills up (or turns read-only) at a seed-chosen point
// and comes back after a seed-chosen time; then the checker, against the frames rendered whole.
void OutputsFullScenario(const std::string& scenario, const std::string& split, int parts) {
  const uint64_t seed = ScenarioSeed(scenario);
  TSR_REQUIRE(::geteuid() == 0, "mounts a tmpfs over the outputs folder");
  FaultFarm ff("outputs-full", seed);
  ScopedTmpfs out(ff.farm().dir() + "/data/outputs/full", 16 << 20);
  ASSERT_TRUE(out.mounted()) << out.error();
  ASSERT_TRUE(ff.StartScheduler()) << ff.farm().SchedulerLog();
  for (const char* w : {"w1", "w2"}) ASSERT_TRUE(ff.StartWorker(w));
  ASSERT_TRUE(ff.farm().WaitForWorkers(2, 20s));
  const std::string scene = TinySceneYaml(128, 96, 40);
  const int kFrames = parts > 1 ? 3 : 12;
  const int tasks = kFrames * parts;
  const std::string frames = "1-" + std::to_string(kFrames);
  const int64_t id =
      ff.Submit(PathTracerJob("shot", frames, split + "output: {directory: full}\n"), scene);
  ASSERT_GT(id, 0);

  // At a seed-chosen point with tasks still to render (a worker has one slot: at least two are
  // not started yet), the filesystem takes no more: no block left, or read-only.
  const int point = std::uniform_int_distribution<int>(1, tasks - 4)(ff.rng());
  const bool read_only = std::uniform_int_distribution<int>(0, 1)(ff.rng()) == 1;
  ASSERT_TRUE(ff.WaitForDone(id, point, 120s));
  if (read_only) {
    // The remount waits for no file to be open for writing there (EBUSY meanwhile).
    ASSERT_TRUE(WaitFor([&] { return out.SetReadOnly(true); }, 10s, 1ms));
  } else {
    out.Fill();
  }
  ++ff.faults().storage_faults;
  ff.faults().Add(std::string("outputs filesystem ") + (read_only ? "read-only" : "full") + " at " +
                  std::to_string(ff.Done(id)) + "/" + std::to_string(tasks) + " tasks done");
  // Filled again until the farm notices: the scheduler removes a frame's parts once it is
  // assembled, which gives room back.
  std::string alert;
  ASSERT_TRUE(WaitFor(
      [&] {
        if (!read_only) out.Fill();
        return !(alert = OutputsAlert(ff.farm())).empty();
      },
      60s))
      << "no outputs_full alert\n"
      << ff.farm().SchedulerLog();
  ff.faults().Add("alert: " + alert);
  std::this_thread::sleep_for(Between(ff.rng(), 0, 3000));
  if (read_only) {
    ASSERT_TRUE(out.SetReadOnly(false));
  } else {
    out.FreeFiller();
  }
  ff.faults().Add("space back at " + std::to_string(ff.Done(id)) + " tasks done");

  JobUnderTest t;
  t.job_id = id;
  t.name = "shot";
  t.first_frame = 1;
  t.last_frame = kFrames;
  t.expected_tasks = tasks;
  t.storage = StorageFault::kOutputsFull;
  t.reference_name = "ref";
  const json view = ff.farm().WaitForJob(id, 240s);
  ASSERT_EQ(view.value("state", ""), "done") << view.dump(2) << ff.farm().SchedulerLog();
  // The reference: the frames rendered whole, fault-free, outside the tmpfs.
  t.reference_job_id = ff.Submit(PathTracerJob("ref", frames), scene);
  ASSERT_EQ(ff.farm().WaitForJob(t.reference_job_id, 240s).value("state", ""), "done");
  ff.checker().Check(t, ff.faults(), 240s);
  ff.checker().CheckFarm();
}

TEST(DiskFullFaults, OutputsFilesystemFullMidJobThenSpaceComesBack) {
  OutputsFullScenario("the outputs filesystem full or read-only mid-job, then back", "", 1);
}

TEST(DiskFullFaults, OutputsFullWhileSplitFramesAreStoredAndAssembled) {
  OutputsFullScenario("the outputs filesystem full or read-only while parts are stored",
                      "tiles: 2x2\nsample_parts: 2\n", 8);
}

}  // namespace
}  // namespace tessera::faults
