#pragma once
// Test offers and asks for GPU claims: a worker whose GPUs are shared, and a job's share of one.

#include <cstdint>

#include "scheduler/policy/policy.h"

namespace tessera::testing {

// A worker with `gpus` GPUs of `memory_mb` each (compute 8.9), each split into `slots_per_gpu`.
inline policy::WorkerOffer SharingWorker(int gpus, int slots_per_gpu, int64_t memory_mb = 24576) {
  policy::WorkerOffer w;
  w.id = 1;
  w.name = "w1";
  w.pools = {"default"};
  w.cpu_cores = 16;
  w.ram_mb = 64000;
  for (int i = 0; i < gpus; ++i) {
    protocol::GpuInfo g;
    g.index = i;
    g.name = "gpu";
    g.memory_mb = memory_mb;
    g.compute_major = 8;
    g.compute_minor = 9;
    w.gpus.push_back(g);
  }
  w.slots_per_gpu = slots_per_gpu;
  return w;
}

// A task asking for `share` of one GPU and `memory_mb` of its memory.
inline spec::ResourceSpec Share(double share, int64_t memory_mb = 0) {
  spec::ResourceSpec need;
  need.gpu_share = share;
  need.gpu_memory_mb = memory_mb;
  return need;
}

}  // namespace tessera::testing
