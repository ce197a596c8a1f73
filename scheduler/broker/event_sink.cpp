#include "scheduler/broker/event_sink.h"

#include "scheduler/broker/outbox.h"
#include "scheduler/events/event_bus.h"
#include "scheduler/store/store.h"

namespace tessera::broker {

void EventSink::Publish(const char* kind, nlohmann::json data) {
  if (bus_ != nullptr) pending_.emplace_back(kind, std::move(data));
}

void EventSink::Record(std::optional<int64_t> job_id, std::optional<int64_t> task_id,
                       std::optional<int64_t> worker_id, const std::string& kind,
                       const std::string& message) {
  (void)store_.AddEvent(job_id, task_id, worker_id, kind, message);
  if (bus_ == nullptr) return;
  nlohmann::json data = {{"event", kind}, {"message", message}};
  if (job_id) data["job_id"] = *job_id;
  if (task_id) data["task_id"] = *task_id;
  if (worker_id) data["worker_id"] = *worker_id;
  Publish("notice", std::move(data));
}

void EventSink::Flush(Clock::SteadyTime now, Outbox& outbox) {
  if (bus_ == nullptr) return;
  if (!changed_jobs_.empty() && now >= next_job_events_) {
    for (int64_t id : changed_jobs_) Publish("job", {{"job_id", id}});
    changed_jobs_.clear();
    next_job_events_ = now + kJobEventInterval;
  }
  if (pending_.empty()) return;
  outbox.AfterCommit([bus = bus_, events = std::move(pending_)]() mutable {
    for (auto& [kind, data] : events) bus->Publish(kind, std::move(data));
  });
  pending_.clear();
}

}  // namespace tessera::broker
