#include "scheduler/broker/gpu_board.h"

namespace tessera::broker {

bool GpuBoard::Record(const std::vector<protocol::GpuSample>& samples, size_t gpu_count,
                      int64_t at_ms) {
  if (gpus_.size() != gpu_count) gpus_.resize(gpu_count);
  std::map<int, std::string> faults = faults_;
  for (const protocol::GpuSample& s : samples) {
    if (s.index < 0 || static_cast<size_t>(s.index) >= gpu_count) continue;
    Gpu& gpu = gpus_[s.index];
    gpu.latest = s;
    gpu.latest_at_ms = at_ms;
    gpu.history.push_back({at_ms, s.utilization_pct, s.memory_used_mb});
    while (gpu.history.size() > kHistory) gpu.history.pop_front();
    if (s.fault.empty()) {
      faults.erase(s.index);
    } else {
      faults[s.index] = s.fault;
    }
  }
  if (faults == faults_) return false;
  faults_ = std::move(faults);
  return true;
}

std::string GpuBoard::FaultSummary() const {
  std::string out;
  for (const auto& [gpu, why] : faults_) {
    out += (out.empty() ? "GPU " : "; GPU ") + std::to_string(gpu) + ": " + why;
  }
  return out;
}

const protocol::GpuSample* GpuBoard::Latest(size_t gpu) const {
  return gpu < gpus_.size() && gpus_[gpu].latest ? &*gpus_[gpu].latest : nullptr;
}

nlohmann::json GpuSampleJson(const protocol::GpuSample& s) {
  nlohmann::json out = nlohmann::json::object();
  auto known = [&](const char* key, auto value) {
    if (value >= 0) out[key] = value;
  };
  known("utilization_pct", s.utilization_pct);
  known("memory_used_mb", s.memory_used_mb);
  known("memory_total_mb", s.memory_total_mb);
  known("temperature_c", s.temperature_c);
  known("power_w", s.power_w);
  known("sm_clock_mhz", s.sm_clock_mhz);
  known("memory_clock_mhz", s.memory_clock_mhz);
  known("ecc_uncorrected", s.ecc_uncorrected);
  if (s.last_xid > 0) out["last_xid"] = s.last_xid;
  return out;
}

nlohmann::json GpuBoard::View(size_t gpu, bool history) const {
  auto fault = faults_.find(static_cast<int>(gpu));
  nlohmann::json out = {{"fault", fault == faults_.end() ? "" : fault->second},
                        {"telemetry", nullptr}};
  if (gpu >= gpus_.size()) return out;
  const Gpu& g = gpus_[gpu];
  if (g.latest) {
    out["telemetry"] = GpuSampleJson(*g.latest);
    out["telemetry"]["at_ms"] = g.latest_at_ms;
  }
  if (history) {
    nlohmann::json t = nlohmann::json::array(), util = nlohmann::json::array(),
                   memory = nlohmann::json::array();
    for (const Point& p : g.history) {
      t.push_back(p.at_ms);
      // Gaps (a figure not known) are null, so a chart breaks its line there.
      util.push_back(p.utilization_pct >= 0 ? nlohmann::json(p.utilization_pct) : nullptr);
      memory.push_back(p.memory_used_mb >= 0 ? nlohmann::json(p.memory_used_mb) : nullptr);
    }
    out["history"] = {{"t", t}, {"utilization_pct", util}, {"memory_used_mb", memory}};
  }
  return out;
}

}  // namespace tessera::broker
