#include "scheduler/events/farm_alerts.h"

#include <algorithm>

namespace tessera::events {

bool FarmAlerts::Raise(const std::string& key, const std::string& kind, const std::string& message,
                       int64_t now_ms) {
  std::lock_guard lock(mu_);
  for (FarmAlert& alert : alerts_) {
    if (alert.key == key) {
      alert.message = message;
      return false;
    }
  }
  alerts_.push_back({key, kind, message, now_ms});
  return true;
}

bool FarmAlerts::Clear(const std::string& key) {
  std::lock_guard lock(mu_);
  const auto it = std::find_if(alerts_.begin(), alerts_.end(),
                               [&](const FarmAlert& alert) { return alert.key == key; });
  if (it == alerts_.end()) return false;
  alerts_.erase(it);
  return true;
}

bool FarmAlerts::Active(const std::string& key) const {
  std::lock_guard lock(mu_);
  return std::any_of(alerts_.begin(), alerts_.end(),
                     [&](const FarmAlert& alert) { return alert.key == key; });
}

std::vector<FarmAlert> FarmAlerts::List() const {
  std::lock_guard lock(mu_);
  return alerts_;
}

}  // namespace tessera::events
