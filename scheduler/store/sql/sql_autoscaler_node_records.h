#pragma once
// AutoscalerNodeRecords (autoscaler_node_records.h) on SQLite: the autoscaler_nodes table.

#include <cstdint>
#include <vector>

#include "scheduler/store/autoscaler_node_records.h"

namespace tessera::store {

class Database;

class SqlAutoscalerNodeRecords : public AutoscalerNodeRecords {
 public:
  explicit SqlAutoscalerNodeRecords(Database& db) : db_(db) {}

  StatusOr<int64_t> AddAutoscalerNode(const AutoscalerNodeRecord& node) override;
  Status UpdateAutoscalerNode(const AutoscalerNodeRecord& node) override;
  Status DeleteAutoscalerNode(int64_t id) override;
  StatusOr<std::vector<AutoscalerNodeRecord>> ListAutoscalerNodes() override;

 private:
  Database& db_;
};

}  // namespace tessera::store
