#pragma once
// The farm's event log: what happened to jobs, tasks and workers, in order (ids only grow),
// stamped with the store's clock. Job submissions and ends are logged by the job changes
// themselves; the broker and the autoscaler add the rest.
//
// One of the store's record tables (store.h): an engine-neutral interface, implemented for SQLite
// by SqlEventRecords (sql/sql_event_records.h).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "scheduler/store/records.h"
#include "shared/base/status.h"

namespace tessera::store {

class EventRecords {
 public:
  virtual ~EventRecords() = default;

  virtual Status AddEvent(std::optional<int64_t> job_id, std::optional<int64_t> task_id,
                          std::optional<int64_t> worker_id, const std::string& kind,
                          const std::string& message) = 0;
  // Events after `after_id` of the given kinds, oldest first, at most `limit`.
  virtual StatusOr<std::vector<EventRecord>> EventsAfter(int64_t after_id,
                                                         const std::vector<std::string>& kinds,
                                                         int limit) = 0;
};

}  // namespace tessera::store
