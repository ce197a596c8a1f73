// Webhook deliveries: each receiver's cursor into the events table (schema 30), and the events
// after it. The notifier (scheduler/events/webhooks.h) reads, sends, then moves the cursor: an
// event is sent at least once, and again after a restart if its acknowledgement was not stored.

#include "scheduler/store/sql/sql_webhook_cursors.h"

#include "scheduler/store/database.h"

namespace tessera::store {

StatusOr<int64_t> SqlWebhookCursors::WebhookCursor(const std::string& receiver) {
  Database::WriteLock lock(db_);
  int64_t cursor = 0;
  Status s = sql::InWriteTx(db_.writer(), [&]() -> Status {
    // (WHERE true: without it SQLite reads the ON of ON CONFLICT as the FROM's join condition.)
    TSR_ASSIGN_OR_RETURN(sql::Stmt ins,
                         db_.writer().Prepare("INSERT INTO webhook_cursors (receiver, "
                                              "last_event_id) SELECT ?, COALESCE(MAX(id), 0) "
                                              "FROM events WHERE true ON CONFLICT DO NOTHING"));
    TSR_RETURN_IF_ERROR(ins.Bind(1, receiver).Run());
    TSR_ASSIGN_OR_RETURN(sql::Stmt q,
                         db_.writer().Prepare("SELECT last_event_id FROM webhook_cursors "
                                              "WHERE receiver = ?"));
    q.Bind(1, receiver);
    TSR_ASSIGN_OR_RETURN(bool row, q.Step());
    if (row) cursor = q.Int(0);
    return Status::Ok();
  });
  TSR_RETURN_IF_ERROR(s);
  return cursor;
}

Status SqlWebhookCursors::SetWebhookCursor(const std::string& receiver, int64_t event_id) {
  Database::WriteLock lock(db_);
  TSR_ASSIGN_OR_RETURN(sql::Stmt s,
                       db_.writer().Prepare("UPDATE webhook_cursors SET last_event_id = ? "
                                            "WHERE receiver = ? AND last_event_id < ?"));
  return s.Bind(1, event_id).Bind(2, receiver).Bind(3, event_id).Run();
}

}  // namespace tessera::store
