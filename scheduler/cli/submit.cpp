// `tessera submit`: validate the job (and its scene) locally with the same parsers the scheduler
// uses, so a mistake is reported with the file and field before anything is sent.

#include "scheduler/cli/submit.h"

#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <system_error>
#include <thread>
#include <variant>

#include "scheduler/cli/api_client.h"
#include "scheduler/cli/commands.h"
#include "scheduler/cli/format.h"
#include "shared/base/sha256.h"
#include "shared/base/utf8.h"
#include "shared/jobs/job_file.h"
#include "shared/jobs/job_steps.h"
#include "shared/jobs/parsed_job_file.h"
#include "shared/plugins/plugin_catalog.h"
#include "shared/scenes/scene_file.h"

namespace tessera::cli {

namespace fs = std::filesystem;

namespace {

// Attempts after the first when an answer was lost (0.5, 1 and 2 s apart).
constexpr int kSubmitRetries = 3;

// Whether a failed POST may have reached the scheduler (it was sent, the answer never came):
// then the same request is sent again. A refused connection reached nothing: reported at once.
bool MayHaveArrived(const Status& status) {
  return status.code() == StatusCode::kUnavailable &&
         (status.message() == "no response" || status.message() == "could not send the request");
}

// A random key for one submission's Idempotency-Key (128 bits, hex).
std::string NewIdempotencyKey() {
  std::random_device random;
  std::string key;
  for (int i = 0; i < 4; ++i) {
    char part[9];
    std::snprintf(part, sizeof(part), "%08x", static_cast<unsigned>(random()));
    key += part;
  }
  return key;
}

}  // namespace

StatusOr<std::string> ReadTextFile(const fs::path& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return Status::InvalidArgument("is a directory, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Status::NotFound(fs::exists(path, ec) ? "cannot open the file for reading"
                                                 : "no such file");
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return Status::Internal("read error");
  return text.str();
}

namespace {

// The parsers report problems as Status; this guard only keeps a library exception that slipped
// through from aborting the CLI.
template <typename Fn>
auto Guarded(Fn fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const std::exception& e) {
    return Status::Internal(std::string("unexpected parser failure: ") + e.what());
  }
}

}  // namespace

int LocalError(const std::string& message) {
  std::cerr << "error: " << message << "\n";
  return kExitUsage;
}

int LocalError(const std::string& where, const std::string& message) {
  std::cerr << "error: " << where << ": " << message << "\n";
  return kExitUsage;
}

// Upload pieces: well under the API's body limit, large enough to keep a fast link busy.
constexpr size_t kUploadPieceBytes = 8 << 20;

// Uploads one asset file as a content-addressed blob unless the scheduler has it, resuming an
// upload an earlier run left unfinished. Returns its SHA-256.
StatusOr<std::string> UploadAsset(ApiClient& client, const fs::path& file) {
  TSR_ASSIGN_OR_RETURN(std::string hash, Sha256File(file.string()));
  std::error_code ec;
  const auto total = static_cast<int64_t>(fs::file_size(file, ec));
  if (ec) return Status::NotFound("cannot read its size: " + ec.message());
  TSR_ASSIGN_OR_RETURN(json state, client.Get("/api/v1/blobs/" + hash));
  if (state.value("complete", false)) return hash;
  int64_t offset = state.value("received", int64_t{0});
  std::ifstream in(file, std::ios::binary);
  if (!in) return Status::NotFound("cannot open the file for reading");
  std::string piece;
  do {
    in.seekg(offset);
    piece.resize(static_cast<size_t>(std::min<int64_t>(kUploadPieceBytes, total - offset)));
    in.read(piece.data(), static_cast<std::streamsize>(piece.size()));
    if (in.gcount() != static_cast<std::streamsize>(piece.size())) {
      return Status::Internal("the file changed while it was uploaded");
    }
    TSR_ASSIGN_OR_RETURN(
        json sent, client.PutBytes("/api/v1/blobs/" + hash + "?offset=" + std::to_string(offset) +
                                       "&total=" + std::to_string(total),
                                   piece));
    offset = sent.value("received", offset + static_cast<int64_t>(piece.size()));
    if (sent.value("complete", false)) return hash;
  } while (offset < total);
  return Status::Internal("the scheduler did not confirm the upload");
}

