#pragma once
// What the farm spends: GPU-seconds and money per task, job, worker and UTC day. Task costs are
// written as attempts end, worker costs as the broker meters registered time at each worker's
// price; both add to the day the store's clock is in (UTC).
//
// One of the store's record tables (store.h): an engine-neutral interface, implemented for SQLite
// by SqlCostRecords (sql/sql_cost_records.h).

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "scheduler/store/records.h"
#include "shared/base/status.h"

namespace tessera::store {

class CostRecords {
 public:
  virtual ~CostRecords() = default;

  // A task attempt ended: its GPU-seconds and money go to the task, its job and today.
  virtual Status AddTaskCost(int64_t task_id, int64_t job_id, double gpu_seconds, double cost) = 0;
  // Registered time at the workers' prices: (worker id, money) each, and the sum to today.
  virtual Status AccrueWorkerCosts(const std::vector<std::pair<int64_t, double>>& worker_costs) = 0;
  // The node group a worker belongs to and what it costs per hour while registered.
  virtual Status SetWorkerPrice(int64_t worker_id, const std::string& node_group,
                                double price_per_hour) = 0;
  // The last `days` UTC days with any cost, oldest first.
  virtual StatusOr<std::vector<CostDay>> CostDays(int days) = 0;
};

}  // namespace tessera::store
