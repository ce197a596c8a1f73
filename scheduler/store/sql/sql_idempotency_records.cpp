// The store's Idempotency-Key records (schema 25): which POST first created what, for a day, so
// a client that lost an answer and retries gets the first result instead of a second job.

#include "scheduler/store/sql/sql_idempotency_records.h"

#include "scheduler/store/database.h"

namespace tessera::store {

namespace {
constexpr int64_t kKeptMs = 24 * 3600 * 1000;
}  // namespace

Status InsertIdempotentRequest(Database& db, const IdempotentRequest& request) {
  const int64_t now = request.created_at_ms > 0 ? request.created_at_ms : db.Now();
  sql::Db& writer = db.writer();
  TSR_ASSIGN_OR_RETURN(sql::Stmt prune,
                       writer.Prepare("DELETE FROM idempotent_requests WHERE created_at < ?"));
  TSR_RETURN_IF_ERROR(prune.Bind(1, now - kKeptMs).Run());
  // The caller holds the write lock inside one transaction: nobody can insert between these.
  TSR_ASSIGN_OR_RETURN(
      sql::Stmt taken,
      writer.Prepare("SELECT 1 FROM idempotent_requests WHERE user_name = ? AND key = ?"));
  taken.Bind(1, request.user).Bind(2, request.key);
  TSR_ASSIGN_OR_RETURN(bool exists, taken.Step());
  if (exists) {
    return Status::AlreadyExists("Idempotency-Key '" + request.key + "' was used a moment ago");
  }
  TSR_ASSIGN_OR_RETURN(
      sql::Stmt ins,
      writer.Prepare("INSERT INTO idempotent_requests (user_name, key, request_hash, "
                     "resource, resource_id, created_at) VALUES (?, ?, ?, ?, ?, ?)"));
  return ins.Bind(1, request.user)
      .Bind(2, request.key)
      .Bind(3, request.request_hash)
      .Bind(4, request.resource)
      .Bind(5, request.resource_id)
      .Bind(6, now)
      .Run();
}

Status SqlIdempotencyRecords::RecordIdempotentRequest(const IdempotentRequest& request) {
  Database::WriteLock lock(db_);
  sql::Transaction tx(db_.writer());
  TSR_RETURN_IF_ERROR(tx.begin_status());
  TSR_RETURN_IF_ERROR(InsertIdempotentRequest(db_, request));
  return tx.Commit();
}

StatusOr<std::optional<IdempotentRequest>> SqlIdempotencyRecords::FindIdempotentRequest(
    const std::string& user, const std::string& key, int64_t max_age_ms) {
  TSR_ASSIGN_OR_RETURN(Database::Reader r, db_.BorrowReader());
  TSR_ASSIGN_OR_RETURN(
      sql::Stmt s,
      r->Prepare("SELECT request_hash, resource, resource_id, created_at FROM "
                 "idempotent_requests WHERE user_name = ? AND key = ? AND created_at >= ?"));
  s.Bind(1, user).Bind(2, key).Bind(3, db_.Now() - max_age_ms);
  TSR_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return std::optional<IdempotentRequest>();
  IdempotentRequest out;
  out.user = user;
  out.key = key;
  out.request_hash = s.Text(0);
  out.resource = s.Text(1);
  out.resource_id = s.Int(2);
  out.created_at_ms = s.Int(3);
  return std::optional<IdempotentRequest>(std::move(out));
}

}  // namespace tessera::store