namespace {

// A job naming a C++ plugin that a worker loaded (`renderer`, as the job file names it): the
// scheduler has its declaration, so the job is checked here by the same rules, before anything
// is uploaded. Quiet on failure: the check then reports the renderer as unknown, or the request
// reports the connection.
void LearnNativePlugins(const ClientOptions& options, const std::string& renderer) {
  if (renderer.empty() || renderer == spec::kRendererNoop ||
      plugin::FindRenderer(renderer) != nullptr) {
    return;
  }
  ApiClient client(options.connection);
  StatusOr<json> listing = client.Get("/api/v1/plugins");
  if (!listing.ok() || !(*listing)["plugins"].is_array()) return;
  for (const json& p : (*listing)["plugins"]) {
    if (p.value("kind", "") != "native") continue;
    StatusOr<plugin::PluginSpec> spec = plugin::NativePluginSpec(
        p.value("name", ""), p.value("description", ""), p.value("tiles", false),
        p.value("sample_parts", false), p.value("declaration", ""));
    if (spec.ok()) (void)plugin::RegisterNativePlugin(std::move(*spec));
  }
}

}  // namespace

// Whose job it is when the job file does not say: the token's user when a token is given (a
// farm with tokens refuses a job of anyone else), else the login name.
std::string DefaultUser(const ClientOptions& options, ApiClient& client) {
  if (!options.connection.token.empty()) {
    StatusOr<json> me = client.Get("/api/v1/whoami");
    if (me.ok() && me->is_object() && me->value("auth", "") == "token") {
      const std::string user = me->value("user", "");
      if (!user.empty()) return user;
    }
  }
  const char* login = std::getenv("USER");
  if (login == nullptr || *login == '\0') return "";
  std::string name = std::string(login).substr(0, spec::kMaxNameLength);
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') c = '_';
  }
  return name;
}

// What the scheduler says the job would create, e.g.
//   job 'spheres' (pathtracer, user ana): frames 1-240 (240), chunk 1, 4 part(s) per frame
//   -> 960 task(s); depends on jobs [12]; output shots/sh010. Nothing was stored.
int PrintDryRun(ApiClient& client, const json& body, bool as_json) {
  StatusOr<json> reply = client.Post("/api/v1/jobs?dry_run=true", body, "");
  if (!reply.ok()) return ReportError(client.server_url(), reply.status());
  const json& job = Member(*reply, "job");
  if (as_json) {
    std::cout << reply->dump(2) << "\n";
    return kExitOk;
  }
  if (Member(job, "steps").is_array()) {
    std::cout << "job '" << Str(job, "name") << "'"
              << (Str(job, "user", "").empty() ? "" : " (user " + Str(job, "user") + ")") << ": "
              << Member(job, "steps").size() << " step(s) -> " << Str(job, "tasks") << " task(s)\n";
    for (const json& step : Member(job, "steps")) {
      const json& frames = Member(step, "frames");
      std::string after;
      for (const json& dep : Member(step, "step_depends_on")) {
        after += (after.empty() ? "" : ", ") + Str(dep, "step") +
                 (Member(dep, "per_frame") == true ? " (per frame)" : "");
      }
      std::cout << "  step " << Str(step, "name") << " (" << Str(step, "renderer") << "): frames "
                << Str(frames, "start") << "-" << Str(frames, "end") << ", chunk "
                << Str(step, "chunk_size") << " -> " << Str(step, "tasks") << " task(s)"
                << (after.empty() ? "" : "; after " + after) << "\n";
    }
    std::cout << "Valid; nothing was stored (submit without --dry-run to create it).\n";
    return kExitOk;
  }
  const json& frames = Member(job, "frames");
  std::cout << "job '" << Str(job, "name") << "' (" << Str(job, "renderer")
            << (Str(job, "user", "").empty() ? "" : ", user " + Str(job, "user")) << "): frames "
            << Str(frames, "start") << "-" << Str(frames, "end") << " (" << Str(frames, "count")
            << "), chunk " << Str(job, "chunk_size") << ", " << Str(job, "parts_per_frame")
            << " part(s) per frame -> " << Str(job, "tasks") << " task(s)\n";
  for (const char* key : {"depends_on", "frame_depends_on"}) {
    const json& ids = Member(job, key);
    if (ids.is_array() && !ids.empty()) std::cout << "  " << key << ": " << ids.dump() << "\n";
  }
  if (Int(job, "assets") > 0) {
    std::cout << "  assets: " << Str(job, "assets") << " file(s), uploaded when submitted\n";
  }
  const json& output = Member(job, "output");
  std::string where =
      output.contains("shared_dir") ? Str(output, "shared_dir") : Str(output, "directory", "");
  if (where.empty()) where = Str(job, "name") + "-<job id> (the default)";
  std::cout << "  output: " << where
            << "\nValid; nothing was stored (submit without --dry-run to create it).\n";
  return kExitOk;
}

