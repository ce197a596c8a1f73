#pragma once
// How a share of one GPU is counted on a GPU cut into slots (worker.gpu_sharing: shared): the
// one rule the scheduler's policy packs tasks by (scheduler/policy/gpu_claims.cpp) and the
// autoscaler plans node groups with (scheduler/autoscaler/decider.cpp), so the two never
// disagree about how many tasks fit.

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace tessera::gpu_slots {

// Slots a task asking for `share` (0, 1] of a GPU takes of its `slots_per_gpu` (>= 2): rounded up
// to whole slots, at least one. The epsilon keeps 0.25 x 4 from rounding up to 2 through a
// representation error.
inline int SlotsForShare(double share, int slots_per_gpu) {
  const double wanted = std::ceil(share * slots_per_gpu - 1e-9);
  return std::clamp(static_cast<int>(wanted), 1, slots_per_gpu);
}

// GPU memory (MiB) a share of `slots` holds: its slots' memory where the GPU's memory is divided
// per slot (`memory_per_slot` > 0), else what the task asks for.
inline int64_t MemoryForShare(int slots, int64_t memory_per_slot, int64_t asked) {
  return memory_per_slot > 0 ? slots * memory_per_slot : asked;
}

}  // namespace tessera::gpu_slots
