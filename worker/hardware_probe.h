#pragma once
// What this machine offers, reported to the scheduler in kRegister. No GPU (or no CUDA driver)
// is not an error: the worker then offers the "cpu" backend only.

#include <cstdint>
#include <string>
#include <vector>

#include "shared/wire/protocol.h"

namespace tessera::worker {

struct HardwareInfo {
  std::string hostname;
  int cpu_cores = 1;
  int64_t ram_mb = 0;
  std::vector<protocol::GpuInfo> gpus;
  std::vector<std::string> backends;  // "cpu", plus "cuda" when at least one GPU was found
  std::string os;                     // OsDescription()
  std::string cpu_model;              // CpuModel()
  protocol::CloudInfo cloud;          // filled by ProbeCloud (cloud_metadata.h), not here
};

// The machine's hostname ("localhost" if it cannot be read).
std::string Hostname();

// "PRETTY_NAME of /etc/os-release, kernel release machine", e.g. "Debian GNU/Linux 12
// (bookworm), Linux 6.1.0-18-amd64 x86_64"; the parts that cannot be read are left out.
std::string OsDescription();

// The CPU's marketing name from /proc/cpuinfo ("model name"); machines whose kernel does not give
// one (many ARM boards) report the architecture instead.
std::string CpuModel();

// Probes CPU, memory and CUDA devices. Never fails; a CUDA error means zero GPUs (logged once).
HardwareInfo ProbeHardware();

// The CUDA devices the CUDA runtime this build links can use, numbered as it numbers them (the
// numbers the scheduler pins tasks to); empty when the build has no CUDA, or there is no driver,
// no device or a driver older than the runtime: `why` then says which (gpu_probe.cpp).
std::vector<protocol::GpuInfo> ListCudaDevices(std::string* why = nullptr);

// ListCudaDevices, saying once in the log why there are none.
std::vector<protocol::GpuInfo> ProbeGpus();

}  // namespace tessera::worker
