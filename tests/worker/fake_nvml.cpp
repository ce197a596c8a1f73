// A stand-in for NVIDIA's libnvidia-ml.so.1 (the NVML entry points worker/nvml_api.h names), for
// machines without a GPU driver: the worker dlopens it exactly as it would the real library.
// Its GPUs are described by the JSON file named in $TESSERA_FAKE_NVML, read again on every
// call, so a test changes a GPU's figures or breaks it while the worker runs:
//
//   {"init_error": 0,                    // nvmlInit's answer (9: driver not loaded)
//    "gpus": [{"pci": "0000:01:00.0",    // as ListCudaDevices writes it
//              "util": 37, "mem_util": 20, "mem_used_mb": 1024, "mem_total_mb": 24576,
//              "temp": 61, "power_mw": 215000, "sm_clock": 1980, "mem_clock": 9501,
//              "ecc": 0,                  // uncorrected ECC errors; absent: not supported
//              "lost": false,             // every call answers GPU_IS_LOST
//              "xids": [79]}]}            // critical Xid events, each delivered once
//
// A GPU removed from the list is gone (the device count drops).

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

namespace {

constexpr int kSuccess = 0;
constexpr int kErrorUninitialized = 1;
constexpr int kErrorInvalidArgument = 2;
constexpr int kErrorNotSupported = 3;
constexpr int kErrorNotFound = 6;
constexpr int kErrorTimeout = 10;
constexpr int kErrorGpuIsLost = 15;
constexpr int kMaxGpus = 64;

struct Device {
  int slot;
};
Device g_devices[kMaxGpus];  // handles: &g_devices[n] is NVML device n
int g_delivered[kMaxGpus];   // Xid events of each GPU already delivered
bool g_registered[kMaxGpus];
std::mutex g_mu;
bool g_initialised = false;

nlohmann::json State() {
  const char* path = std::getenv("TESSERA_FAKE_NVML");
  if (path == nullptr) return nlohmann::json::object();
  std::ifstream in(path);
  nlohmann::json state = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  return state.is_object() ? state : nlohmann::json::object();
}

nlohmann::json Gpus() {
  nlohmann::json gpus = State().value("gpus", nlohmann::json::array());
  return gpus.is_array() ? gpus : nlohmann::json::array();
}

// The GPU behind a handle, or the error a call on it answers.
int Lookup(void* device, nlohmann::json* gpu) {
  if (!g_initialised) return kErrorUninitialized;
  auto* d = static_cast<Device*>(device);
  if (d < g_devices || d >= g_devices + kMaxGpus) return kErrorInvalidArgument;
  const nlohmann::json gpus = Gpus();
  if (d->slot >= static_cast<int>(gpus.size())) return kErrorGpuIsLost;
  *gpu = gpus[d->slot];
  return gpu->value("lost", false) ? kErrorGpuIsLost : kSuccess;
}

template <typename T>
int Figure(void* device, const char* key, T* out) {
  nlohmann::json gpu;
  if (int r = Lookup(device, &gpu); r != kSuccess) return r;
  if (!gpu.contains(key)) return kErrorNotSupported;
  *out = gpu[key].get<T>();
  return kSuccess;
}

}  // namespace

