// A day of render submissions against the autoscaler's policy, in one-minute steps: jobs of
// varied sizes and task lengths arrive (more in working hours), nodes boot with a delay, spot
// nodes are sometimes taken back and spot requests sometimes fail, and a dispatcher hands tasks
// to free nodes. The policy's cost is compared with a lower bound on any schedule's cost; every
// job must finish, and every deadline be met unless the policy said in time that the budget or
// a limit would not allow it.
//
// Deterministic: a seeded generator with its own distributions (the standard ones differ
// between standard libraries).

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <numbers>
#include <queue>
#include <random>
#include <set>
#include <tuple>

#include "scheduler/autoscaler/decider.h"

namespace tessera::autoscaler {
namespace {

constexpr double kStep = 60;
constexpr double kDay = 86400;
constexpr double kNoDeadline = 1e18;
const TimePoint kStart(Seconds(20000LL * 86400));  // a midnight, UTC

class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(seed) {}
  double Uniform() { return double(gen_() >> 11) * 0x1.0p-53; }
  double Uniform(double lo, double hi) { return lo + (hi - lo) * Uniform(); }
  bool Chance(double p) { return Uniform() < p; }
  double Normal() {  // Box-Muller
    const double u = 1 - Uniform(), v = Uniform();
    return std::sqrt(-2 * std::log(u)) * std::cos(2 * std::numbers::pi * v);
  }

