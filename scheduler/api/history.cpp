#include "scheduler/api/history.h"

#include <spdlog/spdlog.h>

#include "scheduler/api/views.h"
#include "scheduler/broker/broker.h"
#include "shared/base/wall_time.h"

namespace tessera::api {

namespace {
constexpr std::chrono::hours kKept{24};
}

FarmHistory::FarmHistory(store::Store& store, broker::Broker& broker, std::chrono::seconds interval)
    : store_(store),
      broker_(broker),
      interval_(std::max(interval, std::chrono::seconds(1))),
      capacity_(static_cast<size_t>(std::chrono::seconds(kKept) / interval_)) {}

FarmHistory::~FarmHistory() { Stop(); }

void FarmHistory::Start() {
  thread_ = std::thread([this] {
    std::unique_lock lock(mu_);
    while (!stop_) {
      lock.unlock();
      // A sample that throws is skipped: the thread (and the dashboard's charts) carry on.
      try {
        Sample();
      } catch (const std::exception& e) {
        spdlog::error("farm history: a sample failed: {}", e.what());
      }
      lock.lock();
      cv_.wait_for(lock, interval_, [this] { return stop_; });
    }
  });
}

void FarmHistory::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void FarmHistory::Sample() {
  StatusOr<store::FarmSummary> sum = store_.Summary();
  if (!sum.ok()) {
    spdlog::warn("farm history: cannot read the summary: {}", sum.status().ToString());
    return;
  }
  const uint64_t completed = broker_.counters().tasks_completed;
  const auto now = std::chrono::steady_clock::now();
  nlohmann::json point = {{"time", IsoTime(wall_time::NowMs())},
                          {"queued", sum->tasks.queued},
                          {"running", sum->tasks.running},
                          {"done_total", sum->tasks.done},
                          {"throughput_per_min", 0.0},
                          {"workers_busy", 0},
                          {"workers_idle", 0},
                          {"workers_offline", 0}};
  for (const auto& [state, n] : sum->workers_by_state) point["workers_" + state] = n;
  std::lock_guard lock(mu_);
  if (last_time_ != std::chrono::steady_clock::time_point{}) {
    const double minutes = std::chrono::duration<double>(now - last_time_).count() / 60.0;
    if (minutes > 0) point["throughput_per_min"] = (completed - last_completed_) / minutes;
  }
  last_completed_ = completed;
  last_time_ = now;
  points_.push_back(std::move(point));
  while (points_.size() > capacity_) points_.pop_front();
}

nlohmann::json FarmHistory::Latest() const {
  std::lock_guard lock(mu_);
  return points_.empty() ? nlohmann::json(nullptr) : points_.back();
}

nlohmann::json FarmHistory::View() const {
  std::lock_guard lock(mu_);
  nlohmann::json points = nlohmann::json::array();
  for (const nlohmann::json& p : points_) points.push_back(p);
  return {{"interval_s", interval_.count()}, {"points", std::move(points)}};
}

}  // namespace tessera::api
