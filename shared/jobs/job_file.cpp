#include "shared/jobs/job_file.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <ctime>

#include "shared/plugins/plugin_catalog.h"
#include "shared/base/sha256.h"
#include "shared/jobs/tags.h"
#include "shared/base/utf8.h"
#include "shared/base/yaml_util.h"

namespace tessera::spec {

namespace {

constexpr const char* kGpuShareRange =
    "resources.gpu_share: must be a fraction in (0, 1], e.g. 0.25";

StatusOr<int> ParseFrameNumber(const std::string& s, const std::string& what) {
  if (s.empty()) return Status::InvalidArgument("frames: " + what + " frame is empty");
  size_t i = (s[0] == '-') ? 1 : 0;
  if (i == s.size()) return Status::InvalidArgument("frames: '" + s + "' is not a frame number");
  for (size_t k = i; k < s.size(); ++k) {
    if (!std::isdigit(static_cast<unsigned char>(s[k]))) {
      return Status::InvalidArgument("frames: '" + s + "' is not a frame number");
    }
  }
  if (s.size() - i > 9) {
    return Status::InvalidArgument("frames: " + what + " frame " + s + " is out of range [" +
                                   std::to_string(kMinFrame) + ", " + std::to_string(kMaxFrame) +
                                   "]");
  }
  return std::stoi(s);
}

// "4x2": columns x rows, each a small positive number.
Status ParseTiles(const std::string& text, int* x, int* y) {
  const Status bad =
      Status::InvalidArgument("tiles: expected COLUMNSxROWS such as 4x2, got '" + text + "'");
  const size_t sep = text.find_first_of("xX");
  if (sep == std::string::npos || sep == 0 || sep + 1 >= text.size() || sep > 4 ||
      text.size() - sep - 1 > 4) {
    return bad;
  }
  for (size_t i = 0; i < text.size(); ++i) {
    if (i != sep && !std::isdigit(static_cast<unsigned char>(text[i]))) return bad;
  }
  *x = std::stoi(text.substr(0, sep));
  *y = std::stoi(text.substr(sep + 1));
  return Status::Ok();
}

}  // namespace

Status ParseFrameRange(const std::string& text, int* start, int* end) {
  std::string t;
  for (char c : text) {
    if (!std::isspace(static_cast<unsigned char>(c))) t += c;
  }
  // A '-' after the first character separates start and end ("-5--1" is -5..-1).
  size_t dash = t.find('-', 1);
  if (dash == std::string::npos) {
    TSR_ASSIGN_OR_RETURN(*start, ParseFrameNumber(t, "start"));
    *end = *start;
    return Status::Ok();
  }
  TSR_ASSIGN_OR_RETURN(*start, ParseFrameNumber(t.substr(0, dash), "start"));
  TSR_ASSIGN_OR_RETURN(*end, ParseFrameNumber(t.substr(dash + 1), "end"));
  return Status::Ok();
}

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
  if (job.name.empty()) return Status::InvalidArgument("name: must not be empty");
  if (job.name.size() > kMaxNameLength) {
    return Status::InvalidArgument("name: longer than " + std::to_string(kMaxNameLength) +
                                   " characters");
  }
  if (!std::all_of(job.name.begin(), job.name.end(), IsNameChar)) {
    return Status::InvalidArgument("name: '" + job.name +
                                   "' may only contain letters, digits, '.', '_' and '-'");
  }
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
  for (auto [value, field] : {std::pair{&job.project, "project"}, std::pair{&job.user, "user"}}) {
    if (value->size() > kMaxNameLength || !std::all_of(value->begin(), value->end(), IsNameChar)) {
      return Status::InvalidArgument(std::string(field) + ": '" + *value +
                                     "' may only contain letters, digits, '.', '_' and '-' (at "
                                     "most " +
                                     std::to_string(kMaxNameLength) + ")");
    }
  }
  if (job.project.empty()) return Status::InvalidArgument("project: must not be empty");
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
  if (job.settings.size() > kMaxSettings) {
    return Status::InvalidArgument("settings: at most " + std::to_string(kMaxSettings) +
                                   " settings, got " + std::to_string(job.settings.size()));
  }
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
  if (job.fail_after_workers < 0 || job.fail_after_workers > kMaxRetries) {
    return Status::InvalidArgument("fail_after_workers: must be in [0, " +
                                   std::to_string(kMaxRetries) + "], got " +
                                   std::to_string(job.fail_after_workers));
  }
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
  const ResourceSpec& rs = job.resources;
  if (rs.gpus < 0 || rs.gpus > 64)
    return Status::InvalidArgument("resources.gpus: must be in [0, 64]");
  if (rs.gpu_memory_mb < 0) return Status::InvalidArgument("resources.gpu_memory_mb: must be >= 0");
  // NaN fails both comparisons, so the check is written to refuse it.
  if (!(rs.gpu_share >= 0 && rs.gpu_share <= 1)) {
    return Status::InvalidArgument(kGpuShareRange);
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
  if (job.asset_files.size() > static_cast<size_t>(kMaxAssets)) {
    return Status::InvalidArgument("assets: more than " + std::to_string(kMaxAssets) + " files");
  }
  for (size_t i = 0; i < job.asset_files.size(); ++i) {
    TSR_RETURN_IF_ERROR(ValidateAssetPath(job.asset_files[i], "assets[" + std::to_string(i) + "]"));
  }
  TSR_RETURN_IF_ERROR(ValidateRelativePath(job.output.directory, "output.directory"));
  const std::string& pattern = job.output.pattern;
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
  if (!job.output.shared_dir.empty()) {
    const std::string& dir = job.output.shared_dir;
    if (dir[0] != '/' || dir.size() > 1024 || dir.find("/../") != std::string::npos ||
        dir.ends_with("/..") || dir.find('\0') != std::string::npos) {
      return Status::InvalidArgument(
          "output.shared_dir: must be an absolute path without '..', got '" + dir + "'");
    }
    if (!job.output.directory.empty()) {
      return Status::InvalidArgument(
          "output.directory: give either directory (under the scheduler's output root) or "
          "shared_dir, not both");
    }
  }
  if (job.output.formats.size() > 4) {
    return Status::InvalidArgument("output.formats: at most 4 entries (exr, png, jpg, tif)");
  }
  if (job.output.formats.empty()) {
    return Status::InvalidArgument("output.formats: must list at least one of exr, png, jpg, tif");
  }
  for (size_t i = 0; i < job.output.formats.size(); ++i) {
    const std::string& f = job.output.formats[i];
    if (f != "exr" && f != "png" && f != "jpg" && f != "tif") {
      return Status::InvalidArgument("output.formats[" + std::to_string(i) + "]: '" + f +
                                     "' is not supported (exr, png, jpg, tif)");
    }
    if (std::count(job.output.formats.begin(), job.output.formats.end(), f) > 1) {
      return Status::InvalidArgument("output.formats: '" + f + "' is listed twice");
    }
  }
  return Status::Ok();
}

StatusOr<JobSpec> ParseJobYaml(std::string_view yaml_text) {
  yaml::Limits limits;
  limits.max_document_bytes = kMaxJobYamlBytes;
  TSR_ASSIGN_OR_RETURN(YAML::Node root, yaml::Parse(yaml_text, "job", limits));
  if (!root.IsMap()) {
    return Status::InvalidArgument("job: expected a map of fields, got " + yaml::KindName(root));
  }
  JobSpec job;
  yaml::MapReader r(root, "");
  r.Required("name", &job.name)
      .Optional("renderer", &job.renderer)
      .Optional("project", &job.project)
      .Optional("user", &job.user);

  YAML::Node scene = r.Child("scene");
  if (!scene.IsDefined() || scene.IsNull()) {
    // Required unless the renderer needs none; ValidateJob says so.
  } else if (scene.IsScalar()) {
    job.scene_path = scene.Scalar();
  } else if (scene.IsMap()) {
    YAML::Emitter out;
    out << scene;
    job.scene_yaml = out.c_str();
  } else {
    r.Fail(Status::InvalidArgument("scene: expected a file path or an inline scene map"));
  }

  YAML::Node settings = r.Child("settings");
  if (settings.IsDefined() && !settings.IsNull()) {
    if (!settings.IsMap()) {
      r.Fail(Status::InvalidArgument("settings: expected a map of setting names to values, got " +
                                     yaml::KindName(settings)));
    } else if (settings.size() > kMaxSettings) {
      r.Fail(yaml::CheckListSize(settings, "settings", kMaxSettings));
    } else {
      for (const auto& kv : settings) {
        const std::string name = kv.first.IsScalar() ? kv.first.Scalar() : "?";
        const std::string field = "settings." + name;
        if (job.settings.count(name)) {
          r.Fail(Status::InvalidArgument(field + ": field is given more than once"));
        } else if (kv.second.IsScalar()) {
          job.settings[name] = kv.second.Scalar();
        } else if (kv.second.IsSequence()) {
          std::vector<std::string> words;
          r.Fail(yaml::CheckListSize(kv.second, field, plugin::kMaxListWords));
          if (r.ok()) r.Fail(yaml::Convert(kv.second, field, &words));
          job.settings[name] = nlohmann::json(words).dump();
        } else if (kv.second.IsMap()) {
          // NAME: value pairs (a plugin's env setting), checked against the plugin later.
          r.Fail(yaml::CheckListSize(kv.second, field, plugin::kMaxEnvVars));
          nlohmann::json vars = nlohmann::json::object();
          for (const auto& var : kv.second) {
            if (!r.ok()) break;
            const std::string key = var.first.IsScalar() ? var.first.Scalar() : "?";
            if (!var.first.IsScalar() || !var.second.IsScalar()) {
              r.Fail(Status::InvalidArgument(field + "." + key + ": expected a value, got " +
                                             yaml::KindName(var.second)));
            } else {
              vars[key] = var.second.Scalar();
            }
          }
          job.settings[name] = vars.dump();
        } else {
          r.Fail(Status::InvalidArgument(field +
                                         ": expected a value, a list of words or a map, got " +
                                         yaml::KindName(kv.second)));
        }
      }
    }
  }

  YAML::Node frames = r.Child("frames");
  if (!frames.IsDefined() || frames.IsNull()) {
    r.Fail(Status::InvalidArgument("frames: required field is missing"));
  } else if (!frames.IsScalar()) {
    r.Fail(Status::InvalidArgument("frames: expected \"A-B\" or a frame number, got " +
                                   yaml::KindName(frames)));
  } else if (r.ok()) {
    r.Fail(ParseFrameRange(frames.Scalar(), &job.frame_start, &job.frame_end));
  }

  std::string tiles;
  r.Optional("tiles", &tiles).Optional("sample_parts", &job.sample_parts);
  if (r.ok() && !tiles.empty()) r.Fail(ParseTiles(tiles, &job.tiles_x, &job.tiles_y));

  r.Optional("chunk_size", &job.chunk_size)
      .Optional("priority", &job.priority)
      .Optional("max_retries", &job.max_retries)
      .Optional("task_timeout", &job.task_timeout)
      .Optional("progress_timeout", &job.progress_timeout)
      .Optional("checkpoint_interval_s", &job.checkpoint_interval_s)
      .Optional("blocklist_after", &job.blocklist_after)
      .OptionalList("depends_on", &job.depends_on, kMaxDependencies)
      .OptionalList("frame_depends_on", &job.frame_depends_on, kMaxDependencies)
      .Optional("fail_after_workers", &job.fail_after_workers)
      .OptionalList("limits", &job.limits, kMaxLabels)
      .OptionalList("pools", &job.pools, kMaxLabels)
      .OptionalList("tags", &job.tags, kMaxLabels)
      .OptionalList("assets", &job.asset_files, kMaxAssets)
      .Optional("interruptible", &job.interruptible);
  std::string deadline;
  r.Optional("deadline", &deadline);
  if (r.ok() && !deadline.empty()) {
    StatusOr<int64_t> at = ParseIsoTime(deadline);
    if (!at.ok()) {
      r.Fail(Status::InvalidArgument("deadline: " + at.status().message()));
    } else {
      job.deadline_ms = *at;
    }
  }

  YAML::Node resources = r.Child("resources");
  if (r.ok()) {
    // `gpu_share: 0` written out is refused (0 is only the default: whole GPUs).
    const YAML::Node& given = resources;
    const bool share_given = given.IsDefined() && given.IsMap() && given["gpu_share"].IsDefined();
    yaml::MapReader res(resources, "resources");
    res.Optional("gpus", &job.resources.gpus)
        .Optional("gpu_memory_mb", &job.resources.gpu_memory_mb)
        .Optional("gpu_share", &job.resources.gpu_share)
        .Optional("compute_capability", &job.resources.compute_capability)
        .Optional("cpu_cores", &job.resources.cpu_cores)
        .Optional("ram_mb", &job.resources.ram_mb);
    r.Fail(res.Finish());
    if (r.ok() && share_given && job.resources.gpu_share == 0) {
      r.Fail(Status::InvalidArgument(kGpuShareRange));
    }
  }

  YAML::Node failure_policy = r.Child("failure_policy");
  if (r.ok()) {
    yaml::MapReader fp(failure_policy, "failure_policy");
    FailurePolicy& p = job.failure_policy;
    fp.Optional("scene_error", &p.scene_error)
        .Optional("out_of_memory", &p.out_of_memory)
        .Optional("license_wait_s", &p.license_wait_s);
    if (fp.ok() && p.scene_error != "fail" && p.scene_error != "retry") {
      fp.Fail(Status::InvalidArgument("failure_policy.scene_error: expected fail or retry, got '" +
                                      p.scene_error + "'"));
    }
    if (fp.ok() && p.out_of_memory != "bigger" && p.out_of_memory != "retry") {
      fp.Fail(Status::InvalidArgument(
          "failure_policy.out_of_memory: expected bigger or retry, got '" + p.out_of_memory + "'"));
    }
    if (fp.ok() && (p.license_wait_s < 0 || p.license_wait_s > kMaxLicenseWaitSeconds)) {
      fp.Fail(Status::InvalidArgument("failure_policy.license_wait_s: must be in [0, " +
                                      std::to_string(kMaxLicenseWaitSeconds) + "]"));
    }
    r.Fail(fp.Finish());
  }

  YAML::Node output = r.Child("output");
  if (r.ok()) {
    yaml::MapReader o(output, "output");
    o.Optional("directory", &job.output.directory)
        .Optional("pattern", &job.output.pattern)
        .OptionalList("formats", &job.output.formats, 4)
        .Optional("shared_dir", &job.output.shared_dir)
        .Optional("reuse", &job.output.reuse);
    std::string exr = "half";
    o.Optional("exr", &exr);
    if (o.ok() && exr != "half" && exr != "float") {
      o.Fail(Status::InvalidArgument("output.exr: expected half or float, got '" + exr + "'"));
    }
    job.output.exr_float = exr == "float";
    r.Fail(o.Finish());
  }
  TSR_RETURN_IF_ERROR(r.Finish());
  TSR_RETURN_IF_ERROR(ValidateJob(job));
  return job;
}

StatusOr<std::map<std::string, std::string>> ResolvedSettings(const JobSpec& job) {
  std::shared_ptr<const plugin::PluginSpec> plugin = plugin::FindPlugin(job.renderer);
  if (plugin == nullptr) return std::map<std::string, std::string>();
  return plugin::ResolveSettings(*plugin, job.settings);
}

StatusOr<std::string> SceneFileName(const JobSpec& job) {
  std::shared_ptr<const plugin::PluginSpec> plugin = plugin::FindPlugin(job.renderer);
  if (plugin == nullptr) return std::string();
  return plugin::CheckSceneName(*plugin, job.scene_path);
}

}  // namespace tessera::spec
