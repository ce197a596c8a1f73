// The event log: rows of the events table, stamped with the store's clock. Job submissions are
// logged by the job changes themselves; a job's end by the schema's job_end_events trigger, which
// stamps it with SQLite's own clock (the trigger's SQL is part of the schema's migrations).

#include "scheduler/store/sql/sql_event_records.h"

#include <nlohmann/json.hpp>

#include "scheduler/store/database.h"

namespace tessera::store {

Status SqlEventRecords::AddEvent(std::optional<int64_t> job_id, std::optional<int64_t> task_id,
                                 std::optional<int64_t> worker_id, const std::string& kind,
                                 const std::string& message) {
  Database::WriteLock lock(db_);
  TSR_ASSIGN_OR_RETURN(
      sql::Stmt s, db_.writer().Prepare("INSERT INTO events (at, job_id, task_id, worker_id, kind, "
                                        "message) VALUES (?, ?, ?, ?, ?, ?)"));
  return s.Bind(1, db_.Now())
      .Bind(2, job_id)
      .Bind(3, task_id)
      .Bind(4, worker_id)
      .Bind(5, kind)
      .Bind(6, message)
      .Run();
}

StatusOr<std::vector<EventRecord>> SqlEventRecords::EventsAfter(
    int64_t after_id, const std::vector<std::string>& kinds, int limit) {
  TSR_ASSIGN_OR_RETURN(Database::Reader r, db_.BorrowReader());
  // The kinds wanted are one parameter, a JSON array, read as rows by each engine's JSON function.
  static constexpr sql::DialectSql kEventsOfKinds{
      "SELECT id, at, job_id, task_id, worker_id, kind, message FROM events WHERE id > ?1 AND "
      "kind IN (SELECT value FROM json_each(?2)) ORDER BY id LIMIT ?3",
      "SELECT id, at, job_id, task_id, worker_id, kind, message FROM events WHERE id > ?1 AND "
      "kind IN (SELECT jsonb_array_elements_text(?2::jsonb)) ORDER BY id LIMIT ?3"};
  TSR_ASSIGN_OR_RETURN(sql::Stmt s, r->Prepare(kEventsOfKinds));
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