 private:
  std::mt19937_64 gen_;
};

struct Job {
  int id = 0;
  double submit = 0;
  int tasks = 0;
  double mean_s = 0;      // true mean task length
  double estimate_s = 0;  // what the submitter said, until tasks are measured
  bool interruptible = true;
  int64_t memory_mib = 0;
  std::optional<double> deadline;
  int waiting = 0, running = 0, done = 0;
  double measured_sum = 0;  // seconds of its finished tasks
  double first_start = -1, finished = -1;
};

struct SimNode {
  std::string id;
  size_t group = 0;
  double requested = 0, registered = 0, ended = -1;
  bool never_registers = false, draining = false;
  double free_at = 0, idle_since = 0;
  int job = -1;  // running a task of this job until free_at
  double task_started = 0;
};

std::vector<NodeGroup> Groups() {
  auto make = [](std::string name, Market market, double price, int max_nodes, int64_t mib,
                 int boot) {
    NodeGroup g;
    g.name = std::move(name);
    g.provider = "cli";
    g.instance_type = g.name;
    g.gpus = {1, mib > 30000 ? "A100" : "A10G", mib};
    g.price_per_hour = price;
    g.market = market;
    g.max_nodes = max_nodes;
    g.pools = {"default"};
    g.boot_time = Seconds(boot);
    return g;
  };
  NodeGroup reserved = make("rsv-a10", Market::kReserved, 0.60, 2, 24576, 120);
  reserved.min_nodes = 2;
  return {reserved, make("spot-a10", Market::kSpot, 0.45, 30, 24576, 150),
          make("od-a10", Market::kOnDemand, 1.10, 30, 24576, 120),
          make("spot-a100", Market::kSpot, 1.50, 12, 81920, 200),
          make("od-a100", Market::kOnDemand, 3.70, 12, 81920, 180)};
}

// About 90 jobs: 6 an hour from 9 to 19 h, 2 an hour otherwise; 4..300 tasks (log-uniform) of
// 15 s..40 min (log-normal, median 2.5 min); a quarter must not be interrupted, 15% need 40 GiB
// GPUs (A100s only), 15% have a deadline.
std::vector<Job> Submissions(Rng& rng) {
  std::vector<Job> jobs;
  for (double t = 0; t < kDay; t += kStep) {
    const double hour = t / 3600;
    const double per_hour = (hour >= 9 && hour < 19) ? 6 : 2;
    if (!rng.Chance(per_hour / 60)) continue;
    Job j;
    j.id = static_cast<int>(jobs.size()) + 1;
    j.submit = t;
    j.tasks = static_cast<int>(std::exp(rng.Uniform(std::log(4.0), std::log(300.0))));
    j.mean_s = std::clamp(150 * std::exp(0.9 * rng.Normal()), 15.0, 2400.0);
    j.estimate_s = j.mean_s * std::exp(rng.Uniform(std::log(0.5), std::log(2.0)));
    j.interruptible = !rng.Chance(0.25);
    j.memory_mib = rng.Chance(0.15) ? 40960 : 0;
    if (rng.Chance(0.15)) {
      // Room for 12 nodes' worth of rounds, half again, and 10 minutes to boot and settle.
      j.deadline = t + 600 + 1.5 * std::ceil(j.tasks / 12.0) * j.mean_s;
    }
    j.waiting = j.tasks;
    jobs.push_back(j);
  }
  return jobs;
}

bool Eligible(const Job& j, const NodeGroup& g) {
  return g.gpus.memory_mib >= j.memory_mib && (j.interruptible || g.market != Market::kSpot);
}

// The lowest hourly price of a group (reserved aside: it is there anyway) that may run the job.
double CheapestElsewhere(const Job& j, const std::vector<NodeGroup>& groups) {
  double price = 1e9;
  for (const NodeGroup& g : groups) {
    if (g.market != Market::kReserved && Eligible(j, g)) price = std::min(price, g.price_per_hour);
  }
  return price;
}

// The cheapest possible schedule's cost, bounded from below: reserved nodes are paid all along
// and run up to their capacity of eligible work for nothing more (the work that would cost most
// elsewhere first); every other task-second is paid at the cheapest rate of a group that may
// run it, with no boot, idle or lost time. Timing is ignored, so no schedule can beat it.
double LowerBound(const std::vector<Job>& jobs, const std::vector<NodeGroup>& groups,
                  double window) {
  double reserved_cost = 0, reserved_capacity = 0;
  for (const NodeGroup& g : groups) {
    if (g.market != Market::kReserved) continue;
    reserved_cost += g.min_nodes * g.price_per_hour * window / 3600;
    reserved_capacity += g.min_nodes * window;
  }
  std::vector<std::pair<double, double>> work;  // (rate per second elsewhere, seconds)
  double paid = 0;
  for (const Job& j : jobs) {
    const double rate = CheapestElsewhere(j, groups) / 3600;
    const bool reserved_ok = std::any_of(groups.begin(), groups.end(), [&](const NodeGroup& g) {
      return g.market == Market::kReserved && Eligible(j, g);
    });
    if (reserved_ok) {
      work.push_back({rate, j.measured_sum});
    } else {
      paid += rate * j.measured_sum;
    }
  }
  std::sort(work.rbegin(), work.rend());
  for (auto [rate, seconds] : work) {
    const double free = std::min(seconds, reserved_capacity);
    reserved_capacity -= free;
    paid += rate * (seconds - free);
  }
  return reserved_cost + paid;
}

struct SimResult {
  std::vector<Job> jobs;
  // Jobs the policy said, before their deadline, it could not make meet it: the budget cap, a
  // group's max, or every task left already on a node (a long task cannot be split).
  std::set<int> flagged_misses;
  double hours = 0, cost = 0, bound = 0, max_spend = 0;
  double task_wait_s = 0, first_task_wait_s = 0, redone_s = 0;
  int64_t tasks_started = 0;
  int launched = 0, reclaims = 0, provider_errors = 0, budget_held_ticks = 0;
};

SimResult Simulate(uint64_t seed, const std::vector<NodeGroup>& groups, const Settings& settings) {
  Rng rng(seed);
  SimResult r;
  std::vector<Job>& jobs = r.jobs;
  jobs = Submissions(rng);
  std::vector<SimNode> nodes;
  std::map<std::string, GroupState> states;
  auto at = [](double t) { return kStart + Seconds(std::llround(t)); };
  auto alive = [](const SimNode& n) { return n.ended < 0; };
  auto spend = [&] {
    double sum = 0;
    for (const SimNode& n : nodes) sum += alive(n) ? groups[n.group].price_per_hour : 0;
    return sum;
  };
  size_t submitted = 0;
  double t = 0;
  for (; t < 2 * kDay; t += kStep) {
    while (submitted < jobs.size() && jobs[submitted].submit <= t) ++submitted;
    if (submitted == jobs.size() &&
        std::all_of(jobs.begin(), jobs.end(), [](const Job& j) { return j.finished >= 0; })) {
      break;
    }

    // Spot nodes are taken back now and then (about one per 24 node-hours); the task is lost.
    for (SimNode& n : nodes) {
      if (!alive(n) || groups[n.group].market != Market::kSpot || n.registered > t) continue;
      if (!rng.Chance(kStep / (24 * 3600.0))) continue;
      ++r.reclaims;
      if (n.job >= 0 && n.free_at > t) {
        --jobs[n.job].running;
        ++jobs[n.job].waiting;
        r.redone_s += t - n.task_started;
      }
      n.ended = t;
      BackOff(states[groups[n.group].name], settings, at(t), "a spot reclaim");
    }

    // What the daemon would tell the policy.
    for (auto& [name, s] : states) s.pending.clear(), s.nodes.clear();
    for (const SimNode& n : nodes) {
      if (!alive(n)) continue;
      GroupState& s = states[groups[n.group].name];
      if (n.never_registers || n.registered > t) {
        s.pending.push_back({n.id, at(n.requested)});
      } else if (n.draining) {
        s.nodes.push_back({n.id, NodeState::kDraining, {}});
      } else if (n.job >= 0 && n.free_at > t) {
        // Its task's start plus its job's mean so far.
        const Job& j = jobs[n.job];
        const double mean = j.done > 0 ? j.measured_sum / j.done : j.estimate_s;
        s.nodes.push_back({n.id, NodeState::kBusy, {}, at(std::max(t, n.task_started + mean))});
      } else {
        s.nodes.push_back({n.id, NodeState::kIdle, at(n.idle_since)});
      }
    }
    Demand demand;
    for (size_t i = 0; i < submitted; ++i) {
      const Job& j = jobs[i];
      if (j.waiting == 0 && j.running == 0) continue;
      DemandClass c;
      c.name = "job " + std::to_string(j.id);
      c.tasks_waiting = j.waiting;
      c.tasks_running = j.running;
      c.pools = {"default"};
      c.gpus = 1;
      c.min_gpu_memory_mib = j.memory_mib;
      c.seconds_per_task = j.done > 0 ? j.measured_sum / j.done : j.estimate_s;
      c.interruptible = j.interruptible;
      if (j.deadline) c.deadline = Deadline{at(*j.deadline), j.waiting + j.running};
      demand.classes.push_back(c);
    }

    // Apply the plan as a daemon would.
    const Plan plan = Decide(groups, states, demand, settings, at(t));
    bool budget_held = false;
    for (const Decision& d : plan.decisions) {
      budget_held |= d.reason.find("budget cap") != std::string::npos;
      if (d.action == Action::kDeadline && d.reason.find("will miss") != std::string::npos &&
          (d.reason.find("(budget cap") != std::string::npos ||
           d.reason.find(" at max)") != std::string::npos ||
           d.reason.find("(every task left has a node") != std::string::npos)) {
        const int id = std::stoi(d.reason.substr(4));  // "job N will miss..."
        if (t < *jobs[id - 1].deadline) r.flagged_misses.insert(id);
      }
    }
    r.budget_held_ticks += budget_held;
    for (const Decision& d : plan.decisions)
      std::printf("  %.2f h [%s] %s\n", t / 3600, ActionName(d.action), d.reason.c_str());
    for (const auto& f : plan.forecasts)
      std::printf("  %.2f h forecast %s before %s finish %s\n", t / 3600, f.demand.c_str(),
                  f.before ? FormatClock(*f.before).c_str() : "-",
                  f.finish ? FormatClock(*f.finish).c_str() : "-");
    for (size_t g = 0; g < groups.size(); ++g) {
      const GroupPlan& gp = plan.groups[g];
      GroupState& s = states[groups[g].name];
      if (gp.backoff_until) BackOff(s, settings, at(t), gp.backoff_cause);
      const std::set<std::string> give_up(gp.give_up.begin(), gp.give_up.end());
      const std::set<std::string> drain(gp.drain.begin(), gp.drain.end());
      for (SimNode& n : nodes) {
        if (!alive(n) || n.group != g) continue;
        if (give_up.count(n.id)) n.ended = t;
        if (drain.count(n.id)) {
          n.draining = true;
          if (n.job < 0 || n.free_at <= t) n.ended = t;
        }
      }
      if (gp.add == 0) continue;
      s.last_scale_out = at(t);
      if (groups[g].market == Market::kSpot && rng.Chance(0.03)) {
        ++r.provider_errors;  // no capacity to be had: nothing starts
        BackOff(s, settings, at(t), "a provider error");
        continue;
      }
      for (int i = 0; i < gp.add; ++i) {
        SimNode n;
        n.id = groups[g].name + "-" + std::to_string(r.launched++);
        n.group = g;
        n.requested = t;
        n.never_registers = groups[g].market == Market::kSpot && rng.Chance(0.04);
        n.registered = t + groups[g].boot_time->count() * rng.Uniform(0.8, 1.3);
        n.free_at = n.idle_since = n.registered;
        nodes.push_back(n);
      }
    }
    r.max_spend = std::max(r.max_spend, spend());

    // Dispatch until the next step, each node as often as it frees up: deadlines first, then
    // work with no cheaper place to run (non-interruptible work on on-demand nodes, 40 GiB work
    // on A100s), then the oldest job. Work with a cheaper place (and no deadline) is left alone
    // while that place has a node free or booting, so a pricier node can idle out rather than
    // keep itself busy.
    std::vector<bool> has_room(groups.size(), false);
    for (const SimNode& n : nodes) {
      if (alive(n) && !n.draining && (n.registered > t || n.job < 0 || n.free_at <= t)) {
        has_room[n.group] = true;
      }
    }
    auto cheaper_room = [&](const Job& j, size_t g) {
      for (size_t o = 0; o < groups.size(); ++o) {
        if (has_room[o] && groups[o].market != Market::kReserved && Eligible(j, groups[o]) &&
            groups[o].price_per_hour < groups[g].price_per_hour) {
          return true;
        }
      }
      return false;
    };
    using Entry = std::pair<double, size_t>;
    std::priority_queue<Entry, std::vector<Entry>, std::greater<>> free_nodes;
    for (size_t i = 0; i < nodes.size(); ++i) {
      const SimNode& n = nodes[i];
      if (alive(n) && !n.never_registers && std::max(n.free_at, n.registered) < t + kStep) {
        free_nodes.push({std::max({n.free_at, n.registered, t}), i});
      }
    }
    while (!free_nodes.empty()) {
      const auto [when, i] = free_nodes.top();
      free_nodes.pop();
      SimNode& n = nodes[i];
      if (n.job >= 0) {
        Job& j = jobs[n.job];
        --j.running;
        ++j.done;
        j.measured_sum += n.free_at - n.task_started;
        if (j.done == j.tasks) j.finished = n.free_at;
        n.job = -1;
        n.idle_since = n.free_at;
      }
      if (n.draining) {
        n.ended = when;
        continue;
      }
      const NodeGroup& group = groups[n.group];
      auto key = [&](const Job& j) {
        return std::make_tuple(j.deadline.value_or(kNoDeadline),
                               CheapestElsewhere(j, groups) < group.price_per_hour, j.submit);
      };
      Job* pick = nullptr;
      for (size_t k = 0; k < submitted; ++k) {
        Job& j = jobs[k];
        if (j.waiting == 0 || !Eligible(j, group)) continue;
        if (!j.deadline && cheaper_room(j, n.group)) continue;
        if (!pick || key(j) < key(*pick)) pick = &j;
      }
      if (!pick) continue;
      --pick->waiting;
      ++pick->running;
      if (pick->first_start < 0) {
        pick->first_start = when;
        r.first_task_wait_s += when - pick->submit;
      }
      r.task_wait_s += when - pick->submit;
      ++r.tasks_started;
      n.job = static_cast<int>(pick - jobs.data());
      n.task_started = when;
      n.free_at = when + pick->mean_s * std::exp(0.3 * rng.Normal() - 0.045);  // mean 1x
      if (n.free_at < t + kStep) free_nodes.push({n.free_at, i});
    }
  }
  r.hours = t / 3600;
  for (const SimNode& n : nodes) {
    r.cost += groups[n.group].price_per_hour * ((n.ended < 0 ? t : n.ended) - n.requested) / 3600;
  }
  r.bound = LowerBound(jobs, groups, t);
  return r;
}

// One simulated day: every job finishes, the budget is never exceeded, and every missed deadline
// was flagged by the policy beforehand. Returns cost / lower bound.
double CheckADay(uint64_t seed, bool print) {
  const std::vector<NodeGroup> groups = Groups();
  Settings settings;  // the defaults: a 15 min horizon, 5 min grace, 10 min cooldown
  settings.budget_per_hour = 40;
  EXPECT_EQ(WhyInvalid(groups, settings), "");
  const SimResult r = Simulate(seed, groups, settings);

  int finished = 0, deadlines = 0, met = 0;
  for (const Job& j : r.jobs) {
    finished += j.finished >= 0;
    if (!j.deadline) continue;
    ++deadlines;
    if (j.finished >= 0 && j.finished <= *j.deadline) {
      ++met;
    } else {
      EXPECT_TRUE(r.flagged_misses.count(j.id))
          << "seed " << seed << ": job " << j.id << " missed its deadline by "
          << j.finished - *j.deadline
          << " s, and the policy never said the budget or a limit would not allow it";
    }
  }
  const double ratio = r.cost / r.bound;
  if (print) {
    std::printf(
        "autoscaler sim, seed %llu: %zu jobs, %lld tasks over %.1f h: cost $%.2f, lower bound "
        "$%.2f, ratio %.3f; mean wait from submission to a task's start %.1f min (to a job's "
        "first task %.1f min); deadlines met %d/%d; %d nodes launched, %d spot reclaims (%.1f "
        "node-h redone), %d spot provider errors; peak spend $%.2f/h (cap $%.0f/h), budget cap "
        "binding in %d of %.0f ticks\n",
        static_cast<unsigned long long>(seed), r.jobs.size(),
        static_cast<long long>(r.tasks_started), r.hours, r.cost, r.bound, ratio,
        r.task_wait_s / std::max<int64_t>(1, r.tasks_started) / 60,
        r.first_task_wait_s / r.jobs.size() / 60, met, deadlines, r.launched, r.reclaims,
        r.redone_s / 3600, r.provider_errors, r.max_spend, settings.budget_per_hour,
        r.budget_held_ticks, r.hours * 60);
  }
  // Nothing starves to save money: every job finishes. The budget is never exceeded.
  EXPECT_EQ(finished, static_cast<int>(r.jobs.size())) << "seed " << seed;
  EXPECT_GT(deadlines, 5) << "seed " << seed;
  EXPECT_LE(r.max_spend, settings.budget_per_hour + 1e-9) << "seed " << seed;
  return ratio;
}

TEST(AutoscalerSimTest, DaysOfSubmissionsCostWithinStatedFactorsOfTheCheapestSchedule) {
  // Thirty different days (seeds 1..30), not one chosen one. The stated factors: the median day
  // at most 1.75x the cheapest possible schedule, no day over 2.25x. Measured: median 1.7, range
  // 1.34..2.17. The bound is loose where the two reserved nodes idle at night (it lets them absorb
  // a day's on-demand-only work) and where spot runs at max, and it pays nothing for boots, idle
  // grace minutes, the hysteresis margin, work lost to reclaims, or on-demand cover during spot
  // back-offs.
  std::vector<double> ratios;
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    const double ratio = CheckADay(seed, /*print=*/seed == 1);
    EXPECT_LE(ratio, 2.25) << "seed " << seed;
    ratios.push_back(ratio);
  }
  std::sort(ratios.begin(), ratios.end());
  const double median = (ratios[14] + ratios[15]) / 2;
  std::printf(
      "autoscaler sim over seeds 1..30: cost / lower bound median %.3f, min %.3f, max %.3f\n",
      median, ratios.front(), ratios.back());
  EXPECT_LE(median, 1.75);
}

}  // namespace
}  // namespace tessera::autoscaler
