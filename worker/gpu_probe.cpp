// GPU discovery for the worker's registration. The CUDA runtime calls live in the path tracer
// (the only component that touches CUDA); a CPU-only machine or build simply has zero GPUs.
#include <spdlog/spdlog.h>

#include <mutex>

#include "plugins/pathtracer/renderer.h"
#include "worker/hardware_probe.h"

namespace tessera::worker {

std::vector<protocol::GpuInfo> ProbeGpus() {
  std::string why;
  std::vector<protocol::GpuInfo> gpus;
  for (const pathtracer::CudaDevice& d : pathtracer::ListCudaDevices(&why)) {
    gpus.push_back({d.index, d.name, d.memory_mb, d.compute_major, d.compute_minor,
                    d.driver_version, d.runtime_version, d.pci_bus_id});
  }
  if (gpus.empty()) {
    // Expected on CPU-only machines; say it once, not on every probe.
    static std::once_flag logged;
    std::call_once(logged, [&why] {
      spdlog::info("no CUDA devices ({}): offering the cpu backend only", why);
    });
  }
  return gpus;
}

}  // namespace tessera::worker
