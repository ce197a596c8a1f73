// GPU claims in the policy on its own: whole GPUs and shares of one, counted in integer slots --
// packing, the preference for a partly used GPU, slots and memory never over-committed, whole
// and shared tasks never on one GPU, and the reasons `tessera why` gives.

#include <gtest/gtest.h>

#include "scheduler/policy/policy.h"
#include "tests/scheduler/policy/gpu_offers.h"

namespace tessera::policy {
namespace {

using testing::Share;
using testing::SharingWorker;

spec::ResourceSpec Whole() {
  spec::ResourceSpec need;
  need.gpus = 1;
  return need;
}

// Places one task the way the broker does (pick, then hold its claim); returns its GPU or -1.
int Place(const spec::ResourceSpec& need, const WorkerOffer& w, std::vector<GpuUse>* use) {
  std::optional<std::vector<int>> gpus = PickGpus(need, w, *use);
  if (!gpus) return -1;
  EXPECT_EQ(gpus->size(), 1u);
  AddClaim(ClaimFor(need, w, *gpus), use);
  return gpus->front();
}

// The invariant every placement keeps: no GPU holds more slots or memory than it has.
void ExpectNotOverCommitted(const WorkerOffer& w, const std::vector<GpuUse>& use) {
  for (size_t i = 0; i < use.size(); ++i) {
    EXPECT_LE(use[i].slots_used, SlotsPerGpu(w)) << "GPU " << i;
    EXPECT_LE(use[i].memory_mb_used, w.gpus[i].memory_mb) << "GPU " << i;
  }
}

TEST(GpuClaimsTest, SharesAreWholeSlotsRoundedUp) {
  const WorkerOffer w = SharingWorker(1, 4);
  EXPECT_EQ(ClaimFor(Share(0.25), w, {0}).slots, 1);
  EXPECT_EQ(ClaimFor(Share(0.3), w, {0}).slots, 2);
  EXPECT_EQ(ClaimFor(Share(0.75), w, {0}).slots, 3);
  EXPECT_EQ(ClaimFor(Share(1.0), w, {0}).slots, 4);
  EXPECT_FALSE(ClaimFor(Share(0.25), w, {0}).whole);
  EXPECT_TRUE(ClaimFor(Whole(), w, {0}).whole);
  EXPECT_DOUBLE_EQ(GpusHeld(ClaimFor(Share(0.25), w, {0}), w), 0.25);
  EXPECT_DOUBLE_EQ(GpusHeld(ClaimFor(Whole(), w, {0}), w), 1.0);
  // Rounding never makes 1/3 of 3 slots two slots.
  EXPECT_EQ(ClaimFor(Share(1.0 / 3), SharingWorker(1, 3), {0}).slots, 1);
}

TEST(GpuClaimsTest, SixteenQuarterSharesFillFourGpusOfFourSlots) {
  const WorkerOffer w = SharingWorker(4, 4);
  std::vector<GpuUse> use(4);
  std::vector<int> per_gpu(4, 0);
  for (int i = 0; i < 16; ++i) {
    const int gpu = Place(Share(0.25), w, &use);
    ASSERT_GE(gpu, 0) << "task " << i << " found nothing free";
    ++per_gpu[gpu];
    ExpectNotOverCommitted(w, use);
  }
  EXPECT_EQ(per_gpu, (std::vector<int>{4, 4, 4, 4}));
  EXPECT_EQ(Place(Share(0.25), w, &use), -1) << "a 17th share does not fit";
}

TEST(GpuClaimsTest, APartlyUsedGpuFillsBeforeAnEmptyOneOpens) {
  const WorkerOffer w = SharingWorker(3, 4);
  std::vector<GpuUse> use(3);
  use[1].slots_used = 1;  // GPU 1 already holds a quarter
  EXPECT_EQ(Place(Share(0.25), w, &use), 1) << "not the empty GPU 0";
  EXPECT_EQ(Place(Share(0.5), w, &use), 1) << "GPU 1 still has two slots";
  EXPECT_EQ(use[1].slots_used, 4);
  EXPECT_EQ(Place(Share(0.25), w, &use), 0) << "GPU 1 is full: the first empty one opens";
  EXPECT_EQ(Place(Share(0.25), w, &use), 0);
  // A larger share goes where it fits, even if that GPU is emptier.
  use[0].slots_used = 3;
  EXPECT_EQ(Place(Share(0.5), w, &use), 2);
}

TEST(GpuClaimsTest, SlotsAreNeverOverCommitted) {
  const WorkerOffer w = SharingWorker(2, 4);
  std::vector<GpuUse> use(2);
  use[0].slots_used = 3;
  use[1].slots_used = 3;
  EXPECT_FALSE(PickGpus(Share(0.5), w, use).has_value()) << "one slot free on each, two needed";
  EXPECT_EQ(PickGpus(Share(0.25), w, use), std::vector<int>{0});
  // Random mixes of shares never exceed a GPU's slots.
  std::vector<GpuUse> mixed(2);
  const double shares[] = {0.25, 0.5, 0.75, 0.3, 1.0, 0.125};
  for (int i = 0; i < 60; ++i) {
    (void)Place(Share(shares[(i * 7) % 6]), w, &mixed);
    ExpectNotOverCommitted(w, mixed);
  }
}

TEST(GpuClaimsTest, MemoryIsNeverOverCommitted) {
  const WorkerOffer w = SharingWorker(2, 4, 24576);
  std::vector<GpuUse> use(2);
  EXPECT_EQ(Place(Share(0.25, 10000), w, &use), 0);
  EXPECT_EQ(Place(Share(0.25, 10000), w, &use), 0);
  EXPECT_EQ(Place(Share(0.25, 10000), w, &use), 1) << "GPU 0 has slots left but only 4576 MB";
  EXPECT_EQ(Place(Share(0.25, 10000), w, &use), 1);
  EXPECT_EQ(Place(Share(0.25, 10000), w, &use), -1);
  EXPECT_EQ(use[0].slots_used, 2);
  EXPECT_EQ(use[0].memory_mb_used, 20000);
  ExpectNotOverCommitted(w, use);
  EXPECT_EQ(WhyNoFreeGpu(Share(0.25, 10000), w, use),
            "GPUs of w1: 0 has 0.5 and 4576 MB free, 1 has 0.5 and 4576 MB free; the task needs "
            "0.25 and 10000 MB");
  EXPECT_EQ(Place(Share(0.25, 4000), w, &use), 0) << "a smaller ask still fits";
}

TEST(GpuClaimsTest, MemoryPerSlotBoundsWhatAShareMayAskFor) {
  WorkerOffer w = SharingWorker(1, 4, 24576);
  w.memory_mb_per_slot = 6000;
  JobNeeds job;
  job.resources = Share(0.25, 8000);
  EXPECT_EQ(WhyNever(job, w),
            "gives a gpu_share of 0.25 as 1 of its 4 slots per GPU, with 6000 MB of GPU memory; a "
            "task asks for 8000 MB");
  job.resources = Share(0.5, 8000);
  EXPECT_TRUE(CouldEverRun(job, w)) << "two slots give 12000 MB";
  EXPECT_EQ(ClaimFor(job.resources, w, {0}).memory_mb, 12000) << "it holds its slots' memory";
  // A task with no memory ask still holds its slot's memory.
  EXPECT_EQ(ClaimFor(Share(0.25), w, {0}).memory_mb, 6000);
  // Elsewhere the ask is checked against the GPU as before.
  job.resources = Share(0.25, 30000);
  EXPECT_NE(WhyNever(job, w).find("has 0 GPU(s) with >= 30000 MB"), std::string::npos);
}

TEST(GpuClaimsTest, WholeAndSharedTasksNeverShareAGpu) {
  const WorkerOffer w = SharingWorker(2, 4);
  std::vector<GpuUse> use(2);
  EXPECT_EQ(Place(Share(0.25), w, &use), 0);
  EXPECT_EQ(PickGpus(Whole(), w, use), std::vector<int>{1}) << "not on GPU 0, which holds a share";
  AddClaim(ClaimFor(Whole(), w, {1}), &use);
  EXPECT_TRUE(use[1].whole);
  EXPECT_EQ(Place(Share(0.25), w, &use), 0) << "never onto the GPU held whole";
  EXPECT_EQ(Place(Share(0.5), w, &use), 0);
  EXPECT_EQ(Place(Share(0.25), w, &use), -1) << "GPU 0 is full and GPU 1 is held whole";
  EXPECT_FALSE(PickGpus(Whole(), w, use).has_value());
  EXPECT_EQ(WhyNoFreeGpu(Whole(), w, use),
            "GPUs of w1: 0 has 0 free, 1 has 0 free; the task needs a whole GPU");
  RemoveClaim(ClaimFor(Whole(), w, {1}), &use);
  EXPECT_FALSE(use[1].whole);
  EXPECT_EQ(Place(Share(0.25), w, &use), 1);
}

TEST(GpuClaimsTest, AShareOnAWorkerThatDoesNotShareTakesAWholeGpu) {
  const WorkerOffer w = SharingWorker(2, 0);  // gpu_sharing: whole
  std::vector<GpuUse> use(2);
  EXPECT_TRUE(ClaimFor(Share(0.25), w, {0}).whole);
  EXPECT_EQ(Place(Share(0.25), w, &use), 0);
  EXPECT_EQ(Place(Share(0.25), w, &use), 1) << "never a second task on GPU 0";
  EXPECT_EQ(Place(Share(0.25), w, &use), -1);
  EXPECT_EQ(WhyNoFreeGpu(Share(0.25), w, use),
            "GPUs of w1: 0 has 0 free, 1 has 0 free; the task needs a whole GPU");
  // A share needs a GPU: a worker without one can never run it.
  JobNeeds job;
  job.resources = Share(0.25);
  EXPECT_NE(WhyNever(job, SharingWorker(0, 0)).find("has 0 GPU(s)"), std::string::npos);
}

TEST(GpuClaimsTest, WhyNamesTheGpuAndWhatTheTaskNeeds) {
  const WorkerOffer w = SharingWorker(1, 4);
  std::vector<GpuUse> use(1);
  EXPECT_EQ(Place(Share(0.5), w, &use), 0);
  EXPECT_EQ(WhyNoFreeGpu(Share(0.5), w, use), "") << "it fits";
  EXPECT_EQ(WhyNoFreeGpu(Share(0.75), w, use), "GPU 0 of w1 has 0.5 free, the task needs 0.75");
  EXPECT_EQ(WhyNoFreeGpu(Share(0.6), w, use),
            "GPU 0 of w1 has 0.5 free, the task needs 0.75 (0.6 rounded up to 3 of 4 slots)");
}

TEST(GpuClaimsTest, GivingAClaimBackRestoresExactlyWhatItTook) {
  const WorkerOffer w = SharingWorker(1, 8);
  std::vector<GpuUse> use(1);
  const GpuClaim a = ClaimFor(Share(0.25, 1000), w, {0});
  const GpuClaim b = ClaimFor(Share(0.5, 3000), w, {0});
  AddClaim(a, &use);
  AddClaim(b, &use);
  EXPECT_EQ(use[0].slots_used, 6);
  EXPECT_EQ(use[0].memory_mb_used, 4000);
  RemoveClaim(a, &use);
  EXPECT_EQ(use[0].slots_used, 4);
  EXPECT_EQ(use[0].memory_mb_used, 3000);
  EXPECT_DOUBLE_EQ(FreeShare(w, use, 0), 0.5);
  RemoveClaim(b, &use);
  EXPECT_EQ(use[0].slots_used, 0);
  EXPECT_EQ(use[0].memory_mb_used, 0);
  // Out-of-range GPU indices (a worker that re-registered with fewer GPUs) are ignored.
  AddClaim(ClaimFor(Share(0.25), w, {5}), &use);
  EXPECT_EQ(use[0].slots_used, 0);
}

TEST(GpuClaimsTest, AnUnhealthyGpuTakesNoNewTaskAndWhySaysWhy) {
  WorkerOffer w = SharingWorker(2, 4);
  std::vector<GpuUse> use(2);
  EXPECT_EQ(Place(Share(0.25), w, &use), 0);
  // GPU 0 holds a quarter: a partly used GPU fills first -- until its telemetry faults it.
  w.gpu_faults[0] = "Xid 79: GPU has fallen off the bus";
  EXPECT_EQ(Place(Share(0.25), w, &use), 1) << "the faulted GPU is passed over";
  EXPECT_EQ(PickGpus(Whole(), w, use), std::nullopt) << "GPU 1 holds a share, GPU 0 is faulted";
  EXPECT_EQ(WhyNoFreeGpu(Whole(), w, use),
            "GPUs of w1: 0 is unhealthy (Xid 79: GPU has fallen off the bus), 1 has 0.75 free; "
            "the task needs a whole GPU");
  w.gpu_faults[1] = "2 uncorrected ECC error(s)";
  EXPECT_EQ(PickGpus(Share(0.25), w, use), std::nullopt) << "no healthy GPU is left";
  // A fault is "not now", never "never": the job still waits for the worker.
  EXPECT_EQ(WhyNeverGpus(Share(0.25), w), "");

  WorkerOffer one = SharingWorker(1, 0);
  one.gpu_faults[0] = "GPU 0 is lost: GPU is lost";
  std::vector<GpuUse> free(1);
  EXPECT_EQ(WhyNoFreeGpu(Whole(), one, free),
            "GPU 0 of w1 is unhealthy (GPU 0 is lost: GPU is lost), the task needs a whole GPU");
  one.gpu_faults.clear();
  EXPECT_EQ(PickGpus(Whole(), one, free), std::vector<int>{0}) << "healthy again";
}

}  // namespace
}  // namespace tessera::policy