namespace {

// What travels with a job besides its file: its scene's text and the files it reads (paths
// relative to scene_dir), read and checked here as the scheduler would.
struct LocalFiles {
  std::string scene_text;
  std::set<std::string> asset_files;
  fs::path scene_dir;
};

StatusOr<LocalFiles> ReadLocalFiles(const std::string& job_file, const spec::JobSpec& job) {
  LocalFiles local;
  std::string& scene_text = local.scene_text;
  // The path tracer's scene, parsed once: checked here, and it names the files that travel.
  std::optional<spec::SceneSpec> scene;
  // A binary scene (.blend) is uploaded like an asset, under its file name.
  const std::shared_ptr<const plugin::PluginSpec> plugin = plugin::FindPlugin(job.renderer);
  const bool binary_scene = plugin && plugin::IsBinaryScene(*plugin, job.scene_path);
  if (!job.scene_path.empty() && !binary_scene) {
    fs::path scene_path = job.scene_path;
    if (scene_path.is_relative()) scene_path = fs::path(job_file).parent_path() / scene_path;
    StatusOr<std::string> read = ReadTextFile(scene_path);
    if (!read.ok()) {
      return Status::InvalidArgument(job_file + ": scene: cannot read '" + scene_path.string() +
                                     "': " + read.status().message());
    }
    if (read->size() > spec::kMaxSceneBytes) {
      return Status::InvalidArgument(scene_path.string() + ": larger than " +
                                     std::to_string(spec::kMaxSceneBytes) + " bytes");
    }
    scene_text = std::move(read).value();
    // Stored and shown as text: refused here with the offset, as the scheduler would.
    if (Status s = utf8::Check(scene_text, "scene"); !s.ok()) {
      return Status::InvalidArgument(scene_path.string() + ": " + s.message());
    }
    // A plugin's scene is the renderer's own text (.pov, .py): the renderer reads it.
    if (!job.uses_plugin()) {
      StatusOr<spec::SceneSpec> parsed = Guarded([&] { return spec::ParseSceneYaml(scene_text); });
      if (!parsed.ok()) {
        return Status::InvalidArgument(scene_path.string() + ": " + parsed.status().message());
      }
      scene = std::move(parsed).value();
    }
  } else if (job.produces_frames() && !job.uses_plugin()) {
    scene_text = job.scene_yaml;
    StatusOr<spec::SceneSpec> parsed = Guarded([&] { return spec::ParseSceneYaml(scene_text); });
    if (!parsed.ok()) {
      return Status::InvalidArgument(job_file + ": scene: " + parsed.status().message());
    }
    scene = std::move(parsed).value();
  }

  // The files the renderer reads besides the scene: the job's own list, and for the path tracer
  // the files its scene names. Paths are relative to the scene's folder.
  std::set<std::string>& asset_files = local.asset_files;
  asset_files.insert(job.asset_files.begin(), job.asset_files.end());
  if (binary_scene) asset_files.insert(fs::path(job.scene_path).filename().string());
  if (job.takes_tessera_scene() && scene) {
    for (const std::string& f : spec::RelativeAssetFiles(*scene)) asset_files.insert(f);
  }
  fs::path& scene_dir = local.scene_dir;
  scene_dir = fs::path(job_file).parent_path();
  if (!job.scene_path.empty()) {
    fs::path scene_path = job.scene_path;
    if (scene_path.is_relative()) scene_path = scene_dir / scene_path;
    scene_dir = scene_path.parent_path();
  }

  return local;
}

// A job without steps is one "step" with no name; a job with steps reads each step's files.
using NamedJobs = std::vector<std::pair<std::string, spec::JobSpec>>;

NamedJobs JobsOf(spec::ParsedJobFile&& parsed) {
  NamedJobs jobs;
  if (auto* pipeline = std::get_if<spec::PipelineSpec>(&parsed)) {
    for (spec::StepSpec& step : pipeline->steps) jobs.emplace_back(step.name, std::move(step.job));
  } else if (auto* job = std::get_if<spec::JobSpec>(&parsed)) {
    jobs.emplace_back("", std::move(*job));
  }
  return jobs;
}

}  // namespace

