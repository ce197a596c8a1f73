#pragma once
// The part of NVIDIA's Management Library (NVML, libnvidia-ml.so.1, shipped with the driver) that
// the worker's GPU telemetry reads, declared here from NVML's documented C ABI so the worker
// builds without the CUDA toolkit's nvml.h and starts on machines without a driver: the library
// is opened at run time with dlopen, never linked.
//
// Only what gpu_telemetry.cpp calls is declared; names keep NVML's (nvmlDeviceGetMemoryInfo is
// `DeviceGetMemoryInfo` in NvmlApi). Versioned entry points (_v2, _v3) are the ones current
// drivers export.

#include <memory>
#include <string>

namespace tessera::worker::nvml {

using Return = int;  // nvmlReturn_t
inline constexpr Return kSuccess = 0;
inline constexpr Return kErrorNotSupported = 3;
inline constexpr Return kErrorTimeout = 10;
inline constexpr Return kErrorGpuIsLost = 15;

using Device = struct DeviceOpaque*;      // nvmlDevice_t
using EventSet = struct EventSetOpaque*;  // nvmlEventSet_t

inline constexpr unsigned kTemperatureGpu = 0;              // NVML_TEMPERATURE_GPU
inline constexpr unsigned kClockSm = 1;                     // NVML_CLOCK_SM
inline constexpr unsigned kClockMem = 2;                    // NVML_CLOCK_MEM
inline constexpr unsigned kMemoryErrorUncorrected = 1;      // NVML_MEMORY_ERROR_TYPE_UNCORRECTED
inline constexpr unsigned kVolatileEcc = 0;                 // NVML_VOLATILE_ECC
inline constexpr unsigned long long kEventXidCritical = 8;  // nvmlEventTypeXidCriticalError

struct Utilization {  // nvmlUtilization_t, percent over the last sample period
  unsigned gpu;
  unsigned memory;
};
struct Memory {  // nvmlMemory_t, bytes
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
struct PciInfo {  // nvmlPciInfo_t (v3)
  char bus_id_legacy[16];
  unsigned domain;
  unsigned bus;
  unsigned device;
  unsigned pci_device_id;
  unsigned pci_subsystem_id;
  char bus_id[32];
};
struct EventData {  // nvmlEventData_t
  Device device;
  unsigned long long event_type;
  unsigned long long event_data;  // the Xid for kEventXidCritical
  unsigned gpu_instance_id;
  unsigned compute_instance_id;
};

// The entry points, resolved from the library. Every one is present once LoadNvml succeeds.
struct Api {
  Return (*Init)();  // nvmlInit_v2
  Return (*Shutdown)();
  const char* (*ErrorString)(Return);
  Return (*DeviceGetCount)(unsigned*);                  // _v2
  Return (*DeviceGetHandleByIndex)(unsigned, Device*);  // _v2
  Return (*DeviceGetPciInfo)(Device, PciInfo*);         // _v3
  Return (*DeviceGetUtilizationRates)(Device, Utilization*);
  Return (*DeviceGetMemoryInfo)(Device, Memory*);
  Return (*DeviceGetTemperature)(Device, unsigned, unsigned*);  // degrees C
  Return (*DeviceGetPowerUsage)(Device, unsigned*);             // milliwatts
  Return (*DeviceGetClockInfo)(Device, unsigned, unsigned*);    // MHz
  Return (*DeviceGetTotalEccErrors)(Device, unsigned, unsigned, unsigned long long*);
  Return (*EventSetCreate)(EventSet*);
  Return (*DeviceRegisterEvents)(Device, unsigned long long, EventSet);
  Return (*EventSetWait)(EventSet, EventData*, unsigned);  // _v2; timeout in ms
  Return (*EventSetFree)(EventSet);
};

// The library opened and its entry points resolved (the handle is closed when the last copy of
// the pointer goes). nullptr, with `why` ("libnvidia-ml.so.1: cannot open shared object file",
// "nvmlDeviceGetPciInfo_v3 missing"), when it cannot be used. Does not call Init.
std::shared_ptr<const Api> LoadNvml(const std::string& library, std::string* why);

}  // namespace tessera::worker::nvml
