// The attempt history's rows (schema 26): one task_logs row per attempt of a task, from its
// lease's start (outcome 'running') to the one outcome it ends with -- done, failed (with a class
// and a message), lost, handed_back or canceled -- and its log. Rows are written by the broker
// thread inside its group commit (starts and done with the task's transition, other ends as
// recorded writes), so the history costs no transaction of its own; the first outcome recorded
// for an attempt stands.

#include "scheduler/store/sql/attempt_rows.h"

#include <nlohmann/json.hpp>

#include "scheduler/store/database.h"

namespace tessera::store {
namespace {

const char* const kOutcomes[] = {"running", "done", "failed", "lost", "handed_back", "canceled"};

std::pair<std::string, std::string> CountKey(const AttemptEnd& end) {
  return {AttemptOutcomeName(end.outcome),
          end.outcome == AttemptOutcome::kFailed ? end.failure_class : std::string()};
}

}  // namespace

const char* AttemptOutcomeName(AttemptOutcome o) { return kOutcomes[static_cast<int>(o)]; }

Status AttemptRows::Insert(int64_t task_id, int attempt, int64_t job_id,
                           std::optional<int64_t> worker_id, const std::vector<int>& gpus) {
  // An attempt number is never reused (a retry continues the count): an existing row is kept.
  TSR_ASSIGN_OR_RETURN(
      sql::Stmt s,
      db_.writer().Prepare("INSERT INTO task_logs (task_id, attempt, job_id, worker_id, "
                           "outcome, gpus, started_at, at, log) "
                           "VALUES (?1, ?2, ?3, ?4, 'running', ?5, ?6, ?6, '') "
                           "ON CONFLICT (task_id, attempt) DO NOTHING"));
  return s.Bind(1, task_id)
      .Bind(2, attempt)
      .Bind(3, job_id)
      .Bind(4, worker_id)
      .Bind(5, gpus.empty() ? std::optional<std::string>()
                            : std::optional<std::string>(nlohmann::json(gpus).dump()))
      .Bind(6, db_.Now())
      .Run();
}

Status AttemptRows::Close(int64_t task_id, int attempt, int64_t job_id, const AttemptEnd& end) {
  const int64_t now = db_.Now();
  auto bind = [&](sql::Stmt& s) {
    s.Bind(1, task_id).Bind(2, attempt).Bind(3, job_id).Bind(4, AttemptOutcomeName(end.outcome));
    if (end.failure_class.empty()) {
      s.BindNull(5);
    } else {
      s.Bind(5, end.failure_class);
    }
    s.Bind(6, end.message).Bind(7, end.charged ? 1 : 0).Bind(8, now);
  };
  sql::Db& writer = db_.writer();
  // The common case: the attempt's row is there, running (one indexed UPDATE on the hot path).
  TSR_ASSIGN_OR_RETURN(sql::Stmt u,
                       writer.Prepare("UPDATE task_logs SET outcome = ?4, failure_class = ?5, "
                                      "message = ?6, charged = ?7, at = ?8, ended_at = ?8 "
                                      "WHERE task_id = ?1 AND attempt = ?2 AND "
                                      "outcome = 'running'"));
  bind(u);
  TSR_RETURN_IF_ERROR(u.Run());
  int changed = writer.Changes();
  if (changed == 0) {
    // Already ended (the first outcome stands), or an attempt that started before the history
    // was kept: then it gets its row now.
    TSR_ASSIGN_OR_RETURN(
        sql::Stmt i, writer.Prepare("INSERT INTO task_logs (task_id, attempt, job_id, "
                                    "outcome, failure_class, message, charged, at, ended_at, log) "
                                    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8, '') "
                                    "ON CONFLICT (task_id, attempt) DO NOTHING"));
    bind(i);
    TSR_RETURN_IF_ERROR(i.Run());
    changed = writer.Changes();
  }
  Count(end, changed);
  return Status::Ok();
}

Status AttemptRows::Reopen(int64_t task_id, int attempt) {
  sql::Db& writer = db_.writer();
  TSR_ASSIGN_OR_RETURN(
      sql::Stmt s, writer.Prepare("UPDATE task_logs SET outcome = 'running', failure_class = NULL, "
                                  "message = NULL, charged = NULL, ended_at = NULL, at = ?3 "
                                  "WHERE task_id = ?1 AND attempt = ?2 AND outcome = 'lost'"));
  TSR_RETURN_IF_ERROR(s.Bind(1, task_id).Bind(2, attempt).Bind(3, db_.Now()).Run());
  // The outcome counters follow the rows (the attempt will end again).
  if (writer.Changes() > 0) pending_.emplace_back(CountKey(AttemptEnd{}), -1);
  return Status::Ok();
}

Status AttemptRows::CloseWhere(const char* where, int64_t id, int64_t extra,
                               const AttemptEnd& end) {
  sql::Db& writer = db_.writer();
  TSR_ASSIGN_OR_RETURN(sql::Stmt s,
                       writer.Prepare("UPDATE task_logs SET outcome = ?3, failure_class = ?4, "
                                      "message = ?5, charged = ?6, at = ?7, ended_at = ?7 "
                                      "WHERE outcome = 'running' AND (" +
                                      std::string(where) + ")"));
  s.Bind(1, id).Bind(2, extra).Bind(3, AttemptOutcomeName(end.outcome));
  if (end.failure_class.empty()) {
    s.BindNull(4);
  } else {
    s.Bind(4, end.failure_class);
  }
  s.Bind(5, end.message).Bind(6, end.charged ? 1 : 0).Bind(7, db_.Now());
  TSR_RETURN_IF_ERROR(s.Run());
  Count(end, writer.Changes());
  return Status::Ok();
}

Status AttemptRows::CloseStale() {
  // Only a task's current attempt can come back (its worker re-attaches it, or the next start
  // closes it); any other attempt still open lost its lease for good.
  AttemptEnd lost;
  lost.message = "its lease ended with a restart of the scheduler";
  return CloseWhere(
      "NOT EXISTS (SELECT 1 FROM tasks t WHERE t.id = task_logs.task_id AND "
      "t.state IN ('queued', 'running') AND t.attempt = task_logs.attempt)",
      0, 0, lost);
}

Status AttemptRows::LoadCounts() {
  Database::WriteLock lock(db_);
  TSR_ASSIGN_OR_RETURN(sql::Stmt s,
                       db_.writer().Prepare("SELECT outcome, CASE WHEN outcome = 'failed' THEN "
                                            "COALESCE(failure_class, '') ELSE '' END, count(*) "
                                            "FROM task_logs WHERE outcome != 'running' "
                                            "GROUP BY 1, 2"));
  std::lock_guard<std::mutex> counts(counts_mu_);
  counts_.clear();
  for (;;) {
    TSR_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    counts_[{s.Text(0), s.Text(1)}] += s.Int(2);
  }
  return Status::Ok();
}

void AttemptRows::Count(const AttemptEnd& end, int64_t n) {
  if (n > 0) pending_.emplace_back(CountKey(end), n);
}

void AttemptRows::Settle(bool committed) {
  if (committed && !pending_.empty()) {
    std::lock_guard<std::mutex> counts(counts_mu_);
    for (const auto& [key, n] : pending_) counts_[key] += n;
  }
  pending_.clear();
}

std::map<std::pair<std::string, std::string>, int64_t> AttemptRows::Counts() const {
  std::lock_guard<std::mutex> counts(counts_mu_);
  return counts_;
}

}  // namespace tessera::store
