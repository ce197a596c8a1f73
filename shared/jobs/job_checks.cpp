// The checks a job passes, whatever it was read from (a job file, a step of a job with steps, the
// API's body): ValidateJob runs them in a fixed order, and the first problem is the one reported,
// naming the field. Also the path and name rules other parts of a job file share.

#include <algorithm>
#include <cctype>
#include <chrono>

#include "shared/base/sha256.h"
#include "shared/base/utf8.h"
#include "shared/jobs/job_file.h"
#include "shared/jobs/tags.h"
#include "shared/plugins/plugin_catalog.h"

namespace tessera::spec {

namespace {

using PluginRef = std::shared_ptr<const plugin::PluginSpec>;

Status CheckName(const JobSpec& job) {
  if (job.name.empty()) return Status::InvalidArgument("name: must not be empty");
  if (job.name.size() > kMaxNameLength) {
    return Status::InvalidArgument("name: longer than " + std::to_string(kMaxNameLength) +
                                   " characters");
  }
  if (!std::all_of(job.name.begin(), job.name.end(), IsNameChar)) {
    return Status::InvalidArgument("name: '" + job.name +
                                   "' may only contain letters, digits, '.', '_' and '-'");
  }
  return Status::Ok();
}

// The renderer is one this farm has; a plugin renderer's scene file name and settings are its
// plugin's (returned, for the checks that depend on what it can do), and any other renderer takes
// no settings.
StatusOr<PluginRef> CheckRenderer(const JobSpec& job) {
  std::shared_ptr<const plugin::PluginSpec> plugin;
  if (job.uses_plugin()) {
    plugin = plugin::FindPlugin(job.renderer);
    if (plugin == nullptr) {
      std::string known = plugin::PathTracerSpec().name + ", " + kRendererNoop;
      for (const plugin::PluginSpec& p : plugin::BuiltinPlugins()) known += ", " + p.name;
      for (const plugin::PluginSpec& p : plugin::RegisteredNativePlugins()) known += ", " + p.name;
      return Status::InvalidArgument("renderer: '" + job.renderer +
                                     "' is not a renderer this farm has (" + known + ")");
    }
    if (!job.scene_yaml.empty() && job.scene_path.empty()) {
      return Status::InvalidArgument("scene: renderer " + job.renderer +
                                     " needs a scene file path, not an inline scene");
    }
    TSR_RETURN_IF_ERROR(plugin::CheckSceneName(*plugin, job.scene_path).status());
    TSR_ASSIGN_OR_RETURN(plugin::Settings settings, plugin::ResolveSettings(*plugin, job.settings));
    // `outputs: files` returns what `files` matches: without a pattern it would return nothing,
    // and patterns without it would be ignored.
    const auto outputs = settings.find("outputs"), files = settings.find("files");
    if (outputs != settings.end() && files != settings.end()) {
      const bool returns_files = outputs->second == "files";
      const bool has_patterns = files->second != "[]";
      if (returns_files && !has_patterns) {
        return Status::InvalidArgument(
            "settings.files: outputs: files needs at least one pattern of the files to return");
      }
      if (!returns_files && has_patterns) {
        return Status::InvalidArgument(
            "settings.files: only read with outputs: files (outputs is " + outputs->second + ")");
      }
    }
  } else if (!job.settings.empty()) {
    return Status::InvalidArgument("settings: renderer " + job.renderer +
                                   " takes no settings (only renderer plugins do)");
  }
  return plugin;
}

// Whose job it is: a project (required) and a user, each a name.
Status CheckOwner(const JobSpec& job) {
  for (auto [value, field] : {std::pair{&job.project, "project"}, std::pair{&job.user, "user"}}) {
    if (value->size() > kMaxNameLength || !std::all_of(value->begin(), value->end(), IsNameChar)) {
      return Status::InvalidArgument(std::string(field) + ": '" + *value +
                                     "' may only contain letters, digits, '.', '_' and '-' (at "
                                     "most " +
                                     std::to_string(kMaxNameLength) + ")");
    }
  }
  if (job.project.empty()) return Status::InvalidArgument("project: must not be empty");
  return Status::Ok();
}

Status CheckScene(const JobSpec& job) {
  if (job.produces_frames() && !job.uses_plugin() && job.scene_path.empty() &&
      job.scene_yaml.empty()) {
    return Status::InvalidArgument("scene: required field is missing");
  }
  if (job.scene_yaml.size() > kMaxSceneBytes) {
    return Status::ResourceExhausted("scene: larger than " + std::to_string(kMaxSceneBytes) +
                                     " bytes");
  }
  // Text a person wrote, stored and shown as it is: it must be UTF-8 (a scene file in another
  // encoding is refused with the offset of its first bad byte, not garbled later).
  TSR_RETURN_IF_ERROR(utf8::Check(job.scene_yaml, "scene"));
  return Status::Ok();
}

// tags, pools and limits: bounded lists of names (a tag may name alternatives).
Status CheckLabels(const JobSpec& job) {
  for (auto [list, field] : {std::pair{&job.tags, "tags"}, std::pair{&job.pools, "pools"},
                             std::pair{&job.limits, "limits"}}) {
    if (list->size() > kMaxLabels) {
      return Status::InvalidArgument(std::string(field) + ": at most " +
                                     std::to_string(kMaxLabels) + " entries, got " +
                                     std::to_string(list->size()));
    }
    for (size_t i = 0; i < list->size(); ++i) {
      // A tag entry may name alternatives, "a100|h100" (shared/jobs/tags.h): each one a name.
      const bool tags = list == &job.tags;
      std::vector<std::string> names = {(*list)[i]};
      if (tags) names = SplitTagAlternatives((*list)[i]);
      for (const std::string& v : names) {
        if (v.empty() || v.size() > kMaxNameLength || !utf8::IsValid(v) ||
            std::any_of(v.begin(), v.end(),
                        [](char c) { return static_cast<unsigned char>(c) < 0x20; })) {
          return Status::InvalidArgument(
              std::string(field) + "[" + std::to_string(i) + "]: must be a name of 1.." +
              std::to_string(kMaxNameLength) + " characters without control characters" +
              (tags ? " (or up to " + std::to_string(kMaxTagAlternatives) +
                          " such names separated by '|', of which a worker needs one)"
                    : ""));
        }
      }
      if (names.size() > kMaxTagAlternatives) {
        return Status::InvalidArgument(std::string(field) + "[" + std::to_string(i) +
                                       "]: at most " + std::to_string(kMaxTagAlternatives) +
                                       " alternatives");
      }
    }
  }
  return Status::Ok();
}

Status CheckFrameRange(const JobSpec& job) {
  if (job.frame_start < kMinFrame || job.frame_end > kMaxFrame || job.frame_end < kMinFrame ||
      job.frame_start > kMaxFrame) {
    return Status::InvalidArgument("frames: frame numbers must be within [" +
                                   std::to_string(kMinFrame) + ", " + std::to_string(kMaxFrame) +
                                   "]");
  }
  if (job.frame_start > job.frame_end) {
    return Status::InvalidArgument("frames: start " + std::to_string(job.frame_start) +
                                   " is after end " + std::to_string(job.frame_end));
  }
  if (job.frame_count() > kMaxFramesPerJob) {
    return Status::InvalidArgument("frames: " + std::to_string(job.frame_count()) +
                                   " frames is over the limit of " +
                                   std::to_string(kMaxFramesPerJob) + " per job");
  }
  return Status::Ok();
}

// How frames become tasks: chunks of frames, or frames split into tiles and sample parts (only as
// the renderer can), within the tasks a job may have.
Status CheckChunksAndParts(const JobSpec& job, const plugin::PluginSpec* plugin) {
  // A step taking another step's frames runs one task over all of them (shared/jobs/job_steps.h).
  const int max_chunk =
      plugin && !plugin->input_frames_setting.empty() ? plugin::kMaxInputFrames : kMaxChunkSize;
  if (job.chunk_size < 1 || job.chunk_size > max_chunk) {
    return Status::InvalidArgument("chunk_size: must be in [1, " + std::to_string(max_chunk) +
                                   "], got " + std::to_string(job.chunk_size));
  }
  if (job.tiles_x < 1 || job.tiles_y < 1 || job.tiles_x > kMaxTilesPerSide ||
      job.tiles_y > kMaxTilesPerSide) {
    return Status::InvalidArgument("tiles: each side must be in [1, " +
                                   std::to_string(kMaxTilesPerSide) + "], got " +
                                   std::to_string(job.tiles_x) + "x" + std::to_string(job.tiles_y));
  }
  if (job.sample_parts < 1 || job.sample_parts > kMaxSampleParts) {
    return Status::InvalidArgument("sample_parts: must be in [1, " +
                                   std::to_string(kMaxSampleParts) + "], got " +
                                   std::to_string(job.sample_parts));
  }
  if (job.splits_frames()) {
    const char* field = job.tiles_x * job.tiles_y > 1 ? "tiles" : "sample_parts";
    // The path tracer splits both ways; a plugin renderer only the ways its spec says it can.
    const std::shared_ptr<const plugin::PluginSpec> renderer = plugin::FindRenderer(job.renderer);
    if (job.sample_parts > 1 && (renderer == nullptr || !renderer->sample_parts)) {
      return Status::InvalidArgument("sample_parts: the " + job.renderer +
                                     " renderer does not split samples (the " +
                                     plugin::PathTracerSpec().name + " does)");
    }
    if (renderer == nullptr || !renderer->tiles) {
      return Status::InvalidArgument(std::string(field) + ": the " + job.renderer +
                                     " renderer does not render tiles");
    }
    if (job.chunk_size != 1) {
      return Status::InvalidArgument("chunk_size: must be 1 when frames are split by " +
                                     std::string(field));
    }
  }
  const int64_t tasks = (job.frame_count() + job.chunk_size - 1) / std::max(1, job.chunk_size) *
                        job.tiles_x * job.tiles_y * job.sample_parts;
  if (tasks > kMaxTasksPerJob) {
    return Status::InvalidArgument("frames: " + std::to_string(tasks) +
                                   " tasks (frames x tiles x sample_parts) is over the limit of " +
                                   std::to_string(kMaxTasksPerJob) + " per job");
  }
  return Status::Ok();
}

// Priority, and how failures and slow tasks are treated: retries, timeouts, checkpoints, the
// blocklist.
Status CheckRetriesAndTimeouts(const JobSpec& job) {
  if (job.priority < 0 || job.priority > 100) {
    return Status::InvalidArgument("priority: must be in [0, 100], got " +
                                   std::to_string(job.priority));
  }
  if (job.max_retries < 0 || job.max_retries > kMaxRetries) {
    return Status::InvalidArgument("max_retries: must be in [0, " + std::to_string(kMaxRetries) +
                                   "], got " + std::to_string(job.max_retries));
  }
  for (auto [value, field] : {std::pair{job.task_timeout, "task_timeout"},
                              std::pair{job.progress_timeout, "progress_timeout"}}) {
    if (value < 0 || value > kMaxTaskTimeoutSeconds) {
      return Status::InvalidArgument(std::string(field) + ": must be in [0, " +
                                     std::to_string(kMaxTaskTimeoutSeconds) + "] seconds, got " +
                                     std::to_string(value));
    }
  }
  if (job.checkpoint_interval_s != 0 &&
      (job.checkpoint_interval_s < kMinCheckpointIntervalSeconds ||
       job.checkpoint_interval_s > kMaxCheckpointIntervalSeconds)) {
    return Status::InvalidArgument("checkpoint_interval_s: must be 0 (off) or in [" +
                                   std::to_string(kMinCheckpointIntervalSeconds) + ", " +
                                   std::to_string(kMaxCheckpointIntervalSeconds) +
                                   "] seconds, got " + std::to_string(job.checkpoint_interval_s));
  }
  if (job.blocklist_after < 0 || job.blocklist_after > kMaxRetries) {
    return Status::InvalidArgument("blocklist_after: must be in [0, " +
                                   std::to_string(kMaxRetries) + "], got " +
                                   std::to_string(job.blocklist_after));
  }
  return Status::Ok();
}

// depends_on and frame_depends_on: at most kMaxDependencies job ids each.
Status CheckJobDependencies(const JobSpec& job) {
  for (auto [ids, field] : {std::pair{&job.depends_on, "depends_on"},
                            std::pair{&job.frame_depends_on, "frame_depends_on"}}) {
    if (ids->size() > kMaxDependencies) {
      return Status::InvalidArgument(std::string(field) + ": at most " +
                                     std::to_string(kMaxDependencies) + " jobs");
    }
    for (size_t i = 0; i < ids->size(); ++i) {
      if ((*ids)[i] < 1) {
        return Status::InvalidArgument(std::string(field) + "[" + std::to_string(i) +
                                       "]: must be a job id (a positive integer)");
      }
    }
  }
  return Status::Ok();
}

Status CheckDeadline(const JobSpec& job) {
  if (job.deadline_ms) {
    const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
    if (*job.deadline_ms < now_ms) {
      return Status::InvalidArgument("deadline: it has already passed");
    }
    if (*job.deadline_ms > now_ms + int64_t{kMaxDeadlineDays} * 86'400'000) {
      return Status::InvalidArgument("deadline: more than " + std::to_string(kMaxDeadlineDays) +
                                     " days away");
    }
  }
  return Status::Ok();
}

Status CheckResources(const ResourceSpec& rs) {
  if (rs.gpus < 0 || rs.gpus > 64)
    return Status::InvalidArgument("resources.gpus: must be in [0, 64]");
  if (rs.gpu_memory_mb < 0) return Status::InvalidArgument("resources.gpu_memory_mb: must be >= 0");
  // NaN fails both comparisons, so the check is written to refuse it.
  if (!(rs.gpu_share >= 0 && rs.gpu_share <= 1)) {
    return Status::InvalidArgument(kGpuShareRangeMessage);
  }
  if (rs.gpu_share > 0 && rs.gpus > 1) {
    return Status::InvalidArgument(
        "resources.gpu_share: a share is part of one GPU, but "
        "resources.gpus asks for " +
        std::to_string(rs.gpus));
  }
  if (rs.compute_capability < 0 || rs.compute_capability > 100) {
    return Status::InvalidArgument("resources.compute_capability: must be like 8.0 or 9.0");
  }
  if (rs.cpu_cores < 0) return Status::InvalidArgument("resources.cpu_cores: must be >= 0");
  if (rs.ram_mb < 0) return Status::InvalidArgument("resources.ram_mb: must be >= 0");
  return Status::Ok();
}

Status CheckAssetFiles(const JobSpec& job) {
  if (job.asset_files.size() > static_cast<size_t>(kMaxAssets)) {
    return Status::InvalidArgument("assets: more than " + std::to_string(kMaxAssets) + " files");
  }
  for (size_t i = 0; i < job.asset_files.size(); ++i) {
    TSR_RETURN_IF_ERROR(ValidateAssetPath(job.asset_files[i], "assets[" + std::to_string(i) + "]"));
  }
  return Status::Ok();
}

// Where the frames go: a folder under the output root or on shared storage, a file pattern with
// one run of '#', and the formats.
Status CheckOutput(const OutputSpec& output) {
  TSR_RETURN_IF_ERROR(ValidateRelativePath(output.directory, "output.directory"));
  const std::string& pattern = output.pattern;
  if (!pattern.empty()) {
    if (pattern.find_first_of("/\\") != std::string::npos) {
      return Status::InvalidArgument("output.pattern: must be a file name without '/', got '" +
                                     pattern + "' (use output.directory for folders)");
    }
    if (pattern == "." || pattern == ".." || pattern.size() > 255) {
      return Status::InvalidArgument("output.pattern: '" + pattern + "' is not a file name");
    }
    size_t first = pattern.find('#');
    if (first == std::string::npos) {
      return Status::InvalidArgument(
          "output.pattern: needs a run of '#' for the frame number, "
          "e.g. 'beauty.####'");
    }
    size_t last = pattern.find_last_of('#');
    if (pattern.find_first_not_of('#', first) < last) {
      return Status::InvalidArgument("output.pattern: only one run of '#' is allowed");
    }
  }
  if (!output.shared_dir.empty()) {
    const std::string& dir = output.shared_dir;
    if (dir[0] != '/' || dir.size() > 1024 || dir.find("/../") != std::string::npos ||
        dir.ends_with("/..") || dir.find('\0') != std::string::npos) {
      return Status::InvalidArgument(
          "output.shared_dir: must be an absolute path without '..', got '" + dir + "'");
    }
    if (!output.directory.empty()) {
      return Status::InvalidArgument(
          "output.directory: give either directory (under the scheduler's output root) or "
          "shared_dir, not both");
    }
  }
  if (output.formats.size() > 4) {
    return Status::InvalidArgument("output.formats: at most 4 entries (exr, png, jpg, tif)");
  }
  if (output.formats.empty()) {
    return Status::InvalidArgument("output.formats: must list at least one of exr, png, jpg, tif");
  }
  for (size_t i = 0; i < output.formats.size(); ++i) {
    const std::string& f = output.formats[i];
    if (f != "exr" && f != "png" && f != "jpg" && f != "tif") {
      return Status::InvalidArgument("output.formats[" + std::to_string(i) + "]: '" + f +
                                     "' is not supported (exr, png, jpg, tif)");
    }
    if (std::count(output.formats.begin(), output.formats.end(), f) > 1) {
      return Status::InvalidArgument("output.formats: '" + f + "' is listed twice");
    }
  }
  return Status::Ok();
}

}  // namespace

Status ValidateRelativePath(const std::string& path, const std::string& field) {
  if (path.empty()) return Status::Ok();
  if (path.size() > 1024) return Status::InvalidArgument(field + ": longer than 1024 characters");
  if (path[0] == '/' || path[0] == '\\' || path[0] == '~') {
    return Status::InvalidArgument(field + ": must be a relative path, got '" + path + "'");
  }
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t next = path.find_first_of("/\\", pos);
    if (next == std::string::npos) next = path.size();
    std::string part = path.substr(pos, next - pos);
    if (part == "..") {
      return Status::InvalidArgument(field +
                                     ": '..' is not allowed (the path must stay inside "
                                     "the output root), got '" +
                                     path + "'");
    }
    for (char c : part) {
      if (static_cast<unsigned char>(c) < 0x20) {
        return Status::InvalidArgument(field + ": control characters are not allowed");
      }
    }
    pos = next + 1;
  }
  return Status::Ok();
}

