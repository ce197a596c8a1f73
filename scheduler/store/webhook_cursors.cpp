// Webhook deliveries: each receiver's cursor into the events table (schema 30), and the events
// after it. The notifier (scheduler/events/webhooks.h) reads, sends, then moves the cursor: an
// event is sent at least once, and again after a restart if its acknowledgement was not stored.

#include <nlohmann/json.hpp>

#include "scheduler/store/rows.h"
#include "scheduler/store/store.h"

namespace tessera::store {

StatusOr<int64_t> Store::WebhookCursor(const std::string& receiver) {
  WriteLock lock(*this);
  int64_t cursor = 0;
  Status s = InWriteTx(*writer_, [&]() -> Status {
    TSR_ASSIGN_OR_RETURN(Stmt ins,
                         writer_->Prepare("INSERT OR IGNORE INTO webhook_cursors (receiver, "
                                          "last_event_id) SELECT ?, COALESCE(MAX(id), 0) "
                                          "FROM events"));
    TSR_RETURN_IF_ERROR(ins.Bind(1, receiver).Run());
    TSR_ASSIGN_OR_RETURN(Stmt q, writer_->Prepare("SELECT last_event_id FROM webhook_cursors "
                                                  "WHERE receiver = ?"));
    q.Bind(1, receiver);
    TSR_ASSIGN_OR_RETURN(bool row, q.Step());
    if (row) cursor = q.Int(0);
    return Status::Ok();
  });
  TSR_RETURN_IF_ERROR(s);
  return cursor;
}

Status Store::SetWebhookCursor(const std::string& receiver, int64_t event_id) {
  WriteLock lock(*this);
  TSR_ASSIGN_OR_RETURN(Stmt s, writer_->Prepare("UPDATE webhook_cursors SET last_event_id = ? "
                                                "WHERE receiver = ? AND last_event_id < ?"));
  return s.Bind(1, event_id).Bind(2, receiver).Bind(3, event_id).Run();
}

StatusOr<std::vector<EventRecord>> Store::EventsAfter(int64_t after_id,
                                                      const std::vector<std::string>& kinds,
                                                      int limit) {
  TSR_ASSIGN_OR_RETURN(Reader r, BorrowReader());
  TSR_ASSIGN_OR_RETURN(
      Stmt s, r->Prepare("SELECT id, at, job_id, task_id, worker_id, kind, message FROM events "
                         "WHERE id > ?1 AND kind IN (SELECT value FROM json_each(?2)) "
                         "ORDER BY id LIMIT ?3"));
  s.Bind(1, after_id).Bind(2, nlohmann::json(kinds).dump()).Bind(3, limit);
  std::vector<EventRecord> out;
  for (;;) {
    TSR_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return out;
    EventRecord e;
    e.id = s.Int(0);
    e.at_ms = s.Int(1);
    e.job_id = s.OptInt(2);
    e.task_id = s.OptInt(3);
    e.worker_id = s.OptInt(4);
    e.kind = s.Text(5);
    e.message = s.Text(6);
    out.push_back(std::move(e));
  }
}

}  // namespace tessera::store
