// Reads for the API and the CLI: lists of jobs, tasks and workers, one job or task, the farm's
// summary, and the lookups the blob and output checks make.

#include "scheduler/store/sql/sql_farm_queries.h"

#include <nlohmann/json.hpp>

#include "scheduler/store/database.h"
#include "scheduler/store/sql/rows.h"
#include "shared/base/wall_time.h"

namespace tessera::store {

StatusOr<std::vector<JobRecord>> SqlFarmQueries::ListJobs(std::optional<JobState> state,
                                                          int limit) {
  JobFilter filter;
  filter.state = state;
  filter.limit = limit;
  return ListJobs(filter);
}

StatusOr<std::vector<JobRecord>> SqlFarmQueries::ListJobs(const JobFilter& f) {
  TSR_ASSIGN_OR_RETURN(Database::Reader r, db_.BorrowReader());
  std::string sql = std::string("SELECT ") + kJobColumns + " FROM jobs WHERE true";
  if (f.state) sql += " AND state = ?1";
  if (f.paused) {
    sql += *f.paused ? " AND paused = 1 AND state IN ('queued', 'running')" : " AND paused = 0";
  }
  if (!f.user.empty()) sql += " AND user_name = ?2";
  if (!f.project.empty()) sql += " AND project = ?3";
  if (f.before) sql += " AND id < ?4";
  if (!f.steps) sql += " AND pipeline_id IS NULL";
  sql += " ORDER BY id DESC LIMIT ?5";
  TSR_ASSIGN_OR_RETURN(sql::Stmt s, r->Prepare(sql));
  if (f.state) s.Bind(1, JobStateName(*f.state));
  if (!f.user.empty()) s.Bind(2, f.user);
  if (!f.project.empty()) s.Bind(3, f.project);
  if (f.before) s.Bind(4, *f.before);
  s.Bind(5, f.limit);
  return CollectRows(s, &ReadJob);
}

StatusOr<JobRecord> SqlFarmQueries::GetJob(int64_t job_id) {
  TSR_ASSIGN_OR_RETURN(Database::Reader r, db_.BorrowReader());
  TSR_ASSIGN_OR_RETURN(
      sql::Stmt s, r->Prepare(std::string("SELECT ") + kJobColumns + " FROM jobs WHERE id = ?"));
  s.Bind(1, job_id);
  TSR_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return Status::NotFound("job " + std::to_string(job_id) + " does not exist");
  return ReadJob(s);
}

StatusOr<std::vector<TaskRecord>> SqlFarmQueries::ListTasks(int64_t job_id) {
  return ListTasks(job_id, TaskFilter{});
}

StatusOr<std::vector<TaskRecord>> SqlFarmQueries::ListTasks(int64_t job_id, const TaskFilter& f) {
  TSR_ASSIGN_OR_RETURN(Database::Reader r, db_.BorrowReader());
  // Running tasks are few farm-wide (one per worker slot): find them through the index of
  // unfinished tasks rather than walking every task of a large job.
  const bool running = f.state == TaskState::kRunning;
  TSR_ASSIGN_OR_RETURN(
      sql::Stmt s,
      r->Prepare(
          std::string("SELECT ") + kTaskColumns + " FROM tasks t " +
          // (PostgreSQL's planner finds the partial index by itself.)
          (running && r->engine() == sql::Engine::kSqlite ? "INDEXED BY tasks_unfinished " : "") +
          "LEFT JOIN workers w ON w.id = t.worker_id WHERE t.job_id = ?1 AND "
          "t.idx > ?2" +
          (running ? " AND t.state IN ('queued', 'running')" : "") +
          (f.state ? " AND t.state = ?4" : "") + " ORDER BY t.idx LIMIT ?3"));
  s.Bind(1, job_id).Bind(2, f.after_index).Bind(3, f.limit);
  if (f.state) s.Bind(4, TaskStateName(*f.state));
  return CollectRows(s, &ReadTask);
}

StatusOr<TaskRecord> SqlFarmQueries::GetTask(int64_t task_id) {
  TSR_ASSIGN_OR_RETURN(Database::Reader r, db_.BorrowReader());
  TSR_ASSIGN_OR_RETURN(sql::Stmt s, r->Prepare(std::string("SELECT ") + kTaskColumns +
                                               " FROM tasks t LEFT JOIN workers w ON w.id = "
                                               "t.worker_id WHERE t.id = ?"));
  s.Bind(1, task_id);
  TSR_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return Status::NotFound("task " + std::to_string(task_id) + " does not exist");
  return ReadTask(s);
}

StatusOr<std::vector<WorkerRecord>> SqlFarmQueries::ListWorkers() {
  TSR_ASSIGN_OR_RETURN(Database::Reader r, db_.BorrowReader());
  // Each worker's running tasks, comma-separated: the engines name the aggregate differently.
  static constexpr sql::DialectSql kWorkers{
      "SELECT w.id, w.name, w.hostname, w.state, w.cpu_cores, w.ram_mb, w.gpus_json, "
      "w.backends_json, w.version, w.registered_at, w.last_seen, (SELECT group_concat(t.id) FROM "
      "tasks t WHERE t.worker_id = w.id AND t.state = 'running'), w.pools_json, w.tags_json, "
      "w.details_json, w.disabled, w.node_group, w.price_per_hour, w.cost FROM workers w ORDER "
      "BY w.id",
      "SELECT w.id, w.name, w.hostname, w.state, w.cpu_cores, w.ram_mb, w.gpus_json, "
      "w.backends_json, w.version, w.registered_at, w.last_seen, (SELECT string_agg(t.id::text, "
      "',' ORDER BY t.id) FROM tasks t WHERE t.worker_id = w.id AND t.state = 'running'), "
      "w.pools_json, w.tags_json, w.details_json, w.disabled, w.node_group, w.price_per_hour, "
      "w.cost FROM workers w ORDER BY w.id"};
  TSR_ASSIGN_OR_RETURN(sql::Stmt s, r->Prepare(kWorkers));
  std::vector<WorkerRecord> out;
  for (;;) {
    TSR_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    WorkerRecord w;
    w.id = s.Int(0);
    w.name = s.Text(1);
    w.hostname = s.Text(2);
    TSR_ASSIGN_OR_RETURN(w.state, ParseEnum<WorkerState>(s.Text(3), kWorkerStates));
    w.cpu_cores = static_cast<int>(s.Int(4));
    w.ram_mb = s.Int(5);
    w.gpus = nlohmann::json::parse(s.Text(6)).get<std::vector<protocol::GpuInfo>>();
    w.backends = nlohmann::json::parse(s.Text(7)).get<std::vector<std::string>>();
    w.version = s.Text(8);
    w.registered_at_ms = s.Int(9);
    w.last_seen_ms = s.Int(10);
    w.pools = nlohmann::json::parse(s.Text(12)).get<std::vector<std::string>>();
    w.tags = nlohmann::json::parse(s.Text(13)).get<std::vector<std::string>>();
    const nlohmann::json details = nlohmann::json::parse(s.Text(14), nullptr, false);
    if (details.is_object()) {
      w.os = details.value("os", "");
      w.cpu_model = details.value("cpu_model", "");
      w.cloud = details.value("cloud", protocol::CloudInfo{});
    }
    w.disabled = s.Int(15) != 0;
    w.node_group = s.Text(16);
    w.price_per_hour = s.Double(17);
    w.cost = s.Double(18);
    std::string tasks = s.Text(11);
    for (size_t pos = 0; pos < tasks.size();) {
      size_t comma = tasks.find(',', pos);
      if (comma == std::string::npos) comma = tasks.size();
      w.current_tasks.push_back(std::stoll(tasks.substr(pos, comma - pos)));
      pos = comma + 1;
    }
    out.push_back(std::move(w));
  }
  return out;
}

StatusOr<FarmSummary> SqlFarmQueries::Summary() {
  TSR_ASSIGN_OR_RETURN(Database::Reader r, db_.BorrowReader());
  FarmSummary sum;
  TSR_ASSIGN_OR_RETURN(sql::Stmt j, r->Prepare("SELECT state, count(*) FROM jobs WHERE "
                                               "pipeline_id IS NULL GROUP BY state"));
  for (;;) {
    TSR_ASSIGN_OR_RETURN(bool row, j.Step());
    if (!row) break;
    sum.jobs_by_state.emplace_back(j.Text(0), j.Int(1));
  }
  TSR_ASSIGN_OR_RETURN(
      sql::Stmt t, r->Prepare("SELECT COALESCE(SUM(tasks_total), 0), "
                              "COALESCE(SUM(tasks_queued), 0), COALESCE(SUM(tasks_running), 0), "
                              "COALESCE(SUM(tasks_done), 0), COALESCE(SUM(tasks_failed), 0), "
                              "COALESCE(SUM(tasks_canceled), 0) FROM jobs "
                              // A job with steps holds its steps' counts, not tasks of its own.
                              "WHERE renderer != 'steps'"));
  TSR_ASSIGN_OR_RETURN(bool trow, t.Step());
  if (trow) {
    sum.tasks = {static_cast<int64_t>(t.Double(0)), static_cast<int64_t>(t.Double(1)),
                 static_cast<int64_t>(t.Double(2)), static_cast<int64_t>(t.Double(3)),
                 static_cast<int64_t>(t.Double(4)), static_cast<int64_t>(t.Double(5))};
  }
  TSR_ASSIGN_OR_RETURN(sql::Stmt w,
                       r->Prepare("SELECT state, count(*) FROM workers GROUP BY state"));
  for (;;) {
    TSR_ASSIGN_OR_RETURN(bool row, w.Step());
    if (!row) break;
    sum.workers_by_state.emplace_back(w.Text(0), w.Int(1));
  }
  TSR_ASSIGN_OR_RETURN(sql::Stmt c,
                       r->Prepare("SELECT (SELECT COALESCE(SUM(price_per_hour), 0) FROM workers "
                                  "WHERE state != 'offline'), (SELECT cost FROM "
                                  "cost_days WHERE day = ?1), (SELECT gpu_seconds FROM "
                                  "cost_days WHERE day = ?1)"));
  c.Bind(1, wall_time::UtcDay(db_.Now()));
  TSR_ASSIGN_OR_RETURN(bool crow, c.Step());
  if (crow) {
    sum.cost_per_hour = c.Double(0);
    sum.cost_today = c.Double(1);
    sum.gpu_seconds_today = c.Double(2);
  }
  TSR_RETURN_IF_ERROR(c.Run());
  return sum;
}

StatusOr<bool> SqlFarmQueries::BlobInUse(const std::string& hash) {
  TSR_ASSIGN_OR_RETURN(Database::Reader r, db_.BorrowReader());
  static constexpr sql::DialectSql kAssetInUse{
      "SELECT 1 FROM jobs WHERE instr(assets, ?) > 0 LIMIT 1",
      "SELECT 1 FROM jobs WHERE strpos(assets, ?) > 0 LIMIT 1"};
  TSR_ASSIGN_OR_RETURN(sql::Stmt s, r->Prepare(kAssetInUse));
  s.Bind(1, hash);
  return s.Step();
}

StatusOr<std::vector<std::pair<int64_t, std::string>>> SqlFarmQueries::JobsWritingTo(
    const std::string& dir) {
  TSR_ASSIGN_OR_RETURN(Database::Reader r, db_.BorrowReader());
  TSR_ASSIGN_OR_RETURN(sql::Stmt s,
                       r->Prepare("SELECT id, user_name FROM jobs WHERE output_dir = ? LIMIT 10"));
  s.Bind(1, dir);
  std::vector<std::pair<int64_t, std::string>> out;
  for (;;) {
    TSR_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    out.emplace_back(s.Int(0), s.Text(1));
  }
  return out;
}

}  // namespace tessera::store
