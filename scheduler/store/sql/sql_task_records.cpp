// Task changes: start, re-attach, finish, requeue, fail, backups, progress -- each a fenced
// transition (task_transitions.h), recorded in the broker's WriteGroup or written at once; the
// unfinished tasks loaded at start-up.

#include "scheduler/store/sql/sql_task_records.h"

#include <nlohmann/json.hpp>
#include <set>

#include "scheduler/store/database.h"
#include "scheduler/store/sql/attempt_rows.h"
#include "scheduler/store/sql/rows.h"
#include "scheduler/store/sql/task_transitions.h"

namespace tessera::store {

StatusOr<std::vector<TaskRecord>> SqlTaskRecords::LoadUnfinishedTasks(std::optional<int64_t> job_id,
                                                                      bool requeue_running) {
  Database::WriteLock lock(db_);
  sql::Db& writer = db_.writer();
  std::set<int64_t> interrupted;
  if (!job_id && !requeue_running) {
    TSR_ASSIGN_OR_RETURN(sql::Stmt r,
                         writer.Prepare("SELECT id FROM tasks WHERE state = 'running'"));
    for (;;) {
      TSR_ASSIGN_OR_RETURN(bool row, r.Step());
      if (!row) break;
      interrupted.insert(r.Int(0));
    }
  } else if (!job_id) {
    // Leases do not survive a restart: running tasks go back to the queue, uncharged (their
    // workers may re-attach them; see ReattachTask).
    sql::Transaction tx(writer);
    TSR_RETURN_IF_ERROR(tx.begin_status());
    TSR_ASSIGN_OR_RETURN(sql::Stmt r,
                         writer.Prepare("SELECT id FROM tasks WHERE state = 'running'"));
    for (;;) {
      TSR_ASSIGN_OR_RETURN(bool row, r.Step());
      if (!row) break;
      interrupted.insert(r.Int(0));
    }
    TSR_RETURN_IF_ERROR(attempts_.CloseStale());
    TSR_RETURN_IF_ERROR(writer.Exec(
        "UPDATE jobs SET tasks_queued = tasks_queued + tasks_running, tasks_running = 0 "
        // A job with steps follows its steps' counters (the schema's trigger), never directly.
        "WHERE tasks_running > 0 AND renderer != 'steps'"));
    TSR_RETURN_IF_ERROR(
        writer.Exec("UPDATE tasks SET state = 'queued', worker_id = NULL, progress = 0, "
                    "live_attempts = '[]', message = 'requeued: scheduler restarted' "
                    "WHERE state = 'running'"));
    Status committed = tx.Commit();
    if (!db_.InGroup()) attempts_.Settle(committed.ok());
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
  TSR_ASSIGN_OR_RETURN(sql::Stmt s, writer.Prepare(sql));
  if (job_id) s.Bind(1, *job_id);
  TSR_ASSIGN_OR_RETURN(std::vector<TaskRecord> tasks, CollectRows(s, &ReadTask));
  for (TaskRecord& t : tasks) t.interrupted = interrupted.count(t.id) > 0;
  return tasks;
}

Status SqlTaskRecords::Transition(int64_t task_id, int attempt, TaskState to,
                                  const std::string& message, bool count_failure,
                                  std::optional<int64_t> worker_id, int64_t job_id, bool reattach,
                                  const std::vector<int>& gpus) {
  if (!reattach) {
    RecordedWrite write;
    write.kind = RecordedWrite::Kind::kTransition;
    write.id = task_id;
    write.attempt = attempt;
    write.to = to;
    write.message = message;
    write.count_failure = count_failure;
    write.worker_id = worker_id;
    write.job_id = job_id;
    write.gpus = gpus;
    if (db_.Record(std::move(write))) return Status::Ok();
  }
  Database::WriteLock lock(db_);
  Status s = sql::InWriteTx(db_.writer(), [&] {
    return transitions_.Move(task_id, attempt, to, message, count_failure, worker_id, job_id,
                             reattach, nullptr, gpus);
  });
  if (!db_.InGroup()) attempts_.Settle(s.ok());
  return s;
}

Status SqlTaskRecords::StartTask(int64_t task_id, int attempt, int64_t worker_id, int64_t job_id,
                                 const std::vector<int>& gpus) {
  return Transition(task_id, attempt, TaskState::kRunning, "", false, worker_id, job_id,
                    /*reattach=*/false, gpus);
}

Status SqlTaskRecords::ReattachTask(int64_t task_id, int attempt, int64_t worker_id,
                                    int64_t job_id) {
  return Transition(task_id, attempt, TaskState::kRunning, "re-attached", false, worker_id, job_id,
                    /*reattach=*/true);
}

Status SqlTaskRecords::FinishTask(int64_t task_id, int attempt, int64_t worker_id, int64_t job_id) {
  return Transition(task_id, attempt, TaskState::kDone, "", false, worker_id, job_id);
}

Status SqlTaskRecords::RequeueTask(int64_t task_id, int attempt, const std::string& message,
                                   bool count_failure, int64_t job_id) {
  return Transition(task_id, attempt, TaskState::kQueued, message, count_failure, std::nullopt,
                    job_id);
}

Status SqlTaskRecords::FailTask(int64_t task_id, int attempt, const std::string& message,
                                int64_t job_id) {
  return Transition(task_id, attempt, TaskState::kFailed, message, true, std::nullopt, job_id);
}

Status SqlTaskRecords::StartBackup(int64_t task_id, int attempt, std::optional<int64_t> worker_id,
                                   const std::vector<int>& gpus) {
  Database::WriteLock lock(db_);
  sql::Db& writer = db_.writer();
  return sql::InWriteTx(writer, [&]() -> Status {
    TSR_ASSIGN_OR_RETURN(TaskTransitions::Fence fence, transitions_.ReadFence(task_id));
    if (fence.state != TaskState::kRunning || attempt != fence.attempt + 1) {
      return TaskTransitions::StaleAttempt(task_id, attempt, fence);
    }
    TSR_ASSIGN_OR_RETURN(sql::Stmt u,
                         // Appended as text: the array stays compact, as json_insert writes it,
                         // so the end of an attempt can compare it with "[N]" on both engines.
                         writer.Prepare("UPDATE tasks SET attempt = ?1, live_attempts = "
                                        "rtrim(live_attempts, ']') || CASE WHEN live_attempts = "
                                        "'[]' THEN '' ELSE ',' END || ?1 || ']' WHERE id = ?2"));
    TSR_RETURN_IF_ERROR(u.Bind(1, attempt).Bind(2, task_id).Run());
    return attempts_.Insert(task_id, attempt, fence.job_id, worker_id, gpus);
  });
}

Status SqlTaskRecords::EndCopy(int64_t task_id, int attempt, bool count_failure) {
  Database::WriteLock lock(db_);
  sql::Db& writer = db_.writer();
  return sql::InWriteTx(writer, [&]() -> Status {
    TSR_ASSIGN_OR_RETURN(TaskTransitions::Fence fence, transitions_.ReadFence(task_id));
    if (fence.state != TaskState::kRunning || !fence.IsLive(attempt) || fence.live.size() < 2) {
      return TaskTransitions::StaleAttempt(task_id, attempt, fence);
    }
    std::vector<int> live;
    for (int a : fence.live) {
      if (a != attempt) live.push_back(a);
    }
    TSR_ASSIGN_OR_RETURN(sql::Stmt u, writer.Prepare("UPDATE tasks SET live_attempts = ?1, "
                                                     "failures = failures + ?2, "
                                                     "failures_total = failures_total + ?2 "
                                                     "WHERE id = ?3"));
    return u.Bind(1, nlohmann::json(live).dump())
        .Bind(2, count_failure ? 1 : 0)
        .Bind(3, task_id)
        .Run();
  });
}

Status SqlTaskRecords::SetTaskProgress(int64_t task_id, int attempt, double progress,
                                       const std::string& status_line) {
  RecordedWrite write;
  write.kind = RecordedWrite::Kind::kProgress;
  write.id = task_id;
  write.attempt = attempt;
  write.progress = progress;
  write.message = status_line;
  if (db_.Record(std::move(write))) return Status::Ok();
  Database::WriteLock lock(db_);
  return transitions_.WriteProgress(task_id, attempt, progress, status_line);
}

StatusOr<std::vector<std::pair<int, int>>> SqlTaskRecords::UndoneFrameRanges(int64_t job_id) {
  TSR_ASSIGN_OR_RETURN(Database::Reader r, db_.BorrowReader());
  TSR_ASSIGN_OR_RETURN(sql::Stmt s, r->Prepare("SELECT frame_start, frame_end FROM tasks WHERE "
                                               "job_id = ? AND state != 'done' ORDER BY idx"));
  s.Bind(1, job_id);
  std::vector<std::pair<int, int>> out;
  for (;;) {
    TSR_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return out;
    out.emplace_back(static_cast<int>(s.Int(0)), static_cast<int>(s.Int(1)));
  }
}

}  // namespace tessera::store
