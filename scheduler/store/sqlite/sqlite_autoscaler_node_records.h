#pragma once
// AutoscalerNodeRecords (autoscaler_node_records.h) on SQLite: the autoscaler_nodes table.

#include <cstdint>
#include <vector>

#include "scheduler/store/autoscaler_node_records.h"

namespace tessera::store {

class SqliteDatabase;

class SqliteAutoscalerNodeRecords : public AutoscalerNodeRecords {
 public:
  explicit SqliteAutoscalerNodeRecords(SqliteDatabase& db) : db_(db) {}

  StatusOr<int64_t> AddAutoscalerNode(const AutoscalerNodeRecord& node) override;
  Status UpdateAutoscalerNode(const AutoscalerNodeRecord& node) override;
  Status DeleteAutoscalerNode(int64_t id) override;
  StatusOr<std::vector<AutoscalerNodeRecord>> ListAutoscalerNodes() override;

 private:
  SqliteDatabase& db_;
};

}  // namespace tessera::store
