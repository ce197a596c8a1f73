// Steps' inputs: a step whose plugin takes another step's frames (plugin.yaml input_frames, e.g.
// an encode) gets them as its assets once that step is done; an OpenJD step of a job bundle
// likewise takes what the steps before it returned into its sessions' output folders, over the
// bundle's attached files. Gathered whenever the step is loaded (submitted, retried,
// re-rendered, a restart), so it always takes the files as they are now; files unchanged are
// found in the blob store by their hash. Stored on an assembler thread, never the broker's.

#include <spdlog/spdlog.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "scheduler/broker/event_sink.h"
#include "scheduler/broker/steps.h"
#include "shared/plugins/plugin_catalog.h"

namespace tessera::broker {

StatusOr<std::vector<store::JobRecord>> Steps::StepsOf(Pass& pass, const store::JobRecord& record,
                                                       const std::vector<store::JobRecord>* given) {
  if (given != nullptr) return *given;
  return pass.store.PipelineSteps(*record.pipeline_id);
}

void Steps::FindInputs(Pass& pass, const store::JobRecord& record, JobInfo& job,
                       const std::vector<store::JobRecord>* steps_given) {
  if (record.renderer == spec::kRendererOpenJd) {
    return FindReturnedFiles(pass, record, job, steps_given);
  }
  const std::shared_ptr<const plugin::PluginSpec> plugin = plugin::FindRenderer(record.renderer);
  if (!plugin || plugin->input_frames_setting.empty() || !record.pipeline_id) return;
  job.inputs_pending = true;
  const auto from = job.settings.find(plugin->input_frames_setting);
  StatusOr<std::vector<store::JobRecord>> steps = StepsOf(pass, record, steps_given);
  if (from != job.settings.end() && steps.ok()) {
    for (const store::JobRecord& step : *steps) {
      if (step.step == from->second) job.input_frames_from = step.id;
    }
  }
}

void Steps::FindReturnedFiles(Pass& pass, const store::JobRecord& record, JobInfo& job,
                              const std::vector<store::JobRecord>* steps_given) {
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
  StatusOr<std::vector<store::JobRecord>> steps = StepsOf(pass, record, steps_given);
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

void Steps::GatheringFailed(Pass& pass, int64_t job_id, Status why) {
  assembler::InputsGathered failed;
  failed.job_id = job_id;
  failed.status = std::move(why);
  pass.later([this, failed = std::move(failed)](Pass& later) { OnInputsGathered(later, failed); });
}

void Steps::GatherInputs(Pass& pass, int64_t job_id, JobInfo& job) {
  if (job.inputs_gathering) return;
  job.inputs_gathering = true;
  if (!job.input_files_from.empty()) return GatherReturnedFiles(pass, job_id, job);
  StatusOr<store::JobRecord> from = job.input_frames_from > 0
                                        ? pass.store.GetJob(job.input_frames_from)
                                        : Status::NotFound("the step it takes frames from is gone");
  if (!from.ok()) return GatheringFailed(pass, job_id, from.status());
  if (p_.options.blobs == nullptr || pass.assembler == nullptr) {
    return GatheringFailed(pass, job_id,
                           Status::FailedPrecondition("the scheduler has no blob store"));
  }
  assembler::InputsJob gather;
  gather.job_id = job_id;
  gather.blobs = p_.options.blobs;
  for (int frame = from->frame_start; frame <= from->frame_end; ++frame) {
    gather.files.emplace_back(plugin::InputFrameName(frame - from->frame_start),
                              (std::filesystem::path(from->output_dir) /
                               spec::OutputFileName(from->output_pattern, frame, "png"))
                                  .string());
  }
  spdlog::info("job {}: storing the {} frames of step {} as its input", job_id, gather.files.size(),
               from->step);
  pass.assembler->GatherInputs(std::move(gather));
}

void Steps::GatherReturnedFiles(Pass& pass, int64_t job_id, JobInfo& job) {
  assembler::InputsJob gather;
  gather.job_id = job_id;
  gather.blobs = p_.options.blobs;
  StatusOr<store::JobRecord> attached = pass.store.GetJob(job.attachments_from);
  if (attached.ok()) gather.base = attached->assets;
  for (int64_t id : job.input_files_from) {
    StatusOr<store::JobRecord> step = pass.store.GetJob(id);
    if (!step.ok()) continue;
    for (const auto& [dir, name] : job.session_outputs) {
      gather.folders.emplace_back((std::filesystem::path(step->output_dir) / name).string(), dir);
    }
  }
  if (p_.options.blobs == nullptr || pass.assembler == nullptr) {
    return GatheringFailed(pass, job_id,
                           Status::FailedPrecondition("the scheduler has no blob store"));
  }
  spdlog::info("job {}: storing what the {} step(s) before it returned as its input", job_id,
               job.input_files_from.size());
  pass.assembler->GatherInputs(std::move(gather));
}

void Steps::OnInputsGathered(Pass& pass, const assembler::InputsGathered& gathered) {
  auto it = p_.table.jobs().find(gathered.job_id);
  // Canceled (or the store was rolled back) meanwhile: a later load gathers them again.
  if (it == p_.table.jobs().end() || !it->second.inputs_pending) return;
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
    (void)pass.store.SetJobError(job_id, reason);
    if (job.pipeline_id) {
      (void)pass.store.SetJobError(*job.pipeline_id, "step " + job.step + ": " + reason);
    }
    pass.events.Record(job_id, std::nullopt, std::nullopt, "inputs_failed", reason);
    if (StatusOr<int> n = Cancel(pass, job_id, reason); !n.ok()) {
      spdlog::error("job {}: cannot cancel: {}", job_id, n.status().ToString());
    }
    return;
  }
  if (Status s = pass.store.SetJobAssets(job_id, gathered.inputs); !s.ok()) {
    spdlog::error("job {}: cannot record its input frames: {}", job_id, s.ToString());
    return;  // still pending: gathered again when it is loaded again
  }
  job.assets = std::make_shared<const std::map<std::string, std::string>>(gathered.inputs);
  job.inputs_pending = false;
  spdlog::info("job {}: {} input frames ({} bytes) stored; its task is queued", job_id,
               gathered.inputs.size(), gathered.bytes);
  pass.events.JobChanged(job_id);
  p_.queue.EnqueueJob(pass, job_id);
}

}  // namespace tessera::broker
