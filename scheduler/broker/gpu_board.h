#pragma once
// GpuBoard: what one connected worker's GPU telemetry (protocol::GpuSample, sent in heartbeats)
// says of each of its GPUs -- the latest reading, a short history for the dashboard's charts,
// and which GPUs are unhealthy and why. The broker copies the faults into the worker's
// policy::WorkerOffer, so no new task is placed on a faulted GPU, and raises an alert per worker.
// Owned by the broker thread (one per WorkerConn); forgotten with the connection, since a worker
// that registers again reads its GPUs anew.

#include <cstdint>
#include <deque>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "shared/wire/protocol.h"

namespace tessera::broker {

class GpuBoard {
 public:
  // Points kept per GPU: ten minutes at the workers' default 5 s reading interval.
  static constexpr size_t kHistory = 120;

  // A heartbeat's reading of a worker with `gpu_count` GPUs, taken at wall time `at_ms`
  // (samples of GPUs it does not have are ignored). True when the faults changed.
  bool Record(const std::vector<protocol::GpuSample>& samples, size_t gpu_count, int64_t at_ms);

  // Unhealthy GPUs: index -> why.
  const std::map<int, std::string>& faults() const { return faults_; }
  // "GPU 1: Xid 79: GPU has fallen off the bus; GPU 3: ..." ("" when all are healthy).
  std::string FaultSummary() const;
  // The latest reading of GPU `gpu`, if one came.
  const protocol::GpuSample* Latest(size_t gpu) const;
  // For the API: {"fault", "telemetry": {the latest reading, "at"} or null, and with
  // `history`, "history": {"t": [ms], "utilization_pct": [...], "memory_used_mb": [...]}}.
  nlohmann::json View(size_t gpu, bool history) const;

 private:
  struct Point {
    int64_t at_ms;
    int utilization_pct;
    int64_t memory_used_mb;
  };
  struct Gpu {
    std::optional<protocol::GpuSample> latest;
    int64_t latest_at_ms = 0;
    std::deque<Point> history;
  };
  std::vector<Gpu> gpus_;
  std::map<int, std::string> faults_;
};

// A reading as the API shows it: its figures, -1 ("not known") left out.
nlohmann::json GpuSampleJson(const protocol::GpuSample& s);

}  // namespace tessera::broker
