#include "scheduler/autoscaler/decider.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <set>
#include <tuple>
#include <utility>

namespace tessera::autoscaler {
namespace {

constexpr double kEps = 1e-6;
constexpr double kNever = std::numeric_limits<double>::infinity();

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

TimePoint After(TimePoint now, double seconds) {
  return now + Seconds(static_cast<int64_t>(std::ceil(seconds - kEps)));
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

// Tasks of `c` one node of `g` runs at once (0: none), as the worker pins GPUs (policy.cpp):
// a task takes max(1, gpus) GPUs on a GPU node, and a node without GPUs runs GPU-less tasks.
int SlotsPerNode(const DemandClass& c, const NodeGroup& g) {
  if (g.gpus.count <= 0) return c.gpus > 0 ? 0 : std::max(1, g.slots);
  if (g.gpus.memory_mib < c.min_gpu_memory_mib) return 0;
  const int by_gpu = g.gpus.count / std::max(1, c.gpus);
  return g.slots > 0 ? std::min(g.slots, by_gpu) : by_gpu;
}

// Why nodes of `g` can never run tasks of `c` ("" when they can), market aside.
std::string WhyUnfit(const DemandClass& c, const NodeGroup& g) {
  if (!c.pools.empty() && std::none_of(c.pools.begin(), c.pools.end(),
                                       [&](const std::string& p) { return g.pools.count(p); })) {
    return "not in any of the pools [" + Join(c.pools, ", ") + "]";
  }
  for (const std::string& tag : c.tags) {
    if (!g.tags.count(tag)) return "lacks the tag '" + tag + "'";
  }
  if (SlotsPerNode(c, g) == 0) {
    return "has " + Count(g.gpus.count, "GPU") + " of " + std::to_string(g.gpus.memory_mib) +
           " MiB, a task needs " + Count(std::max(1, c.gpus), "GPU") +
           (c.min_gpu_memory_mib > 0
                ? " of at least " + std::to_string(c.min_gpu_memory_mib) + " MiB"
                : "");
  }
  return "";
}

// Tasks of `s` seconds on slots that start after their delays: when the last of `tasks` ends
// (seconds from now), tasks being indivisible. kNever when there are no slots.
struct SlotRuns {
  std::map<double, int64_t> slots_at;  // delay (s) -> slots
  int64_t total = 0;
  void Add(double delay, int64_t slots) {
    slots_at[delay] += slots;
    total += slots;
  }
};
double FinishSeconds(const SlotRuns& runs, int64_t tasks, double s) {
  if (tasks <= 0) return 0;
  if (runs.total == 0) return kNever;
  auto done_by = [&](double t) {
    int64_t n = 0;
    for (const auto& [delay, slots] : runs.slots_at) {
      if (t >= delay) n += slots * static_cast<int64_t>(std::floor((t - delay) / s + 1e-9));
    }
    return n;
  };
  double lo = 0;
  double hi = runs.slots_at.rbegin()->first + std::ceil(double(tasks) / runs.total) * s + s;
  for (int i = 0; i < 60; ++i) {
    const double mid = (lo + hi) / 2;
    (done_by(mid) >= tasks ? hi : lo) = mid;
  }
  return hi;
}

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
std::vector<const Node*> DrainOrder(const Group& w) {
  std::vector<const Node*> order;
  for (const Node& node : w.state->nodes) {
    if (node.state != NodeState::kDraining && !Has(w.plan.drain, node.id)) order.push_back(&node);
  }
  auto key = [](const Node* n) {
    return std::make_tuple(n->state != NodeState::kIdle, n->idle_since, !n->busy_until,
                           n->busy_until.value_or(TimePoint{}), n->id);
  };
  std::sort(order.begin(), order.end(),
            [&](const Node* a, const Node* b) { return key(a) < key(b); });
  return order;
}

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

std::vector<Group*> Decider::Eligible(const DemandClass& c) {
  std::vector<std::pair<std::tuple<int, double, size_t>, Group*>> keyed;
  for (size_t i = 0; i < groups_.size(); ++i) {
    Group& w = groups_[i];
    const int slots = SlotsPerNode(c, *w.spec);
    if (!WhyUnfit(c, *w.spec).empty()) continue;
    const Market market = w.spec->market;
    if (market == Market::kSpot && !c.interruptible) continue;
    const int rank = market == Market::kReserved ? 0 : market == Market::kSpot ? 1 : 2;
    keyed.push_back({{rank, w.SlotHourCost(slots), i}, &w});
  }
  std::sort(keyed.begin(), keyed.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<Group*> out;
  for (auto& [key, w] : keyed) out.push_back(w);
  return out;
}

bool Decider::SpotFits(const DemandClass& c) const {
  return std::any_of(groups_.begin(), groups_.end(), [&](const Group& w) {
    return w.spec->market == Market::kSpot && WhyUnfit(c, *w.spec).empty();
  });
}

void Decider::NoteAdd(Group& w, const DemandClass& c, const std::string& cause) {
  if (!Has(w.noted, c.name)) {
    w.noted.push_back(c.name);
    const int64_t tasks =
        c.deadline ? std::max(c.deadline->tasks_left, c.tasks_waiting) : c.tasks_waiting;
    w.note_tasks += c.tasks_waiting;
    w.note_node_minutes += tasks * TaskSeconds(c) / SlotsPerNode(c, *w.spec) / 60;
  }
  const Market market = w.spec->market;
  if (market == Market::kSpot) {
    AddOnce(w.causes, "spot preferred");
  } else if (!c.interruptible && SpotFits(c)) {
    AddOnce(w.causes, "work that does not tolerate interruption stays off spot");
  } else if (c.interruptible && SpotFits(c)) {
    bool any_backed_off = false;
    for (Group& spot : groups_) {
      if (spot.spec->market != Market::kSpot || !spot.backed_off ||
          !WhyUnfit(c, *spot.spec).empty())
        continue;
      any_backed_off = true;
      AddOnce(w.causes, spot.spec->name + " backed off until " + FormatClock(spot.backoff_until) +
                            ", " + MarketName(market) + " covers");
    }
    if (!any_backed_off) AddOnce(w.causes, "spot is at max or over budget");
  }
  if (!cause.empty()) AddOnce(w.causes, cause);
}

void Decider::GiveUpUnregistered(Group& w) {
  for (const PendingNode& p : w.state->pending) {
    const double waited = double((now_ - p.requested_at).count());
    if (waited >= double(settings_.registration_timeout.count())) {
      w.plan.give_up.push_back(p.id);
    } else {
      w.delays.push_back(std::max(0.0, w.boot - waited));
    }
  }
  std::sort(w.delays.begin(), w.delays.end());
  if (w.plan.give_up.empty()) return;
  const int n = static_cast<int>(w.plan.give_up.size());
  std::string reason = "group " + w.spec->name + ": gave up on " + Count(n, "requested node") +
                       " (" + Join(w.plan.give_up, ", ") + "): not registered within " +
                       Span(double(settings_.registration_timeout.count())) +
                       " of the request; terminate";
  if (w.spec->market == Market::kSpot) {
    const TimePoint until = now_ + settings_.spot_backoff;
    if (!w.backed_off || w.backoff_until < until) {
      w.backed_off = true;
      w.backoff_until = until;
      w.backoff_cause = "nodes that never registered";
    }
    w.plan.backoff_until = w.backoff_until;
    w.plan.backoff_cause = w.backoff_cause;
    reason += "; spot backed off until " + FormatClock(w.backoff_until);
  }
  Decide(Action::kGiveUp, w.spec->name, -n, reason);
}

void Decider::HoldAtMin(Group& w) {
  const int missing = w.spec->min_nodes - w.Total();
  if (missing <= 0) return;
  w.plan.add += missing;
  w.floor_add = missing;
  const bool reserved = w.spec->market == Market::kReserved;
  Decide(Action::kScaleOut, w.spec->name, missing,
         "group " + w.spec->name + ": +" + Count(missing, "node") + ": held at min " +
             std::to_string(w.spec->min_nodes) +
             (reserved ? " (reserved: always-on capacity)" : ""));
}

void Decider::SizeForDeadline(const DemandClass& c) {
  const Deadline& d = *c.deadline;
  const double s = TaskSeconds(c);
  // Running tasks count whole, as if they started again: pessimistic on purpose, since a
  // forecast that is late by a task is what misses a deadline.
  const int64_t tasks = std::max<int64_t>(d.tasks_left, c.tasks_waiting);
  DeadlineForecast forecast{c.name, d.at, now_, now_};
  if (tasks <= 0) {
    plan_.forecasts.push_back(forecast);
    return;
  }
  const std::vector<Group*> existing = Eligible(c), &adding = existing;
  // The forecast with the capacity there is (what earlier deadlines left), and the soonest any
  // capacity could finish one task.
  SlotRuns all;
  double soonest = kNever;
  for (Group* w : existing) {
    for (int u = w->claimed; u < w->Total(); ++u) {
      all.Add(w->Delay(u), SlotsPerNode(c, *w->spec));
      soonest = std::min(soonest, w->Delay(u) + s);
    }
  }
  const double before = FinishSeconds(all, tasks, s);
  double first_boot = -1;
  for (Group* w : adding) {
    if ((w->spec->market == Market::kSpot && w->backed_off) || w->Total() >= w->spec->max_nodes)
      continue;
    soonest = std::min(soonest, w->boot + s);
    if (first_boot < 0) first_boot = w->boot;
  }
  // Aim for the deadline when it is sooner than the horizon; a deadline no capacity could meet
  // any more is reported, and the work sized like any other (not rushed at any price).
  const double deadline_s = double((d.at - now_).count());
  const double horizon = std::max(double(settings_.horizon.count()), s) + std::max(0.0, first_boot);
  const bool reachable = deadline_s + kEps >= soonest;
  // Tasks and boots vary around their means: aim a little before the deadline (a share of the
  // time left, at least a quarter of a task), never before the soonest.
  const double aim =
      std::max(soonest, deadline_s - std::max(deadline_s * settings_.deadline_margin, s / 4));
  const double target = reachable ? std::min(aim, horizon) : horizon;

  SlotRuns mine;
  auto finish = [&] { return FinishSeconds(mine, tasks, s); };
  for (Group* w : existing) {
    const int slots = SlotsPerNode(c, *w->spec);
    while (w->claimed < w->Total() && finish() > target + kEps && mine.total < tasks) {
      mine.Add(w->Delay(w->claimed++), slots);
    }
  }
  const double with_existing = finish();
  int added = 0;
  bool short_budget = false;
  std::vector<std::string> added_to, at_max;
  const bool at_risk = with_existing > target + kEps && target < horizon;
  const std::string cause = at_risk ? "deadline of " + c.name + " at " + FormatClock(d.at) : "";
  std::vector<Group*> skipped_spot;
  for (Group* w : adding) {
    if (w->spec->market == Market::kSpot && w->backed_off) {
      skipped_spot.push_back(w);
      continue;
    }
    const int slots = SlotsPerNode(c, *w->spec);
    int here = 0;
    while (finish() > target + kEps && mine.total < tasks) {
      w->wanted = std::max(w->wanted, w->Total() + 1);
      if (w->Total() >= w->spec->max_nodes) {
        AddOnce(at_max, w->spec->name);
        w->held_at_max = true;
        break;
      }
      if (!Affordable(w->spec->price_per_hour)) {
        short_budget = true;
        w->held_by_budget = true;
        // How many it would take to meet the deadline itself (the margin is not worth other
        // work's nodes), for ShiftBudget to make room.
        SlotRuns more = mine;
        int wanted = 0;
        while (reachable && FinishSeconds(more, tasks, s) > deadline_s + kEps &&
               more.total < tasks && w->Total() + wanted < w->spec->max_nodes) {
          more.Add(w->boot, slots);
          ++wanted;
        }
        if (wanted > 0) {
          w->unaffordable.push_back({&c, wanted});
          held_for_deadlines_ += wanted * w->spec->price_per_hour;
        }
        break;
      }
      ++w->plan.add;
      spend_ += w->spec->price_per_hour;
      mine.Add(w->Delay(w->claimed++), slots);
      ++here;
    }
    if (here > 0) {
      added += here;
      added_to.push_back(w->spec->name + " +" + std::to_string(here));
      NoteAdd(*w, c, cause);
      for (Group* spot : skipped_spot) AddOnce(spot->spilled_to, w->spec->name);
    }
  }
  if (added > 0) {
    for (Group* spot : skipped_spot) spot->spilled_tasks += c.tasks_waiting;
  }
  const double done = finish();
  forecast.before = before == kNever ? std::nullopt : std::optional(After(now_, before));
  forecast.finish = done == kNever ? std::nullopt : std::optional(After(now_, done));
  plan_.forecasts.push_back(forecast);

  const std::string was = before == kNever ? "none" : FormatClock(*forecast.before);
  if (added > 0 && at_risk && reachable) {
    Decide(Action::kDeadline, "", added,
           c.name + ": deadline " + FormatClock(d.at) +
               (with_existing > deadline_s + kEps ? " would be missed" : " is at risk") +
               " with the capacity there is (forecast " + was + "): " + Join(added_to, ", ") +
               " nodes, forecast " + (forecast.finish ? FormatClock(*forecast.finish) : "none"));
  }
  if (!forecast.met()) {
    std::string why;
    if (soonest == kNever) {
      why = "no capacity: its groups are at max or backed off";
    } else if (deadline_s <= 0) {
      why = "it has passed";
    } else if (!reachable) {
      why = "too close: the soonest a task could finish is " + FormatClock(After(now_, soonest));
    } else if (mine.total >= tasks) {
      why = "every task left has a node already; a task takes ~" + Span(std::round(s));
    } else if (short_budget) {
      why = "budget cap " + Money(settings_.budget_per_hour) + " reached";
    } else if (!at_max.empty()) {
      why = Join(at_max, ", ") + " at max";
    } else {
      why = "no more capacity may be added";
    }
    Decide(Action::kDeadline, "", 0,
           c.name + " will miss its deadline " + FormatClock(d.at) + ": forecast " +
               (forecast.finish ? FormatClock(*forecast.finish) : "none") + " (" + why + ")");
  }
}

void Decider::SizeForHorizon(const DemandClass& c) {
  const double s = TaskSeconds(c);
  const double horizon = std::max(double(settings_.horizon.count()), s);
  const double all_tasks = double(c.tasks_waiting + c.tasks_running);
  // Slot-seconds of work to do within the horizon (a running task is half done, on average).
  const double all_work = (c.tasks_waiting + 0.5 * c.tasks_running) * s;
  double work = all_work;
  if (work <= 0) return;
  // Cheapest first, each group's existing nodes and then new ones: a pricier group's nodes take
  // only the work cheaper groups cannot, so they idle out once cheaper capacity can do it.
  std::vector<Group*> skipped_spot;
  std::vector<std::string> covered_by;
  for (Group* w : Eligible(c)) {
    const int slots = SlotsPerNode(c, *w->spec);
    const double per_node = slots * horizon;
    const double take = std::min(w->Free(), work / per_node);
    if (take > kEps) {
      w->frac_used += take;
      w->uses.push_back({&c, take});
      work -= take * per_node;
      if (work <= kEps) break;
    }
    if (w->spec->market == Market::kSpot && w->backed_off) {
      skipped_spot.push_back(w);
      continue;
    }
    const double need = work / per_node;
    const double tasks_left = all_tasks * work / all_work;
    const int wanted =
        static_cast<int>(std::min(std::ceil(need - kEps), std::ceil(tasks_left / slots - kEps)));
    int n = std::min(wanted, w->spec->max_nodes - w->Total());
    if (n < wanted) w->held_at_max = true;
    if (w->spec->price_per_hour > 0 && settings_.budget_per_hour > 0) {
      const int affordable = static_cast<int>(
          std::floor((settings_.budget_per_hour - spend_ - held_for_deadlines_ + kEps) /
                     w->spec->price_per_hour));
      if (n > affordable) {
        w->held_by_budget = true;
        w->unaffordable.push_back({&c, n - std::max(affordable, 0)});
        n = affordable;
      }
    }
    w->wanted = std::max(w->wanted, w->Total() + wanted);
    if (n <= 0) continue;
    w->plan.add += n;
    spend_ += n * w->spec->price_per_hour;
    const double used = std::min(double(n), need);
    w->frac_used += used;
    w->uses.push_back({&c, used});
    work -= used * per_node;
    NoteAdd(*w, c, "");
    if (w->spec->market != Market::kSpot) covered_by.push_back(w->spec->name);
    if (work <= kEps) break;
  }
  for (Group* spot : skipped_spot) {
    if (covered_by.empty()) continue;
    spot->spilled_tasks += c.tasks_waiting;
    for (const std::string& by : covered_by) AddOnce(spot->spilled_to, by);
  }
}

void Decider::ExplainScaleOut() {
  for (Group& w : groups_) {
    const int demand_add = w.plan.add - w.floor_add;
    if (demand_add > 0) {
      const std::vector<std::string>& causes = w.causes;
      char work[64];
      if (w.note_node_minutes < 1) {
        std::snprintf(work, sizeof work, "<1");
      } else {
        std::snprintf(work, sizeof work, "~%.0f", w.note_node_minutes);
      }
      Decide(Action::kScaleOut, w.spec->name, demand_add,
             "group " + w.spec->name + ": +" + Count(demand_add, "node") + ": " +
                 Count(w.note_tasks, "task") + " waiting (" + work + " node-minutes of work)" +
                 (causes.empty() ? "" : "; " + Join(causes, "; ")));
    }
    const int after = w.Total();
    if (w.held_by_budget) {
      Decide(Action::kHold, w.spec->name, 0,
             "budget cap " + Money(settings_.budget_per_hour) + " reached: " + w.spec->name +
                 " held at " + std::to_string(after) + " (" +
                 std::to_string(std::min(w.wanted, w.spec->max_nodes)) + " wanted)");
    } else if (w.held_at_max) {
      Decide(Action::kHold, w.spec->name, 0,
             "group " + w.spec->name + " held at max " + std::to_string(w.spec->max_nodes) + " (" +
                 std::to_string(w.wanted) + " wanted)");
    }
    if (w.spilled_tasks > 0) {
      Decide(Action::kHold, w.spec->name, 0,
             w.spec->name + " backed off until " + FormatClock(w.backoff_until) + " after " +
                 (w.backoff_cause.empty() ? "a spot failure" : w.backoff_cause) +
                 "; on-demand covers " + Count(w.spilled_tasks, "waiting task") + " (" +
                 Join(w.spilled_to, ", ") + ")");
    }
  }
}

// Under the budget cap, nodes of a pricier group doing work a cheaper group could do would keep
// themselves busy -- and the budget spent -- for good: scale-in never sees them idle. So when
// the cap holds back a cheaper group, pricier nodes doing such work are drained (their task
// finishes first), enough to pay for the cheaper nodes. Deadline work goes first and may take
// the budget of any node doing work without a deadline, most expensive first. Nodes already
// draining count as budget on its way back, so this does not repeat every tick.
void Decider::ShiftBudget() {
  double returning = 0;
  for (const Group& w : groups_) returning += w.draining * w.spec->price_per_hour;
  std::vector<std::tuple<Group*, const DemandClass*, int>> wants;
  for (Group& w : groups_) {
    for (const auto& [c, nodes] : w.unaffordable) wants.push_back({&w, c, nodes});
  }
  std::stable_sort(wants.begin(), wants.end(), [](const auto& a, const auto& b) {
    return std::get<1>(a)->deadline.has_value() > std::get<1>(b)->deadline.has_value();
  });
  std::vector<Group*> by_price;
  for (Group& w : groups_) by_price.push_back(&w);
  std::stable_sort(by_price.begin(), by_price.end(), [](const Group* a, const Group* b) {
    return a->spec->price_per_hour > b->spec->price_per_hour;
  });
  // What the cap leaves after this plan's adds.
  double headroom = std::max(0.0, settings_.budget_per_hour - spend_);
  for (const auto& [want, want_class, nodes] : wants) {
    double cost = nodes * want->spec->price_per_hour;
    const double from_headroom = std::min(cost, headroom);
    cost -= from_headroom;
    headroom -= from_headroom;
    if (cost <= returning + kEps) {
      returning -= cost;
      continue;
    }
    double to_free = cost - returning;
    returning = 0;
    const bool deadline = want_class->deadline.has_value();
    for (Group* w : by_price) {
      if (to_free <= kEps) break;
      if (w->spec->price_per_hour <= 0) continue;
      if (!deadline && w->spec->price_per_hour <= want->spec->price_per_hour) continue;
      // Units of `w` doing work that may move: any, for a deadline; else work `want` runs for
      // less per task slot.
      auto movable = [&](const DemandClass& c) {
        if (deadline) return true;
        const int here = SlotsPerNode(c, *w->spec), there = SlotsPerNode(c, *want->spec);
        return there > 0 && (want->spec->market != Market::kSpot || c.interruptible) &&
               want->SlotHourCost(there) < w->SlotHourCost(here);
      };
      double units = 0;
      for (const auto& [c, u] : w->uses) units += movable(*c) ? u : 0;
      const int n =
          std::min({static_cast<int>(std::floor(units + kEps)),
                    static_cast<int>(std::ceil(to_free / w->spec->price_per_hour - kEps)),
                    w->Total() - static_cast<int>(w->plan.drain.size()) - w->spec->min_nodes});
      const std::vector<const Node*> order = DrainOrder(*w);
      std::vector<std::string> ids;
      for (size_t i = 0; i < order.size() && static_cast<int>(i) < n; ++i) {
        ids.push_back(order[i]->id);
      }
      if (ids.empty()) continue;
      double left = static_cast<double>(ids.size());
      for (auto& [c, u] : w->uses) {
        if (!movable(*c) || left <= 0) continue;
        const double take = std::min(u, left);
        u -= take;
        left -= take;
      }
      w->frac_used = std::max(0.0, w->frac_used - static_cast<double>(ids.size()));
      w->plan.drain.insert(w->plan.drain.end(), ids.begin(), ids.end());
      to_free -= ids.size() * w->spec->price_per_hour;
      const std::string what =
          deadline ? " so " + want_class->name + " can meet its deadline " +
                         FormatClock(want_class->deadline->at) + " on " + want->spec->name
                   : " whose work " + want->spec->name + " runs for less per task slot";
      Decide(Action::kScaleIn, w->spec->name, -static_cast<int>(ids.size()),
             "budget cap " + Money(settings_.budget_per_hour) + " reached: " + w->spec->name +
                 " drains " + Count(static_cast<int64_t>(ids.size()), "node") + " (" +
                 Join(ids, ", ") + ")" + what + "; busy ones finish their task first");
    }
  }
}

void Decider::ScaleIn(Group& w) {
  if (w.plan.add > 0) return;
  const int wanted = static_cast<int>(std::ceil(w.claimed + w.frac_used - kEps));
  int keep = wanted == 0
                 ? 0
                 : static_cast<int>(std::ceil(wanted * (1 + settings_.scale_in_hysteresis) - kEps));
  keep = std::max(keep, w.spec->min_nodes);
  const int excess = w.Total() - static_cast<int>(w.plan.drain.size()) - keep;
  if (excess <= 0) return;
  std::vector<const Node*> idle;
  for (const Node* n : DrainOrder(w)) {
    if (n->state == NodeState::kIdle && now_ - n->idle_since >= settings_.scale_in_grace) {
      idle.push_back(n);
    }
  }
  if (idle.empty()) return;
  const int n = std::min(excess, static_cast<int>(idle.size()));
  const std::optional<TimePoint>& last_out = w.state->last_scale_out;
  if (last_out && now_ < *last_out + settings_.cooldown) {
    Decide(Action::kHold, w.spec->name, 0,
           "group " + w.spec->name + ": " + Count(n, "idle node") + " kept until " +
               FormatClock(*last_out + settings_.cooldown) + ": cooldown after the scale-out at " +
               FormatClock(*last_out));
    return;
  }
  std::vector<std::string> ids;
  for (int i = 0; i < n; ++i) ids.push_back(idle[i]->id);
  w.plan.drain.insert(w.plan.drain.end(), ids.begin(), ids.end());
  Decide(Action::kScaleIn, w.spec->name, -n,
         "group " + w.spec->name + ": -" + Count(n, "node") + " (" + Join(ids, ", ") +
             "): idle for at least " + Span(double(settings_.scale_in_grace.count())) + "; " +
             (wanted == 0 ? "no waiting work it can run"
                          : std::to_string(wanted) + " wanted, " + std::to_string(keep) + " kept"));
}

// Runs when the farm costs more than the cap (the cap was lowered, or min nodes cost more):
// requested nodes go first (no work lost), then idle ones, then busy ones drain; most expensive
// groups first; never below min.
void Decider::EnforceBudget() {
  const double cap = settings_.budget_per_hour;
  double cost = 0;
  for (const Group& w : groups_) {
    cost +=
        w.spec->price_per_hour * (w.Total() + w.draining - static_cast<int>(w.plan.drain.size()));
  }
  if (cap <= 0 || cost <= cap + kEps) return;
  std::vector<Group*> order;
  for (Group& w : groups_) order.push_back(&w);
  std::stable_sort(order.begin(), order.end(), [](const Group* a, const Group* b) {
    return a->spec->price_per_hour > b->spec->price_per_hour;
  });
  const double was = cost;
  for (Group* w : order) {
    std::vector<std::string> removed;
    auto room = [&] {
      return cost > cap + kEps && w->spec->price_per_hour > 0 &&
             w->Total() - static_cast<int>(w->plan.drain.size()) > w->spec->min_nodes;
    };
    for (auto it = w->state->pending.rbegin(); it != w->state->pending.rend() && room(); ++it) {
      if (Has(w->plan.give_up, it->id)) continue;
      w->plan.give_up.push_back(it->id);
      w->delays.pop_back();
      removed.push_back(it->id);
      cost -= w->spec->price_per_hour;
    }
    for (const Node* n : DrainOrder(*w)) {
      if (!room()) break;
      w->plan.drain.push_back(n->id);
      removed.push_back(n->id);
      cost -= w->spec->price_per_hour;
    }
    if (!removed.empty()) {
      Decide(Action::kScaleIn, w->spec->name, -static_cast<int>(removed.size()),
             "over budget (" + Money(was) + " > cap " + Money(cap) + "): " + w->spec->name +
                 " drains " + Count(static_cast<int64_t>(removed.size()), "node") + " (" +
                 Join(removed, ", ") + "; busy ones finish their task first)");
    }
  }
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

}  // namespace

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
    if (g.gpus.count < 0 || g.gpus.memory_mib < 0 || g.slots < 0) {
      return at + "GPU count, GPU memory and slots cannot be negative";
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
