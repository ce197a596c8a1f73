// Task transitions, fenced by attempt: start, re-attach, finish, requeue, fail, backups, progress;
// the job counters and state that follow them; the unfinished tasks loaded at start-up.

#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>

#include "scheduler/store/rows.h"
#include "scheduler/store/store.h"

namespace tessera::store {

// ---- tasks ------------------------------------------------------------------------------------

StatusOr<std::vector<TaskRecord>> Store::LoadUnfinishedTasks(std::optional<int64_t> job_id,
                                                             bool requeue_running) {
  WriteLock lock(*this);
  std::set<int64_t> interrupted;
  if (!job_id && !requeue_running) {
    TSR_ASSIGN_OR_RETURN(Stmt r, writer_->Prepare("SELECT id FROM tasks WHERE state = 'running'"));
    for (;;) {
      TSR_ASSIGN_OR_RETURN(bool row, r.Step());
      if (!row) break;
      interrupted.insert(r.Int(0));
    }
  } else if (!job_id) {
    // Leases do not survive a restart: running tasks go back to the queue, uncharged (their
    // workers may re-attach them; see ReattachTask).
    Transaction tx(*writer_);
    TSR_RETURN_IF_ERROR(tx.begin_status());
    TSR_ASSIGN_OR_RETURN(Stmt r, writer_->Prepare("SELECT id FROM tasks WHERE state = 'running'"));
    for (;;) {
      TSR_ASSIGN_OR_RETURN(bool row, r.Step());
      if (!row) break;
      interrupted.insert(r.Int(0));
    }
    TSR_RETURN_IF_ERROR(CloseStaleAttempts());
    TSR_RETURN_IF_ERROR(writer_->Exec(
        "UPDATE jobs SET tasks_queued = tasks_queued + tasks_running, tasks_running = 0 "
        // A job with steps follows its steps' counters (the schema's trigger), never directly.
        "WHERE tasks_running > 0 AND renderer != 'steps'"));
    TSR_RETURN_IF_ERROR(
        writer_->Exec("UPDATE tasks SET state = 'queued', worker_id = NULL, progress = 0, "
                      "live_attempts = '[]', message = 'requeued: scheduler restarted' "
                      "WHERE state = 'running'"));
    Status committed = tx.Commit();
    if (!InGroup()) SettleAttemptCounts(committed.ok());
    TSR_RETURN_IF_ERROR(committed);
  }
  std::string sql = std::string("SELECT ") + kTaskColumns +
                    " FROM tasks t LEFT JOIN workers w ON w.id = t.worker_id "
                    "WHERE t.state IN ('queued', 'running')" +
                    // A job with steps: its steps' tasks.
                    (job_id ? " AND t.job_id IN (SELECT id FROM jobs WHERE id = ?1 OR "
                              "pipeline_id = ?1)"
                            : "") +
                    " ORDER BY t.job_id, t.idx";
  TSR_ASSIGN_OR_RETURN(Stmt s, writer_->Prepare(sql));
  if (job_id) s.Bind(1, *job_id);
  TSR_ASSIGN_OR_RETURN(std::vector<TaskRecord> tasks, CollectRows(s, &ReadTask));
  for (TaskRecord& t : tasks) t.interrupted = interrupted.count(t.id) > 0;
  return tasks;
}

StatusOr<Store::TaskFence> Store::ReadFence(int64_t task_id) {
  TSR_ASSIGN_OR_RETURN(Stmt q, writer_->Prepare("SELECT state, attempt, job_id, live_attempts "
                                                "FROM tasks WHERE id = ?"));
  q.Bind(1, task_id);
  TSR_ASSIGN_OR_RETURN(bool found, q.Step());
  if (!found) return Status::NotFound("task " + std::to_string(task_id) + " does not exist");
  TaskFence f;
  TSR_ASSIGN_OR_RETURN(f.state, ParseEnum<TaskState>(q.Text(0), kTaskStates));
  f.attempt = static_cast<int>(q.Int(1));
  f.job_id = q.Int(2);
  f.live = nlohmann::json::parse(q.Text(3)).get<std::vector<int>>();
  return f;
}

Status Store::StaleAttempt(int64_t task_id, int attempt, const TaskFence& f) {
  return Status::FailedPrecondition("task " + std::to_string(task_id) + " attempt " +
                                    std::to_string(attempt) + " is stale (task is " +
                                    TaskStateName(f.state) + ", attempt " +
                                    std::to_string(f.attempt) + ")");
}

Status Store::TransitionTask(int64_t task_id, int attempt, TaskState to, const std::string& message,
                             bool count_failure, std::optional<int64_t> worker_id, int64_t job_id,
                             bool reattach, std::unordered_map<int64_t, Store::CountDeltas>* counts,
                             const std::vector<int>& gpus) {
  // Fencing, in the UPDATE itself: a start names a queued task's next attempt (a re-attach its
  // current one); everything else must name a live attempt of a running task (almost always
  // the only one, which the plain comparison settles without parsing JSON).
  const bool starting = (to == TaskState::kRunning);
  const TaskState from = starting ? TaskState::kQueued : TaskState::kRunning;
  const std::string only_attempt = "[" + std::to_string(attempt) + "]";
  const int64_t now = NowMs();
  // Two statements, one per direction, so each stays a plain indexed UPDATE (this is the
  // dispatch hot path: every task passes through both). No RETURNING: SQLite runs it through a
  // temporary table, which cost as much again; the caller knows the job (else one lookup).
  TSR_ASSIGN_OR_RETURN(
      Stmt u,
      starting
          ? writer_->Prepare("UPDATE tasks SET state = 'running', attempt = ?2, message = ?3, "
                             "live_attempts = ?4, worker_id = ?5, progress = 0, status_line = '', "
                             "started_at = ?6, "
                             "finished_at = NULL "
                             "WHERE id = ?1 AND state = 'queued' AND attempt = ?2 - ?7")
          : writer_->Prepare("UPDATE tasks SET state = ?8, message = ?3, live_attempts = '[]', "
                             "worker_id = ?5, failures = failures + ?7, "
                             "failures_total = failures_total + ?7, progress = ?9, "
                             "finished_at = ?6 "
                             "WHERE id = ?1 AND state = 'running' AND (live_attempts = ?4 OR "
                             "EXISTS (SELECT 1 FROM json_each(live_attempts) WHERE value = ?2))"));
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
  if (writer_->Changes() != 1) {
    TSR_ASSIGN_OR_RETURN(TaskFence fence, ReadFence(task_id));  // NotFound if there is none
    return StaleAttempt(task_id, attempt, fence);
  }
  if (job_id <= 0) {
    TSR_ASSIGN_OR_RETURN(Stmt j, writer_->Prepare("SELECT job_id FROM tasks WHERE id = ?"));
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
          CloseAttemptsWhere("task_id = ?1 AND attempt < ?2", task_id, attempt, superseded));
    }
    TSR_RETURN_IF_ERROR(InsertAttempt(task_id, attempt, job_id, worker_id, gpus));
  } else if (starting) {
    // Its worker took the lease back (it was recorded lost when the worker went silent).
    TSR_RETURN_IF_ERROR(ReopenAttempt(task_id, attempt));
  } else if (IsTerminal(to)) {
    if (to == TaskState::kDone) {
      AttemptEnd done;
      done.outcome = AttemptOutcome::kDone;
      TSR_RETURN_IF_ERROR(CloseAttempt(task_id, attempt, job_id, done));
    }
    if (attempt > 1) {
      AttemptEnd rest;
      rest.outcome = AttemptOutcome::kCanceled;
      rest.message = "the task ended (" + std::string(TaskStateName(to)) + ") without this copy";
      TSR_RETURN_IF_ERROR(CloseAttemptsWhere("task_id = ?1", task_id, 0, rest));
    }
  }
  if (to == TaskState::kFailed) {
    TSR_ASSIGN_OR_RETURN(
        Stmt e, writer_->Prepare("UPDATE jobs SET error = COALESCE(error, ?) WHERE id = ?"));
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

void Store::CountDeltas::Add(TaskState s, int64_t n) {
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

Status Store::ApplyCounts(int64_t job_id, const CountDeltas& d) {
  TSR_ASSIGN_OR_RETURN(
      Stmt c, writer_->Prepare("UPDATE jobs SET tasks_queued = tasks_queued + ?1, "
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

Status Store::RefreshJobState(int64_t job_id) {
  TSR_ASSIGN_OR_RETURN(
      Stmt s,
      writer_->Prepare("UPDATE jobs SET "
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
  return s.Bind(1, NowMs()).Bind(2, job_id).Run();
}

Status Store::Transition(int64_t task_id, int attempt, TaskState to, const std::string& message,
                         bool count_failure, std::optional<int64_t> worker_id, int64_t job_id,
                         bool reattach, const std::vector<int>& gpus) {
  if (!reattach) {
    Deferred op;
    op.kind = Deferred::Kind::kTransition;
    op.id = task_id;
    op.attempt = attempt;
    op.to = to;
    op.message = message;
    op.count_failure = count_failure;
    op.worker_id = worker_id;
    op.job_id = job_id;
    op.gpus = gpus;
    if (Defer(std::move(op))) return Status::Ok();
  }
  WriteLock lock(*this);
  Status s = InWriteTx(*writer_, [&] {
    return TransitionTask(task_id, attempt, to, message, count_failure, worker_id, job_id, reattach,
                          nullptr, gpus);
  });
  if (!InGroup()) SettleAttemptCounts(s.ok());
  return s;
}

Status Store::StartTask(int64_t task_id, int attempt, int64_t worker_id, int64_t job_id,
                        const std::vector<int>& gpus) {
  return Transition(task_id, attempt, TaskState::kRunning, "", false, worker_id, job_id,
                    /*reattach=*/false, gpus);
}

Status Store::ReattachTask(int64_t task_id, int attempt, int64_t worker_id, int64_t job_id) {
  return Transition(task_id, attempt, TaskState::kRunning, "re-attached", false, worker_id, job_id,
                    /*reattach=*/true);
}

Status Store::FinishTask(int64_t task_id, int attempt, int64_t worker_id, int64_t job_id) {
  return Transition(task_id, attempt, TaskState::kDone, "", false, worker_id, job_id);
}

Status Store::RequeueTask(int64_t task_id, int attempt, const std::string& message,
                          bool count_failure, int64_t job_id) {
  return Transition(task_id, attempt, TaskState::kQueued, message, count_failure, std::nullopt,
                    job_id);
}

Status Store::FailTask(int64_t task_id, int attempt, const std::string& message, int64_t job_id) {
  return Transition(task_id, attempt, TaskState::kFailed, message, true, std::nullopt, job_id);
}

Status Store::StartBackup(int64_t task_id, int attempt, std::optional<int64_t> worker_id,
                          const std::vector<int>& gpus) {
  WriteLock lock(*this);
  return InWriteTx(*writer_, [&]() -> Status {
    TSR_ASSIGN_OR_RETURN(TaskFence fence, ReadFence(task_id));
    if (fence.state != TaskState::kRunning || attempt != fence.attempt + 1) {
      return StaleAttempt(task_id, attempt, fence);
    }
    TSR_ASSIGN_OR_RETURN(Stmt u,
                         writer_->Prepare("UPDATE tasks SET attempt = ?1, "
                                          "live_attempts = json_insert(live_attempts, '$[#]', ?1) "
                                          "WHERE id = ?2"));
    TSR_RETURN_IF_ERROR(u.Bind(1, attempt).Bind(2, task_id).Run());
    return InsertAttempt(task_id, attempt, fence.job_id, worker_id, gpus);
  });
}

Status Store::EndCopy(int64_t task_id, int attempt, bool count_failure) {
  WriteLock lock(*this);
  return InWriteTx(*writer_, [&]() -> Status {
    TSR_ASSIGN_OR_RETURN(TaskFence fence, ReadFence(task_id));
    if (fence.state != TaskState::kRunning || !fence.IsLive(attempt) || fence.live.size() < 2) {
      return StaleAttempt(task_id, attempt, fence);
    }
    std::vector<int> live;
    for (int a : fence.live) {
      if (a != attempt) live.push_back(a);
    }
    TSR_ASSIGN_OR_RETURN(Stmt u, writer_->Prepare("UPDATE tasks SET live_attempts = ?1, "
                                                  "failures = failures + ?2, "
                                                  "failures_total = failures_total + ?2 "
                                                  "WHERE id = ?3"));
    return u.Bind(1, nlohmann::json(live).dump())
        .Bind(2, count_failure ? 1 : 0)
        .Bind(3, task_id)
        .Run();
  });
}

Status Store::SetTaskProgress(int64_t task_id, int attempt, double progress,
                              const std::string& status_line) {
  Deferred op;
  op.kind = Deferred::Kind::kProgress;
  op.id = task_id;
  op.attempt = attempt;
  op.progress = progress;
  op.message = status_line;
  if (Defer(std::move(op))) return Status::Ok();
  WriteLock lock(*this);
  return WriteTaskProgress(task_id, attempt, progress, status_line);
}

Status Store::WriteTaskProgress(int64_t task_id, int attempt, double progress,
                                const std::string& status_line) {
  TSR_ASSIGN_OR_RETURN(
      Stmt s, writer_->Prepare("UPDATE tasks SET progress = ?, status_line = ? WHERE id = ? AND "
                               "attempt = ? AND state = 'running'"));
  return s.Bind(1, progress).Bind(2, status_line).Bind(3, task_id).Bind(4, attempt).Run();
}

}  // namespace tessera::store
