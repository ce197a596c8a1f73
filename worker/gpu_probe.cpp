// GPU discovery for the worker's registration, through the CUDA runtime. The worker owns this,
// not a renderer: the GPUs it offers are the machine's, and every renderer uses them (a native
// plugin through the render request's gpus, a command renderer through CUDA_VISIBLE_DEVICES), so
// the inventory cannot depend on one plugin, and the plugin ABI stays about rendering. It uses the
// same CUDA runtime the path tracer is built with, so the devices offered are the ones it can
// render on. A build without CUDA, or a machine without a driver or a GPU, has zero GPUs.
#include <spdlog/spdlog.h>

#include <mutex>

#include "worker/hardware_probe.h"

#if defined(TSR_HAVE_CUDA)
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <cstdio>
#include <memory>
#endif

namespace tessera::worker {

#if defined(TSR_HAVE_CUDA)
namespace {

// CUDA encodes versions as 1000 * major + 10 * minor (12040 is 12.4); 0 means unknown.
std::string CudaVersionString(int version) {
  if (version <= 0) return "";
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

// Why the runtime found no device, in words: it reports "driver version is insufficient" also
// when there is no driver at all, so ask for the driver's library the way the runtime does.
std::string NoDeviceReason(cudaError_t err) {
  if (err != cudaErrorInsufficientDriver) return cudaGetErrorString(err);
  std::unique_ptr<void, int (*)(void*)> driver(::dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL),
                                               ::dlclose);
  if (!driver) {
    const char* error = ::dlerror();
    return std::string("no NVIDIA driver: ") + (error ? error : "libcuda.so.1 cannot be loaded");
  }
  int runtime = 0;
  cudaRuntimeGetVersion(&runtime);
  using GetVersion = int (*)(int*);
  int version = 0;
  auto get = reinterpret_cast<GetVersion>(::dlsym(driver.get(), "cuDriverGetVersion"));
  std::string reason = "the NVIDIA driver";
  if (get != nullptr && get(&version) == 0) {
    reason += " supports CUDA up to " + CudaVersionString(version) + ",";
  }
  reason += " older than this worker's CUDA " + CudaVersionString(runtime) + " runtime";
  return reason;
}

}  // namespace

std::vector<protocol::GpuInfo> ListCudaDevices(std::string* why) {
  std::vector<protocol::GpuInfo> devices;
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();
    if (why) *why = NoDeviceReason(err);
    return devices;
  }
  int driver = 0;
  int runtime = 0;
  if (cudaDriverGetVersion(&driver) != cudaSuccess) cudaGetLastError();
  if (cudaRuntimeGetVersion(&runtime) != cudaSuccess) cudaGetLastError();
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    err = cudaGetDeviceProperties(&prop, i);
    if (err != cudaSuccess) {
      cudaGetLastError();
      if (why) *why = "device " + std::to_string(i) + ": " + cudaGetErrorString(err);
      continue;
    }
    char pci[32];
    std::snprintf(pci, sizeof(pci), "%04x:%02x:%02x.0", prop.pciDomainID, prop.pciBusID,
                  prop.pciDeviceID);
    devices.push_back({i, prop.name, static_cast<int64_t>(prop.totalGlobalMem >> 20), prop.major,
                       prop.minor, CudaVersionString(driver), CudaVersionString(runtime), pci});
  }
  if (devices.empty() && why && why->empty()) *why = "no CUDA devices";
  return devices;
}

#else

std::vector<protocol::GpuInfo> ListCudaDevices(std::string* why) {
  if (why) *why = "built without CUDA";
  return {};
}

#endif

std::vector<protocol::GpuInfo> ProbeGpus() {
  std::string why;
  std::vector<protocol::GpuInfo> gpus = ListCudaDevices(&why);
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
