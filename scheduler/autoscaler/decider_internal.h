#pragma once
// What the files implementing the autoscaler's decision policy (decider*.cpp) share: the
// working state of one Decide call (Group, Decider) and the helpers that word its reasons. Not
// part of the policy's API (decider.h).

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "scheduler/autoscaler/decider.h"

namespace tessera::autoscaler::decider_internal {

inline constexpr double kEps = 1e-6;

std::string Money(double per_hour);                     // "$3/h", "$0.45/h"
std::string Span(double seconds);                       // "2 h", "15 min", "90 s"
std::string Count(int64_t n, const std::string& word);  // "1 node", "3 nodes"
bool Has(const std::vector<std::string>& v, const std::string& s);
void AddOnce(std::vector<std::string>& v, std::string s);
std::string Join(const std::vector<std::string>& v, const char* sep);

// Tasks of `c` one node of `g` runs at once (0: none), as the worker pins GPUs (policy.cpp):
// a task takes max(1, gpus) GPUs on a GPU node, and a node without GPUs runs GPU-less tasks.
int SlotsPerNode(const DemandClass& c, const NodeGroup& g);

// Why nodes of `g` can never run tasks of `c` ("" when they can), market aside.
std::string WhyUnfit(const DemandClass& c, const NodeGroup& g);

// One group while Decide works: its capacity in units (nodes), used in order of when each can
// start new work -- idle ones, busy ones as their task ends, pending ones as they boot, then
// added ones -- so unit k's start delay is known.
struct Group {
  const NodeGroup* spec = nullptr;
  const GroupState* state = nullptr;
  GroupPlan plan;
  int draining = 0;
  std::vector<double> delays;  // registered (not draining) and kept requests: seconds, ascending
  double boot = 0;
  bool backed_off = false;
  TimePoint backoff_until{};
  std::string backoff_cause;
  int floor_add = 0;     // nodes added to reach min
  int claimed = 0;       // whole units claimed by deadline demand
  double frac_used = 0;  // units used by the rest
  // For reasons.
  std::vector<std::string> noted;  // demand classes counted in the two figures below
  int64_t note_tasks = 0;
  double note_node_minutes = 0;
  std::vector<std::string> causes;
  bool held_at_max = false, held_by_budget = false;
  std::vector<std::pair<const DemandClass*, double>> uses;       // horizon work: class, units
  std::vector<std::pair<const DemandClass*, int>> unaffordable;  // class, nodes
  int wanted = 0;             // nodes it would have had without those limits
  int64_t spilled_tasks = 0;  // spot, backed off: waiting tasks other groups took
  std::vector<std::string> spilled_to;

  int Total() const { return static_cast<int>(delays.size()) + plan.add; }
  double Free() const { return Total() - claimed - frac_used; }
  double Delay(int unit) const {
    return unit < static_cast<int>(delays.size()) ? delays[unit] : boot;
  }
  double SlotHourCost(int slots) const { return spec->price_per_hour / slots; }
};

// Registered nodes of `w` that could be drained, in the order they should be: idle ones (the
// longest idle first), then busy ones whose task should end soonest -- budget comes back soonest.
std::vector<const Node*> DrainOrder(const Group& w);

class Decider {
 public:
  Decider(const std::vector<NodeGroup>& groups, const std::map<std::string, GroupState>& states,
          const Settings& settings, TimePoint now)
      : settings_(settings), now_(now) {
    static const GroupState kEmpty;
    for (const NodeGroup& g : groups) {
      Group w;
      w.spec = &g;
      auto it = states.find(g.name);
      w.state = it == states.end() ? &kEmpty : &it->second;
      w.plan.group = g.name;
      w.boot = double((g.boot_time ? *g.boot_time : settings.default_boot_time).count());
      if (w.state->backoff_until && now < *w.state->backoff_until) {
        w.backed_off = true;
        w.backoff_until = *w.state->backoff_until;
        w.backoff_cause = w.state->backoff_cause;
      }
      groups_.push_back(std::move(w));
    }
  }

  Plan Run(const Demand& demand);

 private:
  void GiveUpUnregistered(Group& w);
  void HoldAtMin(Group& w);
  void SizeForDeadline(const DemandClass& c);
  void SizeForHorizon(const DemandClass& c);
  void ShiftBudget();
  void ScaleIn(Group& w);
  void EnforceBudget();
  void ExplainScaleOut();

  bool Affordable(double price) const {
    return settings_.budget_per_hour <= 0 ||
           spend_ + held_for_deadlines_ + price <= settings_.budget_per_hour + kEps;
  }
  double TaskSeconds(const DemandClass& c) const {
    return c.seconds_per_task > 0 ? c.seconds_per_task : settings_.default_task_seconds;
  }
  // Groups that may serve `c`, in the order they are used: reserved (paid anyway), then spot for
  // interruptible work, then the rest; each cheapest per task-slot-hour first.
  std::vector<Group*> Eligible(const DemandClass& c);
  bool SpotFits(const DemandClass& c) const;
  void NoteAdd(Group& w, const DemandClass& c, const std::string& cause);
  void Decide(Action action, const std::string& group, int nodes, std::string reason) {
    plan_.decisions.push_back({action, group, nodes, std::move(reason)});
  }

  const Settings& settings_;
  const TimePoint now_;
  std::vector<Group> groups_;
  double spend_ = 0;
  double held_for_deadlines_ = 0;  // headroom kept for deadline nodes the cap held back
  Plan plan_;
};

}  // namespace tessera::autoscaler::decider_internal
