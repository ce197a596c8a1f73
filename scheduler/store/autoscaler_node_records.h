#pragma once
// The machines the autoscaler asked a provider for, kept until they are terminated, so a
// restarted scheduler still knows the nodes it pays for (scheduler/autoscaler/autoscaler.h).
//
// One of the store's record tables (store.h): an engine-neutral interface, implemented for SQLite
// by SqlAutoscalerNodeRecords (sql/sql_autoscaler_node_records.h).

#include <cstdint>
#include <vector>

#include "scheduler/store/records.h"
#include "shared/base/status.h"

namespace tessera::store {

class AutoscalerNodeRecords {
 public:
  virtual ~AutoscalerNodeRecords() = default;

  // Stores a new request (its id is ignored); returns its id.
  virtual StatusOr<int64_t> AddAutoscalerNode(const AutoscalerNodeRecord& node) = 0;
  // Its worker name, provider id and draining flag, by id.
  virtual Status UpdateAutoscalerNode(const AutoscalerNodeRecord& node) = 0;
  virtual Status DeleteAutoscalerNode(int64_t id) = 0;
  // Every request kept, oldest first.
  virtual StatusOr<std::vector<AutoscalerNodeRecord>> ListAutoscalerNodes() = 0;
};

}  // namespace tessera::store
