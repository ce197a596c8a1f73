// Jobs: submission (a job and all its tasks in one transaction), cancel, pause, priority, retry,
// re-render and delete; the job's stored files, assets, notice, error and frame flags.

#include "scheduler/store/sql/sql_job_records.h"

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "scheduler/store/database.h"
#include "scheduler/store/sql/attempt_rows.h"
#include "scheduler/store/sql/rows.h"
#include "scheduler/store/sql/sql_idempotency_records.h"
#include "scheduler/store/sql/task_transitions.h"

namespace tessera::store {

// ---- jobs -------------------------------------------------------------------------------------

StatusOr<JobRecord> SqlJobRecords::CreateJob(
    const spec::JobSpec& spec, const std::string& job_yaml,
    const std::function<StatusOr<std::string>(int64_t)>& output_dir_for,
    const IdempotentRequest* request, CreatedRows* created) {
  const PluginFiles files = ResolvePluginFiles(spec);  // outside the write lock: it is not free
  int64_t job_id = 0;
  std::vector<TaskRecord> tasks;
  {
    Database::WriteLock lock(db_);
    sql::Transaction tx(db_.writer());
    TSR_RETURN_IF_ERROR(tx.begin_status());
    TSR_ASSIGN_OR_RETURN(job_id, InsertJob(spec, job_yaml, files, output_dir_for, nullptr,
                                           created != nullptr ? &tasks : nullptr));
    TSR_RETURN_IF_ERROR(RecordIdempotentJob(request, job_id));
    TSR_RETURN_IF_ERROR(tx.Commit());
  }
  TSR_ASSIGN_OR_RETURN(Database::Reader r, db_.BorrowReader());
  TSR_ASSIGN_OR_RETURN(JobRecord job, SelectJob(*r, job_id));
  if (created != nullptr) *created = CreatedRows{{}, std::move(tasks)};
  return job;
}

StatusOr<JobRecord> SqlJobRecords::CreatePipeline(
    const spec::PipelineSpec& pipeline, const std::string& job_yaml,
    const std::function<StatusOr<std::string>(int64_t)>& dir_for, const StepDirFn& step_dir_for,
    const IdempotentRequest* request, CreatedRows* created) {
  std::vector<PluginFiles> files;
  int64_t tasks = 0;
  int first = spec::kMaxFrame, last = spec::kMinFrame;
  for (const spec::StepSpec& step : pipeline.steps) {
    files.push_back(ResolvePluginFiles(step.job));
    tasks += spec::TaskCount(step.job);
    first = std::min(first, step.job.frame_start);
    last = std::max(last, step.job.frame_end);
  }
  int64_t job_id = 0;
  std::vector<int64_t> step_order;  // the steps' ids, in the order stored
  std::vector<TaskRecord> step_tasks;
  {
    Database::WriteLock lock(db_);
    sql::Transaction tx(db_.writer());
    TSR_RETURN_IF_ERROR(tx.begin_status());
    const int64_t now = db_.Now();
    TSR_ASSIGN_OR_RETURN(
        sql::Stmt ins,
        db_.writer().Prepare(
            "INSERT INTO jobs (name, state, priority, frame_start, frame_end, "
            "chunk_size, max_retries, job_yaml, scene_yaml, output_dir, "
            "output_pattern, output_formats, tasks_total, tasks_queued, "
            "submitted_at, renderer, project, user_name) VALUES (?1, 'queued', ?2, "
            "?3, ?4, 1, 0, ?5, '', '', '', '[]', ?6, ?6, ?7, ?8, ?9, ?10) RETURNING id"));
    ins.Bind(1, pipeline.name).Bind(2, pipeline.priority).Bind(3, first).Bind(4, last);
    ins.Bind(5, job_yaml).Bind(6, tasks).Bind(7, now).Bind(8, spec::kRendererSteps);
    ins.Bind(9, pipeline.project).Bind(10, pipeline.user.empty() ? "unknown" : pipeline.user);
    TSR_ASSIGN_OR_RETURN(job_id, sql::InsertReturningId(ins));
    TSR_ASSIGN_OR_RETURN(std::string dir, dir_for(job_id));
    TSR_ASSIGN_OR_RETURN(sql::Stmt upd,
                         db_.writer().Prepare("UPDATE jobs SET output_dir = ? WHERE id = ?"));
    TSR_RETURN_IF_ERROR(upd.Bind(1, dir).Bind(2, job_id).Run());

    // Steps come in an order where each follows those it depends on, so their ids are known.
    std::map<std::string, int64_t> step_ids;
    for (size_t i = 0; i < pipeline.steps.size(); ++i) {
      const spec::StepSpec& step = pipeline.steps[i];
      spec::JobSpec job = step.job;
      for (const spec::StepDependency& dep : step.depends_on) {
        (dep.per_frame ? job.frame_depends_on : job.depends_on).push_back(step_ids.at(dep.step));
      }
      const StepLink link{job_id, step.name, nlohmann::json(step.depends_on).dump()};
      TSR_ASSIGN_OR_RETURN(step_ids[step.name],
                           InsertJob(
                               job, step.job_yaml, files[i],
                               [&](int64_t step_id) { return step_dir_for(i, step_id, dir); },
                               &link, created != nullptr ? &step_tasks : nullptr));
      step_order.push_back(step_ids[step.name]);
    }
    TSR_ASSIGN_OR_RETURN(sql::Stmt ev,
                         db_.writer().Prepare("INSERT INTO events (at, job_id, kind, message) "
                                              "VALUES (?, ?, 'job_submitted', ?)"));
    TSR_RETURN_IF_ERROR(ev.Bind(1, now)
                            .Bind(2, job_id)
                            .Bind(3, std::to_string(pipeline.steps.size()) + " steps, " +
                                         std::to_string(tasks) + " tasks")
                            .Run());
    TSR_RETURN_IF_ERROR(RecordIdempotentJob(request, job_id));
    TSR_RETURN_IF_ERROR(tx.Commit());
  }
  TSR_ASSIGN_OR_RETURN(Database::Reader r, db_.BorrowReader());
  TSR_ASSIGN_OR_RETURN(JobRecord job, SelectJob(*r, job_id));
  if (created != nullptr) {
    CreatedRows rows;
    for (int64_t step_id : step_order) {
      TSR_ASSIGN_OR_RETURN(JobRecord step, SelectJob(*r, step_id));
      rows.steps.push_back(std::move(step));
    }
    rows.tasks = std::move(step_tasks);
    *created = std::move(rows);
  }
  return job;
}

Status SqlJobRecords::RecordIdempotentJob(const IdempotentRequest* request, int64_t job_id) {
  if (request == nullptr) return Status::Ok();
  IdempotentRequest made = *request;
  made.resource = "job";
  made.resource_id = job_id;
  return InsertIdempotentRequest(db_, made);
}

namespace {
// Tasks inserted per statement (5 parameters each: well under SQLite's 32,766 and PostgreSQL's
// 65,535 parameters a statement).
constexpr size_t kTasksPerInsert = 100;

// INSERT of `rows` task rows (parameters job_id, idx, frame_start, frame_end, part per row), and
// with `returning` the new rows' ids and indexes (in no promised order).
const std::string& InsertTasksSql(size_t rows, bool returning) {
  static const auto make = [](size_t n, bool ret) {
    std::string sql =
        "INSERT INTO tasks (job_id, idx, frame_start, frame_end, part, state) VALUES ";
    for (size_t r = 0; r < n; ++r) {
      const size_t b = r * 5;
      sql += (r ? ", (?" : "(?") + std::to_string(b + 1) + ", ?" + std::to_string(b + 2) + ", ?" +
             std::to_string(b + 3) + ", ?" + std::to_string(b + 4) + ", ?" + std::to_string(b + 5) +
             ", 'queued')";
    }
    return ret ? sql + " RETURNING id, idx" : sql;
  };
  static const std::vector<std::array<std::string, 2>> texts = [&] {
    std::vector<std::array<std::string, 2>> all(kTasksPerInsert + 1);
    for (size_t n = 1; n <= kTasksPerInsert; ++n) all[n] = {make(n, false), make(n, true)};
    return all;
  }();
  return texts[rows][returning ? 1 : 0];
}

}  // namespace

StatusOr<int64_t> SqlJobRecords::InsertJob(
    const spec::JobSpec& spec, const std::string& job_yaml, const PluginFiles& files,
    const std::function<StatusOr<std::string>(int64_t)>& output_dir_for, const StepLink* step,
    std::vector<TaskRecord>* tasks) {
  std::vector<spec::FrameChunk> chunks = spec::ExpandFrames(spec);
  int64_t now = db_.Now();
  TSR_ASSIGN_OR_RETURN(
      sql::Stmt ins,
      db_.writer().Prepare(
          "INSERT INTO jobs (name, state, priority, frame_start, frame_end, "
          "chunk_size, max_retries, job_yaml, scene_yaml, output_dir, output_pattern, "
          "output_formats, tasks_total, tasks_queued, submitted_at, task_timeout_s, "
          "blocklist_after, depends_on, limits, progress_timeout_s, pools, tags, "
          "resources, renderer, project, user_name, frame_depends_on, "
          "fail_after_workers, parts_per_frame, interruptible, deadline_ms, exr_float, "
          "assets, output_shared, checkpoint_interval_s, settings, scene_name, "
          "pipeline_id, step, step_depends_on, failure_policy) "
          "VALUES (?, 'queued', ?, ?, ?, ?, ?, ?, ?, '', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
          "?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id"));
  ins.Bind(1, spec.name).Bind(2, spec.priority).Bind(3, spec.frame_start).Bind(4, spec.frame_end);
  ins.Bind(5, spec.chunk_size).Bind(6, spec.max_retries).Bind(7, job_yaml);
  ins.Bind(8, spec.scene_yaml).Bind(9, spec::EffectivePattern(spec));
  ins.Bind(10, nlohmann::json(spec.output.formats).dump());
  // Every chunk of frames times every part of a frame (one part, the whole frame, unless split).
  const std::vector<protocol::FramePart> parts =
      spec.parts.empty() ? std::vector<protocol::FramePart>{protocol::FramePart{}} : spec.parts;
  const auto task_count = static_cast<int64_t>(chunks.size() * parts.size());
  ins.Bind(11, task_count).Bind(12, task_count);
  ins.Bind(13, now).Bind(14, spec.task_timeout).Bind(15, spec.blocklist_after);
  ins.Bind(16, nlohmann::json(spec.depends_on).dump());
  ins.Bind(17, nlohmann::json(spec.limits).dump()).Bind(18, spec.progress_timeout);
  ins.Bind(19, nlohmann::json(spec.pools).dump()).Bind(20, nlohmann::json(spec.tags).dump());
  ins.Bind(21, nlohmann::json(spec.resources).dump()).Bind(22, spec.renderer);
  ins.Bind(23, spec.project).Bind(24, spec.user.empty() ? "unknown" : spec.user);
  ins.Bind(25, nlohmann::json(spec.frame_depends_on).dump()).Bind(26, spec.fail_after_workers);
  ins.Bind(27, static_cast<int64_t>(parts.size())).Bind(28, spec.interruptible ? 1 : 0);
  if (spec.deadline_ms) ins.Bind(29, *spec.deadline_ms);
  ins.Bind(30, spec.output.exr_float ? 1 : 0);
  ins.Bind(31, nlohmann::json(spec.assets).dump());
  ins.Bind(32, spec.output.shared_dir.empty() ? 0 : 1);
  ins.Bind(33, spec.checkpoint_interval_s);
  ins.Bind(34, files.settings_json).Bind(35, files.scene_name);
  if (step != nullptr) ins.Bind(36, step->pipeline_id);
  ins.Bind(37, step != nullptr ? step->name : "");
  ins.Bind(38, step != nullptr ? step->depends_on_json : "[]");
  ins.Bind(39, nlohmann::json(spec.failure_policy).dump());
  TSR_ASSIGN_OR_RETURN(const int64_t job_id, sql::InsertReturningId(ins));

  TSR_ASSIGN_OR_RETURN(std::string output_dir, output_dir_for(job_id));
  TSR_ASSIGN_OR_RETURN(sql::Stmt upd,
                       db_.writer().Prepare("UPDATE jobs SET output_dir = ? WHERE id = ?"));
  TSR_RETURN_IF_ERROR(upd.Bind(1, output_dir).Bind(2, job_id).Run());

  std::vector<std::string> part_json;
  for (const protocol::FramePart& part : parts) {
    part_json.push_back(part.whole() ? "" : nlohmann::json(part).dump());
  }
  // Every chunk of frames times every part: row i has index i.
  struct NewTask {
    int frame_start = 0, frame_end = 0;
    size_t part = 0;
  };
  std::vector<NewTask> rows;
  rows.reserve(static_cast<size_t>(task_count));
  for (const spec::FrameChunk& c : chunks) {
    for (size_t p = 0; p < parts.size(); ++p) rows.push_back({c.frame_start, c.frame_end, p});
  }
  // Many rows per INSERT: one statement (on PostgreSQL, one round trip) per kTasksPerInsert
  // tasks. The new rows' ids come back only when the caller keeps the rows.
  for (size_t first = 0; first < rows.size(); first += kTasksPerInsert) {
    const size_t n = std::min(kTasksPerInsert, rows.size() - first);
    TSR_ASSIGN_OR_RETURN(sql::Stmt insert,
                         db_.writer().Prepare(InsertTasksSql(n, tasks != nullptr)));
    for (size_t r = 0; r < n; ++r) {
      const NewTask& t = rows[first + r];
      const int b = static_cast<int>(r * 5);
      insert.Bind(b + 1, job_id)
          .Bind(b + 2, static_cast<int64_t>(first + r))
          .Bind(b + 3, t.frame_start)
          .Bind(b + 4, t.frame_end)
          .Bind(b + 5, part_json[t.part]);
    }
    if (tasks == nullptr) {
      TSR_RETURN_IF_ERROR(insert.Run());
      continue;
    }
    const size_t base = tasks->size();
    tasks->resize(base + n);
    size_t returned = 0;
    for (;; ++returned) {
      TSR_ASSIGN_OR_RETURN(bool row, insert.Step());
      if (!row) break;
      const int64_t index = insert.Int(1);
      if (index < static_cast<int64_t>(first) || index >= static_cast<int64_t>(first + n)) {
        return Status::Internal("an INSERT of tasks returned index " + std::to_string(index));
      }
      const NewTask& t = rows[static_cast<size_t>(index)];
      TaskRecord& stored = (*tasks)[base + static_cast<size_t>(index) - first];
      stored.id = insert.Int(0);
      stored.job_id = job_id;
      stored.index = static_cast<int>(index);
      stored.frame_start = t.frame_start;
      stored.frame_end = t.frame_end;
      stored.part = parts[t.part];
    }
    if (returned != n) {
      return Status::Internal("an INSERT of " + std::to_string(n) + " tasks returned " +
                              std::to_string(returned) + " rows");
    }
  }
  TSR_ASSIGN_OR_RETURN(sql::Stmt ev,
                       db_.writer().Prepare("INSERT INTO events (at, job_id, kind, message) "
                                            "VALUES (?, ?, 'job_submitted', ?)"));
  TSR_RETURN_IF_ERROR(
      ev.Bind(1, now).Bind(2, job_id).Bind(3, std::to_string(task_count) + " tasks").Run());
  return job_id;
}

StatusOr<std::vector<Lease>> SqlJobRecords::CancelJob(int64_t job_id, const std::string& reason) {
  Database::WriteLock lock(db_);
  sql::Transaction tx(db_.writer());
  TSR_RETURN_IF_ERROR(tx.begin_status());
  TSR_ASSIGN_OR_RETURN(sql::Stmt q, db_.writer().Prepare("SELECT state FROM jobs WHERE id = ?"));
  q.Bind(1, job_id);
  TSR_ASSIGN_OR_RETURN(bool found, q.Step());
  if (!found) return Status::NotFound("job " + std::to_string(job_id) + " does not exist");
  TSR_ASSIGN_OR_RETURN(JobState state, ParseEnum<JobState>(q.Text(0), kJobStates));
  if (state != JobState::kQueued && state != JobState::kRunning) {
    return Status::FailedPrecondition("job " + std::to_string(job_id) + " is already " +
                                      JobStateName(state));
  }
  std::vector<Lease> leases;
  TSR_ASSIGN_OR_RETURN(sql::Stmt run,
                       db_.writer().Prepare("SELECT id, attempt, worker_id FROM tasks "
                                            "WHERE job_id = ? AND state = 'running'"));
  run.Bind(1, job_id);
  for (;;) {
    TSR_ASSIGN_OR_RETURN(bool row, run.Step());
    if (!row) break;
    leases.push_back({run.Int(0), static_cast<int>(run.Int(1)), run.OptInt(2)});
  }
  int64_t now = db_.Now();
  TSR_ASSIGN_OR_RETURN(sql::Stmt upd,
                       db_.writer().Prepare("UPDATE tasks SET state = 'canceled', finished_at = ? "
                                            "WHERE job_id = ? AND state IN ('queued', 'running')"));
  TSR_RETURN_IF_ERROR(upd.Bind(1, now).Bind(2, job_id).Run());
  TSR_ASSIGN_OR_RETURN(
      sql::Stmt job, db_.writer().Prepare("UPDATE jobs SET state = 'canceled', finished_at = ?1, "
                                          "tasks_canceled = tasks_canceled + tasks_queued + "
                                          "tasks_running, tasks_queued = 0, tasks_running = 0, "
                                          "error = COALESCE(error, NULLIF(?3, '')) WHERE id = ?2"));
  // (The job_canceled event is the schema's job_end_events trigger's.)
  TSR_RETURN_IF_ERROR(job.Bind(1, now).Bind(2, job_id).Bind(3, reason).Run());
  AttemptEnd canceled;
  canceled.outcome = AttemptOutcome::kCanceled;
  canceled.message = reason.empty() ? "the job was canceled" : "the job was canceled: " + reason;
  TSR_RETURN_IF_ERROR(attempts_.CloseWhere("job_id = ?1", job_id, 0, canceled));
  Status committed = tx.Commit();
  if (!db_.InGroup()) attempts_.Settle(committed.ok());
  TSR_RETURN_IF_ERROR(committed);
  return leases;
}

StatusOr<std::vector<JobRecord>> SqlJobRecords::PipelineSteps(int64_t job_id) {
  TSR_ASSIGN_OR_RETURN(Database::Reader r, db_.BorrowReader());
  TSR_ASSIGN_OR_RETURN(sql::Stmt s, r->Prepare(std::string("SELECT ") + kJobColumns +
                                               " FROM jobs WHERE pipeline_id = ? ORDER BY id"));
  s.Bind(1, job_id);
  return CollectRows(s, &ReadJob);
}

StatusOr<int> SqlJobRecords::ReviveStep(int64_t job_id) {
  Database::WriteLock lock(db_);
  int moved = 0;
  Status s = sql::InWriteTx(db_.writer(), [&]() -> Status {
    TSR_ASSIGN_OR_RETURN(JobState state, JobStateForUpdate(job_id));
    if (state != JobState::kCanceled) return Status::Ok();
    TSR_ASSIGN_OR_RETURN(sql::Stmt upd,
                         db_.writer().Prepare("UPDATE tasks SET state = 'queued', "
                                              "failures = 0, progress = 0, worker_id = NULL, "
                                              "finished_at = NULL, message = 'requeued: the "
                                              "job was retried' WHERE job_id = ? AND "
                                              "state = 'canceled'"));
    TSR_RETURN_IF_ERROR(upd.Bind(1, job_id).Run());
    moved = db_.writer().Changes();
    TSR_ASSIGN_OR_RETURN(
        sql::Stmt job, db_.writer().Prepare("UPDATE jobs SET state = 'queued', finished_at = NULL, "
                                            "error = NULL, tasks_queued = tasks_queued + ?1, "
                                            "tasks_canceled = tasks_canceled - ?1 WHERE id = ?2"));
    TSR_RETURN_IF_ERROR(job.Bind(1, moved).Bind(2, job_id).Run());
    return transitions_.RefreshJobState(job_id);
  });
  TSR_RETURN_IF_ERROR(s);
  return moved;
}

StatusOr<JobState> SqlJobRecords::JobStateForUpdate(int64_t job_id) {
  TSR_ASSIGN_OR_RETURN(sql::Stmt q, db_.writer().Prepare("SELECT state FROM jobs WHERE id = ?"));
  q.Bind(1, job_id);
  TSR_ASSIGN_OR_RETURN(bool found, q.Step());
  if (!found) return Status::NotFound("job " + std::to_string(job_id) + " does not exist");
  return ParseEnum<JobState>(q.Text(0), kJobStates);
}

namespace {
Status RequireUnfinished(int64_t job_id, JobState state) {
  if (state == JobState::kQueued || state == JobState::kRunning) return Status::Ok();
  return Status::FailedPrecondition("job " + std::to_string(job_id) + " is already " +
                                    JobStateName(state));
}
}  // namespace

Status SqlJobRecords::SetJobPriority(int64_t job_id, int priority) {
  if (priority < 0 || priority > 100) {
    return Status::InvalidArgument("priority: must be in [0, 100], got " +
                                   std::to_string(priority));
  }
  Database::WriteLock lock(db_);
  return sql::InWriteTx(db_.writer(), [&]() -> Status {
    TSR_ASSIGN_OR_RETURN(JobState state, JobStateForUpdate(job_id));
    TSR_RETURN_IF_ERROR(RequireUnfinished(job_id, state));
    TSR_ASSIGN_OR_RETURN(sql::Stmt s,
                         db_.writer().Prepare("UPDATE jobs SET priority = ? WHERE id = ?"));
    return s.Bind(1, priority).Bind(2, job_id).Run();
  });
}

Status SqlJobRecords::SetJobPaused(int64_t job_id, bool paused) {
  Database::WriteLock lock(db_);
  return sql::InWriteTx(db_.writer(), [&]() -> Status {
    TSR_ASSIGN_OR_RETURN(JobState state, JobStateForUpdate(job_id));
    TSR_RETURN_IF_ERROR(RequireUnfinished(job_id, state));
    TSR_ASSIGN_OR_RETURN(sql::Stmt s,
                         db_.writer().Prepare("UPDATE jobs SET paused = ? WHERE id = ?"));
    TSR_RETURN_IF_ERROR(s.Bind(1, paused ? 1 : 0).Bind(2, job_id).Run());
    TSR_ASSIGN_OR_RETURN(sql::Stmt ev,
                         db_.writer().Prepare("INSERT INTO events (at, job_id, kind, message) "
                                              "VALUES (?, ?, ?, '')"));
    return ev.Bind(1, db_.Now())
        .Bind(2, job_id)
        .Bind(3, paused ? "job_paused" : "job_resumed")
        .Run();
  });
}

StatusOr<int> SqlJobRecords::RequeueFinished(int64_t job_id, const std::string& task_filter,
                                             int first, int last) {
  TSR_ASSIGN_OR_RETURN(JobState state, JobStateForUpdate(job_id));
  if (state == JobState::kCanceled) {
    return Status::FailedPrecondition("job " + std::to_string(job_id) + " is canceled");
  }
  const std::string where =
      "job_id = ?1 AND " + task_filter + " AND frame_end >= ?2 AND frame_start <= ?3";
  // Counters first, from the rows about to move.
  TSR_ASSIGN_OR_RETURN(sql::Stmt count,
                       db_.writer().Prepare("SELECT count(*), count(*) FILTER (WHERE state = "
                                            "'done'), count(*) FILTER (WHERE state = 'failed') "
                                            "FROM tasks WHERE " +
                                            where));
  count.Bind(1, job_id).Bind(2, first).Bind(3, last);
  TSR_ASSIGN_OR_RETURN(bool row, count.Step());
  const int moved = row ? static_cast<int>(count.Int(0)) : 0;
  if (moved == 0) return 0;
  const int64_t done = count.Int(1);
  const int64_t failed = count.Int(2);
  TSR_ASSIGN_OR_RETURN(sql::Stmt upd,
                       db_.writer().Prepare("UPDATE tasks SET state = 'queued', failures = 0, "
                                            "progress = 0, worker_id = NULL, finished_at = NULL, "
                                            "message = 'requeued by request' WHERE " +
                                            where));
  TSR_RETURN_IF_ERROR(upd.Bind(1, job_id).Bind(2, first).Bind(3, last).Run());
  TSR_ASSIGN_OR_RETURN(
      sql::Stmt job,
      db_.writer().Prepare("UPDATE jobs SET tasks_done = tasks_done - ?, "
                           "tasks_failed = tasks_failed - ?, "
                           "tasks_queued = tasks_queued + ?, error = CASE WHEN "
                           "tasks_failed - ? = 0 THEN NULL ELSE error END WHERE id = ?"));
  TSR_RETURN_IF_ERROR(
      job.Bind(1, done).Bind(2, failed).Bind(3, moved).Bind(4, failed).Bind(5, job_id).Run());
  TSR_RETURN_IF_ERROR(transitions_.RefreshJobState(job_id));
  return moved;
}

StatusOr<int> SqlJobRecords::RetryFailedTasks(int64_t job_id) {
  Database::WriteLock lock(db_);
  sql::Transaction tx(db_.writer());
  TSR_RETURN_IF_ERROR(tx.begin_status());
  TSR_ASSIGN_OR_RETURN(
      int moved, RequeueFinished(job_id, "state = 'failed'", spec::kMinFrame, spec::kMaxFrame));
  TSR_RETURN_IF_ERROR(tx.Commit());
  return moved;
}

StatusOr<int> SqlJobRecords::RerenderFrames(int64_t job_id, int first, int last) {
  if (first > last) {
    return Status::InvalidArgument("frames: start " + std::to_string(first) + " is after end " +
                                   std::to_string(last));
  }
  Database::WriteLock lock(db_);
  sql::Transaction tx(db_.writer());
  TSR_RETURN_IF_ERROR(tx.begin_status());
  TSR_ASSIGN_OR_RETURN(int moved,
                       RequeueFinished(job_id, "state IN ('done', 'failed')", first, last));
  TSR_RETURN_IF_ERROR(tx.Commit());
  return moved;
}

Status SqlJobRecords::DeleteJob(int64_t job_id) {
  Database::WriteLock lock(db_);
  return sql::InWriteTx(db_.writer(), [&]() -> Status {
    TSR_ASSIGN_OR_RETURN(JobState state, JobStateForUpdate(job_id));
    if (state == JobState::kQueued || state == JobState::kRunning) {
      return Status::FailedPrecondition("job " + std::to_string(job_id) + " is " +
                                        JobStateName(state) + "; cancel it before deleting it");
    }
    TSR_ASSIGN_OR_RETURN(sql::Stmt q,
                         db_.writer().Prepare("SELECT pipeline_id FROM jobs WHERE id = ?"));
    q.Bind(1, job_id);
    TSR_ASSIGN_OR_RETURN(bool found, q.Step());
    if (found && !q.IsNull(0)) {
      return Status::FailedPrecondition("job " + std::to_string(job_id) + " is a step of job " +
                                        std::to_string(q.Int(0)) + "; delete that job");
    }
    // A job with steps goes with its steps (a job without has none).
    std::vector<int64_t> ids{job_id};
    TSR_ASSIGN_OR_RETURN(sql::Stmt steps,
                         db_.writer().Prepare("SELECT id FROM jobs WHERE pipeline_id = ?"));
    steps.Bind(1, job_id);
    for (;;) {
      TSR_ASSIGN_OR_RETURN(bool row, steps.Step());
      if (!row) break;
      ids.push_back(steps.Int(0));
    }
    for (int64_t id : ids) {
      for (const char* sql :
           {"DELETE FROM events WHERE job_id = ?", "DELETE FROM task_logs WHERE job_id = ?",
            "DELETE FROM frame_flags WHERE job_id = ?", "DELETE FROM tasks WHERE job_id = ?",
            "DELETE FROM job_worker_failures WHERE job_id = ?", "DELETE FROM jobs WHERE id = ?"}) {
        TSR_ASSIGN_OR_RETURN(sql::Stmt s, db_.writer().Prepare(sql));
        TSR_RETURN_IF_ERROR(s.Bind(1, id).Run());
      }
    }
    return Status::Ok();
  });
}

StatusOr<std::string> SqlJobRecords::JobScene(int64_t job_id) {
  TSR_ASSIGN_OR_RETURN(Database::Reader r, db_.BorrowReader());
  TSR_ASSIGN_OR_RETURN(sql::Stmt s, r->Prepare("SELECT scene_yaml FROM jobs WHERE id = ?"));
  s.Bind(1, job_id);
  TSR_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return Status::NotFound("job " + std::to_string(job_id) + " does not exist");
  return s.Text(0);
}

StatusOr<std::string> SqlJobRecords::JobYaml(int64_t job_id) {
  TSR_ASSIGN_OR_RETURN(Database::Reader r, db_.BorrowReader());
  TSR_ASSIGN_OR_RETURN(sql::Stmt s, r->Prepare("SELECT job_yaml FROM jobs WHERE id = ?"));
  s.Bind(1, job_id);
  TSR_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return Status::NotFound("job " + std::to_string(job_id) + " does not exist");
  return s.Text(0);
}

Status SqlJobRecords::SetJobError(int64_t job_id, const std::string& error) {
  Database::WriteLock lock(db_);
  TSR_ASSIGN_OR_RETURN(
      sql::Stmt s, db_.writer().Prepare("UPDATE jobs SET error = COALESCE(error, ?) WHERE id = ?"));
  return s.Bind(1, error).Bind(2, job_id).Run();
}

Status SqlJobRecords::SetJobNotice(int64_t job_id, const std::optional<std::string>& notice) {
  Database::WriteLock lock(db_);
  TSR_ASSIGN_OR_RETURN(sql::Stmt s,
                       db_.writer().Prepare("UPDATE jobs SET notice = ? WHERE id = ?"));
  return s.Bind(1, notice).Bind(2, job_id).Run();
}

Status SqlJobRecords::SetJobAssets(int64_t job_id,
                                   const std::map<std::string, std::string>& assets) {
  Database::WriteLock lock(db_);
  TSR_ASSIGN_OR_RETURN(sql::Stmt s,
                       db_.writer().Prepare("UPDATE jobs SET assets = ? WHERE id = ?"));
  return s.Bind(1, nlohmann::json(assets).dump()).Bind(2, job_id).Run();
}

Status SqlJobRecords::SetFrameFlag(int64_t job_id, int frame, const std::string& reason) {
  Database::WriteLock lock(db_);
  TSR_ASSIGN_OR_RETURN(sql::Stmt s,
                       db_.writer().Prepare("INSERT INTO frame_flags (job_id, frame, reason, "
                                            "at) VALUES (?1, ?2, ?3, ?4) ON CONFLICT "
                                            "(job_id, frame) DO UPDATE SET reason = "
                                            "excluded.reason, at = excluded.at"));
  return s.Bind(1, job_id).Bind(2, frame).Bind(3, reason).Bind(4, db_.Now()).Run();
}

Status SqlJobRecords::ClearFrameFlag(int64_t job_id, int frame) {
  Database::WriteLock lock(db_);
  TSR_ASSIGN_OR_RETURN(
      sql::Stmt s, db_.writer().Prepare("DELETE FROM frame_flags WHERE job_id = ? AND frame = ?"));
  return s.Bind(1, job_id).Bind(2, frame).Run();
}

StatusOr<std::map<int, std::string>> SqlJobRecords::FrameFlags(int64_t job_id, int first,
                                                               int last) {
  TSR_ASSIGN_OR_RETURN(Database::Reader r, db_.BorrowReader());
  TSR_ASSIGN_OR_RETURN(sql::Stmt s,
                       r->Prepare("SELECT frame, reason FROM frame_flags WHERE job_id = ? "
                                  "AND frame BETWEEN ? AND ?"));
  s.Bind(1, job_id).Bind(2, first).Bind(3, last);
  std::map<int, std::string> flags;
  for (;;) {
    TSR_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    flags[static_cast<int>(s.Int(0))] = s.Text(1);
  }
  return flags;
}

}  // namespace tessera::store
