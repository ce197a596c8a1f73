#pragma once
// GPU telemetry, as farm operators know it from NVIDIA's DCGM exporter: each GPU's utilisation,
// memory, temperature, power and clocks read through NVML every gpu_telemetry.interval_ms and
// sent with the next heartbeat, and its health -- a GPU that disappears, reports a critical Xid
// error or uncorrected ECC errors is marked with a fault, which makes the scheduler place no new
// task on it (and raise an alert naming it).
//
// NvmlReader reads; GpuMonitor runs it on a thread of its own, so a driver call that hangs on a
// failing GPU never stalls the worker's heartbeats. Tests load a fake libnvidia-ml
// (tests/worker/fake_nvml.cpp) through the same dlopen path.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "shared/wire/protocol.h"
#include "worker/nvml_api.h"

namespace tessera::worker {

inline constexpr const char* kDefaultNvmlLibrary = "libnvidia-ml.so.1";

// Xids the driver reports for an application's own mistakes (a bad memory access, a kernel
// stopped by its process, a preempted context): logged and shown, but the GPU stays healthy.
bool XidIsApplicationError(unsigned long long xid);
// What an Xid means, for the fault text: "Xid 79: GPU has fallen off the bus".
std::string XidText(unsigned long long xid);

class NvmlReader {
 public:
  // NVML initialised over `api`, and each of `gpus` (the GPUs the worker registers, indexed as
  // the scheduler knows them) matched to an NVML device by PCI address -- CUDA and NVML number
  // devices differently -- or, for GPUs without one (simulated), by position. Critical Xid
  // events are watched on every matched device. nullptr with `why` when NVML cannot start.
  static std::unique_ptr<NvmlReader> Open(std::shared_ptr<const nvml::Api> api,
                                          const std::vector<protocol::GpuInfo>& gpus,
                                          std::string* why);
  ~NvmlReader();
  NvmlReader(const NvmlReader&) = delete;
  NvmlReader& operator=(const NvmlReader&) = delete;

  // One sample per registered GPU. A GPU that cannot be found or is lost, that has reported a
  // critical Xid (since Open) or uncorrected ECC errors carries a fault, and keeps it.
  std::vector<protocol::GpuSample> Read();

 private:
  NvmlReader(std::shared_ptr<const nvml::Api> api, std::vector<protocol::GpuInfo> gpus)
      : api_(std::move(api)), gpus_(std::move(gpus)) {}
  std::string Error(nvml::Return r) const;
  // The NVML device of registered GPU `i` now (nullopt: gone, with `why`).
  std::optional<nvml::Device> Find(size_t i, std::string* why);
  // The device of registered GPU `i` for this reading, checked against its PCI address; nullopt
  // (and a fault) when it is lost or no longer on the bus.
  std::optional<nvml::Device> Current(size_t i);
  void DrainEvents();

  std::shared_ptr<const nvml::Api> api_;
  std::vector<protocol::GpuInfo> gpus_;
  std::vector<nvml::Device> devices_;  // matched at Open, by registered index (null: none)
  nvml::EventSet events_ = nullptr;
  std::map<size_t, std::string> faults_;  // registered index -> why; kept once set
  std::map<size_t, int> last_xid_;
};

// Reads on its own thread every `interval`; the agent takes the newest reading for its next
// heartbeat.
class GpuMonitor {
 public:
  GpuMonitor(std::unique_ptr<NvmlReader> reader, std::chrono::milliseconds interval);
  ~GpuMonitor();
  GpuMonitor(const GpuMonitor&) = delete;
  GpuMonitor& operator=(const GpuMonitor&) = delete;

  // The reading taken since the last call, if any.
  std::optional<std::vector<protocol::GpuSample>> TakeFresh();

 private:
  void Loop();

  std::unique_ptr<NvmlReader> reader_;
  const std::chrono::milliseconds interval_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;                                      // guarded by mu_
  std::optional<std::vector<protocol::GpuSample>> fresh_;  // guarded by mu_
  std::thread thread_;
};

// The monitor for a worker registering `gpus`: NVML from `library`, read every `interval`.
// nullptr (logged once, with the reason) when there are no GPUs, telemetry is off (interval 0)
// or NVML cannot be used: the worker runs without telemetry.
std::unique_ptr<GpuMonitor> StartGpuMonitor(const std::string& library,
                                            std::chrono::milliseconds interval,
                                            const std::vector<protocol::GpuInfo>& gpus);

}  // namespace tessera::worker
