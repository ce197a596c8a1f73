// The store's cost records (schema 18): GPU-seconds and money per task, job, worker and UTC day,
// written by the broker thread inside its group commit. The day is the UTC day of the store's
// clock.

#include "scheduler/store/sql/sql_cost_records.h"

#include "scheduler/store/database.h"
#include "scheduler/store/sql/table.h"
#include "shared/base/wall_time.h"

namespace tessera::store {
namespace {

constexpr Column<CostDay> kCostDayColumns[] = {
    {"day", &CostDay::day}, {"cost", &CostDay::cost}, {"gpu_seconds", &CostDay::gpu_seconds}};
constexpr Table<CostDay> kCostDays{"cost_days", kCostDayColumns};

}  // namespace

Status SqlCostRecords::AddTaskCost(int64_t task_id, int64_t job_id, double gpu_seconds,
                                   double cost) {
  Database::WriteLock lock(db_);
  return sql::InWriteTx(db_.writer(), [&]() -> Status {
    TSR_ASSIGN_OR_RETURN(sql::Stmt t,
                         db_.writer().Prepare("UPDATE tasks SET gpu_seconds = gpu_seconds + "
                                              "?1, cost = cost + ?2 WHERE id = ?3"));
    TSR_RETURN_IF_ERROR(t.Bind(1, gpu_seconds).Bind(2, cost).Bind(3, task_id).Run());
    TSR_ASSIGN_OR_RETURN(sql::Stmt j,
                         db_.writer().Prepare("UPDATE jobs SET gpu_seconds = gpu_seconds + "
                                              "?1, cost = cost + ?2 WHERE id = ?3"));
    TSR_RETURN_IF_ERROR(j.Bind(1, gpu_seconds).Bind(2, cost).Bind(3, job_id).Run());
    // The day's money comes from the workers' registered time (AccrueWorkerCosts); a task's
    // share of it is already in there.
    return AddToToday(0, gpu_seconds);
  });
}

Status SqlCostRecords::AccrueWorkerCosts(
    const std::vector<std::pair<int64_t, double>>& worker_costs) {
  if (worker_costs.empty()) return Status::Ok();
  Database::WriteLock lock(db_);
  return sql::InWriteTx(db_.writer(), [&]() -> Status {
    double total = 0;
    for (const auto& [id, cost] : worker_costs) {
      TSR_ASSIGN_OR_RETURN(
          sql::Stmt s, db_.writer().Prepare("UPDATE workers SET cost = cost + ?1 WHERE id = ?2"));
      TSR_RETURN_IF_ERROR(s.Bind(1, cost).Bind(2, id).Run());
      total += cost;
    }
    return AddToToday(total, 0);
  });
}

Status SqlCostRecords::SetWorkerPrice(int64_t worker_id, const std::string& node_group,
                                      double price_per_hour) {
  Database::WriteLock lock(db_);
  TSR_ASSIGN_OR_RETURN(
      sql::Stmt s, db_.writer().Prepare(
                       "UPDATE workers SET node_group = ?1, price_per_hour = ?2 WHERE id = ?3"));
  return s.Bind(1, node_group).Bind(2, price_per_hour).Bind(3, worker_id).Run();
}

StatusOr<std::vector<CostDay>> SqlCostRecords::CostDays(int days) {
  TSR_ASSIGN_OR_RETURN(Database::Reader r, db_.BorrowReader());
  // The newest `days` rows, oldest first.
  TSR_ASSIGN_OR_RETURN(sql::Stmt s,
                       r->Prepare(kCostDays.Select("WHERE day IN (SELECT day FROM "
                                                   "cost_days WHERE day >= ?1 ORDER BY "
                                                   "day DESC LIMIT ?2) ORDER BY day")));
  s.Bind(1, wall_time::UtcDay(db_.Now() - int64_t{days - 1} * 86'400'000)).Bind(2, days);
  return ReadRows(s, kCostDays);
}

Status SqlCostRecords::AddToToday(double cost, double gpu_seconds) {
  TSR_ASSIGN_OR_RETURN(
      sql::Stmt s,
      db_.writer().Prepare("INSERT INTO cost_days (day, cost, gpu_seconds) VALUES (?1, ?2, "
                           "?3) ON CONFLICT(day) DO UPDATE SET cost = cost_days.cost + ?2, "
                           "gpu_seconds = cost_days.gpu_seconds + ?3"));
  return s.Bind(1, wall_time::UtcDay(db_.Now())).Bind(2, cost).Bind(3, gpu_seconds).Run();
}

}  // namespace tessera::store