extern "C" {

struct FakeUtilization {
  unsigned gpu, memory;
};
struct FakeMemory {
  unsigned long long total, free, used;
};
struct FakePciInfo {
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};
struct FakeEventData {
  void* device;
  unsigned long long event_type, event_data;
  unsigned gpu_instance_id, compute_instance_id;
};

int nvmlInit_v2() {
  const int error = State().value("init_error", 0);
  if (error != 0) return error;
  std::lock_guard<std::mutex> lock(g_mu);
  for (int i = 0; i < kMaxGpus; ++i) g_devices[i].slot = i;
  g_initialised = true;
  return kSuccess;
}

int nvmlShutdown() {
  g_initialised = false;
  return kSuccess;
}

const char* nvmlErrorString(int r) {
  switch (r) {
    case kSuccess:
      return "Success";
    case kErrorNotSupported:
      return "Not Supported";
    case kErrorTimeout:
      return "Timeout";
    case kErrorGpuIsLost:
      return "GPU is lost";
    case 9:
      return "Driver Not Loaded";
    default:
      return "Unknown Error";
  }
}

int nvmlDeviceGetCount_v2(unsigned* count) {
  if (!g_initialised) return kErrorUninitialized;
  *count = static_cast<unsigned>(std::min<size_t>(Gpus().size(), kMaxGpus));
  return kSuccess;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned index, void** device) {
  if (!g_initialised) return kErrorUninitialized;
  if (index >= Gpus().size() || index >= kMaxGpus) return kErrorInvalidArgument;
  *device = &g_devices[index];
  return kSuccess;
}

int nvmlDeviceGetPciInfo_v3(void* device, FakePciInfo* pci) {
  nlohmann::json gpu;
  if (int r = Lookup(device, &gpu); r != kSuccess) return r;
  std::memset(pci, 0, sizeof(*pci));
  const std::string address = gpu.value("pci", "");
  unsigned domain = 0, bus = 0, dev = 0;
  if (std::sscanf(address.c_str(), "%x:%x:%x", &domain, &bus, &dev) != 3) return kErrorNotFound;
  pci->domain = domain;
  pci->bus = bus;
  pci->device = dev;
  std::snprintf(pci->bus_id, sizeof(pci->bus_id), "%08X:%02X:%02X.0", domain, bus, dev);
  return kSuccess;
}

int nvmlDeviceGetUtilizationRates(void* device, FakeUtilization* util) {
  unsigned gpu = 0;
  if (int r = Figure(device, "util", &gpu); r != kSuccess) return r;
  util->gpu = gpu;
  util->memory = 0;
  (void)Figure(device, "mem_util", &util->memory);
  return kSuccess;
}

int nvmlDeviceGetMemoryInfo(void* device, FakeMemory* memory) {
  unsigned long long used = 0, total = 0;
  if (int r = Figure(device, "mem_used_mb", &used); r != kSuccess) return r;
  if (int r = Figure(device, "mem_total_mb", &total); r != kSuccess) return r;
  memory->used = used << 20;
  memory->total = total << 20;
  memory->free = memory->total - memory->used;
  return kSuccess;
}

int nvmlDeviceGetTemperature(void* device, unsigned sensor, unsigned* celsius) {
  if (sensor != 0) return kErrorInvalidArgument;
  return Figure(device, "temp", celsius);
}

int nvmlDeviceGetPowerUsage(void* device, unsigned* milliwatts) {
  return Figure(device, "power_mw", milliwatts);
}

int nvmlDeviceGetClockInfo(void* device, unsigned type, unsigned* mhz) {
  if (type == 1) return Figure(device, "sm_clock", mhz);
  if (type == 2) return Figure(device, "mem_clock", mhz);
  return kErrorInvalidArgument;
}

int nvmlDeviceGetTotalEccErrors(void* device, unsigned error_type, unsigned counter,
                                unsigned long long* count) {
  if (error_type != 1 || counter != 0) return kErrorInvalidArgument;
  return Figure(device, "ecc", count);
}

int nvmlEventSetCreate(void** set) {
  if (!g_initialised) return kErrorUninitialized;
  static int the_set;
  *set = &the_set;
  return kSuccess;
}

int nvmlDeviceRegisterEvents(void* device, unsigned long long types, void*) {
  nlohmann::json gpu;
  if (int r = Lookup(device, &gpu); r != kSuccess) return r;
  if ((types & 8) == 0) return kErrorNotSupported;
  std::lock_guard<std::mutex> lock(g_mu);
  g_registered[static_cast<Device*>(device)->slot] = true;
  return kSuccess;
}

int nvmlEventSetWait_v2(void*, FakeEventData* data, unsigned) {
  if (!g_initialised) return kErrorUninitialized;
  const nlohmann::json gpus = Gpus();
  std::lock_guard<std::mutex> lock(g_mu);
  for (int i = 0; i < static_cast<int>(gpus.size()) && i < kMaxGpus; ++i) {
    const nlohmann::json xids = gpus[i].value("xids", nlohmann::json::array());
    if (!g_registered[i] || !xids.is_array() || g_delivered[i] >= static_cast<int>(xids.size())) {
      continue;
    }
    std::memset(data, 0, sizeof(*data));
    data->device = &g_devices[i];
    data->event_type = 8;
    data->event_data = xids[g_delivered[i]++].get<unsigned long long>();
    return kSuccess;
  }
  return kErrorTimeout;
}

int nvmlEventSetFree(void*) { return kSuccess; }

}  // extern "C"
