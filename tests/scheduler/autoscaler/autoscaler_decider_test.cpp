// The autoscaler's policy on its own: one case per rule, with hand-built groups, node states and
// queues, and exact node counts and reasons.

#include <gtest/gtest.h>

#include "scheduler/autoscaler/decider.h"

namespace tessera::autoscaler {
namespace {

using std::chrono::minutes;

// 10:00 UTC on some day; reasons print times of day.
TimePoint At(int hour, int minute, int second = 0) {
  return TimePoint(Seconds(20000LL * 86400 + hour * 3600 + minute * 60 + second));
}
const TimePoint kNow = At(10, 0);

NodeGroup Group(std::string name, Market market, double price, int max_nodes, int gpus = 1,
                int64_t memory_mib = 24576) {
  NodeGroup g;
  g.name = std::move(name);
  g.provider = "cli";
  g.instance_type = "test." + g.name;
  g.gpus = {gpus, "A10G", memory_mib};
  g.price_per_hour = price;
  g.market = market;
  g.max_nodes = max_nodes;
  g.pools = {"default"};
  g.boot_time = Seconds(180);
  return g;
}

DemandClass Work(std::string name, int64_t waiting, double seconds, bool interruptible = true) {
  DemandClass c;
  c.name = std::move(name);
  c.tasks_waiting = waiting;
  c.gpus = 1;
  c.seconds_per_task = seconds;
  c.interruptible = interruptible;
  return c;
}

Node Idle(std::string id, TimePoint since) { return {std::move(id), NodeState::kIdle, since}; }
Node Busy(std::string id) { return {std::move(id), NodeState::kBusy, {}}; }

std::string Reasons(const Plan& plan) {
  std::string out;
  for (const Decision& d : plan.decisions) {
    out += std::string("  [") + ActionName(d.action) + "] " + d.reason + "\n";
  }
  return out;
}
// The reason of the one decision of `action` whose text holds `text` ("" when none does).
std::string Find(const Plan& plan, Action action, const std::string& text) {
  for (const Decision& d : plan.decisions) {
    if (d.action == action && d.reason.find(text) != std::string::npos) return d.reason;
  }
  return "";
}
int Adds(const Plan& plan, const std::string& group) { return plan.Find(group)->add; }

Plan Tick(const std::vector<NodeGroup>& groups, const std::map<std::string, GroupState>& states,
          std::vector<DemandClass> classes, const Settings& settings = {}, TimePoint now = kNow) {
  return Decide(groups, states, Demand{std::move(classes)}, settings, now);
}

TEST(AutoscalerPolicyTest, WorkIsSpreadOverTheHorizonAndNeverOnMoreNodesThanTasks) {
  const std::vector<NodeGroup> groups = {Group("spot-a10", Market::kSpot, 0.5, 50)};
  // 30 tasks x 2 min = 60 node-minutes over a 15 min horizon: 4 nodes.
  Plan plan = Tick(groups, {}, {Work("job 1", 30, 120)});
  EXPECT_EQ(Adds(plan, "spot-a10"), 4) << Reasons(plan);
  EXPECT_NE(Find(plan, Action::kScaleOut,
                 "group spot-a10: +4 nodes: 30 tasks waiting (~60 node-minutes of work); spot "
                 "preferred"),
            "")
      << Reasons(plan);
  // 3 one-hour tasks: 3 nodes, not 12 (a task cannot be split to meet the horizon).
  plan = Tick(groups, {}, {Work("job 2", 3, 3600)});
  EXPECT_EQ(Adds(plan, "spot-a10"), 3) << Reasons(plan);
  // Two 2-GPU tasks fit a 4-GPU node.
  NodeGroup quad = Group("spot-4xa10", Market::kSpot, 2.0, 50, 4);
  DemandClass pairs = Work("job 3", 8, 900);
  pairs.gpus = 2;
  plan = Tick({quad}, {}, {pairs});
  EXPECT_EQ(Adds(plan, "spot-4xa10"), 4) << Reasons(plan);
}

TEST(AutoscalerPolicyTest, ScalesOutToMaxFor100WaitingTasks) {
  const std::vector<NodeGroup> groups = {Group("spot-a100", Market::kSpot, 1.2, 10)};
  // 100 tasks x 10 min = 1000 node-minutes: 67 nodes over 15 min, held at 10.
  Plan plan = Tick(groups, {}, {Work("job 7", 100, 600)});
  EXPECT_EQ(Adds(plan, "spot-a100"), 10) << Reasons(plan);
  EXPECT_EQ(plan.Find("spot-a100")->nodes_after, 10);
  EXPECT_NE(Find(plan, Action::kScaleOut, "+10 nodes: 100 tasks waiting (~1000 node-minutes"), "")
      << Reasons(plan);
  EXPECT_NE(Find(plan, Action::kHold, "group spot-a100 held at max 10 (67 wanted)"), "")
      << Reasons(plan);
  EXPECT_DOUBLE_EQ(plan.cost_per_hour, 12.0);
}

TEST(AutoscalerPolicyTest, NothingIsRequestedTwiceWhileBootsArePending) {
  const std::vector<NodeGroup> groups = {Group("od-a10", Market::kOnDemand, 1.0, 20)};
  GroupState booting;
  for (int i = 0; i < 4; ++i) booting.pending.push_back({"req-" + std::to_string(i), At(9, 59)});
  booting.last_scale_out = At(9, 59);
  // 4 nodes' worth of work, 4 nodes booting: nothing more.
  Plan plan = Tick(groups, {{"od-a10", booting}}, {Work("job 1", 60, 60)});
  EXPECT_EQ(Adds(plan, "od-a10"), 0) << Reasons(plan);
  EXPECT_TRUE(plan.decisions.empty()) << Reasons(plan);
  // The queue grows to 6 nodes' worth: only the 2 missing ones.
  plan = Tick(groups, {{"od-a10", booting}}, {Work("job 1", 90, 60)});
  EXPECT_EQ(Adds(plan, "od-a10"), 2) << Reasons(plan);
  EXPECT_EQ(plan.Find("od-a10")->nodes_after, 6);
}

TEST(AutoscalerPolicyTest, ScalesInOnlyNodesIdlePastTheGraceAndNeverBusyOnesOrBelowMin) {
  NodeGroup od = Group("od-a10", Market::kOnDemand, 1.0, 20);
  od.min_nodes = 1;
  GroupState state;
  state.nodes = {Idle("n-a", At(9, 50)), Idle("n-b", At(9, 58)), Busy("n-c"),
                 Idle("n-d", At(9, 54))};
  // Nothing waits; grace 5 min: n-a (10 min idle) and n-d (6 min) go, longest idle first; n-b
  // (2 min) is within its grace; n-c is busy.
  Plan plan = Tick({od}, {{"od-a10", state}}, {});
  EXPECT_EQ(plan.Find("od-a10")->drain, (std::vector<std::string>{"n-a", "n-d"})) << Reasons(plan);
  EXPECT_NE(Find(plan, Action::kScaleIn,
                 "group od-a10: -2 nodes (n-a, n-d): idle for at least 5 min; no waiting work"),
            "")
      << Reasons(plan);
  EXPECT_EQ(plan.Find("od-a10")->nodes_after, 2);
  // Later only n-b and the busy n-c are left: n-b goes, n-c stays (it also holds min 1).
  state.nodes = {Idle("n-b", At(9, 58)), Busy("n-c")};
  plan = Tick({od}, {{"od-a10", state}}, {}, {}, At(10, 4));
  EXPECT_EQ(plan.Find("od-a10")->drain, (std::vector<std::string>{"n-b"})) << Reasons(plan);
  // Never below min, however long a node idles.
  state.nodes = {Idle("n-b", At(8, 0))};
  plan = Tick({od}, {{"od-a10", state}}, {});
  EXPECT_TRUE(plan.Find("od-a10")->drain.empty()) << Reasons(plan);
}

TEST(AutoscalerPolicyTest, NoScaleInWithinTheCooldownAfterAScaleOut) {
  const std::vector<NodeGroup> groups = {Group("od-a10", Market::kOnDemand, 1.0, 20)};
  GroupState state;
  state.nodes = {Idle("n-a", At(9, 50)), Idle("n-b", At(9, 50))};
  state.last_scale_out = At(9, 57);
  Plan plan = Tick(groups, {{"od-a10", state}}, {});
  EXPECT_TRUE(plan.Find("od-a10")->drain.empty()) << Reasons(plan);
  EXPECT_NE(Find(plan, Action::kHold,
                 "group od-a10: 2 idle nodes kept until 10:07 UTC: cooldown after the scale-out "
                 "at 09:57 UTC"),
            "")
      << Reasons(plan);
  plan = Tick(groups, {{"od-a10", state}}, {}, {}, At(10, 7));
  EXPECT_EQ(plan.Find("od-a10")->drain.size(), 2u) << Reasons(plan);
}

// Steps a group through a queue that wobbles around a node threshold, one minute at a time:
// nodes boot in 3 minutes, the first `busy` registered nodes run tasks, the others idle.
struct WobbleResult {
  int added = 0, drained = 0;
};
WobbleResult Wobble(const Settings& settings, int period_min) {
  const std::vector<NodeGroup> groups = {Group("od-a10", Market::kOnDemand, 1.0, 20)};
  std::map<std::string, GroupState> states;
  GroupState& s = states["od-a10"];
  WobbleResult result;
  int next_id = 0;
  for (int minute = 0; minute < 90; ++minute) {
    const TimePoint now = kNow + minutes(minute);
    for (auto it = s.pending.begin(); it != s.pending.end();) {
      if (now - it->requested_at >= minutes(3)) {
        s.nodes.push_back(Idle(it->id, now));
        it = s.pending.erase(it);
      } else {
        ++it;
      }
    }
    // 70 one-minute tasks (4.7 nodes' worth) and 55 (3.7 nodes' worth), alternating.
    const bool high = (minute / period_min) % 2 == 0;
    const int busy = high ? 5 : 4;
    for (size_t i = 0; i < s.nodes.size(); ++i) {
      Node& n = s.nodes[i];
      if (static_cast<int>(i) < busy) {
        n.state = NodeState::kBusy;
      } else if (n.state == NodeState::kBusy) {
        n = Idle(n.id, now);
      }
    }
    Plan plan = Tick(groups, states, {Work("job 1", high ? 70 : 55, 60)}, settings, now);
    const GroupPlan& g = *plan.Find("od-a10");
    for (int i = 0; i < g.add; ++i) s.pending.push_back({"n" + std::to_string(next_id++), now});
    if (g.add > 0) s.last_scale_out = now;
    for (const std::string& id : g.drain) {
      std::erase_if(s.nodes, [&](const Node& n) { return n.id == id; });
    }
    result.added += g.add;
    result.drained += static_cast<int>(g.drain.size());
  }
  return result;
}

TEST(AutoscalerPolicyTest, AQueueWobblingAroundAThresholdDoesNotFlap) {
  // Fast wobble (every minute) and slow wobble (every 8 minutes: longer than the grace and the
  // cooldown, so only the hysteresis margin keeps the fifth node): 5 nodes once, none removed.
  for (int period : {1, 8}) {
    WobbleResult r = Wobble(Settings{}, period);
    EXPECT_EQ(r.added, 5) << "period " << period;
    EXPECT_EQ(r.drained, 0) << "period " << period;
  }
  // Without grace, cooldown and hysteresis the same queue does flap: the test can see it.
  Settings twitchy;
  twitchy.scale_in_grace = Seconds(0);
  twitchy.cooldown = Seconds(0);
  twitchy.scale_in_hysteresis = 0;
  WobbleResult r = Wobble(twitchy, 8);
  EXPECT_GT(r.drained, 2);
  EXPECT_GT(r.added, 7);
}

TEST(AutoscalerPolicyTest, TheFarmBudgetCapsScaleOutCheapestPerGpuHourFirst) {
  NodeGroup single = Group("od-a10", Market::kOnDemand, 1.0, 10);
  NodeGroup quad = Group("od-4xa10", Market::kOnDemand, 3.2, 2, 4);  // $0.80 per GPU-hour
  Settings settings;
  settings.budget_per_hour = 10;
  GroupState quad_state;
  quad_state.nodes = {Busy("q-1")};
  // 400 one-GPU tasks of 10 min: far more than the budget buys. The 4-GPU group is cheaper per
  // GPU-hour, so it fills first (1 + 1 to its max 2, $6.40/h); $3.60/h is left: 3 single nodes.
  Plan plan =
      Tick({single, quad}, {{"od-4xa10", quad_state}}, {Work("job 1", 400, 600, false)}, settings);
  EXPECT_EQ(Adds(plan, "od-4xa10"), 1) << Reasons(plan);
  EXPECT_EQ(Adds(plan, "od-a10"), 3) << Reasons(plan);
  EXPECT_NEAR(plan.cost_per_hour, 9.4, 1e-9);
  EXPECT_NE(Find(plan, Action::kHold, "budget cap $10/h reached: od-a10 held at 3 (10 wanted)"), "")
      << Reasons(plan);
  // At the cap nothing more is added, whatever waits.
  GroupState full;
  full.nodes = {Busy("s-1"), Busy("s-2"), Busy("s-3")};
  quad_state.nodes.push_back(Busy("q-2"));
  plan = Tick({single, quad}, {{"od-4xa10", quad_state}, {"od-a10", full}},
              {Work("job 1", 400, 600, false)}, settings);
  EXPECT_EQ(Adds(plan, "od-4xa10") + Adds(plan, "od-a10"), 0) << Reasons(plan);
  EXPECT_LE(plan.cost_per_hour, 10.0);
}

TEST(AutoscalerPolicyTest, AtTheCapPricierNodesDoingCheaperWorkDrainToPayForCheaperOnes) {
  NodeGroup spot = Group("spot-a10", Market::kSpot, 0.5, 10);
  NodeGroup big = Group("od-a100", Market::kOnDemand, 4.0, 4, 1, 81920);
  Settings settings;
  settings.budget_per_hour = 10;
  GroupState busy_big;
  busy_big.nodes = {{"a-1", NodeState::kBusy, {}, At(10, 30)},
                    {"a-2", NodeState::kBusy, {}, At(10, 5)}};
  // 40 x 10 min of small work, which A100s also run. Spot is cheapest: +4 fit the $2/h left
  // ($8/h go to the two A100s, which run the rest of it). One A100 drains -- the one done
  // soonest -- to pay for more spot nodes; its task finishes first.
  Plan plan = Tick({spot, big}, {{"od-a100", busy_big}}, {Work("job 1", 40, 600)}, settings);
  EXPECT_EQ(Adds(plan, "spot-a10"), 4) << Reasons(plan);
  EXPECT_EQ(plan.Find("od-a100")->drain, (std::vector<std::string>{"a-2"})) << Reasons(plan);
  EXPECT_NE(Find(plan, Action::kScaleIn,
                 "budget cap $10/h reached: od-a100 drains 1 node (a-2) whose work spot-a10 runs "
                 "for less per task slot; busy ones finish their task first"),
            "")
      << Reasons(plan);
  // While it drains, its budget is on its way back: nothing more is drained.
  busy_big.nodes[1].state = NodeState::kDraining;
  GroupState spot_state;
  for (int i = 0; i < 4; ++i) spot_state.pending.push_back({"s-" + std::to_string(i), At(10, 0)});
  plan = Tick({spot, big}, {{"od-a100", busy_big}, {"spot-a10", spot_state}},
              {Work("job 1", 40, 600)}, settings, At(10, 1));
  EXPECT_TRUE(plan.Find("od-a100")->drain.empty()) << Reasons(plan);
}

TEST(AutoscalerPolicyTest, DeadlineWorkTakesTheBudgetOfWorkWithoutOne) {
  NodeGroup spot = Group("spot-a10", Market::kSpot, 0.5, 10);
  NodeGroup big = Group("od-a100", Market::kOnDemand, 4.0, 4, 1, 81920);
  Settings settings;
  settings.budget_per_hour = 7;
  GroupState spot_state;
  for (int i = 0; i < 8; ++i) {
    spot_state.nodes.push_back(
        {"s-" + std::to_string(i), NodeState::kBusy, {}, At(10, 20 - i)});  // s-7 ends first
  }
  DemandClass small = Work("job 1", 20, 600);
  DemandClass urgent = Work("job 2", 3, 300, false);
  urgent.min_gpu_memory_mib = 40960;
  urgent.deadline = Deadline{At(10, 20), 3};
  // Job 2 needs one A100 ($4/h); $3/h is left: two spot nodes drain, the soonest done first.
  Plan plan = Tick({spot, big}, {{"spot-a10", spot_state}}, {small, urgent}, settings);
  EXPECT_EQ(Adds(plan, "od-a100"), 0) << Reasons(plan);
  EXPECT_EQ(plan.Find("spot-a10")->drain, (std::vector<std::string>{"s-7", "s-6"}))
      << Reasons(plan);
  EXPECT_NE(Find(plan, Action::kScaleIn,
                 "spot-a10 drains 2 nodes (s-7, s-6) so job 2 can meet its deadline 10:20 UTC on "
                 "od-a100"),
            "")
      << Reasons(plan);
  EXPECT_NE(Find(plan, Action::kDeadline,
                 "job 2 will miss its deadline 10:20 UTC: forecast none (budget cap $7/h reached)"),
            "")
      << Reasons(plan);
  // Two minutes later they are gone: the A100 fits, and the forecast meets the deadline.
  spot_state.nodes.resize(6);
  plan = Tick({spot, big}, {{"spot-a10", spot_state}}, {small, urgent}, settings, At(10, 2));
  EXPECT_EQ(Adds(plan, "od-a100"), 1) << Reasons(plan);
  EXPECT_TRUE(plan.forecasts[0].met()) << Reasons(plan);
  EXPECT_EQ(plan.forecasts[0].finish, At(10, 20));
  EXPECT_TRUE(plan.Find("spot-a10")->drain.empty()) << Reasons(plan);  // not for the margin
}

TEST(AutoscalerPolicyTest, OverBudgetGivesUpRequestsThenDrainsIdleThenBusyNodes) {
  NodeGroup od = Group("od-a100", Market::kOnDemand, 4.0, 10);
  od.min_nodes = 1;
  GroupState state;
  state.nodes = {Busy("n-1"), Idle("n-2", At(9, 59)), Busy("n-3")};
  state.pending = {{"req-4", At(9, 58)}};
  Settings settings;
  settings.budget_per_hour = 6;  // lowered: 4 nodes cost $16/h
  Plan plan = Tick({od}, {{"od-a100", state}}, {Work("job 1", 50, 600, false)}, settings);
  const GroupPlan& g = *plan.Find("od-a100");
  EXPECT_EQ(g.give_up, (std::vector<std::string>{"req-4"})) << Reasons(plan);
  EXPECT_EQ(g.drain, (std::vector<std::string>{"n-2", "n-1"})) << Reasons(plan);
  EXPECT_EQ(g.add, 0);
  EXPECT_NE(Find(plan, Action::kScaleIn, "over budget ($16/h > cap $6/h): od-a100 drains 3 nodes"),
            "")
      << Reasons(plan);
  // n-3 stays (min 1); n-1 finishes its task first, and costs until then.
  EXPECT_EQ(g.nodes_after, 1);
  EXPECT_DOUBLE_EQ(plan.cost_per_hour, 8.0);
}

TEST(AutoscalerPolicyTest, WhenSpotIsBackedOffOnDemandCoversTheWaitingWork) {
  const std::vector<NodeGroup> groups = {Group("spot-a100", Market::kSpot, 1.2, 20),
                                         Group("on-demand-a100", Market::kOnDemand, 3.0, 20)};
  GroupState spot;
  BackOff(spot, Settings{}, At(9, 57), "a provider error");  // until 10:12
  // 30 tasks x 5 min = 150 node-minutes: 10 nodes over 15 min, on-demand while spot is off.
  Plan plan = Tick(groups, {{"spot-a100", spot}}, {Work("job 9", 30, 300)});
  EXPECT_EQ(Adds(plan, "spot-a100"), 0) << Reasons(plan);
  EXPECT_EQ(Adds(plan, "on-demand-a100"), 10) << Reasons(plan);
  EXPECT_NE(Find(plan, Action::kHold,
                 "spot-a100 backed off until 10:12 UTC after a provider error; on-demand covers "
                 "30 waiting tasks (on-demand-a100)"),
            "")
      << Reasons(plan);
  EXPECT_NE(Find(plan, Action::kScaleOut, "spot-a100 backed off until 10:12 UTC, on-demand covers"),
            "")
      << Reasons(plan);
  // Once the back-off is over, spot is preferred again.
  plan = Tick(groups, {{"spot-a100", spot}}, {Work("job 9", 30, 300)}, {}, At(10, 12));
  EXPECT_EQ(Adds(plan, "spot-a100"), 10) << Reasons(plan);
  EXPECT_EQ(Adds(plan, "on-demand-a100"), 0) << Reasons(plan);
}

TEST(AutoscalerPolicyTest, WorkThatMustNotBeInterruptedNeverGoesToSpot) {
  const std::vector<NodeGroup> groups = {Group("spot-a10", Market::kSpot, 0.4, 20),
                                         Group("od-a10", Market::kOnDemand, 1.0, 20)};
  GroupState spot;
  spot.nodes = {Idle("s-1", At(9, 59)), Idle("s-2", At(9, 59))};  // idle spot does not count
  Plan plan = Tick(groups, {{"spot-a10", spot}}, {Work("final comp", 45, 60, false)});
  EXPECT_EQ(Adds(plan, "spot-a10"), 0) << Reasons(plan);
  EXPECT_EQ(Adds(plan, "od-a10"), 3) << Reasons(plan);
  EXPECT_NE(Find(plan, Action::kScaleOut,
                 "group od-a10: +3 nodes: 45 tasks waiting (~45 node-minutes of work); work that "
                 "does not tolerate interruption stays off spot"),
            "")
      << Reasons(plan);
  // With only spot capacity it is reported as something no group can run, not queued forever.
  plan = Tick({groups[0]}, {}, {Work("final comp", 45, 60, false)});
  EXPECT_NE(Find(plan, Action::kUnschedulable,
                 "final comp: no node group can run its 45 waiting tasks: spot-a10 spot, and it "
                 "must not be interrupted"),
            "")
      << Reasons(plan);
}

TEST(AutoscalerPolicyTest, ReservedCapacityIsAlwaysOnAndCountsFirst) {
  NodeGroup reserved = Group("rsv-a10", Market::kReserved, 0.6, 2);
  reserved.min_nodes = 2;
  const std::vector<NodeGroup> groups = {reserved, Group("spot-a10", Market::kSpot, 0.4, 20)};
  // Not running: brought up to its min whatever the queue.
  Plan plan = Tick(groups, {}, {});
  EXPECT_EQ(Adds(plan, "rsv-a10"), 2);
  EXPECT_NE(Find(plan, Action::kScaleOut,
                 "group rsv-a10: +2 nodes: held at min 2 (reserved: always-on capacity)"),
            "")
      << Reasons(plan);
  GroupState rsv;
  rsv.nodes = {Idle("r-1", At(9, 0)), Idle("r-2", At(9, 0))};
  // 8 tasks x 200 s (1.8 nodes' worth): the reserved nodes take it, although spot is cheaper.
  plan = Tick(groups, {{"rsv-a10", rsv}}, {Work("job 1", 8, 200)});
  EXPECT_EQ(Adds(plan, "spot-a10"), 0) << Reasons(plan);
  EXPECT_TRUE(plan.Find("rsv-a10")->drain.empty());
  // 20 x 200 s (4.4 nodes' worth): reserved 2, spot the other 3.
  plan = Tick(groups, {{"rsv-a10", rsv}}, {Work("job 1", 20, 200)});
  EXPECT_EQ(Adds(plan, "spot-a10"), 3) << Reasons(plan);
  // Idle all day, it is never scaled in.
  plan = Tick(groups, {{"rsv-a10", rsv}}, {}, {}, At(18, 0));
  EXPECT_TRUE(plan.Find("rsv-a10")->drain.empty());
}

TEST(AutoscalerPolicyTest, OnlyGroupsThatMeetTheRequirementsServeADemand) {
  NodeGroup a10 = Group("spot-a10", Market::kSpot, 0.4, 20, 1, 24576);
  NodeGroup a100 = Group("spot-a100-80g", Market::kSpot, 1.5, 20, 1, 81920);
  NodeGroup cpu = Group("od-cpu", Market::kOnDemand, 0.3, 20, 0, 0);
  cpu.pools = {"sim"};
  cpu.tags = {"houdini"};
  const std::vector<NodeGroup> groups = {a10, a100, cpu};
  // 40 GiB per GPU: only the 80 GiB group has it, although the 24 GiB one is cheaper.
  DemandClass big = Work("job 5", 30, 60);
  big.min_gpu_memory_mib = 40960;
  Plan plan = Tick(groups, {}, {big});
  EXPECT_EQ(Adds(plan, "spot-a10"), 0) << Reasons(plan);
  EXPECT_EQ(Adds(plan, "spot-a100-80g"), 2) << Reasons(plan);
  // Pools and tags: CPU work in the "sim" pool needs the houdini tag.
  DemandClass sim = Work("job 6", 15, 60);
  sim.gpus = 0;
  sim.pools = {"sim"};
  sim.tags = {"houdini"};
  plan = Tick(groups, {}, {sim});
  EXPECT_EQ(Adds(plan, "od-cpu"), 1) << Reasons(plan);
  EXPECT_EQ(Adds(plan, "spot-a10") + Adds(plan, "spot-a100-80g"), 0);
  sim.tags = {"houdini", "redshift"};
  plan = Tick(groups, {}, {sim});
  EXPECT_EQ(Adds(plan, "od-cpu"), 0) << Reasons(plan);
  EXPECT_NE(Find(plan, Action::kUnschedulable, "od-cpu lacks the tag 'redshift'"), "")
      << Reasons(plan);
  // Two 80 GiB GPUs per task: no group has them.
  big.gpus = 2;
  big.min_gpu_memory_mib = 81920;
  plan = Tick(groups, {}, {big});
  EXPECT_NE(Find(plan, Action::kUnschedulable,
                 "spot-a100-80g has 1 GPU of 81920 MiB, a task needs 2 GPUs of at least 81920 MiB"),
            "")
      << Reasons(plan);
}

TEST(AutoscalerPolicyTest, ADeadlineTheForecastMissesGetsCapacityAndAForecast) {
  const std::vector<NodeGroup> groups = {Group("od-a10", Market::kOnDemand, 1.0, 20)};
  GroupState state;
  state.nodes = {Idle("n-1", At(9, 59)), Idle("n-2", At(9, 59))};
  Settings settings;
  settings.horizon = Seconds(2 * 3600);  // the horizon alone would wait for the 2 nodes
  DemandClass job = Work("job 42", 40, 300, false);
  job.deadline = Deadline{At(10, 30), 40};
  // 2 nodes: 20 rounds of 5 min, 11:40. It aims at 10:27 (a tenth of the time left in reserve):
  // by then each new node (3 min to boot) runs 4 tasks, each existing one 5: 8 more nodes, which
  // finish at 10:23.
  Plan plan = Tick(groups, {{"od-a10", state}}, {job}, settings);
  EXPECT_EQ(Adds(plan, "od-a10"), 8) << Reasons(plan);
  ASSERT_EQ(plan.forecasts.size(), 1u);
  const DeadlineForecast& f = plan.forecasts[0];
  EXPECT_EQ(f.demand, "job 42");
  EXPECT_EQ(f.before, At(11, 40));
  EXPECT_EQ(f.finish, At(10, 23));
  EXPECT_TRUE(f.met());
  EXPECT_NE(Find(plan, Action::kDeadline,
                 "job 42: deadline 10:30 UTC would be missed with the capacity there is "
                 "(forecast 11:40 UTC): od-a10 +8 nodes, forecast 10:23 UTC"),
            "")
      << Reasons(plan);
  EXPECT_NE(Find(plan, Action::kScaleOut, "deadline of job 42 at 10:30 UTC"), "") << Reasons(plan);
  // Within a $5/h budget only 3 can be added: the forecast says it will be missed, and why.
  settings.budget_per_hour = 5;
  plan = Tick(groups, {{"od-a10", state}}, {job}, settings);
  EXPECT_EQ(Adds(plan, "od-a10"), 3) << Reasons(plan);
  EXPECT_FALSE(plan.forecasts[0].met());
  EXPECT_EQ(plan.forecasts[0].finish, At(10, 43));
  EXPECT_NE(Find(plan, Action::kDeadline,
                 "job 42 will miss its deadline 10:30 UTC: forecast 10:43 UTC (budget cap $5/h "
                 "reached)"),
            "")
      << Reasons(plan);
  // A deadline the capacity there is already meets adds nothing.
  job.deadline = Deadline{At(12, 0), 40};
  plan = Tick(groups, {{"od-a10", state}}, {job}, settings);
  EXPECT_EQ(Adds(plan, "od-a10"), 0) << Reasons(plan);
  EXPECT_EQ(plan.forecasts[0].finish, At(11, 40));
  EXPECT_TRUE(plan.forecasts[0].met());
}

TEST(AutoscalerPolicyTest, RequestsThatNeverRegisterAreGivenUpAndSpotBacksOff) {
  const std::vector<NodeGroup> groups = {Group("spot-a10", Market::kSpot, 0.4, 20),
                                         Group("od-a10", Market::kOnDemand, 1.0, 20)};
  GroupState spot, od;
  spot.pending = {{"sr-1", At(9, 49)}, {"sr-2", At(9, 58)}};  // 11 and 2 minutes ago
  od.pending = {{"or-1", At(9, 45)}};
  Plan plan = Tick(groups, {{"spot-a10", spot}, {"od-a10", od}}, {Work("job 1", 30, 60)});
  const GroupPlan& s = *plan.Find("spot-a10");
  EXPECT_EQ(s.give_up, (std::vector<std::string>{"sr-1"}));
  EXPECT_EQ(s.backoff_until, At(10, 15));
  EXPECT_EQ(plan.Find("od-a10")->give_up, (std::vector<std::string>{"or-1"}));
  EXPECT_FALSE(plan.Find("od-a10")->backoff_until);
  EXPECT_NE(Find(plan, Action::kGiveUp,
                 "group spot-a10: gave up on 1 requested node (sr-1): not registered within 10 "
                 "min of the request; terminate; spot backed off until 10:15 UTC"),
            "")
      << Reasons(plan);
  // The work (2 nodes' worth) counts sr-2, still booting; on-demand covers the other node.
  EXPECT_EQ(s.add, 0) << Reasons(plan);
  EXPECT_EQ(plan.Find("od-a10")->add, 1) << Reasons(plan);
}

TEST(AutoscalerPolicyTest, SharesOfAGpuArePackedAsTheSchedulerPacksThem) {
  // 32 tasks of a quarter GPU, an hour each: a group sharing its GPUs four ways runs 16 at once
  // on a 4-GPU node, so two nodes; a group of whole GPUs needs eight of the same nodes.
  NodeGroup shared = Group("od-shared", Market::kOnDemand, 2.0, 20, 4, 24576);
  shared.gpus.slots_per_gpu = 4;
  NodeGroup whole = Group("od-whole", Market::kOnDemand, 2.0, 20, 4, 24576);
  DemandClass quarter = Work("job 8", 32, 3600);
  quarter.gpus = 0;
  quarter.gpu_share = 0.25;
  EXPECT_EQ(Adds(Tick({shared}, {}, {quarter}), "od-shared"), 2);
  EXPECT_EQ(Adds(Tick({whole}, {}, {quarter}), "od-whole"), 8);
  // A 0.3 share takes two of four slots (rounded up, as the policy does): 8 a node, 4 nodes.
  quarter.gpu_share = 0.3;
  EXPECT_EQ(Adds(Tick({shared}, {}, {quarter}), "od-shared"), 4);
  // Memory bounds the packing too: 10 GiB a task fits twice on a 24 GiB GPU.
  quarter.gpu_share = 0.25;
  quarter.min_gpu_memory_mib = 10240;
  EXPECT_EQ(Adds(Tick({shared}, {}, {quarter}), "od-shared"), 4);
  // Memory divided per slot: 4 GiB slots cannot hold a 10 GiB quarter share.
  shared.gpus.memory_mib_per_slot = 4096;
  Plan plan = Tick({shared}, {}, {quarter});
  EXPECT_EQ(Adds(plan, "od-shared"), 0) << Reasons(plan);
  EXPECT_NE(Find(plan, Action::kUnschedulable,
                 "od-shared shares each GPU 4 ways with 4096 MiB a slot, too little for a 0.25 "
                 "share needing 10240 MiB"),
            "")
      << Reasons(plan);
  // A share needs a GPU: a CPU-only group never serves it.
  NodeGroup cpu = Group("od-cpu", Market::kOnDemand, 0.3, 20, 0, 0);
  EXPECT_EQ(Adds(Tick({cpu}, {}, {quarter}), "od-cpu"), 0);
}

TEST(AutoscalerPolicyTest, InvalidGroupsAndSettingsAreNamed) {
  NodeGroup g = Group("od-a10", Market::kOnDemand, 1.0, 4);
  Settings settings;
  EXPECT_EQ(WhyInvalid({g}, settings), "");
  EXPECT_EQ(WhyInvalid({g, g}, settings), "node group 'od-a10': the name is used twice");
  g.min_nodes = 5;
  EXPECT_EQ(WhyInvalid({g}, settings), "node group 'od-a10': needs 0 <= min_nodes <= max_nodes");
  g.min_nodes = 3;
  settings.budget_per_hour = 2.5;
  EXPECT_EQ(WhyInvalid({g}, settings),
            "the groups' min nodes cost $3/h, over budget_per_hour $2.50/h");
  settings.budget_per_hour = 0;
  NodeGroup sliced = Group("od-sliced", Market::kOnDemand, 1.0, 4);
  sliced.gpus.slots_per_gpu = 33;
  EXPECT_EQ(WhyInvalid({sliced}, settings),
            "node group 'od-sliced': gpus.slots_per_gpu must be 1 (whole GPUs) to 32");
  sliced.gpus.slots_per_gpu = 0;
  EXPECT_NE(WhyInvalid({sliced}, settings), "");
  NodeGroup reserved = Group("rsv-a10", Market::kReserved, 0.6, 4);
  reserved.min_nodes = 2;
  EXPECT_EQ(
      WhyInvalid({reserved}, settings),
      "node group 'rsv-a10': reserved capacity is held at min_nodes: max_nodes must equal it");
  settings.horizon = Seconds(0);
  EXPECT_EQ(WhyInvalid({g}, settings), "horizon must be positive");
}

}  // namespace
}  // namespace tessera::autoscaler
