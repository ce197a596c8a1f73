#include "scheduler/api/submission.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "scheduler/blobs/blob_store.h"
#include "shared/plugin_catalog.h"
#include "shared/scene_spec.h"
#include "shared/utf8.h"

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

}  // namespace

StatusOr<spec::JobSpec> ParseSubmission(const std::string& body, std::string* job_yaml) {
  json req = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (req.is_discarded() || !req.is_object()) {
    return Status::InvalidArgument(
        "body: expected a JSON object {\"job_yaml\": ..., "
        "\"scene_yaml\": ..., \"user\": ...} (valid JSON, text in UTF-8)");
  }
  for (const auto& [key, value] : req.items()) {
    if (key != "job_yaml" && key != "scene_yaml" && key != "user" && key != "assets") {
      return Status::InvalidArgument("body." + key +
                                     ": unknown field (job_yaml, scene_yaml, user, assets)");
    }
    if (key != "assets" && !value.is_string()) {
      return Status::InvalidArgument("body." + key + ": expected a string");
    }
  }
  if (!req.contains("job_yaml")) return Status::InvalidArgument("body.job_yaml: required");
  *job_yaml = req["job_yaml"].get<std::string>();
  TSR_ASSIGN_OR_RETURN(spec::JobSpec job, spec::ParseJobYaml(*job_yaml));
  // The job file's own `user:` wins over the submitting client's account name.
  if (job.user.empty() && req.contains("user")) job.user = req["user"].get<std::string>();
  if (req.contains("scene_yaml")) {
    job.scene_yaml = req["scene_yaml"].get<std::string>();
  } else if (job.scene_yaml.empty() && job.produces_frames() && !job.scene_path.empty()) {
    return Status::InvalidArgument("scene: the scheduler cannot read the path '" + job.scene_path +
                                   "'; send the scene's text as scene_yaml (tessera submit does)");
  }
  TSR_RETURN_IF_ERROR(spec::ValidateJob(job));
  if (req.contains("assets")) TSR_RETURN_IF_ERROR(spec::SetAssets(req["assets"], &job));
  // Every file the job needs must travel with it.
  for (size_t i = 0; i < job.asset_files.size(); ++i) {
    if (!job.assets.count(job.asset_files[i])) {
      return Status::InvalidArgument("assets[" + std::to_string(i) + "]: '" + job.asset_files[i] +
                                     "' was not uploaded (tessera submit uploads the files a "
                                     "job lists)");
    }
  }
  if (auto plugin = plugin::FindPlugin(job.renderer);
      plugin && plugin::IsBinaryScene(*plugin, job.scene_path)) {
    TSR_ASSIGN_OR_RETURN(std::string name, plugin::CheckSceneName(*plugin, job.scene_path));
    if (!job.assets.count(name)) {
      return Status::InvalidArgument("scene: '" + job.scene_path +
                                     "' is a binary scene; it travels as the asset '" + name +
                                     "', which was not uploaded (tessera submit does)");
    }
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
    }
    TSR_RETURN_IF_ERROR(spec::SplitFrames(&job, scene->width, scene->height, scene->samples,
                                          spec::ResultChannels(*scene)));
  } else {
    TSR_RETURN_IF_ERROR(spec::SplitPluginFrames(&job));
  }
  return job;
}

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

}  // namespace

StatusOr<CheckedJob> CheckSubmission(const SubmitContext& ctx, const std::string& body,
                                     const security::Caller& caller, bool dry_run) {
  CheckedJob checked;
  TSR_ASSIGN_OR_RETURN(checked.job, ParseSubmission(body, &checked.job_yaml));
  spec::JobSpec& job = checked.job;
  // A dry run's assets are uploaded only when the job is submitted for real.
  if (!dry_run) TSR_RETURN_IF_ERROR(CheckAssetsStored(ctx, job.assets));
  // A submitter submits as itself; operators may submit on behalf of anyone.
  if (ctx.auth_enabled) {
    if (!caller.may(security::Role::kOperator) && !job.user.empty() && job.user != caller.user) {
      return Status::PermissionDenied("user: this token submits as '" + caller.user + "', not '" +
                                      job.user + "'");
    }
    if (!caller.may(security::Role::kOperator) || job.user.empty()) job.user = caller.user;
  }
  TSR_RETURN_IF_ERROR(utf8::Check(job.user, "user"));
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
  return checked;
}

nlohmann::json DryRunView(const spec::JobSpec& job) {
  const size_t chunks = spec::ExpandFrames(job).size();
  const size_t parts = std::max<size_t>(1, job.parts.size());
  return {{"name", job.name},
          {"renderer", job.renderer},
          {"user", job.user},
          {"frames",
           {{"start", job.frame_start}, {"end", job.frame_end}, {"count", job.frame_count()}}},
          {"chunk_size", job.chunk_size},
          {"parts_per_frame", parts},
          {"tasks", chunks * parts},
          {"depends_on", job.depends_on},
          {"frame_depends_on", job.frame_depends_on},
          {"assets", job.assets.size()},
          {"output", job.output.shared_dir.empty()
                         ? nlohmann::json{{"directory", job.output.directory}}
                         : nlohmann::json{{"shared_dir", job.output.shared_dir}}}};
}

StatusOr<store::JobRecord> SubmitJob(const SubmitContext& ctx, const std::string& body,
                                     const security::Caller& caller,
                                     const store::IdempotentRequest* request) {
  TSR_ASSIGN_OR_RETURN(CheckedJob checked, CheckSubmission(ctx, body, caller));
  const spec::JobSpec& job = checked.job;
  return ctx.store.CreateJob(
      job, checked.job_yaml,
      [&](int64_t id) -> StatusOr<std::string> {
        const bool shared = !job.output.shared_dir.empty();
        std::string dir;
        if (shared) {
          dir = job.output.shared_dir;
        } else {
          TSR_ASSIGN_OR_RETURN(dir,
                               OutputDirFor(ctx.output_root, job.output.directory, job.name, id));
        }
        TSR_RETURN_IF_ERROR(CheckFolderIsFree(ctx.store, dir, job,
                                              shared ? "output.shared_dir" : "output.directory"));
        return dir;
      },
      request);
}

}  // namespace tessera::api
