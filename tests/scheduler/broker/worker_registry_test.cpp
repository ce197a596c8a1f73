// The worker registry on its own, with a clock moved by hand: liveness (who is silent past the
// deadline), how long a live connection holds its name, cost metering, operators' holds, and the
// slots and GPUs that leases and stopping copies take.

#include "scheduler/broker/worker_registry.h"

#include <gtest/gtest.h>

#include <chrono>

namespace tessera::broker {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

WorkerConn Conn(int64_t id, const std::string& name, int slots = 2, int gpus = 0) {
  WorkerConn conn;
  conn.offer.id = id;
  conn.offer.name = name;
  conn.slots = slots;
  conn.offer.gpus.resize(gpus);
  conn.claims.Reset(gpus);
  return conn;
}

// Whether a lease holds any of GPU `index`.
bool Held(const WorkerConn& worker, size_t index) {
  const policy::GpuUse& use = worker.claims.gpus().at(index);
  return use.whole || use.slots_used > 0;
}

TEST(WorkerRegistryTest, WorkerSilentPastTheDeadlineIsDeadAndAMessageKeepsItAlive) {
  const Clock::time_point t0{};
  WorkerRegistry registry(5000ms);
  registry.Add("a", Conn(1, "alpha"), t0);
  registry.Add("b", Conn(2, "beta"), t0);
  EXPECT_TRUE(registry.Silent(t0 + 5000ms).empty());  // at the deadline: still alive
  ASSERT_NE(registry.MarkHeard("b", t0 + 4000ms), nullptr);
  EXPECT_EQ(registry.MarkHeard("nobody", t0 + 4000ms), nullptr);
  EXPECT_EQ(registry.Silent(t0 + 5001ms), std::vector<std::string>{"a"});
  EXPECT_TRUE(registry.Silent(t0 + 9000ms).size() == 1);
  EXPECT_EQ(registry.Silent(t0 + 9001ms).size(), 2u);
}

TEST(WorkerRegistryTest, LiveConnectionHoldsItsNameUntilTheDeadline) {
  const Clock::time_point t0{};
  WorkerRegistry registry(5000ms);
  const WorkerConn& a = registry.Add("a", Conn(1, "alpha"), t0);
  EXPECT_EQ(registry.AliveFor(a, t0 + 1500ms), std::optional(3500ms));
  EXPECT_EQ(registry.AliveFor(a, t0 + 5000ms), std::optional(0ms));
  EXPECT_EQ(registry.AliveFor(a, t0 + 5001ms), std::nullopt);
  EXPECT_EQ(registry.FindByName("alpha")->first, "a");
  EXPECT_EQ(registry.FindByName("gamma"), registry.end());
}

TEST(WorkerRegistryTest, LastSeenIsOnTheWallClock) {
  const Clock::time_point t0{};
  WorkerRegistry registry(5000ms);
  registry.Add("a", Conn(7, "alpha"), t0);
  auto seen = registry.LastSeen(t0 + 3000ms, 1'000'000);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0], (std::pair<int64_t, int64_t>{7, 997'000}));
}

TEST(WorkerRegistryTest, MeteringChargesRegisteredTimeOnceForPricedWorkers) {
  const Clock::time_point t0{};
  WorkerRegistry registry(5000ms);
  WorkerConn priced = Conn(1, "alpha");
  priced.price.per_hour = 2.0;
  registry.Add("a", std::move(priced), t0);
  registry.Add("b", Conn(2, "free"), t0);
  auto costs = registry.Meter(t0 + 30min);
  ASSERT_EQ(costs.size(), 1u);  // a worker without a price costs nothing (and writes nothing)
  EXPECT_EQ(costs[0].first, 1);
  EXPECT_DOUBLE_EQ(costs[0].second, 1.0);
  // Metered up to then: the next hour counts from there, and only for the one asked.
  const std::string only = "a";
  costs = registry.Meter(t0 + 90min, &only);
  ASSERT_EQ(costs.size(), 1u);
  EXPECT_DOUBLE_EQ(costs[0].second, 2.0);
  EXPECT_EQ(registry.Find("a")->metered_until, t0 + 90min);
  EXPECT_EQ(registry.Find("b")->metered_until, t0 + 30min);
}

TEST(WorkerRegistryTest, DisabledNamesHoldAcrossConnectionsAndDrainIsRemembered) {
  const Clock::time_point t0{};
  WorkerRegistry registry(5000ms);
  registry.SetDisabled("alpha", true);
  WorkerConn& a = registry.Add("a", Conn(1, "alpha"), t0);
  EXPECT_TRUE(a.disabled);
  EXPECT_EQ(a.free_slots(), 0);
  registry.SetDisabled("alpha", false);
  EXPECT_FALSE(a.disabled);
  EXPECT_EQ(a.free_slots(), 2);
  registry.SetDisabledNames({"alpha"});
  EXPECT_TRUE(registry.Find("a")->disabled);
  registry.SetDisabledNames({});

  auto drained = registry.RequestDrain("alpha");
  ASSERT_NE(drained, registry.end());
  EXPECT_TRUE(drained->second.draining && drained->second.drain_requested);
  EXPECT_EQ(registry.RequestDrain("nobody"), registry.end());
  WorkerConn other = Conn(2, "beta");
  EXPECT_TRUE(WorkerRegistry::MarkDraining(other));
  EXPECT_FALSE(WorkerRegistry::MarkDraining(other));  // already draining: no news
}

TEST(WorkerRegistryTest, StoppingCopyKeepsItsSlotAndGpusUntilTheHeartbeatDropsIt) {
  const Clock::time_point t0{};
  WorkerRegistry registry(5000ms);
  WorkerConn& w = registry.Add("a", Conn(1, "alpha", /*slots=*/2, /*gpus=*/2), t0);
  spec::ResourceSpec one_gpu;
  one_gpu.gpus = 1;
  WorkerRegistry::Book(w, 10, 1, one_gpu, {0});
  WorkerRegistry::Book(w, 11, 1, one_gpu, {1});
  EXPECT_EQ(w.free_slots(), 0);
  EXPECT_TRUE(Held(w, 0) && Held(w, 1));

  // Task 11 finished: its slot and GPU are free, the worker is not idle yet.
  WorkerRegistry::Release(w, 11, 1, t0 + 10s);
  EXPECT_EQ(w.free_slots(), 1);
  EXPECT_FALSE(Held(w, 1));
  EXPECT_EQ(w.idle_since, t0);

  // Task 10 cancelled: it may still be stopping, so it keeps its slot and GPU.
  WorkerRegistry::MarkStopping(w, 10, 1);
  WorkerRegistry::Release(w, 10, 1, t0 + 20s);
  EXPECT_EQ(w.idle_since, t0 + 20s);
  EXPECT_EQ(w.free_slots(), 1);
  EXPECT_TRUE(Held(w, 0));
  // A heartbeat that still lists it changes nothing; one that does not frees them.
  WorkerRegistry::FreeStopped(w, {protocol::TaskRef{10, 1}});
  EXPECT_TRUE(Held(w, 0));
  WorkerRegistry::FreeStopped(w, {});
  EXPECT_FALSE(Held(w, 0));
  EXPECT_EQ(w.free_slots(), 2);
}

TEST(WorkerRegistryTest, StateChangesAreReportedOnce) {
  const Clock::time_point t0{};
  WorkerRegistry registry(5000ms);
  WorkerConn& w = registry.Add("a", Conn(1, "alpha"), t0);
  EXPECT_TRUE(registry.TakeStateChanges().empty());
  WorkerRegistry::Book(w, 10, 1, spec::ResourceSpec{}, {});
  auto changed = registry.TakeStateChanges();
  ASSERT_EQ(changed.size(), 1u);
  EXPECT_EQ(changed[0].second, store::WorkerState::kBusy);
  EXPECT_TRUE(registry.TakeStateChanges().empty());
  registry.ForgetLeases();
  changed = registry.TakeStateChanges();
  ASSERT_EQ(changed.size(), 1u);
  EXPECT_EQ(changed[0].second, store::WorkerState::kIdle);
}

}  // namespace
}  // namespace tessera::broker
