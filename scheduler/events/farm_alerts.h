#pragma once
// Farm-level alerts: conditions an operator must see at a glance and that clear by themselves
// (an outputs filesystem full, the data folder full and the scheduler read-only). Raised and
// cleared by whoever detects the condition (the broker's poll loop, the store's space check),
// read by the API (GET /api/v1/summary "alerts", /metrics tessera_alert_active), which the
// dashboard shows as a banner and `tessera status` prints.
//
// Keyed: raising an alert already active only updates its message, so a condition checked every
// few seconds raises it once. Thread-safe; time is an input.

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace tessera::events {

struct FarmAlert {
  std::string key;       // stable identity, e.g. "outputs_full:/mnt/renders" or "data_full"
  std::string kind;      // what class of condition: "outputs_full", "data_full", "worker_disk_full"
  std::string message;   // what an operator reads: the path, the room left, what is paused
  int64_t since_ms = 0;  // wall-clock milliseconds when it was first raised
};

class FarmAlerts {
 public:
  // True when `key` was not active before (the caller then logs and records the event once).
  bool Raise(const std::string& key, const std::string& kind, const std::string& message,
             int64_t now_ms);
  // True when `key` was active (the caller logs and records that it cleared).
  bool Clear(const std::string& key);
  bool Active(const std::string& key) const;
  // The active alerts, oldest first.
  std::vector<FarmAlert> List() const;

 private:
  mutable std::mutex mu_;
  std::vector<FarmAlert> alerts_;  // a handful at most: a list reads simplest
};

}  // namespace tessera::events
