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

#include "shared/jobs/job_file.h"
#include "shared/wire/protocol.h"

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
  // GPU sharing (worker.gpu_sharing: shared): each GPU is cut into slots_per_gpu slots (2..32)
  // and a slot gives memory_mb_per_slot of its memory (0: not divided). 0: whole GPUs.
  int slots_per_gpu = 0;
  int64_t memory_mb_per_slot = 0;
  // GPUs its telemetry reports unhealthy (index into gpus -> why, "Xid 79: GPU has fallen off
  // the bus"): no new task is placed on them. Not a "never": the worker may come back healthy.
  std::map<int, std::string> gpu_faults;
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

// ---- free cores and RAM (policy.cpp) ---------------------------------------------------------
// The tasks a worker runs at once (its slots) share its cores and RAM: a task that declares
// resources.cpu_cores or ram_mb holds that much while it runs, and the sums never exceed what
// the worker has. A task that declares neither holds only its slot.
struct CpuUse {
  int cores = 0;
  int64_t ram_mb = 0;
};
// Why a task that could run on this worker finds too few cores or too little RAM free there now,
// e.g. "w3 has 2 of 8 CPU cores free, the task needs 4" ("" when it fits).
std::string WhyNoFreeCpu(const spec::ResourceSpec& need, const WorkerOffer& worker,
                         const CpuUse& use);

// ---- GPU claims (gpu_claims.cpp) -------------------------------------------------------------
// What a GPU can take is counted in integer slots: a shared GPU has slots_per_gpu of them, a GPU of
// a worker that does not share has one. A task with resources.gpu_share on a sharing worker takes
// ceil(share x slots_per_gpu) slots and its memory of one GPU; any other task takes its GPUs
// whole. Neither slots nor memory are ever over-committed, and a GPU held whole holds nothing
// else (nor does a whole task go on a GPU that shared tasks hold).

// What the leases on one GPU hold now.
struct GpuUse {
  int slots_used = 0;
  int64_t memory_mb_used = 0;
  bool whole = false;  // held whole by one task
};
// What one task takes: the same slots and memory on each of its GPUs.
struct GpuClaim {
  std::vector<int> gpus;  // indices into WorkerOffer::gpus
  int slots = 0;          // per GPU
  int64_t memory_mb = 0;  // per GPU
  bool whole = true;
};

// Slots one of the worker's GPUs has (1 unless it shares them).
int SlotsPerGpu(const WorkerOffer& worker);
// Whether a task with `need` takes a share of one GPU here (rather than whole GPUs).
bool TakesShare(const spec::ResourceSpec& need, const WorkerOffer& worker);

// The GPUs one task takes on this worker given what the GPUs hold (`use`, indexed like
// worker.gpus; missing entries are free): none on a worker without GPUs; a share on one GPU,
// the fullest that still has enough free (a partly used GPU fills up before an empty one is
// opened);
// otherwise max(1, resources.gpus) free GPUs that each meet the memory and compute minimums --
// a task is pinned to its own GPU(s). Unhealthy GPUs (gpu_faults) are never picked. nullopt:
// too little is free now.
std::optional<std::vector<int>> PickGpus(const spec::ResourceSpec& need, const WorkerOffer& worker,
                                         const std::vector<GpuUse>& use);
// What a task with `need` holds on `gpus` (as PickGpus chose them) of this worker.
GpuClaim ClaimFor(const spec::ResourceSpec& need, const WorkerOffer& worker,
                  const std::vector<int>& gpus);
// Adds a claim to `use` or gives it back (indices outside `use` are ignored; counts never go
// below zero).
void AddClaim(const GpuClaim& claim, std::vector<GpuUse>* use);
void RemoveClaim(const GpuClaim& claim, std::vector<GpuUse>* use);
// The free part of GPU `gpu` (0..1), and how much of a GPU a claim holds (for GPU-seconds).
double FreeShare(const WorkerOffer& worker, const std::vector<GpuUse>& use, int gpu);
double GpusHeld(const GpuClaim& claim, const WorkerOffer& worker);
// Why a task that could run on this worker finds too little of its GPUs free now, e.g. "GPU 0
// of w3 has 0.5 free, the task needs 0.75", "GPU 1 of w3 is unhealthy (Xid 79: ...)" ("" when
// PickGpus would place it).
std::string WhyNoFreeGpu(const spec::ResourceSpec& need, const WorkerOffer& worker,
                         const std::vector<GpuUse>& use);
// The GPU part of WhyNever: not enough qualifying GPUs, or a share whose slots can never give
// the memory the task asks for ("" when the GPUs could fit it).
std::string WhyNeverGpus(const spec::ResourceSpec& need, const WorkerOffer& worker);

// Named counted limits: whether one more task holding `names` stays within `max` (a name listed
// n times holds n; a name that is not configured allows nothing).
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
