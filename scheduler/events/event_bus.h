#pragma once
// The farm's live event stream: what the dashboard and `tessera wait` follow instead of polling
// (GET /api/v1/events, server-sent events). The broker and the API publish; each reader keeps
// its own cursor (the last sequence number it saw) and asks for what came after it.
//
// Events are kept in memory only, the newest kCapacity of them: a reader that falls further
// behind is told it missed some (FarmEvents::missed) and refreshes from the API. What must
// survive a restart is in the store's events table.
//
// Kinds: "job" (a job's tasks or state changed; at most a few per second per job), "frame" (a
// frame was written), "worker" (a worker joined, left, drained, was revoked), "notice" (the
// store's notable events: infeasible jobs, flagged frames, blocklisted workers...).

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tessera::events {

struct FarmEvent {
  int64_t seq = 0;
  std::string kind;
  nlohmann::json data;  // with "seq", "time" and "kind" filled in
};

struct FarmEvents {
  std::vector<FarmEvent> events;
  bool missed = false;  // events after the cursor were already dropped
  bool closed = false;  // the bus is shutting down: stop reading
};

class EventBus {
 public:
  static constexpr size_t kCapacity = 20000;

  // Any thread. `data` gets "seq", "time" (ISO-8601) and "kind" added.
  void Publish(const std::string& kind, nlohmann::json data);

  // The events after `after` (at most `max`), waiting up to `wait` for the first one.
  FarmEvents Since(int64_t after, std::chrono::milliseconds wait, size_t max = 500);
  int64_t last_seq() const;

  // Wakes every waiting reader for good (scheduler shutdown).
  void Close();

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<FarmEvent> ring_;
  int64_t next_seq_ = 1;
  bool closed_ = false;
};

}  // namespace tessera::events
