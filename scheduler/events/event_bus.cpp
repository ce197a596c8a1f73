#include "scheduler/events/event_bus.h"

#include "scheduler/store/store.h"
#include "shared/base/utf8.h"
#include "shared/base/wall_time.h"

namespace tessera::events {
namespace {

// Readers serialise events to JSON text, which throws on a string that is not UTF-8. Strings
// from outside are made valid where they enter; this keeps a slip anywhere from ever reaching a
// reader (events are few and small: the walk costs nothing that matters).
void MakeValid(nlohmann::json& value) {
  if (value.is_string()) {
    utf8::SanitizeInPlace(value.get_ref<std::string&>());
  } else if (value.is_array()) {
    for (nlohmann::json& v : value) MakeValid(v);
  } else if (value.is_object()) {
    nlohmann::json valid = nlohmann::json::object();
    for (auto& [key, v] : value.items()) {
      MakeValid(v);
      valid[utf8::Sanitize(key)] = std::move(v);
    }
    value = std::move(valid);
  }
}

}  // namespace

void EventBus::Publish(const std::string& kind, nlohmann::json data) {
  MakeValid(data);
  data["kind"] = utf8::Sanitize(kind);
  data["time"] = wall_time::IsoTime(wall_time::NowMs());
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
