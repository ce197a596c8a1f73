// How rows of the jobs and tasks tables become records.

#include "scheduler/store/sql/rows.h"

#include <nlohmann/json.hpp>

namespace tessera::store {

const char* const kJobColumns =
    "id, name, state, priority, frame_start, frame_end, chunk_size, max_retries, output_dir, "
    "output_pattern, output_formats, tasks_total, tasks_queued, tasks_running, tasks_done, "
    "tasks_failed, tasks_canceled, error, submitted_at, started_at, finished_at, paused, "
    "task_timeout_s, blocklist_after, depends_on, limits, progress_timeout_s, pools, tags, "
    "resources, renderer, project, user_name, frame_depends_on, fail_after_workers, notice, "
    "parts_per_frame, interruptible, deadline_ms, gpu_seconds, cost, exr_float, assets, "
    "output_shared, checkpoint_interval_s, settings, scene_name, pipeline_id, step, "
    "step_depends_on, failure_policy";

StatusOr<JobRecord> ReadJob(const sql::Stmt& s) {
  JobRecord j;
  j.id = s.Int(0);
  j.name = s.Text(1);
  TSR_ASSIGN_OR_RETURN(j.state, ParseEnum<JobState>(s.Text(2), kJobStates));
  j.priority = static_cast<int>(s.Int(3));
  j.frame_start = static_cast<int>(s.Int(4));
  j.frame_end = static_cast<int>(s.Int(5));
  j.chunk_size = static_cast<int>(s.Int(6));
  j.max_retries = static_cast<int>(s.Int(7));
  j.output_dir = s.Text(8);
  j.output_pattern = s.Text(9);
  j.output_formats = nlohmann::json::parse(s.Text(10)).get<std::vector<std::string>>();
  j.tasks = {s.Int(11), s.Int(12), s.Int(13), s.Int(14), s.Int(15), s.Int(16)};
  if (!s.IsNull(17)) j.error = s.Text(17);
  j.submitted_at_ms = s.Int(18);
  j.started_at_ms = s.OptInt(19);
  j.finished_at_ms = s.OptInt(20);
  j.paused = s.Int(21) != 0;
  j.task_timeout_s = static_cast<int>(s.Int(22));
  j.blocklist_after = static_cast<int>(s.Int(23));
  j.depends_on = nlohmann::json::parse(s.Text(24)).get<std::vector<int64_t>>();
  j.limits = nlohmann::json::parse(s.Text(25)).get<std::vector<std::string>>();
  j.progress_timeout_s = static_cast<int>(s.Int(26));
  j.pools = nlohmann::json::parse(s.Text(27)).get<std::vector<std::string>>();
  j.tags = nlohmann::json::parse(s.Text(28)).get<std::vector<std::string>>();
  j.resources = nlohmann::json::parse(s.Text(29)).get<spec::ResourceSpec>();
  j.renderer = s.Text(30);
  j.project = s.Text(31);
  j.user = s.Text(32);
  j.frame_depends_on = nlohmann::json::parse(s.Text(33)).get<std::vector<int64_t>>();
  j.fail_after_workers = static_cast<int>(s.Int(34));
  if (!s.IsNull(35)) j.notice = s.Text(35);
  j.parts_per_frame = static_cast<int>(s.Int(36));
  j.interruptible = s.Int(37) != 0;
  j.deadline_ms = s.OptInt(38);
  j.gpu_seconds = s.Double(39);
  j.cost = s.Double(40);
  j.exr_float = s.Int(41) != 0;
  j.assets = nlohmann::json::parse(s.Text(42)).get<std::map<std::string, std::string>>();
  j.output_shared = s.Int(43) != 0;
  j.checkpoint_interval_s = static_cast<int>(s.Int(44));
  j.settings = nlohmann::json::parse(s.Text(45)).get<std::map<std::string, std::string>>();
  j.scene_name = s.Text(46);
  j.pipeline_id = s.OptInt(47);
  j.step = s.Text(48);
  j.step_depends_on = nlohmann::json::parse(s.Text(49)).get<std::vector<spec::StepDependency>>();
  j.failure_policy = nlohmann::json::parse(s.Text(50)).get<spec::FailurePolicy>();
  return j;
}

StatusOr<JobRecord> SelectJob(sql::Db& db, int64_t job_id) {
  TSR_ASSIGN_OR_RETURN(
      sql::Stmt s, db.Prepare(std::string("SELECT ") + kJobColumns + " FROM jobs WHERE id = ?"));
  s.Bind(1, job_id);
  TSR_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return Status::NotFound("job " + std::to_string(job_id) + " does not exist");
  return ReadJob(s);
}

const char* const kTaskColumns =
    "t.id, t.job_id, t.idx, t.frame_start, t.frame_end, t.state, t.attempt, t.failures, "
    "t.worker_id, w.name, t.progress, t.message, t.started_at, t.finished_at, t.failed_on, t.part, "
    "t.gpu_seconds, t.cost, t.failures_total, t.status_line";

StatusOr<TaskRecord> ReadTask(const sql::Stmt& s) {
  TaskRecord t;
  t.id = s.Int(0);
  t.job_id = s.Int(1);
  t.index = static_cast<int>(s.Int(2));
  t.frame_start = static_cast<int>(s.Int(3));
  t.frame_end = static_cast<int>(s.Int(4));
  TSR_ASSIGN_OR_RETURN(t.state, ParseEnum<TaskState>(s.Text(5), kTaskStates));
  t.attempt = static_cast<int>(s.Int(6));
  t.failures = static_cast<int>(s.Int(7));
  t.worker_id = s.OptInt(8);
  if (!s.IsNull(9)) t.worker_name = s.Text(9);
  t.progress = s.Double(10);
  t.message = s.Text(11);
  t.started_at_ms = s.OptInt(12);
  t.finished_at_ms = s.OptInt(13);
  t.failed_on = nlohmann::json::parse(s.Text(14)).get<std::vector<int64_t>>();
  if (const std::string part = s.Text(15); !part.empty()) {
    t.part = nlohmann::json::parse(part).get<protocol::FramePart>();
  }
  t.gpu_seconds = s.Double(16);
  t.cost = s.Double(17);
  t.failures_total = static_cast<int>(s.Int(18));
  t.status_line = s.Text(19);
  return t;
}

const char* JobStateName(JobState s) { return kJobStates[static_cast<int>(s)]; }
const char* TaskStateName(TaskState s) { return kTaskStates[static_cast<int>(s)]; }
const char* WorkerStateName(WorkerState s) { return kWorkerStates[static_cast<int>(s)]; }
bool IsTerminal(TaskState s) {
  return s == TaskState::kDone || s == TaskState::kFailed || s == TaskState::kCanceled;
}

PluginFiles ResolvePluginFiles(const spec::JobSpec& spec) {
  PluginFiles files;
  if (StatusOr<std::map<std::string, std::string>> settings = spec::ResolvedSettings(spec);
      settings.ok()) {
    files.settings_json = nlohmann::json(*settings).dump();
  }
  if (StatusOr<std::string> name = spec::SceneFileName(spec); name.ok()) files.scene_name = *name;
  return files;
}

}  // namespace tessera::store
