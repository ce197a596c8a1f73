// The store's cost records (schema 18): GPU-seconds and money per task, job, worker and UTC day,
// and the autoscaler's node requests. Costs are written by the broker thread inside its group
// commit; the autoscaler's nodes by the autoscaler thread.

#include <ctime>

#include "scheduler/store/store.h"
#include "scheduler/store/table.h"

namespace tessera::store {
namespace {

constexpr Column<AutoscalerNodeRecord> kNodeColumns[] = {
    {"id", &AutoscalerNodeRecord::id},
    {"node_group", &AutoscalerNodeRecord::group},
    {"worker_name", &AutoscalerNodeRecord::worker_name},
    {"provider_id", &AutoscalerNodeRecord::provider_id},
    {"requested_at", &AutoscalerNodeRecord::requested_at_ms},
    {"draining", &AutoscalerNodeRecord::draining}};
constexpr Table<AutoscalerNodeRecord> kNodes{"autoscaler_nodes", kNodeColumns};

constexpr Column<CostDay> kCostDayColumns[] = {
    {"day", &CostDay::day}, {"cost", &CostDay::cost}, {"gpu_seconds", &CostDay::gpu_seconds}};
constexpr Table<CostDay> kCostDays{"cost_days", kCostDayColumns};

// Adds to today's row.
Status AddToDay(Db& db, double cost, double gpu_seconds) {
  TSR_ASSIGN_OR_RETURN(
      Stmt s, db.Prepare("INSERT INTO cost_days (day, cost, gpu_seconds) VALUES (?1, ?2, ?3) ON "
                         "CONFLICT(day) DO UPDATE SET cost = cost + ?2, "
                         "gpu_seconds = gpu_seconds + ?3"));
  return s.Bind(1, UtcDay(NowMs())).Bind(2, cost).Bind(3, gpu_seconds).Run();
}

}  // namespace

Status Store::AddTaskCost(int64_t task_id, int64_t job_id, double gpu_seconds, double cost) {
  WriteLock lock(*this);
  return InWriteTx(*writer_, [&]() -> Status {
    TSR_ASSIGN_OR_RETURN(Stmt t, writer_->Prepare("UPDATE tasks SET gpu_seconds = gpu_seconds + "
                                                  "?1, cost = cost + ?2 WHERE id = ?3"));
    TSR_RETURN_IF_ERROR(t.Bind(1, gpu_seconds).Bind(2, cost).Bind(3, task_id).Run());
    TSR_ASSIGN_OR_RETURN(Stmt j, writer_->Prepare("UPDATE jobs SET gpu_seconds = gpu_seconds + "
                                                  "?1, cost = cost + ?2 WHERE id = ?3"));
    TSR_RETURN_IF_ERROR(j.Bind(1, gpu_seconds).Bind(2, cost).Bind(3, job_id).Run());
    // The day's money comes from the workers' registered time (AccrueWorkerCosts); a task's
    // share of it is already in there.
    return AddToDay(*writer_, 0, gpu_seconds);
  });
}

Status Store::AccrueWorkerCosts(const std::vector<std::pair<int64_t, double>>& worker_costs) {
  if (worker_costs.empty()) return Status::Ok();
  WriteLock lock(*this);
  return InWriteTx(*writer_, [&]() -> Status {
    double total = 0;
    for (const auto& [id, cost] : worker_costs) {
      TSR_ASSIGN_OR_RETURN(Stmt s,
                           writer_->Prepare("UPDATE workers SET cost = cost + ?1 WHERE id = ?2"));
      TSR_RETURN_IF_ERROR(s.Bind(1, cost).Bind(2, id).Run());
      total += cost;
    }
    return AddToDay(*writer_, total, 0);
  });
}

Status Store::SetWorkerPrice(int64_t worker_id, const std::string& node_group,
                             double price_per_hour) {
  WriteLock lock(*this);
  TSR_ASSIGN_OR_RETURN(
      Stmt s,
      writer_->Prepare("UPDATE workers SET node_group = ?1, price_per_hour = ?2 WHERE id = ?3"));
  return s.Bind(1, node_group).Bind(2, price_per_hour).Bind(3, worker_id).Run();
}

StatusOr<std::vector<CostDay>> Store::CostDays(int days) {
  TSR_ASSIGN_OR_RETURN(Reader r, BorrowReader());
  // The newest `days` rows, oldest first.
  TSR_ASSIGN_OR_RETURN(Stmt s, r->Prepare(kCostDays.Select("WHERE day IN (SELECT day FROM "
                                                           "cost_days WHERE day >= ?1 ORDER BY "
                                                           "day DESC LIMIT ?2) ORDER BY day")));
  s.Bind(1, UtcDay(NowMs() - int64_t{days - 1} * 86'400'000)).Bind(2, days);
  return ReadRows(s, kCostDays);
}

StatusOr<int64_t> Store::AddAutoscalerNode(const AutoscalerNodeRecord& node) {
  WriteLock lock(*this);
  TSR_ASSIGN_OR_RETURN(
      Stmt s, writer_->Prepare("INSERT INTO autoscaler_nodes (node_group, worker_name, "
                               "provider_id, requested_at, draining) VALUES (?1, ?2, ?3, ?4, ?5)"));
  TSR_RETURN_IF_ERROR(s.Bind(1, node.group)
                          .Bind(2, node.worker_name)
                          .Bind(3, node.provider_id)
                          .Bind(4, node.requested_at_ms)
                          .Bind(5, node.draining ? 1 : 0)
                          .Run());
  return writer_->LastInsertId();
}

Status Store::UpdateAutoscalerNode(const AutoscalerNodeRecord& node) {
  WriteLock lock(*this);
  TSR_ASSIGN_OR_RETURN(Stmt s, writer_->Prepare("UPDATE autoscaler_nodes SET worker_name = ?1, "
                                                "provider_id = ?2, draining = ?3 WHERE id = ?4"));
  return s.Bind(1, node.worker_name)
      .Bind(2, node.provider_id)
      .Bind(3, node.draining ? 1 : 0)
      .Bind(4, node.id)
      .Run();
}

Status Store::DeleteAutoscalerNode(int64_t id) {
  WriteLock lock(*this);
  TSR_ASSIGN_OR_RETURN(Stmt s, writer_->Prepare("DELETE FROM autoscaler_nodes WHERE id = ?1"));
  return s.Bind(1, id).Run();
}

StatusOr<std::vector<AutoscalerNodeRecord>> Store::ListAutoscalerNodes() {
  TSR_ASSIGN_OR_RETURN(Reader r, BorrowReader());
  return SelectAll(*r, kNodes, "ORDER BY id");
}

}  // namespace tessera::store
