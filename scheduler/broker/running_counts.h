#pragma once
// RunningCounts: the leases running now, counted the ways the policy caps them -- per named
// limit (BrokerOptions::limits) and, for fair share, per project and per user. A lease that
// starts counts +1 against its job, project, user and limits; one that ends, -1.
//
// Threads: broker thread only.

#include <map>
#include <string>

#include "scheduler/broker/lease_table.h"
#include "scheduler/policy/policy.h"

namespace tessera::broker {

struct RunningCounts {
  std::map<std::string, int> limits_in_use;  // named limit -> running tasks holding it
  policy::FarmShares shares;                 // fair share: running tasks by project and user

  // A lease of the job starts (+1) or ends (-1).
  void Count(JobInfo& job, int delta) {
    job.running += delta;
    for (const std::string& name : job.needs.limits) limits_in_use[name] += delta;
    shares.project_running[job.project] += delta;
    shares.user_running[{job.project, job.user}] += delta;
  }
  // Nothing runs (memory was reloaded from the store).
  void Clear() {
    limits_in_use.clear();
    shares.project_running.clear();
    shares.user_running.clear();
  }
};

}  // namespace tessera::broker
