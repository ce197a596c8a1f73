#pragma once
// SlotClaims: what one connected worker's leases claim of it -- per GPU the slots and memory in
// use, and the CPU cores and RAM the tasks it runs at once have declared (what the policy
// places against) -- and per lease, keyed by (task_id, attempt), the fencing token, the claim it
// took, so ending a lease gives back exactly what it took, even while another attempt of the
// same task holds a claim here too. Owned by the broker thread (one per WorkerConn).

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "scheduler/policy/policy.h"

namespace tessera::broker {

class SlotClaims {
 public:
  // Nothing held, on a worker with `gpu_count` GPUs.
  void Reset(size_t gpu_count);
  // The lease (task_id, attempt) takes its claim on `gpus` (as policy::PickGpus chose them).
  // Taking again under the same key first gives back what that key held.
  void Take(int64_t task_id, int attempt, const spec::ResourceSpec& need,
            const policy::WorkerOffer& worker, const std::vector<int>& gpus);
  // Gives back what the lease took (nothing if it holds nothing here).
  void Release(int64_t task_id, int attempt);

  // The GPUs a task with `need` takes here now (none on a worker without GPUs), or nullopt when
  // the worker's free cores and RAM (policy::WhyNoFreeCpu) or its free GPUs (policy::PickGpus)
  // are not enough for it.
  std::optional<std::vector<int>> Pick(const spec::ResourceSpec& need,
                                       const policy::WorkerOffer& worker) const;
  // Why Pick finds too little free: the cores or RAM first, then the GPUs ("" when it would place
  // it).
  std::string WhyNoneFree(const spec::ResourceSpec& need, const policy::WorkerOffer& worker) const;

  // Per GPU, what the leases hold now: what policy::PickGpus places against.
  const std::vector<policy::GpuUse>& gpus() const { return use_; }
  // The cores and RAM the leases hold now: what policy::WhyNoFreeCpu places against.
  const policy::CpuUse& cpu() const { return cpu_; }
  // How much of a GPU the lease holds (a share counts its part): its GPU-seconds per second.
  // `fallback` when it holds nothing here.
  double GpusHeld(int64_t task_id, int attempt, const policy::WorkerOffer& worker,
                  double fallback) const;
  // Per GPU: [{"index", "slots", "slots_used", "memory_mb_used", "free_share", "whole",
  // "tasks": [{"task_id", "attempt", "share"}]}].
  nlohmann::json View(const policy::WorkerOffer& worker) const;

 private:
  struct Claim {
    policy::GpuClaim gpus;
    policy::CpuUse cpu;
  };
  std::vector<policy::GpuUse> use_;
  policy::CpuUse cpu_;
  std::map<std::pair<int64_t, int>, Claim> claims_;
};

}  // namespace tessera::broker
