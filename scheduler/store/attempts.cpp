// The attempt history (schema 26): one task_logs row per attempt of a task, from its lease's
// start (outcome 'running') to the one outcome it ends with -- done, failed (with a class and a
// message), lost, handed_back or canceled -- and its log. Rows are written by the broker thread
// inside its group commit (starts and done with the task's transition, other ends as recorded
// writes), so the history costs no transaction of its own; the first outcome recorded for an
// attempt stands.

#include <nlohmann/json.hpp>

#include "scheduler/store/store.h"

namespace tessera::store {
namespace {

const char* const kOutcomes[] = {"running", "done", "failed", "lost", "handed_back", "canceled"};

// Columns of TaskLogRecord, as ReadAttempt expects them (the log is read separately).
const char* kAttemptColumns =
    "l.task_id, l.attempt, l.job_id, l.worker_id, w.name, l.outcome, l.at, l.failure_class, "
    "l.message, l.charged, l.gpus, l.started_at, l.ended_at";

TaskLogRecord ReadAttempt(const Stmt& s) {
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

std::pair<std::string, std::string> CountKey(const AttemptEnd& end) {
  return {AttemptOutcomeName(end.outcome),
          end.outcome == AttemptOutcome::kFailed ? end.failure_class : std::string()};
}

}  // namespace

const char* AttemptOutcomeName(AttemptOutcome o) { return kOutcomes[static_cast<int>(o)]; }

Status Store::InsertAttempt(int64_t task_id, int attempt, int64_t job_id,
                            std::optional<int64_t> worker_id, const std::vector<int>& gpus) {
  // An attempt number is never reused (a retry continues the count): an existing row is kept.
  TSR_ASSIGN_OR_RETURN(
      Stmt s, writer_->Prepare("INSERT INTO task_logs (task_id, attempt, job_id, worker_id, "
                               "outcome, gpus, started_at, at, log) "
                               "VALUES (?1, ?2, ?3, ?4, 'running', ?5, ?6, ?6, '') "
                               "ON CONFLICT (task_id, attempt) DO NOTHING"));
  return s.Bind(1, task_id)
      .Bind(2, attempt)
      .Bind(3, job_id)
      .Bind(4, worker_id)
      .Bind(5, gpus.empty() ? std::optional<std::string>()
                            : std::optional<std::string>(nlohmann::json(gpus).dump()))
      .Bind(6, NowMs())
      .Run();
}

Status Store::CloseAttempt(int64_t task_id, int attempt, int64_t job_id, const AttemptEnd& end) {
  const int64_t now = NowMs();
  auto bind = [&](Stmt& s) {
    s.Bind(1, task_id).Bind(2, attempt).Bind(3, job_id).Bind(4, AttemptOutcomeName(end.outcome));
    if (end.failure_class.empty()) {
      s.BindNull(5);
    } else {
      s.Bind(5, end.failure_class);
    }
    s.Bind(6, end.message).Bind(7, end.charged ? 1 : 0).Bind(8, now);
  };
  // The common case: the attempt's row is there, running (one indexed UPDATE on the hot path).
  TSR_ASSIGN_OR_RETURN(Stmt u,
                       writer_->Prepare("UPDATE task_logs SET outcome = ?4, failure_class = ?5, "
                                        "message = ?6, charged = ?7, at = ?8, ended_at = ?8 "
                                        "WHERE task_id = ?1 AND attempt = ?2 AND "
                                        "outcome = 'running'"));
  bind(u);
  TSR_RETURN_IF_ERROR(u.Run());
  int changed = writer_->Changes();
  if (changed == 0) {
    // Already ended (the first outcome stands), or an attempt that started before the history
    // was kept: then it gets its row now.
    TSR_ASSIGN_OR_RETURN(
        Stmt i, writer_->Prepare("INSERT OR IGNORE INTO task_logs (task_id, attempt, job_id, "
                                 "outcome, failure_class, message, charged, at, ended_at, log) "
                                 "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8, '')"));
    bind(i);
    TSR_RETURN_IF_ERROR(i.Run());
    changed = writer_->Changes();
  }
  CountAttempts(end, changed);
  return Status::Ok();
}

Status Store::ReopenAttempt(int64_t task_id, int attempt) {
  TSR_ASSIGN_OR_RETURN(
      Stmt s, writer_->Prepare("UPDATE task_logs SET outcome = 'running', failure_class = NULL, "
                               "message = NULL, charged = NULL, ended_at = NULL, at = ?3 "
                               "WHERE task_id = ?1 AND attempt = ?2 AND outcome = 'lost'"));
  TSR_RETURN_IF_ERROR(s.Bind(1, task_id).Bind(2, attempt).Bind(3, NowMs()).Run());
  // The outcome counters follow the rows (the attempt will end again).
  if (writer_->Changes() > 0) attempts_pending_.emplace_back(CountKey(AttemptEnd{}), -1);
  return Status::Ok();
}

Status Store::CloseAttemptsWhere(const char* where, int64_t id, int64_t extra,
                                 const AttemptEnd& end) {
  TSR_ASSIGN_OR_RETURN(Stmt s,
                       writer_->Prepare("UPDATE task_logs SET outcome = ?3, failure_class = ?4, "
                                        "message = ?5, charged = ?6, at = ?7, ended_at = ?7 "
                                        "WHERE outcome = 'running' AND (" +
                                        std::string(where) + ")"));
  s.Bind(1, id).Bind(2, extra).Bind(3, AttemptOutcomeName(end.outcome));
  if (end.failure_class.empty()) {
    s.BindNull(4);
  } else {
    s.Bind(4, end.failure_class);
  }
  s.Bind(5, end.message).Bind(6, end.charged ? 1 : 0).Bind(7, NowMs());
  TSR_RETURN_IF_ERROR(s.Run());
  CountAttempts(end, writer_->Changes());
  return Status::Ok();
}

Status Store::CloseStaleAttempts() {
  // Only a task's current attempt can come back (its worker re-attaches it, or the next start
  // closes it); any other attempt still open lost its lease for good.
  AttemptEnd lost;
  lost.message = "its lease ended with a restart of the scheduler";
  return CloseAttemptsWhere(
      "NOT EXISTS (SELECT 1 FROM tasks t WHERE t.id = task_logs.task_id AND "
      "t.state IN ('queued', 'running') AND t.attempt = task_logs.attempt)",
      0, 0, lost);
}

Status Store::EndAttempt(int64_t task_id, int attempt, int64_t job_id, const AttemptEnd& end) {
  Deferred op;
  op.kind = Deferred::Kind::kAttemptEnd;
  op.id = task_id;
  op.attempt = attempt;
  op.job_id = job_id;
  op.outcome = end.outcome;
  op.failure_class = end.failure_class;
  op.message = end.message;
  op.count_failure = end.charged;
  if (Defer(std::move(op))) return Status::Ok();
  WriteLock lock(*this);
  Status s = InWriteTx(*writer_, [&] { return CloseAttempt(task_id, attempt, job_id, end); });
  if (!InGroup()) SettleAttemptCounts(s.ok());
  return s;
}

Status Store::SaveTaskLog(const TaskLogRecord& log) {
  WriteLock lock(*this);
  TSR_ASSIGN_OR_RETURN(
      Stmt s, writer_->Prepare("INSERT INTO task_logs (task_id, attempt, job_id, worker_id, "
                               "outcome, at, log) VALUES (?1, ?2, ?3, ?4, 'running', ?5, ?6) "
                               "ON CONFLICT (task_id, attempt) DO UPDATE SET log = excluded.log, "
                               "worker_id = COALESCE(task_logs.worker_id, excluded.worker_id)"));
  return s.Bind(1, log.task_id)
      .Bind(2, log.attempt)
      .Bind(3, log.job_id)
      .Bind(4, log.worker_id)
      .Bind(5, NowMs())
      .Bind(6, log.log)
      .Run();
}

StatusOr<std::vector<TaskLogRecord>> Store::TaskLogs(int64_t task_id) {
  TSR_ASSIGN_OR_RETURN(Reader reader, BorrowReader());
  TSR_ASSIGN_OR_RETURN(Stmt s, reader->Prepare(std::string("SELECT ") + kAttemptColumns +
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

Status Store::LoadAttemptCounts() {
  WriteLock lock(*this);
  TSR_ASSIGN_OR_RETURN(Stmt s,
                       writer_->Prepare("SELECT outcome, CASE WHEN outcome = 'failed' THEN "
                                        "COALESCE(failure_class, '') ELSE '' END, count(*) "
                                        "FROM task_logs WHERE outcome != 'running' GROUP BY 1, 2"));
  std::lock_guard<std::mutex> counts(attempt_counts_mu_);
  attempt_counts_.clear();
  for (;;) {
    TSR_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    attempt_counts_[{s.Text(0), s.Text(1)}] += s.Int(2);
  }
  return Status::Ok();
}

void Store::CountAttempts(const AttemptEnd& end, int64_t n) {
  if (n > 0) attempts_pending_.emplace_back(CountKey(end), n);
}

void Store::SettleAttemptCounts(bool committed) {
  if (committed && !attempts_pending_.empty()) {
    std::lock_guard<std::mutex> counts(attempt_counts_mu_);
    for (const auto& [key, n] : attempts_pending_) attempt_counts_[key] += n;
  }
  attempts_pending_.clear();
}

std::map<std::pair<std::string, std::string>, int64_t> Store::AttemptCounts() const {
  std::lock_guard<std::mutex> counts(attempt_counts_mu_);
  return attempt_counts_;
}

}  // namespace tessera::store
