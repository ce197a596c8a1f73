// The attempt history as the API reads it (a task's attempts with their logs) and the two writes
// made outside a task's transition: an attempt's end (recorded in the broker's WriteGroup) and
// its log.

#include "scheduler/store/sql/sql_attempt_records.h"

#include <nlohmann/json.hpp>

#include "scheduler/store/database.h"
#include "scheduler/store/sql/attempt_rows.h"

namespace tessera::store {
namespace {

// Columns of TaskLogRecord, as ReadAttempt expects them (the log is read separately).
const char* kAttemptColumns =
    "l.task_id, l.attempt, l.job_id, l.worker_id, w.name, l.outcome, l.at, l.failure_class, "
    "l.message, l.charged, l.gpus, l.started_at, l.ended_at";

TaskLogRecord ReadAttempt(const sql::Stmt& s) {
  TaskLogRecord r;
  r.task_id = s.Int(0);
  r.attempt = static_cast<int>(s.Int(1));
  r.job_id = s.Int(2);
  r.worker_id = s.OptInt(3);
  if (!s.IsNull(4)) r.worker_name = s.Text(4);
  r.outcome = s.Text(5);
  r.at_ms = s.Int(6);
  if (!s.IsNull(7)) r.failure_class = s.Text(7);
  if (!s.IsNull(8)) r.message = s.Text(8);
  if (!s.IsNull(9)) r.charged = s.Int(9) != 0;
  if (!s.IsNull(10)) {
    nlohmann::json gpus = nlohmann::json::parse(s.Text(10), nullptr, /*allow_exceptions=*/false);
    if (gpus.is_array()) {
      for (const auto& g : gpus) {
        if (g.is_number_integer()) r.gpus.push_back(g.get<int>());
      }
    }
  }
  r.started_at_ms = s.OptInt(11);
  r.ended_at_ms = s.OptInt(12);
  return r;
}

}  // namespace

Status SqlAttemptRecords::EndAttempt(int64_t task_id, int attempt, int64_t job_id,
                                     const AttemptEnd& end) {
  RecordedWrite write;
  write.kind = RecordedWrite::Kind::kAttemptEnd;
  write.id = task_id;
  write.attempt = attempt;
  write.job_id = job_id;
  write.outcome = end.outcome;
  write.failure_class = end.failure_class;
  write.message = end.message;
  write.count_failure = end.charged;
  if (db_.Record(std::move(write))) return Status::Ok();
  Database::WriteLock lock(db_);
  Status s =
      sql::InWriteTx(db_.writer(), [&] { return attempts_.Close(task_id, attempt, job_id, end); });
  if (!db_.InGroup()) attempts_.Settle(s.ok());
  return s;
}

Status SqlAttemptRecords::SaveTaskLog(const TaskLogRecord& log) {
  Database::WriteLock lock(db_);
  TSR_ASSIGN_OR_RETURN(
      sql::Stmt s,
      db_.writer().Prepare("INSERT INTO task_logs (task_id, attempt, job_id, worker_id, "
                           "outcome, at, log) VALUES (?1, ?2, ?3, ?4, 'running', ?5, ?6) "
                           "ON CONFLICT (task_id, attempt) DO UPDATE SET log = excluded.log, "
                           "worker_id = COALESCE(task_logs.worker_id, excluded.worker_id)"));
  return s.Bind(1, log.task_id)
      .Bind(2, log.attempt)
      .Bind(3, log.job_id)
      .Bind(4, log.worker_id)
      .Bind(5, db_.Now())
      .Bind(6, log.log)
      .Run();
}

StatusOr<std::vector<TaskLogRecord>> SqlAttemptRecords::TaskLogs(int64_t task_id) {
  TSR_ASSIGN_OR_RETURN(Database::Reader reader, db_.BorrowReader());
  TSR_ASSIGN_OR_RETURN(sql::Stmt s,
                       reader->Prepare(std::string("SELECT ") + kAttemptColumns +
                                       ", l.log FROM task_logs l LEFT JOIN workers w ON "
                                       "w.id = l.worker_id WHERE l.task_id = ? "
                                       "ORDER BY l.attempt"));
  s.Bind(1, task_id);
  std::vector<TaskLogRecord> out;
  for (;;) {
    TSR_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    TaskLogRecord r = ReadAttempt(s);
    r.log = s.Text(13);
    out.push_back(std::move(r));
  }
  return out;
}

std::map<std::pair<std::string, std::string>, int64_t> SqlAttemptRecords::AttemptCounts() const {
  return attempts_.Counts();
}

}  // namespace tessera::store
