#include "worker/command_plugin.h"

#include <fcntl.h>
#include <fnmatch.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>

#include "shared/base/disk_space.h"
#include "shared/base/subprocess.h"
#include "shared/base/utf8.h"
#include "shared/jobs/job_file.h"
#include "shared/plugins/plugin_catalog.h"
#include "worker/blob_cache.h"

extern char** environ;

namespace tessera::worker {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr size_t kTailLines = 8;
constexpr size_t kMaxErrorLines = 5;

std::string Join(const std::vector<std::string>& lines, const char* sep) {
  std::string out;
  for (const std::string& l : lines) out += (out.empty() ? "" : sep) + l;
  return out;
}

// Scans the renderer's output: progress and error patterns, and the last lines for messages.
class OutputScanner {
 public:
  OutputScanner(const plugin::PluginSpec& spec, std::function<void(double, std::optional<int>)> on)
      : spec_(spec), on_progress_(std::move(on)) {
    if (!spec.progress_regex.empty()) progress_ = std::regex(spec.progress_regex);
    for (const std::string& e : spec.error_regexes) errors_.emplace_back(e);
    for (const plugin::FailureRule& rule : spec.failure_rules) {
      rule_patterns_.emplace_back();
      for (const std::string& p : rule.patterns) rule_patterns_.back().emplace_back(p);
    }
    rule_matched_.assign(spec.failure_rules.size(), false);
  }

  void Line(const std::string& line) {
    if (line.empty()) return;
    tail_.push_back(line);
    if (tail_.size() > kTailLines) tail_.erase(tail_.begin());
    for (size_t i = 0; i < rule_patterns_.size(); ++i) {
      for (const std::regex& p : rule_patterns_[i]) {
        if (!rule_matched_[i] && std::regex_search(line, p)) rule_matched_[i] = true;
      }
    }
    for (const std::regex& e : errors_) {
      if (std::regex_search(line, e)) {
        if (error_lines_.size() < kMaxErrorLines) error_lines_.push_back(line);
        break;
      }
    }
    std::smatch m;
    if (progress_ && std::regex_search(line, m, *progress_)) {
      double fraction = -1;
      try {
        if (spec_.progress_percent_group > 0) {
          fraction = std::stod(m[spec_.progress_percent_group].str()) / 100.0;
        } else {
          const double total = std::stod(m[spec_.progress_total_group].str());
          if (total > 0) fraction = std::stod(m[spec_.progress_done_group].str()) / total;
        }
        std::optional<int> frame;
        if (spec_.progress_frame_group > 0) frame = std::stoi(m[spec_.progress_frame_group].str());
        if (fraction >= 0) on_progress_(std::clamp(fraction, 0.0, 1.0), frame);
      } catch (const std::exception&) {
        // A number too large or malformed for the regex's groups: not progress.
      }
    }
  }

  const std::vector<std::string>& error_lines() const { return error_lines_; }
  const std::vector<std::string>& tail() const { return tail_; }

  // The plugin's failure class for a run that failed this way (plugin::FailureRule): the first
  // rule whose exit codes or patterns match; else crash for a signal, timeout for the task
  // timeout, "" (the scheduler's default, render) otherwise.
  std::string Classify(const ProcessResult& r) const {
    for (size_t i = 0; i < spec_.failure_rules.size(); ++i) {
      const plugin::FailureRule& rule = spec_.failure_rules[i];
      const bool code = r.started && !r.timed_out && r.signal == 0 &&
                        std::count(rule.exit_codes.begin(), rule.exit_codes.end(), r.exit_code);
      if (code || rule_matched_[i]) return rule.failure_class;
    }
    if (r.timed_out) return protocol::kFailureTimeout;
    if (r.signal != 0) return protocol::kFailureCrash;
    return "";
  }

