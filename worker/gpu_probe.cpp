// The worker's only CUDA runtime calls. Built with TSR_HAVE_CUDA (and linked to cudart_static)
// only when CMake found the CUDA toolkit; any CUDA error, such as no driver on a CPU-only machine,
// simply means zero GPUs.
#include <spdlog/spdlog.h>

#include <mutex>

#include "worker/hardware_probe.h"

#ifdef TSR_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace tessera::worker {

std::vector<protocol::GpuInfo> ProbeGpus() {
  std::vector<protocol::GpuInfo> gpus;
#ifdef TSR_HAVE_CUDA
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    // Expected on CPU-only machines (no driver); say it once, not on every probe.
    static std::once_flag logged;
    std::call_once(logged, [err] {
      spdlog::info("no CUDA devices ({}): offering the cpu backend only", cudaGetErrorString(err));
    });
    return gpus;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    err = cudaGetDeviceProperties(&prop, i);
    if (err != cudaSuccess) {
      spdlog::info("CUDA device {} skipped: {}", i, cudaGetErrorString(err));
      continue;
    }
    protocol::GpuInfo gpu;
    gpu.index = i;
    gpu.name = prop.name;
    gpu.memory_mb = static_cast<int64_t>(prop.totalGlobalMem / (1024 * 1024));
    gpu.compute_major = prop.major;
    gpu.compute_minor = prop.minor;
    gpus.push_back(std::move(gpu));
  }
  if (gpus.empty()) spdlog::info("no usable CUDA devices: offering the cpu backend only");
#else
  static std::once_flag logged;
  std::call_once(logged, [] { spdlog::info("built without CUDA: offering the cpu backend only"); });
#endif
  return gpus;
}

}  // namespace tessera::worker
