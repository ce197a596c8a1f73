#include "worker/gpu_telemetry.h"

#include <dlfcn.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cstdio>

namespace tessera::worker {
namespace nvml {

std::shared_ptr<const Api> LoadNvml(const std::string& library, std::string* why) {
  // RTLD_LOCAL: the driver's symbols stay out of the worker's namespace.
  void* handle = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* error = ::dlerror();
    *why = error != nullptr ? error : library + ": cannot be opened";
    return nullptr;
  }
  auto api = std::shared_ptr<Api>(new Api{}, [handle](Api* a) {
    delete a;
    ::dlclose(handle);
  });
  std::string missing;
  auto resolve = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(handle, name));
    if (fn == nullptr) missing += (missing.empty() ? "" : ", ") + std::string(name);
  };
  resolve(api->Init, "nvmlInit_v2");
  resolve(api->Shutdown, "nvmlShutdown");
  resolve(api->ErrorString, "nvmlErrorString");
  resolve(api->DeviceGetCount, "nvmlDeviceGetCount_v2");
  resolve(api->DeviceGetHandleByIndex, "nvmlDeviceGetHandleByIndex_v2");
  resolve(api->DeviceGetPciInfo, "nvmlDeviceGetPciInfo_v3");
  resolve(api->DeviceGetUtilizationRates, "nvmlDeviceGetUtilizationRates");
  resolve(api->DeviceGetMemoryInfo, "nvmlDeviceGetMemoryInfo");
  resolve(api->DeviceGetTemperature, "nvmlDeviceGetTemperature");
  resolve(api->DeviceGetPowerUsage, "nvmlDeviceGetPowerUsage");
  resolve(api->DeviceGetClockInfo, "nvmlDeviceGetClockInfo");
  resolve(api->DeviceGetTotalEccErrors, "nvmlDeviceGetTotalEccErrors");
  resolve(api->EventSetCreate, "nvmlEventSetCreate");
  resolve(api->DeviceRegisterEvents, "nvmlDeviceRegisterEvents");
  resolve(api->EventSetWait, "nvmlEventSetWait_v2");
  resolve(api->EventSetFree, "nvmlEventSetFree");
  if (!missing.empty()) {
    *why = library + " lacks " + missing + " (a driver older than NVML 11)";
    return nullptr;
  }
  return api;
}

}  // namespace nvml

