#include "scheduler/store/sql/sql_engine.h"

namespace tessera::store::sql {

const char* EngineName(Engine engine) {
  return engine == Engine::kSqlite ? "sqlite" : "postgresql";
}

Status Stmt::Run() {
  for (;;) {
    TSR_ASSIGN_OR_RETURN(bool row, Step());
    if (!row) return Status::Ok();
  }
}

Status Transaction::Commit() {
  TSR_RETURN_IF_ERROR(begin_);
  Status s = db_.Commit();
  if (s.ok()) done_ = true;
  return s;
}

StatusOr<int64_t> InsertReturningId(Stmt& insert) {
  TSR_ASSIGN_OR_RETURN(bool row, insert.Step());
  if (!row) return Status::Internal("an INSERT ... RETURNING id gave no row");
  const int64_t id = insert.Int(0);
  TSR_RETURN_IF_ERROR(insert.Run());
  return id;
}

}  // namespace tessera::store::sql
