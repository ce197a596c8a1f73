#pragma once
// EventSink: what the broker tells the API's live readers and keeps in the events table -- live
// events ("job", "frame", "worker", "notice"; events/event_bus.h) and notable events stored with
// the pass's writes. Live events wait for the pass to commit (they are handed to the outbox),
// and a job's changes go out as one "job" event per job at most every kJobEventInterval.
//
// Threads: broker thread only.

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "shared/base/clock.h"

namespace tessera::events {
class EventBus;
}
namespace tessera::store {
class Store;
}

namespace tessera::broker {

class Outbox;

class EventSink {
 public:
  static constexpr std::chrono::milliseconds kJobEventInterval{250};

  // `bus` may be null: nothing is published (notable events are still stored).
  EventSink(store::Store& store, events::EventBus* bus) : store_(store), bus_(bus) {}

  // Whether anyone reads live events (callers skip building them otherwise).
  bool enabled() const { return bus_ != nullptr; }
  // The job's tasks or state changed.
  void JobChanged(int64_t job_id) {
    if (bus_ != nullptr) changed_jobs_.insert(job_id);
  }
  void Publish(const char* kind, nlohmann::json data);
  // A notable event: stored (the events table) and published as a "notice".
  void Record(std::optional<int64_t> job_id, std::optional<int64_t> task_id,
              std::optional<int64_t> worker_id, const std::string& kind,
              const std::string& message);
  // Hands this pass's events to the outbox, published once the pass commits.
  void Flush(Clock::SteadyTime now, Outbox& outbox);
  // The pass rolled back: its events never happened.
  void Discard() { pending_.clear(); }

 private:
  store::Store& store_;
  events::EventBus* bus_;
  std::set<int64_t> changed_jobs_;
  Clock::SteadyTime next_job_events_{};
  std::vector<std::pair<const char*, nlohmann::json>> pending_;
};

}  // namespace tessera::broker