int RunSubmit(const ClientOptions& options, const std::string& job_file,
              const SubmitOptions& submit) {
  const bool dry_run = submit.dry_run;
  std::error_code ec;
  // A folder is an OpenJD job bundle (template.yaml and its files).
  if (fs::is_directory(job_file, ec)) return SubmitTemplate(options, job_file, submit);
  StatusOr<std::string> job_text = ReadTextFile(job_file);
  if (!job_text.ok()) return LocalError(job_file, job_text.status().message());
  // The file's one parse: what it is, and the document its spec is checked from.
  const JobFileText file{*job_text, spec::ReadJobFile(*job_text)};
  if (file.document.kind == spec::JobFileKind::kOpenJdJobTemplate) {
    return SubmitTemplate(options, job_file, submit, &file);
  }
  if (submit.ForTemplatesOnly()) {
    return LocalError(job_file +
                      " is a Tessera job file: -p, --env, --path-mapping-rules, "
                      "--priority, --max-retries, --project and --pool are for Open Job "
                      "Description templates (a job file says these itself)");
  }
  LearnNativePlugins(options, file.document.TopRenderer());
  StatusOr<spec::ParsedJobFile> parsed = Guarded([&] { return spec::CheckJobFile(file.document); });
  if (!parsed.ok()) return LocalError(job_file, parsed.status().message());
  const NamedJobs jobs = JobsOf(std::move(parsed).value());

  ApiClient client(options.connection);
  json body = {{"job_yaml", *job_text}};
  // Every asset of every step, by its path relative to its scene's folder (steps share the map).
  std::map<std::string, fs::path> asset_paths;
  for (const auto& [step, job] : jobs) {
    const std::string where = step.empty() ? job_file : job_file + ": step " + step;
    StatusOr<LocalFiles> local = ReadLocalFiles(job_file, job);
    if (!local.ok()) {
      return LocalError(step.empty() ? local.status().message()
                                     : "step " + step + ": " + local.status().message());
    }
    if (step.empty()) {
      body["scene_yaml"] = local->scene_text;
    } else if (!local->scene_text.empty()) {
      body["step_scenes"][step] = local->scene_text;
    }
    for (const std::string& file : local->asset_files) {
      if (Status s = spec::ValidateAssetPath(file, "assets"); !s.ok()) {
        return LocalError(where, s.message());
      }
      const fs::path path = local->scene_dir / file;
      auto [it, added] = asset_paths.emplace(file, path);
      std::error_code ec;
      if (!added && !fs::equivalent(it->second, path, ec)) {
        return LocalError(where, "asset '" + file + "' names " + path.string() +
                                     ", another step's names " + it->second.string() +
                                     "; the steps of a job share their assets' paths");
      }
    }
  }
  if (!asset_paths.empty()) {
    json assets = json::object();
    for (const auto& [file, path] : asset_paths) {
      std::error_code ec;
      if (!fs::is_regular_file(path, ec)) {
        return LocalError(job_file, "asset '" + file + "': no such file " + path.string());
      }
      StatusOr<std::string> hash = dry_run ? Sha256File(path.string()) : UploadAsset(client, path);
      if (!hash.ok()) {
        if (hash.status().code() == StatusCode::kUnavailable) {
          return ReportError(client.server_url(), hash.status());
        }
        return LocalError(path.string(), "upload failed: " + hash.status().message());
      }
      assets[file] = *hash;
    }
    body["assets"] = std::move(assets);
  }
  // Fair share counts jobs per user; a job file may name its user itself.
  if (std::string user = DefaultUser(options, client); !user.empty()) body["user"] = user;
  if (dry_run) return PrintDryRun(client, body, options.json);
  return PostJob(options, client, body);
}

int PostJob(const ClientOptions& options, ApiClient& client, const json& body) {
  // One key for this submission: if an answer is lost (the connection drops after the job was
  // stored), the re-sent request gets that job back instead of creating a second one.
  const std::string key = NewIdempotencyKey();
  StatusOr<json> reply = client.Post("/api/v1/jobs", body, key);
  for (int retry = 0; !reply.ok() && MayHaveArrived(reply.status()) && retry < kSubmitRetries;
       ++retry) {
    const auto pause = std::chrono::milliseconds(500) * (1 << retry);
    std::cerr << "tessera submit: " << reply.status().message() << "; retrying in " << pause.count()
              << " ms (the same request: it cannot create the job twice)\n";
    std::this_thread::sleep_for(pause);
    reply = client.Post("/api/v1/jobs", body, key);
  }
  if (!reply.ok()) return ReportError(client.server_url(), reply.status());
  const json& submitted = (*reply).contains("job") ? (*reply)["job"] : *reply;
  if (options.json) {
    std::cout << submitted.dump(2) << "\n";
  } else if (submitted.contains("id")) {
    std::cout << submitted["id"].dump() << "\n";
  } else {
    std::cerr << "error: the scheduler accepted the job but sent no job id\n";
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace tessera::cli
