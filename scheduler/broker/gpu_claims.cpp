#include "scheduler/broker/gpu_claims.h"

namespace tessera::broker {

void GpuClaims::Reset(size_t gpu_count) {
  use_.assign(gpu_count, policy::GpuUse{});
  claims_.clear();
}

void GpuClaims::Take(int64_t task_id, int attempt, const spec::ResourceSpec& need,
                     const policy::WorkerOffer& worker, const std::vector<int>& gpus) {
  Release(task_id, attempt);
  policy::GpuClaim claim = policy::ClaimFor(need, worker, gpus);
  if (claim.gpus.empty()) return;  // a CPU task: nothing to hold
  policy::AddClaim(claim, &use_);
  claims_[{task_id, attempt}] = std::move(claim);
}

void GpuClaims::Release(int64_t task_id, int attempt) {
  auto it = claims_.find({task_id, attempt});
  if (it == claims_.end()) return;
  policy::RemoveClaim(it->second, &use_);
  claims_.erase(it);
}

double GpuClaims::GpusHeld(int64_t task_id, int attempt, const policy::WorkerOffer& worker,
                           double fallback) const {
  auto it = claims_.find({task_id, attempt});
  return it == claims_.end() ? fallback : policy::GpusHeld(it->second, worker);
}

nlohmann::json GpuClaims::View(const policy::WorkerOffer& worker) const {
  const int slots = policy::SlotsPerGpu(worker);
  nlohmann::json gpus = nlohmann::json::array();
  for (size_t i = 0; i < use_.size(); ++i) {
    nlohmann::json tasks = nlohmann::json::array();
    for (const auto& [key, claim] : claims_) {
      for (int g : claim.gpus) {
        if (g != static_cast<int>(i)) continue;
        tasks.push_back({{"task_id", key.first},
                         {"attempt", key.second},
                         {"share", claim.whole ? 1.0 : static_cast<double>(claim.slots) / slots}});
      }
    }
    gpus.push_back({{"index", i},
                    {"slots", slots},
                    {"slots_used", use_[i].slots_used},
                    {"memory_mb_used", use_[i].memory_mb_used},
                    {"free_share", policy::FreeShare(worker, use_, static_cast<int>(i))},
                    {"whole", use_[i].whole},
                    {"tasks", tasks}});
  }
  return gpus;
}

}  // namespace tessera::broker
