#pragma once
// The farm over time, for the dashboard's charts (GET /api/v1/history): every interval a thread
// samples the task and worker counts and the number of tasks completed, and keeps the last day
// of samples in memory (they are cheap to lose: a restarted scheduler starts a new history).

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "scheduler/store/store.h"

namespace tessera::broker {
class Broker;
}

namespace tessera::api {

class FarmHistory {
 public:
  FarmHistory(store::Store& store, broker::Broker& broker, std::chrono::seconds interval);
  ~FarmHistory();  // Stop()s

  void Start();  // takes the first sample at once
  void Stop();

  // {"interval_s", "points": [{"time", "queued", "running", "done_total", "throughput_per_min",
  //  "workers_busy", "workers_idle", "workers_offline"}]}, oldest first.
  nlohmann::json View() const;
  // The newest point (null before the first sample).
  nlohmann::json Latest() const;

 private:
  void Sample();

  store::Store& store_;
  broker::Broker& broker_;
  const std::chrono::seconds interval_;
  const size_t capacity_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::deque<nlohmann::json> points_;
  uint64_t last_completed_ = 0;
  std::chrono::steady_clock::time_point last_time_{};
  std::thread thread_;
};

}  // namespace tessera::api
