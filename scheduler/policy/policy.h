#pragma once
// The scheduling policy: pure decisions over a read-only view of the farm (after Ray's
// scheduling policies). The broker owns the mechanism -- sockets, leases, the store, the queue --
// and asks the policy whether a worker could ever run a job, whether it can run one of its tasks
// now, and which of the waiting jobs a free worker should serve next. Nothing here does I/O,
// reads a clock or keeps state between calls, so every rule is unit-tested directly.
//
// "Not now" and "never" are different answers: a worker whose GPUs are busy will be free later,
// a worker outside the job's pools never will, and a job no connected worker could ever run is
// reported on the job instead of waiting silently.

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "shared/job_spec.h"
#include "shared/protocol.h"

namespace tessera::policy {

// What a connected worker offers.
struct WorkerOffer {
  int64_t id = 0;
  std::string name;
  std::set<std::string> pools, tags;
  int cpu_cores = 0;
  int64_t ram_mb = 0;
  std::vector<protocol::GpuInfo> gpus;
  std::map<std::string, std::string> plugins;  // renderer plugins it runs -> version
};

// What every task of a job needs, and where it may not run.
struct JobNeeds {
  std::vector<std::string> pools;  // empty: any pool
  std::vector<std::string> tags;   // all required
  std::vector<std::string> limits;
  spec::ResourceSpec resources;
  std::set<int64_t> blocklist;  // worker ids
  // A renderer plugin the worker must offer ("" or a built-in renderer: every worker has it).
  std::string renderer;
};

// Why `worker` can never run the job's tasks ("" when it could): blocklist, renderer plugin,
// pools, tags or hardware. Busy slots and GPUs are not a reason: they free up.
std::string WhyNever(const JobNeeds& job, const WorkerOffer& worker);
inline bool CouldEverRun(const JobNeeds& job, const WorkerOffer& worker) {
  return WhyNever(job, worker).empty();
}

// The GPUs one task takes on this worker, chosen among those not in `busy` (indexed like
// worker.gpus): none on a worker without GPUs; otherwise max(1, resources.gpus) GPUs that each
// meet the memory and compute minimums -- a task is pinned to its own GPU(s). nullopt: not
// enough qualifying GPUs are free now.
std::optional<std::vector<int>> PickGpus(const spec::ResourceSpec& need, const WorkerOffer& worker,
                                         const std::vector<bool>& busy);

// Named counted limits: whether one more task holding `names` stays within `max` (a name that
// is not configured allows nothing).
bool LimitsAllow(const std::vector<std::string>& names, const std::map<std::string, int>& max,
                 const std::map<std::string, int>& in_use);

// Fair share (scheduler config `projects:`): running tasks are split between projects in
// proportion to their weights, then evenly between the users of a project, then between the
// jobs of a user (fewest running, then least served, then oldest). A project may be capped.
struct ProjectShare {
  double weight = 1.0;
  int max_running = 0;  // 0: no cap
};
struct FarmShares {
  std::map<std::string, ProjectShare> projects;  // absent: weight 1, no cap
  std::map<std::string, int> project_running;
  std::map<std::pair<std::string, std::string>, int> user_running;  // (project, user)
};
// A job whose next task the worker could run now.
struct Candidate {
  int64_t job_id = 0;
  std::string project, user;
  int running = 0;         // its tasks running now
  int64_t dispatched = 0;  // leases it has been given so far
};
// Whether the job's project may start one more task.
bool ProjectAllows(const std::string& project, const FarmShares& shares);
// Index of the candidate to serve next (all of one priority), or nullopt if there is none.
std::optional<size_t> PickFairShare(const std::vector<Candidate>& candidates,
                                    const FarmShares& shares);

}  // namespace tessera::policy