 private:
  const plugin::PluginSpec& spec_;
  std::function<void(double, std::optional<int>)> on_progress_;
  std::optional<std::regex> progress_;
  std::vector<std::regex> errors_;
  std::vector<std::vector<std::regex>> rule_patterns_;  // of each failure rule
  std::vector<bool> rule_matched_;
  std::vector<std::string> error_lines_;
  std::vector<std::string> tail_;
};

// Crops a full-frame image to the tile, or checks a tile-sized one.
StatusOr<image::ImageBuffer> FitToPart(image::ImageBuffer img, const protocol::FramePart& part,
                                       const std::string& file) {
  if (part.whole_region()) return img;
  const int w = part.x1 - part.x0, h = part.y1 - part.y0;
  if (img.width == w && img.height == h) return img;
  if (img.width < part.x1 || img.height < part.y1) {
    return Status::Internal(file + ": the renderer wrote " + std::to_string(img.width) + "x" +
                            std::to_string(img.height) + ", which is neither the tile (" +
                            std::to_string(w) + "x" + std::to_string(h) +
                            ") nor a frame holding it");
  }
  image::ImageBuffer out;
  out.width = w;
  out.height = h;
  out.channels = img.channels;
  out.channel_names = img.channel_names;
  out.pixels.resize(static_cast<size_t>(w) * h * img.channels);
  for (int y = 0; y < h; ++y) {
    const float* src =
        img.pixels.data() + (static_cast<size_t>(y + part.y0) * img.width + part.x0) * img.channels;
    std::copy(src, src + static_cast<size_t>(w) * img.channels,
              out.pixels.data() + static_cast<size_t>(y) * w * img.channels);
  }
  return out;
}

// Gives the task folder's directories (not the files: assets are hard links to the worker's
// cache) to the user renderers run as, so it can write its images and temporary files there.
Status HandOver(const std::string& task_dir, const subprocess::Identity& who) {
  std::error_code ec;
  auto give = [&](const fs::path& dir) -> Status {
    if (::lchown(dir.c_str(), who.uid, who.gid) != 0) {
      return Status::Internal("cannot hand the task folder " + dir.string() + " to " + who.user +
                              ": " + std::strerror(errno));
    }
    return Status::Ok();
  };
  TSR_RETURN_IF_ERROR(give(task_dir));
  for (fs::recursive_directory_iterator it(task_dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_directory(ec) && !it->is_symlink(ec)) TSR_RETURN_IF_ERROR(give(it->path()));
  }
  if (ec) return Status::Internal("cannot walk the task folder " + task_dir + ": " + ec.message());
  return Status::Ok();
}

}  // namespace

std::string EffectivePluginPath(const std::string& configured) {
  if (!configured.empty()) return configured;
  const char* path = std::getenv("PATH");
  return path ? path : "/usr/local/bin:/usr/bin:/bin";
}

CommandPluginList DetectCommandPlugins(const std::string& search_path,
                                       const std::vector<std::string>& command_programs) {
  CommandPluginList found;
  for (const plugin::PluginSpec& spec : plugin::BuiltinPlugins()) {
    CommandPlugin a;
    a.spec = spec;
    if (!spec.executable_setting.empty()) {
      if (command_programs.empty()) {
        spdlog::info("plugin {}: not offered, worker.command_programs allows no program",
                     spec.name);
        continue;
      }
      spdlog::info("plugin {}: jobs may run {}", spec.name, Join(command_programs, ", "));
      found.push_back(std::move(a));  // the job names the program; checked per task
      continue;
    }
    for (const std::string& name : spec.executable_names) {
      if (auto path = FindProgram(name, search_path)) {
        a.executable = *path;
        break;
      }
    }
    if (a.executable.empty()) {
      spdlog::info("plugin {}: not offered, none of [{}] is in the plugin path", spec.name,
                   Join(spec.executable_names, ", "));
      continue;
    }
    if (!spec.version_regex.empty()) {
      std::vector<std::string> argv = {a.executable};
      argv.insert(argv.end(), spec.version_args.begin(), spec.version_args.end());
      const std::regex re(spec.version_regex);
      std::string version;
      RunProcess(argv, fs::temp_directory_path().string(), nullptr,
                 Clock::now() + std::chrono::seconds(20), [&](const std::string& line) {
                   std::smatch m;
                   if (version.empty() && std::regex_search(line, m, re)) version = m[1].str();
                 });
      if (version.empty()) {
        spdlog::warn("plugin {}: not offered, {} printed no version matching '{}'", spec.name,
                     a.executable, spec.version_regex);
        continue;
      }
      a.version = version;
    }
    spdlog::info("plugin {}: {} version {}", spec.name, a.executable, a.version);
    found.push_back(std::move(a));
  }
  return found;
}

