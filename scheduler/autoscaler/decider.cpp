// The autoscaler's decision policy (decider.h). Its parts:
//  - decider.cpp: the order the rules run in (Decider::Run), the helpers that word reasons,
//    and the API: Decide, WhyInvalid, names and clock formatting;
//  - decider_scale_out.cpp: demand sized into nodes: min nodes, deadline forecasts, work over
//    the horizon, which groups serve it, and the reasons for each scale-out;
//  - decider_scale_in.cpp: nodes given back: unregistered requests (and spot backoff), budget
//    shifted to cheaper groups, idle nodes scaled in, the budget cap enforced;
//  - decider_internal.h: what these share.
#include "scheduler/autoscaler/decider.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "scheduler/autoscaler/decider_internal.h"
#include "shared/jobs/gpu_slots.h"
#include "shared/jobs/tags.h"
#include "shared/wire/protocol.h"

namespace tessera::autoscaler::decider_internal {

std::string Money(double per_hour) {
  char buf[48];
  const bool whole = std::abs(per_hour - std::round(per_hour)) < 0.005;
  std::snprintf(buf, sizeof buf, whole ? "$%.0f/h" : "$%.2f/h", per_hour);
  return buf;
}

std::string Span(double seconds) {
  const auto s = static_cast<int64_t>(std::llround(seconds));
  if (s >= 3600 && s % 3600 == 0) return std::to_string(s / 3600) + " h";
  if (s >= 60 && s % 60 == 0) return std::to_string(s / 60) + " min";
  return std::to_string(s) + " s";
}

std::string Count(int64_t n, const std::string& word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

bool Has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}
void AddOnce(std::vector<std::string>& v, std::string s) {
  if (!Has(v, s)) v.push_back(std::move(s));
}
std::string Join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

// Tasks of `c` one GPU of `g` holds at once: a share packs as the scheduler's policy packs it
// (policy/gpu_claims.cpp: rounded up to whole slots, never over the GPU's memory); else one.
int TasksPerGpu(const DemandClass& c, const NodeGroup& g) {
  const int ways = std::clamp(g.gpus.slots_per_gpu, 1, protocol::kMaxSlotsPerGpu);
  if (c.gpu_share <= 0 || ways < 2) return g.gpus.memory_mib >= c.min_gpu_memory_mib ? 1 : 0;
  const int slots = gpu_slots::SlotsForShare(c.gpu_share, ways);
  const int64_t per_slot = g.gpus.memory_mib_per_slot;
  const int64_t memory = gpu_slots::MemoryForShare(slots, per_slot, c.min_gpu_memory_mib);
  if (per_slot > 0 && c.min_gpu_memory_mib > memory) return 0;
  if (memory > g.gpus.memory_mib) return 0;
  const int64_t by_memory = memory > 0 ? g.gpus.memory_mib / memory : ways;
  return static_cast<int>(std::min<int64_t>(ways / slots, by_memory));
}

int SlotsPerNode(const DemandClass& c, const NodeGroup& g) {
  const bool wants_gpu = c.gpus > 0 || c.gpu_share > 0;
  if (g.gpus.count <= 0) return wants_gpu ? 0 : std::max(1, g.slots);
  const int per_gpu = TasksPerGpu(c, g);
  if (per_gpu == 0) return 0;
  const int by_gpu =
      c.gpu_share > 0 && per_gpu > 1 ? g.gpus.count * per_gpu : g.gpus.count / std::max(1, c.gpus);
  return g.slots > 0 ? std::min(g.slots, by_gpu) : by_gpu;
}

std::string WhyUnfit(const DemandClass& c, const NodeGroup& g) {
  if (!c.pools.empty() && std::none_of(c.pools.begin(), c.pools.end(),
                                       [&](const std::string& p) { return g.pools.count(p); })) {
    return "not in any of the pools [" + Join(c.pools, ", ") + "]";
  }
  for (const std::string& tag : c.tags) {
    if (!spec::TagMet(tag, g.tags)) return "lacks " + spec::TagWanted(tag);
  }
  if (SlotsPerNode(c, g) == 0) {
    if (c.gpu_share > 0 && g.gpus.count > 0 && g.gpus.memory_mib >= c.min_gpu_memory_mib) {
      char share[32];
      std::snprintf(share, sizeof share, "%g", c.gpu_share);
      return "shares each GPU " + std::to_string(g.gpus.slots_per_gpu) + " ways with " +
             std::to_string(g.gpus.memory_mib_per_slot) + " MiB a slot, too little for a " + share +
             " share needing " + std::to_string(c.min_gpu_memory_mib) + " MiB";
    }
    return "has " + Count(g.gpus.count, "GPU") + " of " + std::to_string(g.gpus.memory_mib) +
           " MiB, a task needs " + Count(std::max(1, c.gpus), "GPU") +
           (c.min_gpu_memory_mib > 0
                ? " of at least " + std::to_string(c.min_gpu_memory_mib) + " MiB"
                : "");
  }
  return "";
}

Plan Decider::Run(const Demand& demand) {
  for (Group& w : groups_) {
    for (const Node& n : w.state->nodes) {
      if (n.state == NodeState::kDraining) {
        ++w.draining;
      } else if (n.state == NodeState::kBusy) {
        // A busy node takes new work when its task ends: the estimate, else half a default task.
        w.delays.push_back(n.busy_until ? std::max(0.0, double((*n.busy_until - now_).count()))
                                        : settings_.default_task_seconds / 2);
      } else {
        w.delays.push_back(0);
      }
    }
    GiveUpUnregistered(w);
    HoldAtMin(w);
    spend_ += w.spec->price_per_hour * (w.Total() + w.draining);
  }
  // Deadlines first, earliest first; then work that may not run on spot (it has fewer places to
  // go); then the rest, in the order given.
  std::vector<const DemandClass*> order;
  for (const DemandClass& c : demand.classes) order.push_back(&c);
  std::stable_sort(order.begin(), order.end(), [](const DemandClass* a, const DemandClass* b) {
    auto key = [](const DemandClass* c) {
      return std::make_tuple(c->deadline        ? 0
                             : c->interruptible ? 2
                                                : 1,
                             c->deadline ? c->deadline->at : TimePoint{});
    };
    return key(a) < key(b);
  });
  for (const DemandClass* c : order) {
    const bool has_work = c->tasks_waiting > 0 || c->tasks_running > 0 ||
                          (c->deadline && c->deadline->tasks_left > 0);
    if (!has_work) continue;
    if (Eligible(*c).empty()) {
      std::vector<std::string> why;
      for (const Group& w : groups_) {
        std::string unfit = WhyUnfit(*c, *w.spec);
        if (unfit.empty() && w.spec->market == Market::kSpot)
          unfit = "spot, and it must not be interrupted";
        if (why.size() < 4) why.push_back(w.spec->name + " " + unfit);
      }
      Decide(Action::kUnschedulable, "", 0,
             c->name + ": no node group can run its " + Count(c->tasks_waiting, "waiting task") +
                 (why.empty() ? "" : ": " + Join(why, "; ")));
      continue;
    }
    if (c->deadline) {
      SizeForDeadline(*c);
    } else {
      SizeForHorizon(*c);
    }
  }
  ExplainScaleOut();
  ShiftBudget();
  for (Group& w : groups_) ScaleIn(w);
  EnforceBudget();

  for (Group& w : groups_) {
    int busy_drained = 0;
    for (const Node& n : w.state->nodes) {
      if (n.state == NodeState::kBusy && Has(w.plan.drain, n.id)) ++busy_drained;
    }
    w.plan.nodes_after = w.Total() - static_cast<int>(w.plan.drain.size());
    plan_.cost_per_hour +=
        w.spec->price_per_hour * (w.plan.nodes_after + w.draining + busy_drained);
    plan_.groups.push_back(std::move(w.plan));
  }
  return std::move(plan_);
}

}  // namespace tessera::autoscaler::decider_internal

