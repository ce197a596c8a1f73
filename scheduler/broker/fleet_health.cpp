// Fleet: what takes work away from a worker without dropping it -- a GPU whose telemetry reports
// a fault, a disk of its own that is full (each under an alert of its own, cleared when the
// worker recovers or leaves) -- what its registered time costs, and the API's views of the
// fleet.

#include <spdlog/spdlog.h>

#include "scheduler/broker/event_sink.h"
#include "scheduler/broker/fleet.h"
#include "scheduler/events/farm_alerts.h"

namespace tessera::broker {

namespace {
std::string GpuFaultKey(const std::string& worker) { return "worker_gpu_fault:" + worker; }
std::string DiskFullKey(const std::string& worker) { return "worker_disk_full:" + worker; }
}  // namespace

void Fleet::OnGpuSamples(Pass& pass, WorkerConn& worker,
                         const std::vector<protocol::GpuSample>& samples) {
  if (!worker.gpu_board.Record(samples, worker.offer.gpus.size(), pass.wall_ms)) return;
  worker.offer.gpu_faults = worker.gpu_board.faults();
  const std::string& name = worker.offer.name;
  const std::string summary = worker.gpu_board.FaultSummary();
  if (summary.empty()) {
    ClearGpuFaultAlert(worker);
    spdlog::info("worker {}: its GPUs are healthy again", name);
    pass.events.Record(std::nullopt, std::nullopt, worker.offer.id, "worker_gpu_healthy", name);
    if (pass.events.enabled()) {
      pass.events.Publish("worker", {{"worker", name}, {"state", "gpu_healthy"}});
    }
    return;
  }
  const std::string message =
      "worker " + name + " is unhealthy: " + summary + "; no new tasks on the faulted GPU(s)";
  spdlog::error("{}", message);
  if (p_.options.alerts) {
    p_.options.alerts->Raise(GpuFaultKey(name), "worker_gpu_fault", message, pass.wall_ms);
  }
  pass.events.Record(std::nullopt, std::nullopt, worker.offer.id, "worker_gpu_fault", summary);
  if (pass.events.enabled()) {
    pass.events.Publish("worker", {{"worker", name}, {"state", "gpu_fault"}, {"reason", summary}});
  }
}

void Fleet::ClearGpuFaultAlert(const WorkerConn& worker) {
  if (p_.options.alerts) p_.options.alerts->Clear(GpuFaultKey(worker.offer.name));
}

void Fleet::SetDiskFull(Pass& pass, WorkerConn& worker, const std::string& disk_full) {
  if (disk_full == worker.disk_full) return;
  const bool was_full = !worker.disk_full.empty();
  worker.disk_full = disk_full;
  const std::string& name = worker.offer.name;
  if (!disk_full.empty()) {
    const std::string message = "worker " + name + ": " + disk_full + "; it gets no new tasks";
    if (p_.options.alerts) {
      p_.options.alerts->Raise(DiskFullKey(name), "worker_disk_full", message, pass.wall_ms);
    }
    if (!was_full) {
      spdlog::warn("{} until it has room again", message);
      pass.events.Record(std::nullopt, std::nullopt, worker.offer.id, "worker_disk_full",
                         disk_full);
      if (pass.events.enabled()) {
        pass.events.Publish("worker", {{"worker", name}, {"state", "disk_full"}});
      }
    }
    return;
  }
  if (p_.options.alerts) p_.options.alerts->Clear(DiskFullKey(name));
  spdlog::info("worker {} has room on its disk again: it takes tasks again", name);
  pass.events.Record(std::nullopt, std::nullopt, worker.offer.id, "worker_disk_space_back", name);
  if (pass.events.enabled()) {
    pass.events.Publish("worker", {{"worker", name}, {"state", "disk_space_back"}});
  }
}

void Fleet::MeterCosts(Pass& pass, const std::string* only) {
  if (Status s = pass.store.AccrueWorkerCosts(p_.workers.Meter(pass.now, only)); !s.ok()) {
    spdlog::error("cannot record the workers' cost: {}", s.ToString());
  }
}

nlohmann::json Fleet::Plugins() const {
  nlohmann::json workers = nlohmann::json::array();
  for (const auto& [identity, worker] : p_.workers) {
    nlohmann::json plugins = nlohmann::json::array();
    for (const auto& [name, version] : worker.offer.plugins) {
      plugins.push_back({{"name", name}, {"version", version}});
    }
    workers.push_back({{"id", worker.offer.id}, {"name", worker.offer.name}, {"plugins", plugins}});
  }
  return nlohmann::json{{"workers", workers}};
}

nlohmann::json Fleet::GpuUse(bool history) const {
  nlohmann::json workers = nlohmann::json::object();
  for (const auto& [identity, worker] : p_.workers) {
    nlohmann::json gpus = worker.claims.View(worker.offer);
    for (size_t i = 0; i < gpus.size(); ++i) {
      gpus[i].update(worker.gpu_board.View(i, history));
      if (i < worker.offer.gpus.size()) gpus[i]["name"] = worker.offer.gpus[i].name;
    }
    // Unhealthy: a GPU is faulted or its disk is full (each takes work away from it).
    std::string reason = worker.gpu_board.FaultSummary();
    if (!worker.disk_full.empty()) {
      reason += (reason.empty() ? "" : "; ") + ("disk full: " + worker.disk_full);
    }
    workers[worker.offer.name] = {{"slots", worker.slots},
                                  {"slots_used", worker.used_slots()},
                                  {"cpu_cores_used", worker.claims.cpu().cores},
                                  {"ram_mb_used", worker.claims.cpu().ram_mb},
                                  {"slots_per_gpu", worker.offer.slots_per_gpu},
                                  {"memory_mb_per_slot", worker.offer.memory_mb_per_slot},
                                  {"health", reason.empty() ? "ok" : "unhealthy"},
                                  {"health_reason", reason},
                                  {"gpus", std::move(gpus)}};
  }
  return workers;
}

}  // namespace tessera::broker
