// The scheduling policy on its own: pure decisions over hand-built views of a farm.

#include "scheduler/policy/policy.h"

#include <gtest/gtest.h>

namespace tessera::policy {
namespace {

protocol::GpuInfo Gpu(int index, int64_t memory_mb, int major, int minor) {
  protocol::GpuInfo g;
  g.index = index;
  g.name = "gpu";
  g.memory_mb = memory_mb;
  g.compute_major = major;
  g.compute_minor = minor;
  return g;
}

WorkerOffer Worker(int64_t id, std::vector<protocol::GpuInfo> gpus = {}) {
  WorkerOffer w;
  w.id = id;
  w.name = "w" + std::to_string(id);
  w.pools = {"default"};
  w.cpu_cores = 16;
  w.ram_mb = 64000;
  w.gpus = std::move(gpus);
  return w;
}

TEST(PolicyTest, PoolsTagsAndBlocklistDecideWhereAJobMayEverRun) {
  WorkerOffer w = Worker(7);
  w.pools = {"gpu", "default"};
  w.tags = {"cuda12"};
  JobNeeds job;
  EXPECT_TRUE(CouldEverRun(job, w));
  job.pools = {"lighting"};
  EXPECT_EQ(WhyNever(job, w), "not in any of the pools [\"lighting\"]");
  job.pools = {"lighting", "gpu"};
  EXPECT_TRUE(CouldEverRun(job, w));
  job.tags = {"cuda12", "optix"};
  EXPECT_EQ(WhyNever(job, w), "lacks the tag 'optix'");
  job.tags = {"cuda12"};
  job.blocklist = {7};
  EXPECT_EQ(WhyNever(job, w), "blocklisted for this job");
  job.blocklist = {8};
  EXPECT_TRUE(CouldEverRun(job, w));
}

TEST(PolicyTest, PluginRenderersRunOnlyWhereTheWorkerOffersThem) {
  WorkerOffer w = Worker(7);
  JobNeeds job;
  job.renderer = "povray";
  EXPECT_EQ(WhyNever(job, w),
            "does not offer the renderer 'povray' (its program is not installed there)");
  w.plugins = {{"povray", "3.7.0.10"}};
  EXPECT_TRUE(CouldEverRun(job, w));
  job.renderer = "pathtracer";  // built in: every worker has it
  EXPECT_TRUE(CouldEverRun(job, Worker(8)));
  // A renderer whose program the job names is off where the worker's allow-list is empty,
  // whatever the machine has installed: the reason names the list.
  for (const char* renderer : {"command", "openjd"}) {
    job.renderer = renderer;
    EXPECT_EQ(WhyNever(job, Worker(9)),
              std::string("does not offer the renderer '") + renderer +
                  "' (its worker.command_programs, the programs a job may run, lists none)");
  }
}

TEST(PolicyTest, ATagEntryMayNameAlternatives) {
  WorkerOffer w = Worker(7);
  w.tags = {"h100", "x86_64"};
  JobNeeds job;
  job.tags = {"a100|h100", "x86_64"};
  EXPECT_TRUE(CouldEverRun(job, w));
  job.tags = {"a100|l40s"};
  EXPECT_EQ(WhyNever(job, w), "lacks one of the tags a100, l40s");
}

TEST(PolicyTest, ALimitListedTwiceHoldsTwo) {
  const std::map<std::string, int> max = {{"licenses", 3}};
  EXPECT_TRUE(LimitsAllow({"licenses", "licenses"}, max, {{"licenses", 1}}));
  EXPECT_FALSE(LimitsAllow({"licenses", "licenses"}, max, {{"licenses", 2}}));
  EXPECT_TRUE(LimitsAllow({"licenses"}, max, {{"licenses", 2}}));
}

TEST(PolicyTest, ResourcesAreMinimumsPerTask) {
  WorkerOffer big = Worker(1, {Gpu(0, 143771, 9, 0), Gpu(1, 143771, 9, 0)});
  WorkerOffer old = Worker(2, {Gpu(0, 24000, 7, 5)});
  WorkerOffer cpu = Worker(3);
  JobNeeds job;
  job.resources.gpus = 1;
  job.resources.gpu_memory_mb = 80000;
  job.resources.compute_capability = 9.0;
  EXPECT_TRUE(CouldEverRun(job, big));
  EXPECT_NE(WhyNever(job, old).find("has 0 GPU(s) with >= 80000 MB"), std::string::npos);
  EXPECT_FALSE(CouldEverRun(job, cpu));
  job.resources.gpus = 3;  // more GPUs than the biggest node has
  EXPECT_FALSE(CouldEverRun(job, big));
  JobNeeds cores;
  cores.resources.cpu_cores = 32;
  EXPECT_EQ(WhyNever(cores, cpu), "has 16 CPU cores, a task needs 32");
  JobNeeds ram;
  ram.resources.ram_mb = 128000;
  EXPECT_EQ(WhyNever(ram, cpu), "has 64000 MB of RAM, a task needs 128000");
  // A GPU-less job still runs on a CPU-only worker.
  EXPECT_TRUE(CouldEverRun(JobNeeds{}, cpu));
}

TEST(PolicyTest, TasksRunningAtOnceShareTheWorkersCoresAndRam) {
  const WorkerOffer w = Worker(3);  // 16 cores, 64000 MB
  spec::ResourceSpec four_cores;
  four_cores.cpu_cores = 4;
  EXPECT_EQ(WhyNoFreeCpu(four_cores, w, {12, 0}), "");
  EXPECT_EQ(WhyNoFreeCpu(four_cores, w, {13, 0}),
            "w3 has 3 of 16 CPU cores free, the task needs 4");
  spec::ResourceSpec ram;
  ram.ram_mb = 20000;
  EXPECT_EQ(WhyNoFreeCpu(ram, w, {16, 44000}), "") << "no cores declared: only RAM counts";
  EXPECT_EQ(WhyNoFreeCpu(ram, w, {0, 44001}),
            "w3 has 19999 of 64000 MB of RAM free, the task needs 20000");
  // A task declaring neither holds only its slot: a full worker still takes it.
  EXPECT_EQ(WhyNoFreeCpu(spec::ResourceSpec{}, w, {16, 64000}), "");
}

TEST(PolicyTest, EachTaskIsPinnedToItsOwnGpus) {
  WorkerOffer w = Worker(1, {Gpu(0, 24000, 8, 6), Gpu(1, 80000, 9, 0), Gpu(2, 80000, 9, 0)});
  spec::ResourceSpec any;
  std::vector<GpuUse> busy(3);
  EXPECT_EQ(PickGpus(any, w, busy), std::vector<int>{0}) << "a GPU worker gives a task one GPU";
  AddClaim(ClaimFor(any, w, {0}), &busy);
  EXPECT_EQ(PickGpus(any, w, busy), std::vector<int>{1});
  spec::ResourceSpec two;
  two.gpus = 2;
  two.gpu_memory_mb = 40000;
  busy.assign(3, GpuUse{});
  EXPECT_EQ(PickGpus(two, w, busy), (std::vector<int>{1, 2})) << "GPU 0 is too small";
  AddClaim(ClaimFor(any, w, {2}), &busy);
  EXPECT_FALSE(PickGpus(two, w, busy).has_value()) << "not now: one qualifying GPU is busy";
  EXPECT_TRUE(CouldEverRun(JobNeeds{{}, {}, {}, two, {}}, w)) << "but it will fit later";
  // CPU-only workers pin nothing.
  EXPECT_EQ(PickGpus(any, Worker(2), {}), std::vector<int>{});
}

TEST(PolicyTest, NamedLimitsCountRunningTasks) {
  std::map<std::string, int> max = {{"blender", 2}, {"nuke", 0}};
  std::map<std::string, int> used;
  EXPECT_TRUE(LimitsAllow({"blender"}, max, used));
  used["blender"] = 2;
  EXPECT_FALSE(LimitsAllow({"blender"}, max, used));
  EXPECT_FALSE(LimitsAllow({"nuke"}, max, used)) << "a limit of 0 allows nothing";
  EXPECT_FALSE(LimitsAllow({"houdini"}, max, used)) << "an unconfigured limit allows nothing";
  EXPECT_TRUE(LimitsAllow({}, max, used));
}

TEST(PolicyTest, FairShareWithinAPriorityLevel) {
  FarmShares shares;
  // Job 1 was submitted first and already has 5 tasks running; job 2 has none: job 2 is next.
  std::vector<Candidate> jobs = {{1, "default", "ana", 5, 5}, {2, "default", "ana", 0, 0}};
  shares.project_running["default"] = 5;
  shares.user_running[{"default", "ana"}] = 5;
  EXPECT_EQ(PickFairShare(jobs, shares), 1u);
  // Equal running: the one served least so far, then the oldest.
  jobs = {{1, "default", "ana", 2, 10}, {2, "default", "ana", 2, 3}};
  EXPECT_EQ(PickFairShare(jobs, shares), 1u);
  jobs = {{1, "default", "ana", 2, 3}, {2, "default", "ana", 2, 3}};
  EXPECT_EQ(PickFairShare(jobs, shares), 0u);
  EXPECT_FALSE(PickFairShare({}, shares).has_value());
}

TEST(PolicyTest, FairShareBetweenUsersBeforeJobs) {
  // Ana has three jobs with one running task each; Bo has one job with two. Per job, Bo's is the
  // busiest, but Bo as a user has fewer running tasks than Ana: Bo's job is next.
  FarmShares shares;
  shares.user_running[{"default", "ana"}] = 3;
  shares.user_running[{"default", "bo"}] = 2;
  shares.project_running["default"] = 5;
  std::vector<Candidate> jobs = {{1, "default", "ana", 1, 1},
                                 {2, "default", "ana", 1, 1},
                                 {3, "default", "ana", 1, 1},
                                 {4, "default", "bo", 2, 2}};
  EXPECT_EQ(PickFairShare(jobs, shares), 3u);
}

TEST(PolicyTest, ProjectWeightsAndCaps) {
  FarmShares shares;
  shares.projects["show"] = {3.0, 0};
  shares.projects["rnd"] = {1.0, 2};
  // show has 5 running at weight 3 (1.67 per unit of weight), rnd 1 at weight 1: rnd is next.
  shares.project_running = {{"show", 5}, {"rnd", 1}};
  std::vector<Candidate> jobs = {{1, "rnd", "x", 1, 1}, {2, "show", "y", 5, 5}};
  EXPECT_EQ(PickFairShare(jobs, shares), 0u) << "rnd: 1 per unit < show: 1.67";
  shares.project_running["rnd"] = 2;
  EXPECT_FALSE(ProjectAllows("rnd", shares)) << "rnd is at its cap of 2";
  EXPECT_EQ(PickFairShare(jobs, shares), 1u) << "capped projects are skipped";
  EXPECT_TRUE(ProjectAllows("unlisted", shares));
  shares.project_running["show"] = 1000;
  EXPECT_EQ(PickFairShare(jobs, shares), 1u) << "show has no cap";
  EXPECT_FALSE(PickFairShare({{1, "rnd", "x", 2, 2}}, shares).has_value());
}

}  // namespace
}  // namespace tessera::policy