Status ValidateAssetPath(const std::string& path, const std::string& field) {
  if (path.empty() || path.size() > 512) {
    return Status::InvalidArgument(field + ": must be a path of 1..512 characters");
  }
  if (path[0] == '/') {
    return Status::InvalidArgument(field + ": '" + path +
                                   "' must be relative to the scene's folder");
  }
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t next = path.find('/', pos);
    if (next == std::string::npos) next = path.size();
    const std::string part = path.substr(pos, next - pos);
    if (part.empty() || part == "." || part == "..") {
      return Status::InvalidArgument(field + ": '" + path +
                                     "' has an empty, '.' or '..' part (assets stay inside the "
                                     "task's folder)");
    }
    if (part[0] == '-') {
      return Status::InvalidArgument(field + ": '" + path + "' has a part starting with '-'");
    }
    for (char c : part) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != ' ' && c != '.' && c != '_' &&
          c != '+' && c != '-') {
        return Status::InvalidArgument(field + ": '" + path +
                                       "' may hold only letters, digits, ' ', '.', '_', '+', '-' "
                                       "and '/'");
      }
    }
    pos = next + 1;
  }
  return Status::Ok();
}

Status SetAssets(const nlohmann::json& assets, JobSpec* job) {
  if (!assets.is_object()) {
    return Status::InvalidArgument("assets: expected a map of path -> SHA-256 of an uploaded blob");
  }
  if (assets.size() > static_cast<size_t>(kMaxAssets)) {
    return Status::InvalidArgument("assets: more than " + std::to_string(kMaxAssets) + " files");
  }
  job->assets.clear();
  for (const auto& [path, hash] : assets.items()) {
    const std::string field = "assets[" + path + "]";
    TSR_RETURN_IF_ERROR(ValidateAssetPath(path, field));
    if (!hash.is_string() || !IsSha256Hex(hash.get<std::string>())) {
      return Status::InvalidArgument(field + ": expected a SHA-256 (64 lowercase hex digits)");
    }
    job->assets[path] = hash.get<std::string>();
  }
  return Status::Ok();
}