const CommandPlugin* FindCommandPlugin(const CommandPluginList& plugins, const std::string& name) {
  for (const CommandPlugin& p : plugins) {
    if (p.spec.name == name) return &p;
  }
  return nullptr;
}

StatusOr<std::vector<std::string>> MatchOutputFiles(const std::string& task_dir,
                                                    const std::vector<std::string>& patterns) {
  // A task folder holds what its run made; a bound on the walk keeps a command that made
  // millions of files from stalling the worker here.
  constexpr int kMaxEntries = 200000;
  std::vector<bool> matched(patterns.size(), false);
  std::vector<std::string> files;
  std::error_code ec;
  int entries = 0;
  const fs::path root(task_dir);
  for (fs::recursive_directory_iterator it(root, fs::directory_options::none, ec), end;
       !ec && it != end; it.increment(ec)) {
    if (++entries > kMaxEntries) {
      return Status::ResourceExhausted("settings.files: the task folder holds more than " +
                                       std::to_string(kMaxEntries) + " entries");
    }
    const std::string name = it->path().lexically_relative(root).string();
    bool any = false;
    for (size_t i = 0; i < patterns.size(); ++i) {
      if (::fnmatch(patterns[i].c_str(), name.c_str(), FNM_PATHNAME | FNM_PERIOD) == 0) {
        matched[i] = any = true;
      }
    }
    if (!any) continue;
    const fs::file_status st = it->symlink_status(ec);
    if (fs::is_directory(st)) continue;  // a folder a pattern names: its files need their own
    // The worker reads the file with its own rights: a link could lead anywhere.
    if (!fs::is_regular_file(st)) {
      return Status::PermissionDenied("settings.files: " + utf8::Sanitize(name) +
                                      " is a link or special file, not a file the task made");
    }
    TSR_RETURN_IF_ERROR(spec::ValidateAssetPath(utf8::Sanitize(name), "settings.files"));
    const uintmax_t size = it->file_size(ec);
    if (!ec && size > static_cast<uintmax_t>(protocol::kMaxResultBytes)) {
      return Status::ResourceExhausted("settings.files: " + name + " is " + std::to_string(size) +
                                       " bytes, more than the result limit of " +
                                       std::to_string(protocol::kMaxResultBytes));
    }
    files.push_back(name);
    if (files.size() > static_cast<size_t>(protocol::kMaxOutputFiles)) {
      return Status::ResourceExhausted("settings.files: more than " +
                                       std::to_string(protocol::kMaxOutputFiles) +
                                       " files match (one task returns at most that many)");
    }
  }
  if (ec) return Status::Internal("cannot walk the task folder " + task_dir + ": " + ec.message());
  for (size_t i = 0; i < patterns.size(); ++i) {
    if (!matched[i]) {
      return Status::NotFound("settings.files: '" + patterns[i] + "' matched no file");
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

StatusOr<std::string> AllowedProgram(const std::string& program,
                                     const CommandPluginOptions& options, const std::string& field,
                                     const std::string& renderer) {
  if (options.command_programs.empty()) {
    return Status::FailedPrecondition("renderer " + renderer +
                                      " is off on this worker: worker.command_programs lists "
                                      "no program a job may run");
  }
  // Exactly as listed: a name stays a name (found in the plugin path), a path stays that path.
  if (std::find(options.command_programs.begin(), options.command_programs.end(), program) ==
      options.command_programs.end()) {
    return Status::PermissionDenied(field + ": '" + program +
                                    "' is not a program this worker allows (worker."
                                    "command_programs: " +
                                    Join(options.command_programs, ", ") + ")");
  }
  auto found = FindProgram(program, options.search_path);
  if (!found) {
    return Status::FailedPrecondition(field + ": program '" + program +
                                      "' is not found on this worker");
  }
  return *found;
}

StatusOr<std::unique_ptr<ScopedTaskFolder>> ScopedTaskFolder::Create(
    const CommandPluginOptions& options, const protocol::Assign& assign) {
  auto folder = std::unique_ptr<ScopedTaskFolder>(new ScopedTaskFolder());
  folder->dir_ = TaskFolder(options.data_dir, assign);
  const std::string& dir = folder->dir_;
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir, ec);
  if (ec && disk_space::IsFullErrno(ec.value())) {
    return disk_space::FullError("create the task folder", dir, ec.value());
  }
  if (ec) return Status::Internal("cannot create the task folder " + dir + ": " + ec.message());
  TSR_RETURN_IF_ERROR(LinkAssets(dir, options.assets));
  return folder;
}

ScopedTaskFolder::~ScopedTaskFolder() {
  std::error_code ec;
  if (!std::getenv("TESSERA_KEEP_TASK_DIRS")) fs::remove_all(dir_, ec);
}

Status HandOverTaskFolder(const std::string& task_dir, const CommandPluginOptions& options) {
  return options.run_as ? HandOver(task_dir, *options.run_as) : Status::Ok();
}

subprocess::RunOptions ProgramOptions(const CommandPluginOptions& options,
                                      const protocol::Assign& assign, const std::string& task_dir,
                                      std::map<std::string, std::string> job_env) {
  subprocess::RunOptions run_options;
  run_options.run_as = options.run_as;
  run_options.scrub_environment = true;
  run_options.set_env = std::move(job_env);
  run_options.set_env["HOME"] = task_dir;
  // The program sees only the task's GPUs (in order, renumbered from 0 by CUDA), and a task
  // without a GPU sees none, so it cannot take one another task was given.
  std::string visible;
  for (int gpu : assign.gpus) visible += (visible.empty() ? "" : ",") + std::to_string(gpu);
  run_options.set_env["CUDA_VISIBLE_DEVICES"] = visible;
  if (options.run_as) {
    run_options.set_env["USER"] = options.run_as->user;
    run_options.set_env["LOGNAME"] = options.run_as->user;
  }
  return run_options;
}

std::string TaskFolder(const std::string& data_dir, const protocol::Assign& assign) {
  return data_dir + "/tasks/job" + std::to_string(assign.job_id) + "-task" +
         std::to_string(assign.task_id) + "-a" + std::to_string(assign.attempt);
}

Status RunCommandPlugin(const CommandPlugin& plugin, const protocol::Assign& assign,
                        const CommandPluginOptions& options) {
  const plugin::PluginSpec& spec = plugin.spec;
  // The scheduler validated these; a worker still never trusts the wire.
  TSR_ASSIGN_OR_RETURN(plugin::Settings settings, plugin::ResolveSettings(spec, assign.settings));
  std::string executable = plugin.executable;
  if (!spec.executable_setting.empty()) {
    TSR_ASSIGN_OR_RETURN(executable,
                         AllowedProgram(settings[spec.executable_setting], options,
                                        "settings." + spec.executable_setting, spec.name));
  }

  if (assign.part.sample_begin != 0 || assign.part.sample_end >= 0) {
    return Status::InvalidArgument("renderer " + spec.name +
                                   " cannot render a range of samples (only whole frames" +
                                   (spec.tiles ? " and tiles)" : ")"));
  }
  TSR_ASSIGN_OR_RETURN(std::unique_ptr<ScopedTaskFolder> folder,
                       ScopedTaskFolder::Create(options, assign));
  const std::string& task_dir = folder->dir();
  std::error_code ec;
  if (!fs::create_directories(task_dir + "/out", ec)) {
    return disk_space::ClassifyWriteFailure(
        Status::Internal("cannot create " + task_dir + "/out: " + ec.message()), task_dir, 0);
  }

  plugin::RunContext ctx;
  ctx.task_dir = task_dir;
  ctx.output_dir = task_dir + "/out";
  ctx.frame_start = assign.frame_start;
  ctx.frame_end = assign.frame_end;
  ctx.threads = options.threads;
  ctx.gpus = assign.gpus;
  ctx.part = assign.part;
  ctx.settings = settings;
  if (!assign.scene_name.empty()) {
    TSR_ASSIGN_OR_RETURN(std::string name, plugin::CheckSceneName(spec, assign.scene_name));
    if (name != assign.scene_name) {
      return Status::InvalidArgument("scene: file name '" + assign.scene_name +
                                     "' must not contain folders");
    }
    ctx.scene = task_dir + "/" + name;
    // A binary scene (.blend) is already there among the assets; a text scene is written,
    // never through a link to a cached asset of the same name.
    if (!options.assets.count(name)) {
      fs::remove(ctx.scene, ec);
      std::ofstream out(ctx.scene, std::ios::binary);
      out << assign.scene_yaml;
      out.close();  // a full disk shows here, not at the first write
      if (!out) {
        return disk_space::ClassifyWriteFailure(
            Status::Internal("cannot write the scene to " + ctx.scene), ctx.scene,
            assign.scene_yaml.size());
      }
    }
  } else if (spec.scene_required) {
    return Status::InvalidArgument("scene: renderer " + spec.name + " needs a scene file");
  }

  TSR_RETURN_IF_ERROR(HandOverTaskFolder(task_dir, options));
  // The job's env settings (ResolveSettings checked them again: no name the worker sets, no
  // LD_*), under what the worker sets.
  std::map<std::string, std::string> job_env;
  for (const plugin::SettingSpec& s : spec.settings) {
    auto value = settings.find(s.name);
    if (s.type != plugin::SettingType::kEnv || value == settings.end()) continue;
    TSR_ASSIGN_OR_RETURN(auto vars, plugin::EnvValue(value->second));
    for (auto& [name, text] : vars) job_env[name] = std::move(text);
  }
  const subprocess::RunOptions run_options =
      ProgramOptions(options, assign, task_dir, std::move(job_env));

  std::optional<Clock::time_point> deadline;
  if (assign.timeout_s > 0) deadline = Clock::now() + std::chrono::seconds(assign.timeout_s);
  const int frame_count = assign.frame_end - assign.frame_start + 1;

  // One renderer run: for one frame (first == last) or the whole task.
  auto run = [&](int first, int last) -> Status {
    ctx.frame = first;
    TSR_ASSIGN_OR_RETURN(std::vector<std::string> args, plugin::BuildArgv(spec, ctx));
    std::vector<std::string> argv = {executable};
    argv.insert(argv.end(), args.begin(), args.end());
    spdlog::debug("task {}: running {}", assign.task_id, utf8::Sanitize(Join(argv, " ")));
    if (options.on_output) options.on_output(utf8::Sanitize("$ " + Join(argv, " ")));
    OutputScanner scanner(spec, [&](double fraction, std::optional<int> frame) {
      double done = first - assign.frame_start;
      if (frame && *frame >= first && *frame <= last) {
        done = *frame - assign.frame_start;
        if (options.on_frame_started) options.on_frame_started(*frame);
      }
      if (options.on_progress) options.on_progress((done + fraction) / frame_count);
    });
    const auto started = Clock::now();
    ProcessResult r = RunProcess(
        argv, task_dir, options.cancel, deadline,
        [&](const std::string& raw) {
          // Program output is made valid here, where it is captured: patterns, messages, the
          // task log and everything that stores or shows them see only valid UTF-8.
          const std::string line = utf8::Sanitize(raw);
          scanner.Line(line);
          if (options.on_output) options.on_output(line);
        },
        run_options);
    if (r.cancelled) return Status::Cancelled("cancelled");
    if (options.failure_class != nullptr) *options.failure_class = scanner.Classify(r);
    const std::string errors = Join(scanner.error_lines(), " | ");
    const std::string detail =
        errors.empty()
            ? (scanner.tail().empty() ? "" : "; last output: " + Join(scanner.tail(), " | "))
            : "; it reported: " + errors;
    if (!r.started) return Status::Internal(spec.name + " could not be started" + detail);
    if (r.timed_out) {
      return Status::Internal(spec.name + " was killed at the task timeout (" +
                              std::to_string(assign.timeout_s) + " s)" + detail);
    }
    if (r.signal != 0) {
      return Status::Internal(spec.name + " crashed (killed by signal " + std::to_string(r.signal) +
                              ", " + strsignal(r.signal) + ")" + detail);
    }
    if (std::find(spec.success_exit_codes.begin(), spec.success_exit_codes.end(), r.exit_code) ==
        spec.success_exit_codes.end()) {
      return Status::Internal(spec.name + " failed with exit code " + std::to_string(r.exit_code) +
                              detail);
    }
    if (!errors.empty()) {
      return Status::Internal(spec.name + " exited with code " + std::to_string(r.exit_code) +
                              " but reported errors: " + errors);
    }
    // `outputs: none` (the command renderer's default, which the scheduler fills in; an
    // assignment without the setting -- a job stored before it existed -- returns images): the
    // exit code was the whole answer.
    const auto outputs = assign.settings.find("outputs");
    if (outputs != assign.settings.end() && outputs->second == "none") return Status::Ok();
    if (outputs != assign.settings.end() && outputs->second == "files") {
      TSR_ASSIGN_OR_RETURN(std::vector<std::string> patterns, plugin::ListValue(settings["files"]));
      TSR_ASSIGN_OR_RETURN(std::vector<std::string> files, MatchOutputFiles(task_dir, patterns));
      for (const std::string& name : files) {
        if (!options.on_file) return Status::Internal("this run takes no files back");
        TSR_RETURN_IF_ERROR(options.on_file(name, task_dir + "/" + name));
        fs::remove(task_dir + "/" + name, ec);  // a per-frame run's next match is a new file
      }
      return Status::Ok();
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
    for (int frame = first; frame <= last; ++frame) {
      TSR_ASSIGN_OR_RETURN(std::string path, plugin::OutputPath(spec, ctx, frame));
      const fs::file_status st = fs::symlink_status(path, ec);
      if (!fs::exists(st)) {
        return Status::Internal(spec.name + " exited with code " + std::to_string(r.exit_code) +
                                " but wrote no image for frame " + std::to_string(frame) + " (" +
                                fs::path(path).filename().string() + ")" + detail);
      }
      // The worker reads the image with its own rights: a link could lead anywhere.
      if (!fs::is_regular_file(st)) {
        return Status::PermissionDenied(spec.name + " left " + fs::path(path).filename().string() +
                                        " for frame " + std::to_string(frame) +
                                        " as a link or special file, not an image file");
      }
      bool integer = false;
      StatusOr<image::ImageBuffer> img = image::Read(path, &integer);
      if (!img.ok()) return img.status().WithContext("frame " + std::to_string(frame));
      if (integer && spec.output_srgb) {
        for (size_t p = 0, n = static_cast<size_t>(img->width) * img->height; p < n; ++p) {
          for (int c = 0; c < std::min(img->channels, 3); ++c) {
            float& v = img->pixels[p * img->channels + c];
            v = image::SrgbToLinear(v);
          }
        }
      }
      TSR_ASSIGN_OR_RETURN(
          image::ImageBuffer fitted,
          FitToPart(std::move(img).value(), assign.part, fs::path(path).filename().string()));
      TSR_RETURN_IF_ERROR(options.on_frame(frame, std::move(fitted), seconds / (last - first + 1)));
      fs::remove(path, ec);
    }
    return Status::Ok();
  };

  if (spec.per_frame) {
    for (int frame = assign.frame_start; frame <= assign.frame_end; ++frame) {
      if (options.cancel && options.cancel->load()) return Status::Cancelled("cancelled");
      if (options.on_frame_started) options.on_frame_started(frame);
      TSR_RETURN_IF_ERROR(run(frame, frame).WithContext("frame " + std::to_string(frame)));
    }
    return Status::Ok();
  }
  return run(assign.frame_start, assign.frame_end);
}

}  // namespace tessera::worker
