#include "scheduler/api/submission.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <variant>

#include "scheduler/api/submission_body.h"
#include "scheduler/blobs/blob_store.h"
#include "shared/base/utf8.h"
#include "shared/jobs/job_steps.h"
#include "shared/jobs/parsed_job_file.h"
#include "shared/openjd/openjd.h"
#include "shared/plugins/plugin_catalog.h"
#include "shared/scenes/scene_file.h"

namespace tessera::api {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

bool Inside(const fs::path& root, const fs::path& path) {
  auto [root_end, unused] = std::mismatch(root.begin(), root.end(), path.begin(), path.end());
  return root_end == root.end();
}

// Every job a dependency list names must exist; the new job's own id cannot be named (it does
// not exist yet, and ids are never reused), so dependencies point only at older jobs and can
// never form a cycle.
Status CheckDependencies(store::Store& store, const std::vector<int64_t>& ids, const char* field) {
  for (size_t i = 0; i < ids.size(); ++i) {
    StatusOr<store::JobRecord> job = store.GetJob(ids[i]);
    if (job.ok()) continue;
    if (job.status().code() != StatusCode::kNotFound) return job.status();
    return Status::InvalidArgument(std::string(field) + "[" + std::to_string(i) + "]: job " +
                                   std::to_string(ids[i]) + " does not exist");
  }
  return Status::Ok();
}

// A job's output folder is its own: one that another job writes to is refused, unless both
// jobs are the same user's and the spec says `output.reuse: true`. Runs inside the job's
// insert, under the store's write lock, so two submissions cannot both claim a folder.
Status CheckFolderIsFree(store::Store& store, const std::string& dir, const spec::JobSpec& job,
                         const char* field) {
  TSR_ASSIGN_OR_RETURN(auto users, store.JobsWritingTo(dir));
  for (const auto& [id, user] : users) {
    if (user != (job.user.empty() ? "unknown" : job.user)) {
      return Status::PermissionDenied(std::string(field) + ": the folder holds the frames of job " +
                                      std::to_string(id) + " of another user; choose another");
    }
    if (!job.output.reuse) {
      return Status::AlreadyExists(std::string(field) + ": the folder holds the frames of job " +
                                   std::to_string(id) +
                                   "; choose another, or set output.reuse: true to write into it");
    }
  }
  return Status::Ok();
}

// Completes a parsed job with what travelled beside its file (its scene's text, the assets'
// hashes) and checks the lot: every file it needs was uploaded, its frames split. With
// `only_needed`, the job keeps just the assets it names (a step of a job shares the job's map).
Status CompleteJob(spec::JobSpec& job, const std::optional<std::string>& scene_yaml,
                   const json& assets, bool only_needed) {
  if (scene_yaml) {
    job.scene_yaml = *scene_yaml;
  } else if (job.scene_yaml.empty() && job.produces_frames() && !job.scene_path.empty()) {
    return Status::InvalidArgument("scene: the scheduler cannot read the path '" + job.scene_path +
                                   "'; send the scene's text as scene_yaml (tessera submit does)");
  }
  TSR_RETURN_IF_ERROR(spec::ValidateJob(job));
  if (!assets.is_null()) TSR_RETURN_IF_ERROR(spec::SetAssets(assets, &job));
  std::set<std::string> needed;
  // Every file the job needs must travel with it.
  for (size_t i = 0; i < job.asset_files.size(); ++i) {
    if (!job.assets.count(job.asset_files[i])) {
      return Status::InvalidArgument("assets[" + std::to_string(i) + "]: '" + job.asset_files[i] +
                                     "' was not uploaded (tessera submit uploads the files a "
                                     "job lists)");
    }
    needed.insert(job.asset_files[i]);
  }
  if (auto plugin = plugin::FindPlugin(job.renderer);
      plugin && plugin::IsBinaryScene(*plugin, job.scene_path)) {
    TSR_ASSIGN_OR_RETURN(std::string name, plugin::CheckSceneName(*plugin, job.scene_path));
    if (!job.assets.count(name)) {
      return Status::InvalidArgument("scene: '" + job.scene_path +
                                     "' is a binary scene; it travels as the asset '" + name +
                                     "', which was not uploaded (tessera submit does)");
    }
    needed.insert(name);
  }
  if (job.takes_tessera_scene()) {
    StatusOr<spec::SceneSpec> scene = spec::ParseSceneYaml(job.scene_yaml);
    if (!scene.ok()) return scene.status().WithContext("scene");
    for (const std::string& file : spec::RelativeAssetFiles(*scene)) {
      if (!job.assets.count(file)) {
        return Status::InvalidArgument(
            "scene: the file '" + file +
            "' it names is not among the job's assets (tessera submit uploads the files a scene "
            "names; or give an absolute path on shared storage)");
      }
      needed.insert(file);
    }
    TSR_RETURN_IF_ERROR(spec::SplitFrames(&job, scene->width, scene->height, scene->samples,
                                          spec::ResultChannels(*scene)));
  } else {
    TSR_RETURN_IF_ERROR(spec::SplitPluginFrames(&job));
  }
  // A step keeps the files it names; an OpenJD step's session may read any file its job brought
  // (a bundle's attachments, mapped into every session).
  if (only_needed && job.renderer != spec::kRendererOpenJd) {
    std::erase_if(job.assets, [&](const auto& a) { return !needed.count(a.first); });
  }
  // A step taking another step's frames gets exactly those as its assets, later (the broker).
  if (auto plugin = plugin::FindPlugin(job.renderer);
      plugin && !plugin->input_frames_setting.empty()) {
    job.assets.clear();
  }
  return Status::Ok();
}

Status WithStep(const Status& s, const std::string& step) {
  return s.ok() ? s : Status(s.code(), "step " + step + ": " + s.message());
}

// A job without steps, as its file says, completed with what travelled beside it.
Status CompleteSingleJob(const SubmissionBody& req, spec::JobSpec& job) {
  // The job file's own `user:` wins over the submitting client's account name.
  if (job.user.empty() && req.user) job.user = *req.user;
  return CompleteJob(job, req.scene_yaml, req.assets, /*only_needed=*/false);
}

// A job with steps, as its file says: each step completed with its scene and the shared assets.
Status CompletePipeline(const SubmissionBody& req, spec::PipelineSpec& pipeline) {
  if (pipeline.user.empty() && req.user) pipeline.user = *req.user;
  if (req.scene_yaml && !req.scene_yaml->empty()) {
    return Status::InvalidArgument(
        "body.scene_yaml: a job with steps sends each step's scene in step_scenes");
  }
  if (req.step_scenes.is_object()) {
    for (const auto& [name, text] : req.step_scenes.items()) {
      if (pipeline.step_index(name) < 0) {
        return Status::InvalidArgument("body.step_scenes." + name.substr(0, 128) +
                                       ": the job has no step of that name");
      }
    }
  }
  int64_t tasks = 0;
  for (spec::StepSpec& step : pipeline.steps) {
    step.job.user = pipeline.user;
    std::optional<std::string> scene;
    if (req.step_scenes.is_object() && req.step_scenes.contains(step.name)) {
      scene = req.step_scenes[step.name].get<std::string>();
    }
    TSR_RETURN_IF_ERROR(
        WithStep(CompleteJob(step.job, scene, req.assets, /*only_needed=*/true), step.name));
    tasks += spec::TaskCount(step.job);
  }
  if (tasks > spec::kMaxTasksPerJob) {
    return Status::InvalidArgument("steps: " + std::to_string(tasks) +
                                   " tasks over all steps; a job may have at most " +
                                   std::to_string(spec::kMaxTasksPerJob));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::string> OutputDirFor(const std::string& output_root, const std::string& relative,
                                   const std::string& name, int64_t job_id) {
  fs::path root = fs::weakly_canonical(output_root);
  fs::path dir = root / (relative.empty() ? name + "-" + std::to_string(job_id) : relative);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    return Status::Internal("output.directory: cannot create " + dir.string() + ": " +
                            ec.message());
  }
  // A symlink inside the root must not lead outside it.
  fs::path real = fs::canonical(dir, ec);
  if (ec || !Inside(root, real)) {
    return Status::InvalidArgument("output.directory: '" + relative +
                                   "' resolves outside the output root " + root.string());
  }
  return real.string();
}

StatusOr<std::string> SharedDirFor(const std::vector<std::string>& shared_roots,
                                   const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  fs::path real = fs::canonical(dir, ec);
  if (ec) {
    return Status::InvalidArgument("output.shared_dir: cannot create '" + dir +
                                   "' on the scheduler: " + ec.message());
  }
  for (const std::string& root_text : shared_roots) {
    if (Inside(fs::weakly_canonical(root_text, ec), real)) return real.string();
  }
  return Status::InvalidArgument(
      "output.shared_dir: '" + dir + "' is not inside any of this farm's storage.shared_roots" +
      (shared_roots.empty() ? std::string(" (none are configured)") : std::string()));
}

namespace {

// Every asset a job names is a stored blob (touched, so the blob store keeps it).
Status CheckAssetsStored(const SubmitContext& ctx,
                         const std::map<std::string, std::string>& assets) {
  for (const auto& [path, hash] : assets) {
    if (ctx.blobs != nullptr) ctx.blobs->Touch(hash);
    if (ctx.blobs == nullptr || !ctx.blobs->Size(hash).ok()) {
      return Status::InvalidArgument("assets[" + path + "]: blob " + hash +
                                     " is not stored; upload it first (PUT /api/v1/blobs/" + hash +
                                     ")");
    }
  }
  return Status::Ok();
}

// Who the job is submitted as: a submitter submits as itself; operators may submit on behalf of
// anyone.
Status CheckSubmitter(const SubmitContext& ctx, const security::Caller& caller, std::string* user) {
  if (ctx.auth_enabled) {
    if (!caller.may(security::Role::kOperator) && !user->empty() && *user != caller.user) {
      return Status::PermissionDenied("user: this token submits as '" + caller.user + "', not '" +
                                      *user + "'");
    }
    if (!caller.may(security::Role::kOperator) || user->empty()) *user = caller.user;
  }
  return utf8::Check(*user, "user");
}

// What the farm must have for the job: its limits, the jobs it depends on, its shared folder's
// root; and, unless a dry run, its assets uploaded.
Status CheckFarmHas(const SubmitContext& ctx, spec::JobSpec& job, bool dry_run) {
  if (!dry_run) TSR_RETURN_IF_ERROR(CheckAssetsStored(ctx, job.assets));
  for (size_t i = 0; i < job.limits.size(); ++i) {
    if (!ctx.limits.count(job.limits[i])) {
      return Status::InvalidArgument("limits[" + std::to_string(i) + "]: no limit named '" +
                                     job.limits[i] + "' is configured on this farm");
    }
  }
  TSR_RETURN_IF_ERROR(CheckDependencies(ctx.store, job.depends_on, "depends_on"));
  TSR_RETURN_IF_ERROR(CheckDependencies(ctx.store, job.frame_depends_on, "frame_depends_on"));
  if (!job.output.shared_dir.empty()) {
    TSR_ASSIGN_OR_RETURN(job.output.shared_dir,
                         SharedDirFor(ctx.shared_roots, job.output.shared_dir));
  }
  return Status::Ok();
}

nlohmann::json OutputView(const spec::OutputSpec& output) {
  return output.shared_dir.empty() ? nlohmann::json{{"directory", output.directory}}
                                   : nlohmann::json{{"shared_dir", output.shared_dir}};
}

// The folder a job (or step) writes to: on shared storage, or under `root`; a folder another
// job writes to is refused unless the spec allows it.
StatusOr<std::string> FolderFor(const std::vector<std::string>& shared_roots,
                                const std::string& root, const spec::JobSpec& job,
                                const std::string& relative, const std::string& shared,
                                store::Store& store, int64_t id) {
  std::string dir;
  if (!shared.empty()) {
    TSR_ASSIGN_OR_RETURN(dir, SharedDirFor(shared_roots, shared));
  } else {
    TSR_ASSIGN_OR_RETURN(dir, OutputDirFor(root, relative, job.name, id));
  }
  TSR_RETURN_IF_ERROR(CheckFolderIsFree(store, dir, job,
                                        shared.empty() ? "output.directory" : "output.shared_dir"));
  return dir;
}

}  // namespace

StatusOr<CheckedJob> CheckSubmission(const SubmitContext& ctx, const std::string& body,
                                     const security::Caller& caller, bool dry_run) {
  TSR_ASSIGN_OR_RETURN(SubmissionBody req, ParseSubmissionBody(body, ctx.openjd));
  TSR_ASSIGN_OR_RETURN(spec::ParsedJobFile file, spec::CheckJobFile(req.document));
  CheckedJob checked;
  checked.job_yaml = req.job_yaml;
  if (auto* pipeline = std::get_if<spec::PipelineSpec>(&file)) {
    TSR_RETURN_IF_ERROR(CompletePipeline(req, *pipeline));
    TSR_RETURN_IF_ERROR(CheckSubmitter(ctx, caller, &pipeline->user));
    for (spec::StepSpec& step : pipeline->steps) {
      step.job.user = pipeline->user;
      TSR_RETURN_IF_ERROR(WithStep(CheckFarmHas(ctx, step.job, dry_run), step.name));
    }
    checked.spec = std::move(*pipeline);
    return checked;
  }
  // A template was translated into a job with steps (ParseSubmissionBody): what is left is a job.
  auto* job = std::get_if<spec::JobSpec>(&file);
  if (job == nullptr) return Status::Internal("job_yaml: an OpenJD template was not translated");
  TSR_RETURN_IF_ERROR(CompleteSingleJob(req, *job));
  TSR_RETURN_IF_ERROR(CheckSubmitter(ctx, caller, &job->user));
  TSR_RETURN_IF_ERROR(CheckFarmHas(ctx, *job, dry_run));
  checked.spec = std::move(*job);
  return checked;
}

nlohmann::json DryRunView(const spec::JobSpec& job) {
  return {{"name", job.name},
          {"renderer", job.renderer},
          {"user", job.user},
          {"frames",
           {{"start", job.frame_start}, {"end", job.frame_end}, {"count", job.frame_count()}}},
          {"chunk_size", job.chunk_size},
          {"parts_per_frame", std::max<size_t>(1, job.parts.size())},
          {"tasks", spec::TaskCount(job)},
          {"depends_on", job.depends_on},
          {"frame_depends_on", job.frame_depends_on},
          {"assets", job.assets.size()},
          {"output", OutputView(job.output)}};
}

nlohmann::json DryRunView(const CheckedJob& checked) {
  if (checked.job() != nullptr) return DryRunView(*checked.job());
  const spec::PipelineSpec& pipeline = *checked.pipeline();
  nlohmann::json steps = nlohmann::json::array();
  int64_t tasks = 0;
  for (const spec::StepSpec& step : pipeline.steps) {
    nlohmann::json view = DryRunView(step.job);
    view.erase("user");
    view["name"] = step.name;
    view["step_depends_on"] = step.depends_on;
    tasks += spec::TaskCount(step.job);
    steps.push_back(std::move(view));
  }
  return {{"name", pipeline.name},     {"renderer", spec::kRendererSteps},
          {"user", pipeline.user},     {"tasks", tasks},
          {"steps", std::move(steps)}, {"output", OutputView(pipeline.output)}};
}

namespace {

// Stores a checked job with its tasks, each folder claimed inside the job's transaction.
StatusOr<store::JobRecord> StoreChecked(const SubmitContext& ctx, const CheckedJob& checked,
                                        const store::IdempotentRequest* request,
                                        store::CreatedRows* created) {
  if (const spec::PipelineSpec* pipeline_spec = checked.pipeline()) {
    const spec::PipelineSpec& pipeline = *pipeline_spec;
    // The job's folder; each step's is a folder named after it inside (unless it has its own).
    spec::JobSpec job_folder;
    job_folder.name = pipeline.name;
    job_folder.user = pipeline.user;
    job_folder.output = pipeline.output;
    return ctx.store.CreatePipeline(
        pipeline, checked.job_yaml,
        [&](int64_t id) {
          return FolderFor(ctx.shared_roots, ctx.output_root, job_folder, pipeline.output.directory,
                           pipeline.output.shared_dir, ctx.store, id);
        },
        [&](size_t i, int64_t id, const std::string& job_dir) -> StatusOr<std::string> {
          const spec::StepSpec& step = pipeline.steps[i];
          if (step.own_output) {
            return FolderFor(ctx.shared_roots, ctx.output_root, step.job, step.job.output.directory,
                             step.job.output.shared_dir, ctx.store, id);
          }
          const bool shared = !pipeline.output.shared_dir.empty();
          return FolderFor(ctx.shared_roots, job_dir, step.job, step.name,
                           shared ? job_dir + "/" + step.name : "", ctx.store, id);
        },
        request, created);
  }
  const spec::JobSpec& job = *checked.job();
  return ctx.store.CreateJob(
      job, checked.job_yaml,
      [&](int64_t id) {
        return FolderFor(ctx.shared_roots, ctx.output_root, job, job.output.directory,
                         job.output.shared_dir, ctx.store, id);
      },
      request, created);
}

// What the broker holds of a stored job: the rows the store created (a job's own, or its
// steps') and each one's scene as the checked spec carries it (the text that was stored).
broker::SubmittedJob ForBroker(const store::JobRecord& record, const CheckedJob& checked,
                               store::CreatedRows created) {
  broker::SubmittedJob submitted;
  submitted.id = record.id;
  if (const spec::PipelineSpec* pipeline = checked.pipeline()) {
    // Steps are stored in the spec's order, one row each.
    for (size_t i = 0; i < created.steps.size() && i < pipeline->steps.size(); ++i) {
      submitted.scenes[created.steps[i].id] = pipeline->steps[i].job.scene_yaml;
    }
    submitted.jobs = std::move(created.steps);
  } else {
    submitted.scenes[record.id] = checked.job()->scene_yaml;
    submitted.jobs = {record};
  }
  submitted.tasks = std::move(created.tasks);
  return submitted;
}

}  // namespace

StatusOr<store::JobRecord> SubmitJob(const SubmitContext& ctx, const std::string& body,
                                     const security::Caller& caller,
                                     const store::IdempotentRequest* request, CheckedJob* submitted,
                                     broker::SubmittedJob* for_broker) {
  TSR_ASSIGN_OR_RETURN(CheckedJob checked, CheckSubmission(ctx, body, caller));
  store::CreatedRows created;
  StatusOr<store::JobRecord> record =
      StoreChecked(ctx, checked, request, for_broker != nullptr ? &created : nullptr);
  if (!record.ok()) return record;
  if (for_broker != nullptr) *for_broker = ForBroker(*record, checked, std::move(created));
  if (submitted != nullptr) *submitted = std::move(checked);
  return record;
}

}  // namespace tessera::api
