// The autoscaler's node requests (schema 18), written by the autoscaler thread.

#include "scheduler/store/sql/sql_autoscaler_node_records.h"

#include "scheduler/store/database.h"
#include "scheduler/store/sql/table.h"

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

}  // namespace

StatusOr<int64_t> SqlAutoscalerNodeRecords::AddAutoscalerNode(const AutoscalerNodeRecord& node) {
  Database::WriteLock lock(db_);
  TSR_ASSIGN_OR_RETURN(
      sql::Stmt s,
      db_.writer().Prepare("INSERT INTO autoscaler_nodes (node_group, worker_name, "
                           "provider_id, requested_at, draining) VALUES (?1, ?2, ?3, ?4, ?5) "
                           "RETURNING id"));
  s.Bind(1, node.group)
      .Bind(2, node.worker_name)
      .Bind(3, node.provider_id)
      .Bind(4, node.requested_at_ms)
      .Bind(5, node.draining ? 1 : 0);
  return sql::InsertReturningId(s);
}

Status SqlAutoscalerNodeRecords::UpdateAutoscalerNode(const AutoscalerNodeRecord& node) {
  Database::WriteLock lock(db_);
  TSR_ASSIGN_OR_RETURN(sql::Stmt s,
                       db_.writer().Prepare("UPDATE autoscaler_nodes SET worker_name = ?1, "
                                            "provider_id = ?2, draining = ?3 WHERE id = ?4"));
  return s.Bind(1, node.worker_name)
      .Bind(2, node.provider_id)
      .Bind(3, node.draining ? 1 : 0)
      .Bind(4, node.id)
      .Run();
}

Status SqlAutoscalerNodeRecords::DeleteAutoscalerNode(int64_t id) {
  Database::WriteLock lock(db_);
  TSR_ASSIGN_OR_RETURN(sql::Stmt s,
                       db_.writer().Prepare("DELETE FROM autoscaler_nodes WHERE id = ?1"));
  return s.Bind(1, id).Run();
}

StatusOr<std::vector<AutoscalerNodeRecord>> SqlAutoscalerNodeRecords::ListAutoscalerNodes() {
  TSR_ASSIGN_OR_RETURN(Database::Reader r, db_.BorrowReader());
  return SelectAll(*r, kNodes, "ORDER BY id");
}

}  // namespace tessera::store
