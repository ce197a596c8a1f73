// Capacity and cost commands: the farm at a glance (`tessera status` without a job), what the
// farm cost per day (`tessera costs`), and the autoscaler's node groups, forecasts and decisions
// (`tessera autoscaler status`).

#include <cstdio>
#include <iostream>

#include "scheduler/cli/commands.h"
#include "scheduler/cli/format.h"

namespace tessera::cli {

int RunFarmStatus(const ClientOptions& options) {
  int rc = kExitOk;
  std::optional<json> reply = Call(
      options, [](ApiClient& c) { return c.Get("/api/v1/summary"); }, &rc);
  if (!reply) return rc;
  const json& jobs = Member(*reply, "jobs");
  const json& tasks = Member(*reply, "tasks");
  const json& workers = Member(*reply, "workers");
  const json& cost = Member(*reply, "cost");
  std::cout << "Farm (tessera " << Str(*reply, "version") << ")\n";
  std::cout << "  jobs       " << Int(jobs, "running") << " running, " << Int(jobs, "queued")
            << " queued, " << Int(jobs, "done") << " done, " << Int(jobs, "failed") << " failed\n";
  char throughput[32];
  std::snprintf(throughput, sizeof(throughput), "%.1f", Num(*reply, "throughput_per_min"));
  std::cout << "  tasks      " << Int(tasks, "running") << " running, " << Int(tasks, "queued")
            << " queued; " << throughput << " finished per minute\n";
  std::cout << "  workers    " << Int(workers, "busy") << " busy, " << Int(workers, "idle")
            << " idle, " << Int(workers, "offline") << " offline\n";
  std::cout << "  cost       " << FormatMoney(Num(cost, "today")) << " today (UTC), "
            << FormatMoney(Num(cost, "per_hour")) << " per hour now, "
            << FormatDuration(Num(cost, "gpu_seconds_today")) << " GPU time today\n";
  // Farm-level alerts (a full disk, ...): shown, but the farm answered, so the exit code is 0.
  const json& alerts = Member(*reply, "alerts");
  if (alerts.is_array() && !alerts.empty()) {
    std::cout << "ALERTS (" << alerts.size() << ")\n";
    for (const json& a : alerts) {
      std::cout << "  " << Str(a, "kind") << " since " << Str(a, "since") << ": "
                << Str(a, "message") << "\n";
    }
  }
  return kExitOk;
}

int RunCosts(const ClientOptions& options, int days) {
  int rc = kExitOk;
  std::optional<json> reply = Call(
      options, [&](ApiClient& c) { return c.Get("/api/v1/costs?days=" + std::to_string(days)); },
      &rc);
  if (!reply) return rc;
  const json& rows = Member(*reply, "days");
  if (!rows.is_array() || rows.empty()) {
    std::cout << "No cost recorded in the last " << days
              << " days (workers cost their node group's price, or cost.instance_prices).\n";
    return kExitOk;
  }
  Table table({"DAY (UTC)", "COST", "GPU TIME"});
  for (const json& d : rows) {
    table.AddRow(
        {Str(d, "day"), FormatMoney(Num(d, "cost")), FormatDuration(Num(d, "gpu_seconds"))});
  }
  table.AddRow({"total", FormatMoney(Num(*reply, "total")), ""});
  table.Print(std::cout);
  return kExitOk;
}

int RunAutoscalerStatus(const ClientOptions& options, int decisions) {
  int rc = kExitOk;
  std::optional<json> reply = Call(
      options, [](ApiClient& c) { return c.Get("/api/v1/autoscaler"); }, &rc);
  if (!reply) return rc;
  if (Member(*reply, "enabled") != true) {
    std::cout << "The autoscaler is off: the scheduler config has no autoscaler.groups.\n";
    return kExitOk;
  }
  Table groups({"GROUP", "PROVIDER", "MARKET", "PRICE/H", "NODES", "PLANNED", "MIN-MAX", "NOTE"});
  for (const json& g : Member(*reply, "groups")) {
    int up = 0, requested = 0, draining = 0;
    for (const json& n : Member(g, "nodes")) {
      const std::string state = Str(n, "state");
      requested += state == "requested";
      draining += state == "draining";
      up += state == "idle" || state == "busy";
    }
    std::string nodes = std::to_string(up);
    if (requested) nodes += " +" + std::to_string(requested) + " booting";
    if (draining) nodes += " (" + std::to_string(draining) + " draining)";
    std::string note = "-";
    if (Member(g, "backoff_until").is_string()) {
      note = "backed off until " + FormatTimestamp(Member(g, "backoff_until")) + " (" +
             Str(g, "backoff_cause") + ")";
    }
    groups.AddRow({Str(g, "name"), Str(g, "provider"), Str(g, "market"),
                   FormatMoney(Num(g, "price_per_hour")), nodes, Str(g, "planned_nodes"),
                   Str(g, "min_nodes") + "-" + Str(g, "max_nodes"), note});
  }
  groups.Print(std::cout);
  const double budget = Num(*reply, "budget_per_hour");
  std::cout << "\ncost " << FormatMoney(Num(*reply, "cost_per_hour")) << "/h now, "
            << FormatMoney(Num(*reply, "planned_cost_per_hour")) << "/h planned, budget "
            << (budget > 0 ? FormatMoney(budget) + "/h" : std::string("none")) << "\n";
  const json& forecasts = Member(*reply, "forecasts");
  if (forecasts.is_array() && !forecasts.empty()) {
    std::cout << "\nDeadlines\n";
    Table table({"JOB", "DEADLINE", "FORECAST", ""});
    for (const json& f : forecasts) {
      table.AddRow({Str(f, "job_id"), FormatTimestamp(Member(f, "deadline")),
                    Member(f, "finish").is_string() ? FormatTimestamp(Member(f, "finish"))
                                                    : "no capacity can run it",
                    Member(f, "met") == true ? "on time" : "LATE"});
    }
    table.Print(std::cout);
  }
  const json& list = Member(*reply, "decisions");
  std::cout << "\nLatest decisions\n";
  if (!list.is_array() || list.empty()) std::cout << "  none yet\n";
  int shown = 0;
  for (const json& d : list) {
    if (shown++ == decisions) break;
    std::cout << "  " << FormatTimestamp(Member(d, "at")) << "  " << Str(d, "action") << "  "
              << Str(d, "reason") << "\n";
  }
  return kExitOk;
}

}  // namespace tessera::cli
