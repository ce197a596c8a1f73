#pragma once
// CostRecords (cost_records.h) on SQLite: cost columns of tasks, jobs and workers, and the
// cost_days table (schema 18), one row per UTC day.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "scheduler/store/cost_records.h"

namespace tessera::store {

class Database;

class SqlCostRecords : public CostRecords {
 public:
  explicit SqlCostRecords(Database& db) : db_(db) {}

  Status AddTaskCost(int64_t task_id, int64_t job_id, double gpu_seconds, double cost) override;
  Status AccrueWorkerCosts(const std::vector<std::pair<int64_t, double>>& worker_costs) override;
  Status SetWorkerPrice(int64_t worker_id, const std::string& node_group,
                        double price_per_hour) override;
  StatusOr<std::vector<CostDay>> CostDays(int days) override;

 private:
  // Adds to today's row (the caller holds the write lock, in a transaction).
  Status AddToToday(double cost, double gpu_seconds);

  Database& db_;
};

}  // namespace tessera::store
