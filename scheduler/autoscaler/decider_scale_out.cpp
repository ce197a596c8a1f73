// The autoscaler's decision policy, scaling out (decider.h; the parts are listed in
// decider.cpp): groups held at min, deadline demand forecast and met, other demand sized in work
// over the horizon across the groups that may serve it, and the reasons for each scale-out.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <tuple>
#include <utility>

#include "scheduler/autoscaler/decider_internal.h"

namespace tessera::autoscaler::decider_internal {
namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

TimePoint After(TimePoint now, double seconds) {
  return now + Seconds(static_cast<int64_t>(std::ceil(seconds - kEps)));
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

}  // namespace

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
}  // namespace tessera::autoscaler::decider_internal
