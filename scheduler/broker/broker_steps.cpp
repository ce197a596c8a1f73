// The broker's side of jobs with steps (shared/jobs/job_steps.h). Each step is a job of its own in
// the queue, waiting on the steps it depends on through the job dependencies every job has
// (depends_on: the whole step; frame_depends_on: frame by frame). What is particular to steps:
// a step that fails or is canceled cancels the steps that depend on it (so the job ends, failed,
// instead of waiting forever), and an operation on the job (cancel, pause, priority, retry,
// re-render) is applied to each of its steps. The job's counters and state follow its steps' in
// the store (schema 29's triggers). A step whose plugin takes another step's frames (an encode)
// gets them here as its assets once that step is done; so does an OpenJD step of a job bundle
// with what the steps before it returned (their files come into its sessions' output folders).

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>
#include <set>

#include "scheduler/blobs/blob_store.h"
#include "scheduler/broker/broker.h"
#include "shared/plugins/plugin_catalog.h"

namespace tessera::broker {

namespace {

bool DependsOn(const store::JobRecord& step, int64_t other) {
  return std::count(step.depends_on.begin(), step.depends_on.end(), other) > 0 ||
         std::count(step.frame_depends_on.begin(), step.frame_depends_on.end(), other) > 0;
}

}  // namespace

StatusOr<int> Broker::CancelNow(int64_t job_id, const std::string& reason) {
  TSR_ASSIGN_OR_RETURN(store::JobRecord job, store_.GetJob(job_id));
  if (job.has_steps()) {
    TSR_ASSIGN_OR_RETURN(std::vector<store::JobRecord> steps, store_.PipelineSteps(job_id));
    if (job.terminal()) {
      return Status::FailedPrecondition("job " + std::to_string(job_id) + " is already " +
                                        store::JobStateName(job.state));
    }
    int stopped = 0;
    for (const store::JobRecord& step : steps) {
      if (step.terminal()) continue;
      StatusOr<int> n = CancelNow(step.id, reason);
      if (n.ok()) stopped += *n;
    }
    // Its steps' counters made it canceled already, unless a step was done before.
    StatusOr<std::vector<store::Lease>> own = store_.CancelJob(job_id, reason);
    if (!own.ok() && own.status().code() != StatusCode::kFailedPrecondition) return own.status();
    MarkJobChanged(job_id);
    spdlog::info("job {} canceled with its steps ({} running tasks told to stop)", job_id, stopped);
    return stopped;
  }
  TSR_ASSIGN_OR_RETURN(std::vector<store::Lease> leases, store_.CancelJob(job_id, reason));
  for (auto& [id, task] : leases_.tasks()) {
    if (task.job_id == job_id) CancelAllLeases(task, "the job was canceled");
  }
  leases_.DropQueued(job_id);
  for (auto it = leases_.tasks().begin(); it != leases_.tasks().end();) {
    if (it->second.job_id != job_id) {
      ++it;
      continue;
    }
    ClearResume(it->second);  // its checkpoint goes with it
    it = leases_.tasks().erase(it);
  }
  leases_.jobs().erase(job_id);
  MarkJobChanged(job_id);
  spdlog::info("job {} canceled ({} running tasks told to stop){}", job_id, leases.size(),
               reason.empty() ? "" : ": " + reason);
  if (job.pipeline_id) CancelStepsAfter(job);
  return static_cast<int>(leases.size());
}

void Broker::CancelStepsAfter(const store::JobRecord& ended) {
  if (!ended.pipeline_id) return;
  StatusOr<std::vector<store::JobRecord>> steps = store_.PipelineSteps(*ended.pipeline_id);
  if (!steps.ok()) {
    spdlog::error("job {}: cannot read the steps of job {}: {}", ended.id, *ended.pipeline_id,
                  steps.status().ToString());
    return;
  }
  const std::string reason = "step " + ended.step + " " + store::JobStateName(ended.state) +
                             (ended.error ? ": " + *ended.error : std::string());
  if (ended.state == store::JobState::kFailed) {
    (void)store_.SetJobError(*ended.pipeline_id, reason);
    RecordEvent(*ended.pipeline_id, std::nullopt, std::nullopt, "step_failed", reason);
  }
  for (const store::JobRecord& step : *steps) {
    if (step.terminal() || !DependsOn(step, ended.id)) continue;
    // Canceling it cancels the steps after it in turn.
    if (StatusOr<int> n = CancelNow(step.id, reason); !n.ok()) {
      spdlog::error("job {}: cannot cancel step {}: {}", step.id, step.step, n.status().ToString());
    }
  }
}

void Broker::CancelStepsOfEndedSteps() {
  // A step that ended failed or canceled just before a crash may have left steps waiting on it.
  std::vector<int64_t> loaded;
  for (const auto& [id, info] : leases_.jobs()) {
    if (info.pipeline_id) loaded.push_back(id);
  }
  for (int64_t id : loaded) {
    StatusOr<store::JobRecord> step = store_.GetJob(id);
    if (!step.ok() || step->terminal()) continue;
    std::vector<int64_t> deps = step->depends_on;
    deps.insert(deps.end(), step->frame_depends_on.begin(), step->frame_depends_on.end());
    for (int64_t dep : deps) {
      StatusOr<store::JobRecord> other = store_.GetJob(dep);
      if (other.ok() && other->pipeline_id == step->pipeline_id &&
          (other->state == store::JobState::kFailed ||
           other->state == store::JobState::kCanceled)) {
        CancelStepsAfter(*other);
        break;
      }
    }
  }
}

void Broker::FindInputFrames(const store::JobRecord& record, JobInfo& job) {
  if (record.renderer == spec::kRendererOpenJd) return FindReturnedFiles(record, job);
  const std::shared_ptr<const plugin::PluginSpec> plugin = plugin::FindRenderer(record.renderer);
  if (!plugin || plugin->input_frames_setting.empty() || !record.pipeline_id) return;
  // Gathered whenever the step is loaded (submitted, retried, re-rendered, a restart), so it
  // always takes the frames as they are now: the frames step may have been re-rendered since.
  // Frames unchanged are found in the blob store by their hash.
  job.inputs_pending = true;
  const auto from = job.settings.find(plugin->input_frames_setting);
  StatusOr<std::vector<store::JobRecord>> steps = store_.PipelineSteps(*record.pipeline_id);
  if (from != job.settings.end() && steps.ok()) {
    for (const store::JobRecord& step : *steps) {
      if (step.step == from->second) job.input_frames_from = step.id;
    }
  }
}

void Broker::FindReturnedFiles(const store::JobRecord& record, JobInfo& job) {
  if (!record.pipeline_id || (record.depends_on.empty() && record.frame_depends_on.empty())) {
    return;
  }
  // The session's output folders (a job bundle's; shared/openjd/openjd.h): none, nothing to take.
  const nlohmann::json session =
      nlohmann::json::parse(*job.scene_yaml, nullptr, /*allow_exceptions=*/false);
  if (!session.is_object() || !session.contains("outputs") || !session["outputs"].is_array() ||
      session["outputs"].empty()) {
    return;
  }
  StatusOr<std::vector<store::JobRecord>> steps = store_.PipelineSteps(*record.pipeline_id);
  if (!steps.ok()) return;
  for (const nlohmann::json& out : session["outputs"]) {
    if (out.is_object() && out.value("dir", nlohmann::json()).is_string() &&
        out.value("name", nlohmann::json()).is_string()) {
      job.session_outputs.emplace_back(out["dir"].get<std::string>(),
                                       out["name"].get<std::string>());
    }
  }
  // Every step before it, and a step with none before it: its assets are the bundle's own (it
  // never takes any), the ones every session starts from.
  std::map<int64_t, const store::JobRecord*> by_id;
  for (const store::JobRecord& step : *steps) by_id[step.id] = &step;
  std::set<int64_t> before;
  std::vector<int64_t> todo = record.depends_on;
  todo.insert(todo.end(), record.frame_depends_on.begin(), record.frame_depends_on.end());
  while (!todo.empty()) {
    const int64_t id = todo.back();
    todo.pop_back();
    auto it = by_id.find(id);
    if (it == by_id.end() || !before.insert(id).second) continue;
    todo.insert(todo.end(), it->second->depends_on.begin(), it->second->depends_on.end());
    todo.insert(todo.end(), it->second->frame_depends_on.begin(),
                it->second->frame_depends_on.end());
  }
  for (const store::JobRecord& step : *steps) {
    if (step.depends_on.empty() && step.frame_depends_on.empty()) {
      job.attachments_from = step.id;
      break;
    }
  }
  job.input_files_from.assign(before.begin(), before.end());
  job.inputs_pending = !job.input_files_from.empty() && !job.session_outputs.empty();
}

void Broker::GatherInputFrames(int64_t job_id, JobInfo& job) {
  if (job.inputs_gathering) return;
  job.inputs_gathering = true;
  if (!job.input_files_from.empty()) return GatherReturnedFiles(job_id, job);
  StatusOr<store::JobRecord> from = job.input_frames_from > 0
                                        ? store_.GetJob(job.input_frames_from)
                                        : Status::NotFound("the step it takes frames from is gone");
  if (!from.ok() || options_.blobs == nullptr || !assembler_) {
    // Answered like a failed gathering, after this pass: the callers iterate the jobs that
    // ending this one would change.
    assembler::FrameWritten failed;
    failed.job_id = job_id;
    failed.kind = assembler::FrameWritten::Kind::kInputs;
    failed.status =
        !from.ok() ? from.status() : Status::FailedPrecondition("the scheduler has no blob store");
    Post([this, failed = std::move(failed)] { OnInputFramesGathered(failed); });
    return;
  }
  assembler::InputsJob gather;
  gather.job_id = job_id;
  gather.blobs = options_.blobs;
  for (int frame = from->frame_start; frame <= from->frame_end; ++frame) {
    gather.files.emplace_back(plugin::InputFrameName(frame - from->frame_start),
                              (std::filesystem::path(from->output_dir) /
                               spec::OutputFileName(from->output_pattern, frame, "png"))
                                  .string());
  }
  spdlog::info("job {}: storing the {} frames of step {} as its input", job_id, gather.files.size(),
               from->step);
  assembler_->GatherInputs(std::move(gather));
}

void Broker::GatherReturnedFiles(int64_t job_id, JobInfo& job) {
  assembler::InputsJob gather;
  gather.job_id = job_id;
  gather.blobs = options_.blobs;
  StatusOr<store::JobRecord> attached = store_.GetJob(job.attachments_from);
  if (attached.ok()) gather.base = attached->assets;
  for (int64_t id : job.input_files_from) {
    StatusOr<store::JobRecord> step = store_.GetJob(id);
    if (!step.ok()) continue;
    for (const auto& [dir, name] : job.session_outputs) {
      gather.folders.emplace_back((std::filesystem::path(step->output_dir) / name).string(), dir);
    }
  }
  if (options_.blobs == nullptr || !assembler_) {
    assembler::FrameWritten failed;
    failed.job_id = job_id;
    failed.kind = assembler::FrameWritten::Kind::kInputs;
    failed.status = Status::FailedPrecondition("the scheduler has no blob store");
    Post([this, failed = std::move(failed)] { OnInputFramesGathered(failed); });
    return;
  }
  spdlog::info("job {}: storing what the {} step(s) before it returned as its input", job_id,
               job.input_files_from.size());
  assembler_->GatherInputs(std::move(gather));
}

void Broker::OnInputFramesGathered(const assembler::FrameWritten& gathered) {
  auto it = leases_.jobs().find(gathered.job_id);
  // Canceled (or the store was rolled back) meanwhile: a later load gathers them again.
  if (it == leases_.jobs().end() || !it->second.inputs_pending) return;
  JobInfo& job = it->second;
  const int64_t job_id = it->first;
  job.inputs_gathering = false;
  if (!gathered.status.ok()) {
    // A frame file the step wrote is gone, unreadable or not a plain PNG (deleted by hand, a
    // full data folder, a link planted on shared storage): no worker can encode without it. The
    // step ends with the reason on it and the job; re-render the frames step and retry it.
    const std::string reason =
        std::string(job.input_files_from.empty() ? "cannot take its input frames: "
                                                 : "cannot take the files the steps before it "
                                                   "returned: ") +
        gathered.status.message();
    spdlog::error("job {}: {}", job_id, reason);
    (void)store_.SetJobError(job_id, reason);
    if (job.pipeline_id) {
      (void)store_.SetJobError(*job.pipeline_id, "step " + job.step + ": " + reason);
    }
    RecordEvent(job_id, std::nullopt, std::nullopt, "inputs_failed", reason);
    if (StatusOr<int> n = CancelNow(job_id, reason); !n.ok()) {
      spdlog::error("job {}: cannot cancel: {}", job_id, n.status().ToString());
    }
    return;
  }
  if (Status s = store_.SetJobAssets(job_id, gathered.inputs); !s.ok()) {
    spdlog::error("job {}: cannot record its input frames: {}", job_id, s.ToString());
    return;  // still pending: gathered again when it is loaded again
  }
  job.assets = std::make_shared<const std::map<std::string, std::string>>(gathered.inputs);
  job.inputs_pending = false;
  spdlog::info("job {}: {} input frames ({} bytes) stored; its task is queued", job_id,
               gathered.inputs.size(), gathered.bytes);
  MarkJobChanged(job_id);
  EnqueueJob(job_id);
}

std::string Broker::DependencyName(const JobInfo& job, int64_t dep) {
  if (job.pipeline_id) {
    StatusOr<store::JobRecord> other = store_.GetJob(dep);
    if (other.ok() && other->pipeline_id == job.pipeline_id) return "step " + other->step;
  }
  return "job " + std::to_string(dep);
}

StatusOr<std::vector<int64_t>> Broker::JobsOf(int64_t job_id) {
  TSR_ASSIGN_OR_RETURN(store::JobRecord job, store_.GetJob(job_id));
  if (!job.has_steps()) return std::vector<int64_t>{job_id};
  TSR_ASSIGN_OR_RETURN(std::vector<store::JobRecord> steps, store_.PipelineSteps(job_id));
  std::vector<int64_t> ids;
  for (const store::JobRecord& step : steps) ids.push_back(step.id);
  return ids;
}

}  // namespace tessera::broker