bool IsNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
}

bool JobSpec::takes_tessera_scene() const { return plugin::TakesTesseraScene(renderer); }

Status ValidateJob(const JobSpec& job) {
  TSR_RETURN_IF_ERROR(CheckName(job));
  TSR_ASSIGN_OR_RETURN(const PluginRef plugin, CheckRenderer(job));
  TSR_RETURN_IF_ERROR(CheckOwner(job));
  TSR_RETURN_IF_ERROR(CheckScene(job));

  if (job.settings.size() > kMaxSettings) {
    return Status::InvalidArgument("settings: at most " + std::to_string(kMaxSettings) +
                                   " settings, got " + std::to_string(job.settings.size()));
  }
  TSR_RETURN_IF_ERROR(CheckLabels(job));
  TSR_RETURN_IF_ERROR(CheckFrameRange(job));
  TSR_RETURN_IF_ERROR(CheckChunksAndParts(job, plugin.get()));
  TSR_RETURN_IF_ERROR(CheckRetriesAndTimeouts(job));
  TSR_RETURN_IF_ERROR(CheckJobDependencies(job));

  if (job.fail_after_workers < 0 || job.fail_after_workers > kMaxRetries) {
    return Status::InvalidArgument("fail_after_workers: must be in [0, " +
                                   std::to_string(kMaxRetries) + "], got " +
                                   std::to_string(job.fail_after_workers));
  }
  TSR_RETURN_IF_ERROR(CheckDeadline(job));
  TSR_RETURN_IF_ERROR(CheckResources(job.resources));
  TSR_RETURN_IF_ERROR(CheckAssetFiles(job));
  return CheckOutput(job.output);
}

}  // namespace tessera::spec
