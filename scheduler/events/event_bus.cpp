#include "scheduler/events/event_bus.h"

#include "scheduler/api/views.h"
#include "scheduler/store/store.h"

namespace tessera::events {

void EventBus::Publish(const std::string& kind, nlohmann::json data) {
  data["kind"] = kind;
  data["time"] = api::IsoTime(store::NowMs());
  {
    std::lock_guard lock(mu_);
    const int64_t seq = next_seq_++;
    data["seq"] = seq;
    ring_.push_back({seq, kind, std::move(data)});
    if (ring_.size() > kCapacity) ring_.pop_front();
  }
  cv_.notify_all();
}

FarmEvents EventBus::Since(int64_t after, std::chrono::milliseconds wait, size_t max) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, wait, [&] { return closed_ || next_seq_ - 1 > after; });
  FarmEvents out;
  out.closed = closed_;
  if (ring_.empty()) return out;
  // Sequence numbers are consecutive, so the first event after `after` is found by arithmetic.
  const int64_t first = ring_.front().seq;
  out.missed = after + 1 < first && after < next_seq_ - 1;
  size_t i = after + 1 <= first ? 0 : static_cast<size_t>(after + 1 - first);
  for (; i < ring_.size() && out.events.size() < max; ++i) out.events.push_back(ring_[i]);
  return out;
}

int64_t EventBus::last_seq() const {
  std::lock_guard lock(mu_);
  return next_seq_ - 1;
}

void EventBus::Close() {
  {
    std::lock_guard lock(mu_);
    closed_ = true;
  }
  cv_.notify_all();
}

}  // namespace tessera::events
