#pragma once
// EventRecords (event_records.h) on SQLite: the events table.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "scheduler/store/event_records.h"

namespace tessera::store {

class Database;

class SqlEventRecords : public EventRecords {
 public:
  explicit SqlEventRecords(Database& db) : db_(db) {}

  Status AddEvent(std::optional<int64_t> job_id, std::optional<int64_t> task_id,
                  std::optional<int64_t> worker_id, const std::string& kind,
                  const std::string& message) override;
  StatusOr<std::vector<EventRecord>> EventsAfter(int64_t after_id,
                                                 const std::vector<std::string>& kinds,
                                                 int limit) override;

 private:
  Database& db_;
};

}  // namespace tessera::store
