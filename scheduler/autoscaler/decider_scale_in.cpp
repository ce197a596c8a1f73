// The autoscaler's decision policy, scaling in (decider.h; the parts are listed in
// decider.cpp): requested nodes that never registered given up (a spot group backed off), budget
// shifted from pricier groups to cheaper ones, idle nodes scaled in slowly, and the budget cap
// enforced when the farm costs more than it.
#include <algorithm>
#include <cmath>
#include <tuple>
#include <utility>

#include "scheduler/autoscaler/decider_internal.h"

namespace tessera::autoscaler::decider_internal {

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

}  // namespace tessera::autoscaler::decider_internal
