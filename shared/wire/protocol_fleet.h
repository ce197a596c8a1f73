#pragma once
// The worker protocol's messages about a worker itself (shared/wire/protocol.h has the whole
// conversation, the limits and the message types): what it is and offers (kRegister), how it
// joins a CURVE farm (kEnrol), the scheduler's answers (kWelcome, kReject), and its heartbeat.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "shared/wire/msgpack.h"
#include "shared/wire/protocol_tasks.h"  // TaskRef

namespace tessera::protocol {

struct GpuInfo {
  int index = 0;
  std::string name;
  int64_t memory_mb = 0;
  int compute_major = 0;
  int compute_minor = 0;
  std::string driver_version;   // CUDA version the driver supports, "12.4"; older workers: ""
  std::string runtime_version;  // CUDA runtime the worker was built with, "12.4"
  // PCI address, "0000:3b:00.0" (how the worker matches NVML's devices to CUDA's, whose order
  // differs); "" for simulated GPUs and older workers.
  std::string pci_bus_id;
};

// One GPU's load and health as the worker read it through NVML (worker/gpu_telemetry.h), sent in
// kHeartbeat every gpu_telemetry.interval_ms (DCGM-exporter's figures). -1: not known (the GPU
// or driver does not report it).
struct GpuSample {
  int index = 0;  // the GPU's index in Register.gpus
  int utilization_pct = -1;
  int64_t memory_used_mb = -1;
  int64_t memory_total_mb = -1;
  int temperature_c = -1;
  double power_w = -1;
  int sm_clock_mhz = -1;
  int memory_clock_mhz = -1;
  int64_t ecc_uncorrected = -1;  // uncorrected ECC errors since the driver loaded
  int last_xid = 0;              // the latest Xid error the driver reported (0: none)
  // Non-empty: the GPU is unhealthy and gets no new tasks -- why ("Xid 79: GPU has fallen off
  // the bus"). Once set it stays for the life of the worker process (a reset is needed).
  std::string fault;
};

// Where a worker runs, from its cloud's instance metadata. All empty on premises (or when the
// worker's cloud.provider is none).
struct CloudInfo {
  std::string provider;  // "aws", "gcp", "alibaba", "tencent"; "" = none
  std::string region;
  std::string zone;
  std::string instance_type;
  std::string lifecycle;  // "spot", "on-demand", or "" when the provider does not say
};

// A renderer plugin a worker can run: its program was found and its version detected, or it is
// a C++ plugin the worker loaded (plugins/api/renderer_api.h).
struct PluginOffer {
  std::string name;  // the plugin's name, what jobs give as `renderer:`
  std::string version;
  std::string executable;  // where the worker found it (a C++ plugin: its library)
  // C++ plugins loaded from outside the build also say what a job may give them, so the
  // scheduler can validate jobs naming them: plugin.yaml's `scene:`/`settings:` keys, a line
  // of description and their capabilities ("tiles", "sample_parts", "checkpoint").
  bool native = false;
  std::string description;
  std::vector<std::string> capabilities;
  std::string declaration;
};

// What a worker understands beyond the base protocol (Register.features), so a scheduler only
// uses it with workers that do.
inline constexpr const char* kFeatureAcksInAssign = "acks_in_assign";

struct Register {
  std::string name;  // operator-chosen worker name (defaults to the hostname)
  std::string hostname;
  std::string version;  // tessera version of the worker
  int cpu_cores = 0;
  int64_t ram_mb = 0;
  std::vector<GpuInfo> gpus;
  std::vector<std::string> backends;  // render backends this worker can run: "cpu", "cuda"
  int slots = 1;                      // tasks it runs at once
  // GPU sharing (worker.gpu_sharing): each GPU is cut into slots_per_gpu slots (2..32) that
  // tasks asking for a gpu_share take; 0 (older workers send none): one task per GPU, whole.
  // memory_mb_per_slot: GPU memory each slot gives a task (0: not divided per slot).
  int slots_per_gpu = 0;
  int64_t memory_mb_per_slot = 0;
  std::vector<std::string> pools = {"default"};  // pools it serves; jobs may name pools
  std::vector<std::string> tags;                 // capabilities jobs may require
  // Tasks it is still rendering from before (a reconnect, or a scheduler restart): the
  // scheduler re-attaches those leases when their attempt is still current, and cancels the rest.
  std::vector<TaskRef> running;
  // Renderer plugins it can run (the built-in pathtracer and noop are always there). Older
  // workers send none.
  std::vector<PluginOffer> plugins;
  // Tasks that are finished here but whose results wait in the spool for a kResultAck: their
  // leases are re-attached (without taking a slot) so the re-sent results can be applied.
  std::vector<TaskRef> delivering;
  bool draining = false;  // finishing its tasks before leaving: assign it nothing new
  // Facts about the machine, shown to people (not used for placement). Older workers send none.
  std::string os;  // "Debian GNU/Linux 12 (bookworm), Linux 6.1.0-18-amd64 x86_64"
  std::string cpu_model;
  CloudInfo cloud;
  std::vector<std::string> features;  // kFeature*
};

// A join-token connection asks to enrol a worker under `name` with its own key pair.
struct Enrol {
  std::string name;
  std::string public_key;  // Z85, 40 characters
};

struct Enrolled {
  std::string name;
};

struct Welcome {
  int64_t worker_id = 0;
  int heartbeat_ms = 1000;
  int liveness = 5;  // missed heartbeats before a peer is considered gone
};

struct Reject {
  std::string reason;
  // > 0: not for good, only not now (another live connection holds the worker's name): the
  // worker connects again after this long. 0: refused for good; the worker stops.
  int retry_after_ms = 0;
};

struct Heartbeat {
  // Every task occupying a slot, including cancelled ones whose render is still stopping: the
  // scheduler keeps a cancelled task's slot reserved until it disappears from this list.
  std::vector<TaskRef> running;
  bool draining = false;  // assign it nothing new
  // Non-empty while a filesystem the worker writes (task folders, spool, cache) is full: what
  // and where ("no space left on device: 0 B free of 20 GiB on /var/lib/tessera"). The
  // scheduler assigns it nothing new and raises an alert until it is empty again.
  std::string disk_full;
  // Finished attempts whose results are still on their way (a large frame in pieces) or wait
  // for a kResultAck: their leases are not lost.
  std::vector<TaskRef> delivering;
  // A fresh reading of every GPU, when one was taken since the last heartbeat (empty: none new,
  // or no telemetry). Older workers send none.
  std::vector<GpuSample> gpu_samples;
};

// Missing fields take their defaults (forward compatibility); mistyped fields are errors.
TSR_MESSAGE_FIELDS(GpuInfo, index, name, memory_mb, compute_major, compute_minor, driver_version,
                   runtime_version, pci_bus_id)
TSR_MESSAGE_FIELDS(GpuSample, index, utilization_pct, memory_used_mb, memory_total_mb,
                   temperature_c, power_w, sm_clock_mhz, memory_clock_mhz, ecc_uncorrected,
                   last_xid, fault)
TSR_MESSAGE_FIELDS(CloudInfo, provider, region, zone, instance_type, lifecycle)
TSR_MESSAGE_FIELDS(PluginOffer, name, version, executable, native, description, capabilities,
                   declaration)
TSR_MESSAGE_FIELDS(Register, name, hostname, version, cpu_cores, ram_mb, gpus, backends, slots,
                   pools, tags, running, plugins, delivering, draining, os, cpu_model, cloud,
                   features, slots_per_gpu, memory_mb_per_slot)
TSR_MESSAGE_FIELDS(Enrol, name, public_key)
TSR_MESSAGE_FIELDS(Enrolled, name)
TSR_MESSAGE_FIELDS(Welcome, worker_id, heartbeat_ms, liveness)
TSR_MESSAGE_FIELDS(Reject, reason, retry_after_ms)
TSR_MESSAGE_FIELDS(Heartbeat, running, draining, delivering, disk_full, gpu_samples)

}  // namespace tessera::protocol
