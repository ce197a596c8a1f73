// The broker's per-worker GPU bookkeeping: each lease's claim is kept under (task_id, attempt),
// so ending one lease gives back exactly what it took and nothing of another attempt's.

#include "scheduler/broker/slot_claims.h"

#include <gtest/gtest.h>

#include "tests/scheduler/policy/gpu_offers.h"

namespace tessera::broker {
namespace {

using testing::Share;

// Two GPUs of 24 GiB, each shared four ways.
policy::WorkerOffer SharingWorker() { return testing::SharingWorker(2, 4); }

TEST(SlotClaimsTest, ReleaseGivesBackExactlyWhatThatAttemptTook) {
  const policy::WorkerOffer w = SharingWorker();
  SlotClaims claims;
  claims.Reset(2);
  // Task 7's attempt 1 is still stopping on GPU 0 while its attempt 2 runs there too.
  claims.Take(7, 1, Share(0.25, 1000), w, {0});
  claims.Take(7, 2, Share(0.5, 2000), w, {0});
  claims.Take(8, 1, Share(0.25), w, {1});
  EXPECT_EQ(claims.gpus()[0].slots_used, 3);
  EXPECT_EQ(claims.gpus()[0].memory_mb_used, 3000);
  claims.Release(7, 1);
  EXPECT_EQ(claims.gpus()[0].slots_used, 2) << "attempt 2's half stays held";
  EXPECT_EQ(claims.gpus()[0].memory_mb_used, 2000);
  claims.Release(7, 1);  // a second release of the same lease gives nothing back again
  claims.Release(9, 1);  // nor does one it never took
  EXPECT_EQ(claims.gpus()[0].slots_used, 2);
  EXPECT_EQ(claims.gpus()[1].slots_used, 1);
  claims.Release(7, 2);
  EXPECT_EQ(claims.gpus()[0].slots_used, 0);
  EXPECT_EQ(claims.gpus()[0].memory_mb_used, 0);
}

TEST(SlotClaimsTest, TakingAgainUnderOneKeyReplacesItsClaim) {
  const policy::WorkerOffer w = SharingWorker();
  SlotClaims claims;
  claims.Reset(2);
  claims.Take(7, 1, Share(0.25), w, {0});
  claims.Take(7, 1, Share(0.25), w, {1});
  EXPECT_EQ(claims.gpus()[0].slots_used, 0);
  EXPECT_EQ(claims.gpus()[1].slots_used, 1);
  claims.Take(8, 1, spec::ResourceSpec{}, w, {});  // a task without GPUs holds nothing
  claims.Reset(2);
  EXPECT_EQ(claims.gpus()[1].slots_used, 0);
}

TEST(SlotClaimsTest, DeclaredCoresAndRamAreHeldPerLease) {
  const policy::WorkerOffer w = SharingWorker();
  SlotClaims claims;
  claims.Reset(2);
  spec::ResourceSpec cpu;
  cpu.cpu_cores = 4;
  cpu.ram_mb = 8000;
  claims.Take(7, 1, cpu, w, {});
  claims.Take(8, 1, cpu, w, {});
  claims.Take(9, 1, spec::ResourceSpec{}, w, {});  // declares nothing: holds nothing
  EXPECT_EQ(claims.cpu().cores, 8);
  EXPECT_EQ(claims.cpu().ram_mb, 16000);
  claims.Take(7, 1, cpu, w, {});  // taken again under its key: not counted twice
  EXPECT_EQ(claims.cpu().cores, 8);
  claims.Release(7, 1);
  EXPECT_EQ(claims.cpu().cores, 4);
  EXPECT_EQ(claims.cpu().ram_mb, 8000);
  EXPECT_EQ(claims.GpusHeld(8, 1, w, 0.0), 0.0) << "a CPU task holds no GPU";
  claims.Reset(2);
  EXPECT_EQ(claims.cpu().cores, 0);
}

TEST(SlotClaimsTest, ViewListsEachGpusTasksAndFreeShare) {
  const policy::WorkerOffer w = SharingWorker();
  SlotClaims claims;
  claims.Reset(2);
  claims.Take(7, 1, Share(0.25), w, {0});
  claims.Take(8, 3, Share(0.5), w, {0});
  spec::ResourceSpec whole;
  whole.gpus = 1;
  claims.Take(9, 1, whole, w, {1});
  const nlohmann::json view = claims.View(w);
  ASSERT_EQ(view.size(), 2u);
  EXPECT_EQ(view[0]["free_share"], 0.25);
  EXPECT_EQ(view[0]["slots"], 4);
  EXPECT_EQ(view[0]["slots_used"], 3);
  EXPECT_EQ(view[0]["tasks"], nlohmann::json::parse(R"([{"task_id": 7, "attempt": 1, "share": 0.25},
                                      {"task_id": 8, "attempt": 3, "share": 0.5}])"));
  EXPECT_EQ(view[1]["whole"], true);
  EXPECT_EQ(view[1]["free_share"], 0.0);
  EXPECT_EQ(view[1]["tasks"][0]["share"], 1.0);
  EXPECT_DOUBLE_EQ(claims.GpusHeld(8, 3, w, 1.0), 0.5);
  EXPECT_DOUBLE_EQ(claims.GpusHeld(9, 1, w, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(claims.GpusHeld(10, 1, w, 2.0), 2.0) << "not held here: the fallback";
}

}  // namespace
}  // namespace tessera::broker