namespace tessera::autoscaler {

using decider_internal::Decider;
using decider_internal::kEps;
using decider_internal::Money;

const char* MarketName(Market market) {
  switch (market) {
    case Market::kSpot:
      return "spot";
    case Market::kOnDemand:
      return "on-demand";
    case Market::kReserved:
      return "reserved";
  }
  return "?";
}

const char* ActionName(Action action) {
  switch (action) {
    case Action::kScaleOut:
      return "scale-out";
    case Action::kScaleIn:
      return "scale-in";
    case Action::kGiveUp:
      return "give-up";
    case Action::kHold:
      return "hold";
    case Action::kDeadline:
      return "deadline";
    case Action::kUnschedulable:
      return "unschedulable";
  }
  return "?";
}

void BackOff(GroupState& state, const Settings& settings, TimePoint now, std::string cause) {
  state.backoff_until = now + settings.spot_backoff;
  state.backoff_cause = std::move(cause);
}

const GroupPlan* Plan::Find(const std::string& group) const {
  for (const GroupPlan& g : groups) {
    if (g.group == group) return &g;
  }
  return nullptr;
}

Plan Decide(const std::vector<NodeGroup>& groups, const std::map<std::string, GroupState>& states,
            const Demand& demand, const Settings& settings, TimePoint now) {
  return Decider(groups, states, settings, now).Run(demand);
}

std::string WhyInvalid(const std::vector<NodeGroup>& groups, const Settings& settings) {
  std::set<std::string> names;
  double floor_cost = 0;
  for (const NodeGroup& g : groups) {
    const std::string at = "node group '" + g.name + "': ";
    if (g.name.empty()) return "a node group has no name";
    if (!names.insert(g.name).second) return at + "the name is used twice";
    if (g.min_nodes < 0 || g.max_nodes < g.min_nodes) {
      return at + "needs 0 <= min_nodes <= max_nodes";
    }
    if (g.market == Market::kReserved && g.max_nodes != g.min_nodes) {
      return at + "reserved capacity is held at min_nodes: max_nodes must equal it";
    }
    if (g.price_per_hour < 0) return at + "price_per_hour is negative";
    if (g.gpus.count < 0 || g.gpus.memory_mib < 0 || g.slots < 0 ||
        g.gpus.memory_mib_per_slot < 0) {
      return at + "GPU count, GPU memory and slots cannot be negative";
    }
    if (g.gpus.slots_per_gpu < 1 || g.gpus.slots_per_gpu > protocol::kMaxSlotsPerGpu) {
      return at + "gpus.slots_per_gpu must be 1 (whole GPUs) to " +
             std::to_string(protocol::kMaxSlotsPerGpu);
    }
    if (g.boot_time && g.boot_time->count() < 0) return at + "boot_time is negative";
    floor_cost += g.min_nodes * g.price_per_hour;
  }
  if (settings.budget_per_hour < 0) return "budget_per_hour is negative";
  if (settings.budget_per_hour > 0 && floor_cost > settings.budget_per_hour + kEps) {
    return "the groups' min nodes cost " + Money(floor_cost) + ", over budget_per_hour " +
           Money(settings.budget_per_hour);
  }
  if (settings.horizon.count() <= 0) return "horizon must be positive";
  if (settings.registration_timeout.count() <= 0) return "registration_timeout must be positive";
  if (settings.scale_in_grace.count() < 0 || settings.cooldown.count() < 0 ||
      settings.spot_backoff.count() < 0 || settings.default_boot_time.count() < 0) {
    return "scale_in_grace, cooldown, spot_backoff and default_boot_time cannot be negative";
  }
  if (settings.scale_in_hysteresis < 0) return "scale_in_hysteresis is negative";
  if (settings.default_task_seconds <= 0) return "default_task_seconds must be positive";
  return "";
}

std::string FormatClock(TimePoint t) {
  const int64_t s = t.time_since_epoch().count();
  const int64_t of_day = ((s % 86400) + 86400) % 86400;
  char buf[16];
  std::snprintf(buf, sizeof buf, "%02d:%02d UTC", int(of_day / 3600), int(of_day / 60 % 60));
  return buf;
}

}  // namespace tessera::autoscaler
