// Task transitions, fenced by attempt, with the attempt rows and job counters that follow them;
// and the writes a WriteGroup recorded, applied together at its commit.

#include "scheduler/store/sql/task_transitions.h"

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include "scheduler/store/sql/attempt_rows.h"
#include "scheduler/store/sql/rows.h"
#include "scheduler/store/sql/sql_worker_records.h"

namespace tessera::store {

StatusOr<TaskTransitions::Fence> TaskTransitions::ReadFence(int64_t task_id) {
  TSR_ASSIGN_OR_RETURN(sql::Stmt q,
                       db_.writer().Prepare("SELECT state, attempt, job_id, live_attempts "
                                            "FROM tasks WHERE id = ?"));
  q.Bind(1, task_id);
  TSR_ASSIGN_OR_RETURN(bool found, q.Step());
  if (!found) return Status::NotFound("task " + std::to_string(task_id) + " does not exist");
  Fence f;
  TSR_ASSIGN_OR_RETURN(f.state, ParseEnum<TaskState>(q.Text(0), kTaskStates));
  f.attempt = static_cast<int>(q.Int(1));
  f.job_id = q.Int(2);
  f.live = nlohmann::json::parse(q.Text(3)).get<std::vector<int>>();
  return f;
}

Status TaskTransitions::StaleAttempt(int64_t task_id, int attempt, const Fence& f) {
  return Status::FailedPrecondition("task " + std::to_string(task_id) + " attempt " +
                                    std::to_string(attempt) + " is stale (task is " +
                                    TaskStateName(f.state) + ", attempt " +
                                    std::to_string(f.attempt) + ")");
}

Status TaskTransitions::Move(int64_t task_id, int attempt, TaskState to, const std::string& message,
                             bool count_failure, std::optional<int64_t> worker_id, int64_t job_id,
                             bool reattach, std::unordered_map<int64_t, CountDeltas>* counts,
                             const std::vector<int>& gpus) {
  // Fencing, in the UPDATE itself: a start names a queued task's next attempt (a re-attach its
  // current one); everything else must name a live attempt of a running task (almost always
  // the only one, which the plain comparison settles without parsing JSON).
  const bool starting = (to == TaskState::kRunning);
  const TaskState from = starting ? TaskState::kQueued : TaskState::kRunning;
  const std::string only_attempt = "[" + std::to_string(attempt) + "]";
  const int64_t now = db_.Now();
  sql::Db& writer = db_.writer();
  // Two statements, one per direction, so each stays a plain indexed UPDATE (this is the
  // dispatch hot path: every task passes through both). No RETURNING: SQLite runs it through a
  // temporary table, which cost as much again; the caller knows the job (else one lookup).
  // The end of an attempt is fenced by the live attempts, a JSON array in a TEXT column: one
  // attempt is compared as text ("[N]"), several with each engine's JSON function.
  static constexpr sql::DialectSql kEnd{
      "UPDATE tasks SET state = ?8, message = ?3, live_attempts = '[]', worker_id = ?5, "
      "failures = failures + ?7, failures_total = failures_total + ?7, progress = ?9, "
      "finished_at = ?6 WHERE id = ?1 AND state = 'running' AND (live_attempts = ?4 OR EXISTS "
      "(SELECT 1 FROM json_each(live_attempts) WHERE value = ?2))",
      "UPDATE tasks SET state = ?8, message = ?3, live_attempts = '[]', worker_id = ?5, "
      "failures = failures + ?7, failures_total = failures_total + ?7, progress = ?9, "
      "finished_at = ?6 WHERE id = ?1 AND state = 'running' AND (live_attempts = ?4 OR "
      "live_attempts::jsonb @> jsonb_build_array(?2))"};
  TSR_ASSIGN_OR_RETURN(
      sql::Stmt u,
      starting ? writer.Prepare("UPDATE tasks SET state = 'running', attempt = ?2, message = ?3, "
                                "live_attempts = ?4, worker_id = ?5, progress = 0, "
                                "status_line = '', started_at = ?6, finished_at = NULL "
                                "WHERE id = ?1 AND state = 'queued' AND attempt = ?2 - ?7")
               : writer.Prepare(kEnd));
  u.Bind(1, task_id).Bind(2, attempt).Bind(3, message).Bind(4, only_attempt).Bind(5, worker_id);
  if (starting) {
    if (attempt < 1) return Status::InvalidArgument("attempt: must be at least 1");
    u.Bind(6, now).Bind(7, reattach ? 0 : 1);
  } else {
    const bool terminal = IsTerminal(to);
    u.Bind(6, terminal ? std::optional<int64_t>(now) : std::nullopt);
    u.Bind(7, count_failure ? 1 : 0).Bind(8, TaskStateName(to));
    u.Bind(9, to == TaskState::kDone ? 1.0 : 0.0);
  }
  TSR_RETURN_IF_ERROR(u.Run());
  if (writer.Changes() != 1) {
    TSR_ASSIGN_OR_RETURN(Fence fence, ReadFence(task_id));  // NotFound if there is none
    return StaleAttempt(task_id, attempt, fence);
  }
  if (job_id <= 0) {
    TSR_ASSIGN_OR_RETURN(sql::Stmt j, writer.Prepare("SELECT job_id FROM tasks WHERE id = ?"));
    j.Bind(1, task_id);
    TSR_ASSIGN_OR_RETURN(bool row, j.Step());
    if (!row) return Status::NotFound("task " + std::to_string(task_id) + " does not exist");
    job_id = j.Int(0);
  }
  // The attempt history, in the same transaction: a start opens the attempt (an older one still
  // open lost its lease with a restart: its worker did not take it back); done closes it, and
  // the end of the task closes any copy the broker did not.
  // A first attempt has no other (a backup is always a later one): the dispatch hot path pays
  // one INSERT at the start and one UPDATE at done.
  if (starting && !reattach) {
    if (attempt > 1) {
      AttemptEnd superseded;
      superseded.message = "its lease ended with a restart of the scheduler";
      TSR_RETURN_IF_ERROR(
          attempts_.CloseWhere("task_id = ?1 AND attempt < ?2", task_id, attempt, superseded));
    }
    TSR_RETURN_IF_ERROR(attempts_.Insert(task_id, attempt, job_id, worker_id, gpus));
  } else if (starting) {
    // Its worker took the lease back (it was recorded lost when the worker went silent).
    TSR_RETURN_IF_ERROR(attempts_.Reopen(task_id, attempt));
  } else if (IsTerminal(to)) {
    if (to == TaskState::kDone) {
      AttemptEnd done;
      done.outcome = AttemptOutcome::kDone;
      TSR_RETURN_IF_ERROR(attempts_.Close(task_id, attempt, job_id, done));
    }
    if (attempt > 1) {
      AttemptEnd rest;
      rest.outcome = AttemptOutcome::kCanceled;
      rest.message = "the task ended (" + std::string(TaskStateName(to)) + ") without this copy";
      TSR_RETURN_IF_ERROR(attempts_.CloseWhere("task_id = ?1", task_id, 0, rest));
    }
  }
  if (to == TaskState::kFailed) {
    TSR_ASSIGN_OR_RETURN(sql::Stmt e,
                         writer.Prepare("UPDATE jobs SET error = COALESCE(error, ?) WHERE id = ?"));
    TSR_RETURN_IF_ERROR(
        e.Bind(1, "task " + std::to_string(task_id) + " failed: " + message).Bind(2, job_id).Run());
  }
  // Last, so a failed step above leaves no count behind.
  CountDeltas delta;
  CountDeltas& d = counts ? (*counts)[job_id] : delta;
  d.Add(from, -1);
  d.Add(to, +1);
  return counts ? Status::Ok() : ApplyCounts(job_id, delta);
}

void TaskTransitions::CountDeltas::Add(TaskState s, int64_t n) {
  switch (s) {
    case TaskState::kQueued:
      queued += n;
      break;
    case TaskState::kRunning:
      running += n;
      break;
    case TaskState::kDone:
      done += n;
      break;
    case TaskState::kFailed:
      failed += n;
      break;
    case TaskState::kCanceled:
      canceled += n;
      break;
  }
}

Status TaskTransitions::ApplyCounts(int64_t job_id, const CountDeltas& d) {
  TSR_ASSIGN_OR_RETURN(
      sql::Stmt c,
      db_.writer().Prepare("UPDATE jobs SET tasks_queued = tasks_queued + ?1, "
                           "tasks_running = tasks_running + ?2, tasks_done = tasks_done + ?3, "
                           "tasks_failed = tasks_failed + ?4, "
                           "tasks_canceled = tasks_canceled + ?5 WHERE id = ?6 "
                           "RETURNING state, started_at IS NULL, tasks_total, tasks_running, "
                           "tasks_done, tasks_failed, tasks_canceled"));
  c.Bind(1, d.queued).Bind(2, d.running).Bind(3, d.done).Bind(4, d.failed).Bind(5, d.canceled);
  c.Bind(6, job_id);
  TSR_ASSIGN_OR_RETURN(bool row, c.Step());
  if (!row) return Status::Ok();  // the job is gone
  // The job's state follows its counters; most changes (leases starting or ending while others
  // run) leave it as it is, so it is recomputed only when the counters say it moves.
  const std::string state = c.Text(0);
  const bool unstarted = c.Int(1) != 0;
  const int64_t total = c.Int(2), running = c.Int(3), done = c.Int(4), failed = c.Int(5),
                canceled = c.Int(6);
  const bool finished = done + failed + canceled == total;
  const bool active = running + done + failed > 0;
  const bool refresh =
      state != "canceled" &&
      (finished || (active ? state != "running" || (unstarted && running > 0) : state != "queued"));
  TSR_RETURN_IF_ERROR(c.Run());
  return refresh ? RefreshJobState(job_id) : Status::Ok();
}

Status TaskTransitions::RefreshJobState(int64_t job_id) {
  TSR_ASSIGN_OR_RETURN(
      sql::Stmt s, db_.writer().Prepare(
                       "UPDATE jobs SET "
                       "state = CASE WHEN state = 'canceled' THEN 'canceled' "
                       "  WHEN tasks_done + tasks_failed + tasks_canceled = tasks_total THEN "
                       "    CASE WHEN tasks_failed > 0 THEN 'failed' ELSE 'done' END "
                       "  WHEN tasks_running + tasks_done + tasks_failed > 0 THEN 'running' "
                       "  ELSE 'queued' END, "
                       "started_at = CASE WHEN started_at IS NULL AND tasks_running > 0 THEN ?1 "
                       "  ELSE started_at END, "
                       "finished_at = CASE WHEN state = 'canceled' THEN finished_at "
                       "  WHEN tasks_done + tasks_failed + tasks_canceled = tasks_total THEN "
                       "    COALESCE(finished_at, ?1) ELSE NULL END "
                       "WHERE id = ?2"));
  return s.Bind(1, db_.Now()).Bind(2, job_id).Run();
}

Status TaskTransitions::WriteProgress(int64_t task_id, int attempt, double progress,
                                      const std::string& status_line) {
  TSR_ASSIGN_OR_RETURN(
      sql::Stmt s,
      db_.writer().Prepare("UPDATE tasks SET progress = ?, status_line = ? WHERE id = ? "
                           "AND attempt = ? AND state = 'running'"));
  return s.Bind(1, progress).Bind(2, status_line).Bind(3, task_id).Bind(4, attempt).Run();
}

// ---- the group's recorded writes --------------------------------------------------------------

Status TaskTransitions::Apply(std::vector<RecordedWrite>& writes) {
  std::unordered_map<int64_t, CountDeltas> counts;
  for (const RecordedWrite& w : writes) {
    Status s;
    switch (w.kind) {
      case RecordedWrite::Kind::kTransition:
        s = Move(w.id, w.attempt, w.to, w.message, w.count_failure, w.worker_id, w.job_id,
                 /*reattach=*/false, &counts, w.gpus);
        break;
      case RecordedWrite::Kind::kAttemptEnd:
        s = attempts_.Close(w.id, w.attempt, w.job_id,
                            AttemptEnd{w.outcome, w.failure_class, w.message, w.count_failure});
        break;
      case RecordedWrite::Kind::kWorkerState:
        s = WriteWorkerState(db_, w.id, w.worker_state);
        break;
      case RecordedWrite::Kind::kProgress:
        s = WriteProgress(w.id, w.attempt, w.progress, w.message);
        break;
    }
    if (s.code() == StatusCode::kFailedPrecondition || s.code() == StatusCode::kNotFound) {
      spdlog::error("store: a recorded write was refused and skipped: {}", s.ToString());
    } else if (!s.ok()) {
      return s;
    }
  }
  writes.clear();
  for (const auto& [job_id, delta] : counts) TSR_RETURN_IF_ERROR(ApplyCounts(job_id, delta));
  return Status::Ok();
}

void TaskTransitions::Settle(bool committed) { attempts_.Settle(committed); }

}  // namespace tessera::store