namespace {

// "0000:3b:00.0", as ListCudaDevices writes it, from NVML's numbers.
std::string PciAddress(const nvml::PciInfo& pci) {
  char text[32];
  std::snprintf(text, sizeof(text), "%04x:%02x:%02x.0", pci.domain, pci.bus, pci.device);
  return text;
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

}  // namespace

bool XidIsApplicationError(unsigned long long xid) {
  return xid == 13 || xid == 31 || xid == 43 || xid == 45;
}

std::string XidText(unsigned long long xid) {
  static const std::map<unsigned long long, const char*> kMeaning = {
      {13, "graphics engine exception"},
      {31, "GPU memory page fault"},
      {43, "GPU stopped processing"},
      {45, "preemptive cleanup"},
      {48, "double-bit ECC error"},
      {61, "internal micro-controller breakpoint"},
      {62, "internal micro-controller halt"},
      {63, "ECC page retirement or row remapping event"},
      {64, "ECC page retirement or row remapping failure"},
      {74, "NVLink error"},
      {79, "GPU has fallen off the bus"},
      {92, "high single-bit ECC error rate"},
      {94, "contained ECC error"},
      {95, "uncontained ECC error"},
      {119, "GSP RPC timeout"},
      {120, "GSP error"},
  };
  auto it = kMeaning.find(xid);
  return "Xid " + std::to_string(xid) +
         (it != kMeaning.end() ? std::string(": ") + it->second : "");
}

std::string NvmlReader::Error(nvml::Return r) const {
  const char* text = api_->ErrorString(r);
  return text != nullptr ? std::string(text) : "NVML error " + std::to_string(r);
}

std::unique_ptr<NvmlReader> NvmlReader::Open(std::shared_ptr<const nvml::Api> api,
                                             const std::vector<protocol::GpuInfo>& gpus,
                                             std::string* why) {
  if (nvml::Return r = api->Init(); r != nvml::kSuccess) {
    const char* text = api->ErrorString(r);
    *why = std::string("nvmlInit: ") + (text != nullptr ? text : std::to_string(r));
    return nullptr;
  }
  std::unique_ptr<NvmlReader> reader(new NvmlReader(std::move(api), gpus));
  reader->devices_.assign(gpus.size(), nullptr);
  for (size_t i = 0; i < gpus.size(); ++i) {
    std::string lost;
    if (auto device = reader->Find(i, &lost)) {
      reader->devices_[i] = *device;
    } else {
      // Not watched rather than faulted: a GPU NVML never showed is a mismatch of the two
      // libraries' views (a container without NVML's device nodes), not a failing GPU.
      spdlog::warn("GPU {} ({}): no telemetry: {}", i, gpus[i].name, lost);
    }
  }
  const nvml::Api& a = *reader->api_;
  if (a.EventSetCreate(&reader->events_) != nvml::kSuccess) reader->events_ = nullptr;
  for (size_t i = 0; i < gpus.size() && reader->events_ != nullptr; ++i) {
    if (reader->devices_[i] == nullptr) continue;
    nvml::Return r =
        a.DeviceRegisterEvents(reader->devices_[i], nvml::kEventXidCritical, reader->events_);
    if (r != nvml::kSuccess) {
      spdlog::info("GPU {}: Xid errors are not watched: {}", i, reader->Error(r));
    }
  }
  return reader;
}

NvmlReader::~NvmlReader() {
  if (events_ != nullptr) api_->EventSetFree(events_);
  api_->Shutdown();
}

std::optional<nvml::Device> NvmlReader::Find(size_t i, std::string* why) {
  const nvml::Api& a = *api_;
  unsigned count = 0;
  if (nvml::Return r = a.DeviceGetCount(&count); r != nvml::kSuccess) {
    *why = "cannot count GPUs: " + Error(r);
    return std::nullopt;
  }
  const std::string wanted = Lower(gpus_[i].pci_bus_id);
  if (wanted.empty()) {
    // Simulated GPUs (and CUDA builds that give no address): by position.
    nvml::Device device = nullptr;
    if (i < count &&
        a.DeviceGetHandleByIndex(static_cast<unsigned>(i), &device) == nvml::kSuccess) {
      return device;
    }
    *why = "NVML lists " + std::to_string(count) + " GPU(s)";
    return std::nullopt;
  }
  for (unsigned n = 0; n < count; ++n) {
    nvml::Device device = nullptr;
    nvml::PciInfo pci{};
    if (a.DeviceGetHandleByIndex(n, &device) != nvml::kSuccess ||
        a.DeviceGetPciInfo(device, &pci) != nvml::kSuccess) {
      continue;
    }
    if (PciAddress(pci) == wanted) return device;
  }
  *why = "no GPU at PCI " + wanted + " among the " + std::to_string(count) + " NVML lists";
  return std::nullopt;
}

std::optional<nvml::Device> NvmlReader::Current(size_t i) {
  auto fault = [&](const std::string& why) -> std::optional<nvml::Device> {
    if (!faults_.count(i)) {
      faults_[i] = why;
      spdlog::error("{}: it takes no new tasks", why);
    }
    return std::nullopt;
  };
  if (gpus_[i].pci_bus_id.empty()) return devices_[i];  // matched by position: no address
  // Still the GPU at its address? Handles outlive a re-enumeration, addresses do not.
  nvml::PciInfo pci{};
  const nvml::Return r = api_->DeviceGetPciInfo(devices_[i], &pci);
  if (r == nvml::kErrorGpuIsLost) {
    return fault("GPU " + std::to_string(i) + " is lost: " + Error(r));
  }
  if (r == nvml::kSuccess && PciAddress(pci) == Lower(gpus_[i].pci_bus_id)) return devices_[i];
  std::string gone;
  std::optional<nvml::Device> found = Find(i, &gone);
  if (!found) return fault("GPU " + std::to_string(i) + " is gone: " + gone);
  devices_[i] = *found;
  return found;
}

void NvmlReader::DrainEvents() {
  if (events_ == nullptr) return;
  // Everything queued since the last reading, without waiting.
  for (int n = 0; n < 256; ++n) {
    nvml::EventData event{};
    if (api_->EventSetWait(events_, &event, 0) != nvml::kSuccess) return;
    if (event.event_type != nvml::kEventXidCritical) continue;
    for (size_t i = 0; i < devices_.size(); ++i) {
      if (devices_[i] == nullptr || devices_[i] != event.device) continue;
      last_xid_[i] = static_cast<int>(std::min<unsigned long long>(event.event_data, 1 << 30));
      const std::string text = XidText(event.event_data);
      if (XidIsApplicationError(event.event_data)) {
        spdlog::warn("GPU {}: {} (an application's error; the GPU stays in service)", i, text);
      } else if (!faults_.count(i)) {
        faults_[i] = text;
        spdlog::error("GPU {}: {}: it takes no new tasks", i, text);
      }
    }
  }
}

std::vector<protocol::GpuSample> NvmlReader::Read() {
  DrainEvents();
  const nvml::Api& a = *api_;
  std::vector<protocol::GpuSample> samples;
  for (size_t i = 0; i < gpus_.size(); ++i) {
    protocol::GpuSample s;
    s.index = static_cast<int>(i);
    if (last_xid_.count(i)) s.last_xid = last_xid_[i];
    if (devices_[i] == nullptr) {  // never watched
      samples.push_back(std::move(s));
      continue;
    }
    std::optional<nvml::Device> device = Current(i);
    if (device) {
      bool lost = false;
      auto ok = [&](nvml::Return r) {
        lost = lost || r == nvml::kErrorGpuIsLost;
        return r == nvml::kSuccess;
      };
      nvml::Utilization util{};
      if (ok(a.DeviceGetUtilizationRates(*device, &util))) {
        s.utilization_pct = static_cast<int>(util.gpu);
      }
      nvml::Memory memory{};
      if (ok(a.DeviceGetMemoryInfo(*device, &memory))) {
        s.memory_used_mb = static_cast<int64_t>(memory.used >> 20);
        s.memory_total_mb = static_cast<int64_t>(memory.total >> 20);
      }
      unsigned value = 0;
      if (ok(a.DeviceGetTemperature(*device, nvml::kTemperatureGpu, &value))) {
        s.temperature_c = static_cast<int>(value);
      }
      if (ok(a.DeviceGetPowerUsage(*device, &value))) s.power_w = value / 1000.0;
      if (ok(a.DeviceGetClockInfo(*device, nvml::kClockSm, &value))) {
        s.sm_clock_mhz = static_cast<int>(value);
      }
      if (ok(a.DeviceGetClockInfo(*device, nvml::kClockMem, &value))) {
        s.memory_clock_mhz = static_cast<int>(value);
      }
      unsigned long long ecc = 0;
      if (ok(a.DeviceGetTotalEccErrors(*device, nvml::kMemoryErrorUncorrected, nvml::kVolatileEcc,
                                       &ecc))) {
        s.ecc_uncorrected = static_cast<int64_t>(std::min<unsigned long long>(ecc, 1ULL << 50));
        if (ecc > 0 && !faults_.count(i)) {
          faults_[i] = std::to_string(ecc) + " uncorrected ECC error(s)";
          spdlog::error("GPU {}: {}: it takes no new tasks", i, faults_[i]);
        }
      }
      if (lost && !faults_.count(i)) {
        faults_[i] = "GPU " + std::to_string(i) + " is lost: " + Error(nvml::kErrorGpuIsLost);
        spdlog::error("{}: it takes no new tasks", faults_[i]);
      }
    }
    if (faults_.count(i)) s.fault = faults_[i];
    samples.push_back(std::move(s));
  }
  return samples;
}

GpuMonitor::GpuMonitor(std::unique_ptr<NvmlReader> reader, std::chrono::milliseconds interval)
    : reader_(std::move(reader)), interval_(interval), thread_([this] { Loop(); }) {}

GpuMonitor::~GpuMonitor() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

std::optional<std::vector<protocol::GpuSample>> GpuMonitor::TakeFresh() {
  std::lock_guard<std::mutex> lock(mu_);
  std::optional<std::vector<protocol::GpuSample>> out;
  out.swap(fresh_);
  return out;
}

void GpuMonitor::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    lock.unlock();
    std::vector<protocol::GpuSample> samples;
    try {
      samples = reader_->Read();
    } catch (const std::exception& e) {
      spdlog::warn("GPU telemetry: {}", e.what());
    }
    lock.lock();
    if (!samples.empty()) fresh_ = std::move(samples);
    wake_.wait_for(lock, interval_, [this] { return stop_; });
  }
}

std::unique_ptr<GpuMonitor> StartGpuMonitor(const std::string& library,
                                            std::chrono::milliseconds interval,
                                            const std::vector<protocol::GpuInfo>& gpus) {
  if (gpus.empty() || interval.count() <= 0) return nullptr;
  std::string why;
  std::shared_ptr<const nvml::Api> api = nvml::LoadNvml(library, &why);
  std::unique_ptr<NvmlReader> reader;
  if (api) reader = NvmlReader::Open(std::move(api), gpus, &why);
  if (!reader) {
    spdlog::warn("no GPU telemetry ({}); GPUs are scheduled without health checks", why);
    return nullptr;
  }
  spdlog::info("GPU telemetry through {} every {} ms", library, interval.count());
  return std::make_unique<GpuMonitor>(std::move(reader), interval);
}

}  // namespace tessera::worker
