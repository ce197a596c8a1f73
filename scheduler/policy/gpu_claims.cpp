// GPU claims: which GPUs a task takes, whole or a share of one, counted in integer slots so that
// shares add up exactly (policy.h explains the rules).

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "scheduler/policy/policy.h"
#include "shared/jobs/gpu_slots.h"

namespace tessera::policy {
namespace {

bool GpuQualifies(const protocol::GpuInfo& gpu, const spec::ResourceSpec& need) {
  const double compute = gpu.compute_major + gpu.compute_minor / 10.0;
  return gpu.memory_mb >= need.gpu_memory_mb && compute + 1e-9 >= need.compute_capability;
}

// A GPU a task may be placed on now: it qualifies and its worker's telemetry finds it healthy.
bool GpuUsable(const WorkerOffer& worker, size_t i, const spec::ResourceSpec& need) {
  return GpuQualifies(worker.gpus[i], need) && !worker.gpu_faults.count(static_cast<int>(i));
}

// A share asks for part of one GPU, so it needs a GPU even where `gpus` is 0.
int GpusPerTask(const spec::ResourceSpec& need, const WorkerOffer& worker) {
  if (worker.gpus.empty()) return need.gpu_share > 0 ? std::max(1, need.gpus) : need.gpus;
  return std::max(1, need.gpus);
}

// Slots a task takes on each of its GPUs: a share rounded up to whole slots, else all of them.
int SlotsFor(const spec::ResourceSpec& need, const WorkerOffer& worker) {
  const int slots = SlotsPerGpu(worker);
  if (!TakesShare(need, worker)) return slots;
  return gpu_slots::SlotsForShare(need.gpu_share, slots);
}

// GPU memory a task holds on each of its GPUs: a share holds its slots' memory where the worker
// divides memory per slot (what it asks for must fit in that: WhyNeverGpus), else what it asks.
int64_t MemoryFor(const spec::ResourceSpec& need, const WorkerOffer& worker) {
  if (!TakesShare(need, worker)) return need.gpu_memory_mb;
  return gpu_slots::MemoryForShare(SlotsFor(need, worker), worker.memory_mb_per_slot,
                                   need.gpu_memory_mb);
}

const GpuUse& UseOf(const std::vector<GpuUse>& use, size_t gpu) {
  static const GpuUse kFree;
  return gpu < use.size() ? use[gpu] : kFree;
}

bool Fits(const GpuClaim& claim, const protocol::GpuInfo& gpu, const GpuUse& use,
          int slots_per_gpu) {
  if (use.whole) return false;
  if (claim.whole) return use.slots_used == 0 && use.memory_mb_used == 0;
  return use.slots_used + claim.slots <= slots_per_gpu &&
         use.memory_mb_used + claim.memory_mb <= gpu.memory_mb;
}

// 0.5, 0.25, 0.333: a share as people write it.
std::string ShareText(double share) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3f", share);
  std::string s = text;
  while (s.size() > 1 && s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s;
}

}  // namespace

int SlotsPerGpu(const WorkerOffer& worker) {
  return worker.slots_per_gpu >= 2 ? std::min(worker.slots_per_gpu, protocol::kMaxSlotsPerGpu) : 1;
}

bool TakesShare(const spec::ResourceSpec& need, const WorkerOffer& worker) {
  return need.gpu_share > 0 && need.gpus <= 1 && SlotsPerGpu(worker) > 1 && !worker.gpus.empty();
}

GpuClaim ClaimFor(const spec::ResourceSpec& need, const WorkerOffer& worker,
                  const std::vector<int>& gpus) {
  GpuClaim claim;
  claim.gpus = gpus;
  claim.whole = !TakesShare(need, worker);
  claim.slots = SlotsFor(need, worker);
  claim.memory_mb = MemoryFor(need, worker);
  return claim;
}

std::optional<std::vector<int>> PickGpus(const spec::ResourceSpec& need, const WorkerOffer& worker,
                                         const std::vector<GpuUse>& use) {
  const int wanted = GpusPerTask(need, worker);
  if (wanted == 0) return std::vector<int>{};
  const GpuClaim claim = ClaimFor(need, worker, {});
  const int slots_per_gpu = SlotsPerGpu(worker);
  if (!claim.whole) {
    // Best fit: the fullest GPU with enough free, so empty GPUs stay free for whole tasks and
    // for larger shares.
    int best = -1;
    for (size_t i = 0; i < worker.gpus.size(); ++i) {
      if (!GpuUsable(worker, i, need) ||
          !Fits(claim, worker.gpus[i], UseOf(use, i), slots_per_gpu)) {
        continue;
      }
      if (best < 0 || UseOf(use, i).slots_used > UseOf(use, best).slots_used) {
        best = static_cast<int>(i);
      }
    }
    if (best < 0) return std::nullopt;
    return std::vector<int>{best};
  }
  std::vector<int> picked;
  for (size_t i = 0; i < worker.gpus.size() && static_cast<int>(picked.size()) < wanted; ++i) {
    if (GpuUsable(worker, i, need) && Fits(claim, worker.gpus[i], UseOf(use, i), slots_per_gpu)) {
      picked.push_back(static_cast<int>(i));
    }
  }
  if (static_cast<int>(picked.size()) < wanted) return std::nullopt;
  return picked;
}

void AddClaim(const GpuClaim& claim, std::vector<GpuUse>* use) {
  for (int g : claim.gpus) {
    if (g < 0 || static_cast<size_t>(g) >= use->size()) continue;
    GpuUse& u = (*use)[g];
    u.slots_used += claim.slots;
    u.memory_mb_used += claim.memory_mb;
    u.whole = u.whole || claim.whole;
  }
}

void RemoveClaim(const GpuClaim& claim, std::vector<GpuUse>* use) {
  for (int g : claim.gpus) {
    if (g < 0 || static_cast<size_t>(g) >= use->size()) continue;
    GpuUse& u = (*use)[g];
    u.slots_used = std::max(0, u.slots_used - claim.slots);
    u.memory_mb_used = std::max<int64_t>(0, u.memory_mb_used - claim.memory_mb);
    // Only one whole claim can be on a GPU, so giving one back frees it.
    if (claim.whole) u.whole = false;
  }
}

double FreeShare(const WorkerOffer& worker, const std::vector<GpuUse>& use, int gpu) {
  const GpuUse& u = UseOf(use, static_cast<size_t>(std::max(0, gpu)));
  if (u.whole) return 0;
  const int slots = SlotsPerGpu(worker);
  return static_cast<double>(std::max(0, slots - u.slots_used)) / slots;
}

double GpusHeld(const GpuClaim& claim, const WorkerOffer& worker) {
  const auto gpus = static_cast<double>(claim.gpus.size());
  if (claim.whole) return gpus;
  return gpus * claim.slots / SlotsPerGpu(worker);
}

std::string WhyNoFreeGpu(const spec::ResourceSpec& need, const WorkerOffer& worker,
                         const std::vector<GpuUse>& use) {
  if (PickGpus(need, worker, use).has_value()) return "";
  const GpuClaim claim = ClaimFor(need, worker, {});
  const int slots_per_gpu = SlotsPerGpu(worker);
  std::vector<std::string> gpus;
  for (size_t i = 0; i < worker.gpus.size(); ++i) {
    if (!GpuQualifies(worker.gpus[i], need)) continue;
    if (gpus.size() == 8) {
      gpus.push_back("...");
      break;
    }
    if (auto fault = worker.gpu_faults.find(static_cast<int>(i));
        fault != worker.gpu_faults.end()) {
      gpus.push_back(std::to_string(i) + " is unhealthy (" + fault->second + ")");
      continue;
    }
    const GpuUse& u = UseOf(use, i);
    std::string text =
        std::to_string(i) + " has " + ShareText(FreeShare(worker, use, static_cast<int>(i)));
    if (claim.memory_mb > 0) {
      text += " and " +
              std::to_string(std::max<int64_t>(0, worker.gpus[i].memory_mb - u.memory_mb_used)) +
              " MB";
    }
    gpus.push_back(text + " free");
  }
  std::string needs;
  if (claim.whole) {
    const int wanted = GpusPerTask(need, worker);
    needs = wanted == 1 ? "a whole GPU" : std::to_string(wanted) + " whole GPUs";
  } else {
    needs = ShareText(static_cast<double>(claim.slots) / slots_per_gpu);
    if (std::abs(need.gpu_share * slots_per_gpu - claim.slots) > 1e-9) {
      needs += " (" + ShareText(need.gpu_share) + " rounded up to " + std::to_string(claim.slots) +
               " of " + std::to_string(slots_per_gpu) + " slots)";
    }
  }
  if (claim.memory_mb > 0) needs += " and " + std::to_string(claim.memory_mb) + " MB";
  if (gpus.empty()) return "no GPU of " + worker.name + " qualifies, the task needs " + needs;
  if (gpus.size() == 1) {
    return "GPU " + gpus[0].substr(0, gpus[0].find(' ')) + " of " + worker.name +
           gpus[0].substr(gpus[0].find(' ')) + ", the task needs " + needs;
  }
  std::string list;
  for (const std::string& g : gpus) list += (list.empty() ? "" : ", ") + g;
  return "GPUs of " + worker.name + ": " + list + "; the task needs " + needs;
}

std::string WhyNeverGpus(const spec::ResourceSpec& need, const WorkerOffer& worker) {
  const int qualifying =
      static_cast<int>(std::count_if(worker.gpus.begin(), worker.gpus.end(),
                                     [&](const auto& g) { return GpuQualifies(g, need); }));
  if (qualifying < GpusPerTask(need, worker)) {
    return "has " + std::to_string(qualifying) +
           " GPU(s) with >= " + std::to_string(need.gpu_memory_mb) +
           " MB and compute >= " + nlohmann::json(need.compute_capability).dump() +
           ", a task needs " + std::to_string(GpusPerTask(need, worker));
  }
  if (TakesShare(need, worker) && worker.memory_mb_per_slot > 0 &&
      need.gpu_memory_mb > MemoryFor(need, worker)) {
    const int slots = SlotsFor(need, worker);
    return "gives a gpu_share of " + ShareText(need.gpu_share) + " as " + std::to_string(slots) +
           " of its " + std::to_string(SlotsPerGpu(worker)) + " slots per GPU, with " +
           std::to_string(MemoryFor(need, worker)) + " MB of GPU memory; a task asks for " +
           std::to_string(need.gpu_memory_mb) + " MB";
  }
  return "";
}

}  // namespace tessera::policy
