// Fault injection: a worker frozen (SIGSTOP) for longer than the scheduler's liveness while it
// renders, then thawed (SIGCONT). The scheduler must give its task to another worker; the thawed
// worker's late result belongs to an old attempt and must not be applied a second time.

#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "tests/faults/fault_farm.h"

namespace tessera::faults {
namespace {

using nlohmann::json;
using testing::TinySceneYaml;
using testing::WaitFor;
using namespace std::chrono_literals;

TEST(FreezeFaults, WorkerFrozenLongerThanTheLivenessThenThawed) {
  const uint64_t seed = ScenarioSeed("SIGSTOP of a rendering worker past the liveness, SIGCONT");
  FaultFarm ff("freeze", seed);  // heartbeats 200 ms x 5: lost after 1 s of silence
  ASSERT_TRUE(ff.StartScheduler()) << ff.farm().SchedulerLog();
  ASSERT_TRUE(ff.StartWorker("victim"));
  ASSERT_TRUE(ff.StartWorker("other"));
  ASSERT_TRUE(ff.farm().WaitForWorkers(2, 20s));
  const std::string scene = TinySceneYaml(128, 96, 256);  // about 0.75 s a frame
  const int kFrames = 16;
  const int64_t id = ff.Submit(PathTracerJob("frozen", "1-16"), scene);
  ASSERT_GT(id, 0);

  // Two freezes, each at a seed-chosen point of the job, in one of the victim's renders.
  std::vector<int> points = {std::uniform_int_distribution<int>(0, kFrames / 2)(ff.rng()),
                             std::uniform_int_distribution<int>(0, kFrames - 2)(ff.rng())};
  std::sort(points.begin(), points.end());
  for (int point : points) {
    auto job_over = [&] { return ff.Counts(id).value("done", 0) >= kFrames; };
    if (!ff.WaitForDone(id, point, 120s) ||
        !WaitFor([&] { return ff.RunningOn(id, "victim") > 0 || job_over(); }, 60s, 20ms) ||
        job_over()) {
      break;
    }
    std::this_thread::sleep_for(Between(ff.rng(), 0, 300));
    const auto frozen_for = Between(ff.rng(), 2000, 4000);
    ff.farm().worker("victim").Signal(SIGSTOP);
    ++ff.faults().freezes;
    ff.faults().Add("SIGSTOP victim for " + std::to_string(frozen_for.count()) + " ms at " +
                    std::to_string(ff.Done(id)) + "/" + std::to_string(kFrames) + " done");
    const auto thaw_at = std::chrono::steady_clock::now() + frozen_for;
    // Past the liveness the scheduler shows it offline (its task goes back to the queue).
    EXPECT_TRUE(WaitFor([&] { return ff.WorkerState("victim") == "offline"; }, frozen_for))
        << "a worker frozen for " << frozen_for.count() << " ms is not shown offline";
    std::this_thread::sleep_until(thaw_at);
    ff.farm().worker("victim").Signal(SIGCONT);
    ff.faults().Add("SIGCONT victim");
    // It finds out it was dropped and registers again.
    EXPECT_TRUE(WaitFor([&] { return ff.WorkerState("victim") != "offline"; }, 30s))
        << ff.farm().WorkerLog("victim");
  }

  JobUnderTest t;
  t.job_id = id;
  t.name = "frozen";
  t.first_frame = 1;
  t.last_frame = kFrames;
  t.expected_tasks = kFrames;
  const json view = ff.farm().WaitForJob(id, 240s);
  ASSERT_EQ(view.value("state", ""), "done") << view.dump(2);
  t.reference_name = "ref";
  t.reference_job_id = ff.Submit(PathTracerJob("ref", "1-16"), scene);
  ASSERT_EQ(ff.farm().WaitForJob(t.reference_job_id, 240s).value("state", ""), "done");
  ff.checker().Check(t, ff.faults(), 240s);
  ff.checker().CheckFarm();
}

}  // namespace
}  // namespace tessera::faults
