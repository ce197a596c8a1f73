#include "scheduler/broker/slot_claims.h"

#include <algorithm>

namespace tessera::broker {

void SlotClaims::Reset(size_t gpu_count) {
  use_.assign(gpu_count, policy::GpuUse{});
  cpu_ = {};
  claims_.clear();
}

void SlotClaims::Take(int64_t task_id, int attempt, const spec::ResourceSpec& need,
                      const policy::WorkerOffer& worker, const std::vector<int>& gpus) {
  Release(task_id, attempt);
  Claim claim{policy::ClaimFor(need, worker, gpus),
              {std::max(0, need.cpu_cores), std::max<int64_t>(0, need.ram_mb)}};
  if (claim.gpus.gpus.empty() && claim.cpu.cores == 0 && claim.cpu.ram_mb == 0) return;
  policy::AddClaim(claim.gpus, &use_);
  cpu_.cores += claim.cpu.cores;
  cpu_.ram_mb += claim.cpu.ram_mb;
  claims_[{task_id, attempt}] = std::move(claim);
}

void SlotClaims::Release(int64_t task_id, int attempt) {
  auto it = claims_.find({task_id, attempt});
  if (it == claims_.end()) return;
  policy::RemoveClaim(it->second.gpus, &use_);
  cpu_.cores = std::max(0, cpu_.cores - it->second.cpu.cores);
  cpu_.ram_mb = std::max<int64_t>(0, cpu_.ram_mb - it->second.cpu.ram_mb);
  claims_.erase(it);
}

std::optional<std::vector<int>> SlotClaims::Pick(const spec::ResourceSpec& need,
                                                 const policy::WorkerOffer& worker) const {
  if (!policy::WhyNoFreeCpu(need, worker, cpu_).empty()) return std::nullopt;
  return policy::PickGpus(need, worker, use_);
}

std::string SlotClaims::WhyNoneFree(const spec::ResourceSpec& need,
                                    const policy::WorkerOffer& worker) const {
  std::string why = policy::WhyNoFreeCpu(need, worker, cpu_);
  return why.empty() ? policy::WhyNoFreeGpu(need, worker, use_) : why;
}

double SlotClaims::GpusHeld(int64_t task_id, int attempt, const policy::WorkerOffer& worker,
                            double fallback) const {
  auto it = claims_.find({task_id, attempt});
  return it == claims_.end() || it->second.gpus.gpus.empty()
             ? fallback
             : policy::GpusHeld(it->second.gpus, worker);
}

nlohmann::json SlotClaims::View(const policy::WorkerOffer& worker) const {
  const int slots = policy::SlotsPerGpu(worker);
  nlohmann::json gpus = nlohmann::json::array();
  for (size_t i = 0; i < use_.size(); ++i) {
    nlohmann::json tasks = nlohmann::json::array();
    for (const auto& [key, held] : claims_) {
      const policy::GpuClaim& claim = held.gpus;
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
