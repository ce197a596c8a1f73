#include "worker/task_runner.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <zmq_addon.hpp>

#include "plugins/api/renderer_api.h"
#include "shared/base/disk_space.h"
#include "shared/base/file_io.h"
#include "shared/base/utf8.h"
#include "worker/blob_cache.h"
#include "worker/openjd_task.h"

namespace tessera::worker {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// 8 bytes task_id, 4 bytes attempt, 1 byte last; host byte order (it never leaves the process).
constexpr size_t kTagSize = 13;

}  // namespace

zmq::message_t EncodeOutboxTag(const OutboxTag& tag) {
  zmq::message_t frame(kTagSize);
  auto* p = static_cast<char*>(frame.data());
  int32_t attempt = tag.ref.attempt;
  std::memcpy(p, &tag.ref.task_id, 8);
  std::memcpy(p + 8, &attempt, 4);
  p[12] = tag.last ? 1 : 0;
  return frame;
}

std::optional<OutboxTag> DecodeOutboxTag(const zmq::message_t& frame) {
  if (frame.size() != kTagSize) return std::nullopt;
  const auto* p = static_cast<const char*>(frame.data());
  OutboxTag tag;
  int32_t attempt = 0;
  std::memcpy(&tag.ref.task_id, p, 8);
  std::memcpy(&attempt, p + 8, 4);
  tag.ref.attempt = attempt;
  tag.last = p[12] != 0;
  return tag;
}

TaskRunner::TaskRunner(zmq::context_t& context, std::string outbox, protocol::Assign assign,
                       RenderSettings settings)
    : context_(context),
      outbox_(std::move(outbox)),
      assign_(std::move(assign)),
      ref_{assign_.task_id, assign_.attempt},
      settings_(std::move(settings)),
      current_frame_(std::max(assign_.frame_start, assign_.resume_frame)),
      thread_([this] { Run(); }) {}

void TaskRunner::ProvideAssets(Status status, std::map<std::string, std::string> files) {
  std::lock_guard<std::mutex> lock(assets_mu_);
  assets_status_ = std::move(status);
  asset_files_ = std::move(files);
  assets_ready_ = true;
  assets_cv_.notify_all();
}

Status TaskRunner::WaitForAssets() {
  if (assign_.assets.empty() && assign_.resume_checkpoint.empty()) return Status::Ok();
  std::unique_lock<std::mutex> lock(assets_mu_);
  while (!assets_ready_) {
    if (cancel_.load() || handback_.load()) {
      return Status::Cancelled("stopped while its assets were being fetched");
    }
    assets_cv_.wait_for(lock, std::chrono::milliseconds(100));
  }
  if (!assets_status_.ok()) return assets_status_;
  if (auto it = asset_files_.find(kCheckpointBlob); it != asset_files_.end()) {
    StatusOr<std::string> bytes = file_io::ReadAll(it->second);
    if (bytes.ok()) resume_checkpoint_ = std::move(*bytes);  // else: the frame starts over
    asset_files_.erase(it);
  }
  if (!asset_files_.empty()) Log(std::to_string(asset_files_.size()) + " asset file(s) ready");
  return Status::Ok();
}

void TaskRunner::RequestHandback(const std::string& reason) {
  if (handback_.load()) return;
  handback_reason_ = reason;
  handback_.store(true);
  // A plugin that checkpoints stops at its next safe point; anything else stops now.
  const NativePlugin* native = FindNativePlugin(*settings_.native, assign_.renderer);
  if (native == nullptr || !native->Can(TSR_CAP_CHECKPOINT)) cancel_.store(true);
}

TaskRunner::~TaskRunner() {
  if (thread_.joinable()) thread_.join();
}

void TaskRunner::Log(const std::string& line) {
  std::lock_guard<std::mutex> lock(log_mu_);
  log_ += utf8::Sanitize(line);
  log_ += '\n';
  // Trim at a line start, in slack-sized steps so long logs are not copied on every line.
  if (log_.size() > protocol::kMaxTaskLogBytes + protocol::kMaxTaskLogBytes / 4) {
    size_t cut = log_.size() - protocol::kMaxTaskLogBytes;
    size_t line_start = log_.find('\n', cut);
    cut = line_start == std::string::npos ? cut : line_start + 1;
    log_.erase(0, cut);
  }
}

Status TaskRunner::Send(zmq::socket_t& out, bool last, std::vector<zmq::message_t> frames) {
  if (settings_.spool != nullptr && !frames.empty()) {
    const bool final = IsFinalResult(frames);
    if (Status s = settings_.spool->Add(ref_, frames, final); !s.ok()) {
      // A result the spool cannot keep would be lost with the connection: on a full disk the
      // task stops here (and fails as storage_full, uncharged). Its final word goes anyway.
      if (!final && s.code() == StatusCode::kStorageFull) return s;
      spdlog::error("task {} attempt {}: {}; sending it without a spool copy", ref_.task_id,
                    ref_.attempt, s.message());
    }
  }
  frames.insert(frames.begin(), EncodeOutboxTag({ref_, last}));
  // Blocking send: the agent drains its outbox until it has seen every runner's `last`.
  zmq::send_multipart(out, frames);
  return Status::Ok();
}

void TaskRunner::SendCheckpoint(zmq::socket_t& out, int frame, int samples,
                                std::string checkpoint) {
  if (static_cast<int64_t>(checkpoint.size()) > protocol::kMaxResultBytes) {
    spdlog::warn("task {} attempt {}: checkpoint of {} bytes is above the result limit; not sent",
                 ref_.task_id, ref_.attempt, checkpoint.size());
    return;
  }
  protocol::Checkpoint m{ref_.task_id, ref_.attempt, frame, samples};
  spdlog::debug("task {} attempt {}: checkpoint of frame {} after {} samples ({} bytes)",
                ref_.task_id, ref_.attempt, frame, samples, checkpoint.size());
  Log("checkpoint: frame " + std::to_string(frame) + " after " + std::to_string(samples) +
      " samples");
  zmq::message_t payload(checkpoint.data(), checkpoint.size());
  std::vector<zmq::message_t> frames =
      protocol::Encode(protocol::MessageType::kCheckpoint, m, std::move(payload));
  // Not spooled: only the newest matters, and a lost one is just an older resume point.
  frames.insert(frames.begin(), EncodeOutboxTag({ref_, false}));
  zmq::send_multipart(out, frames);
}

void TaskRunner::Run() {
  const auto start = Clock::now();
  const std::string who = "task " + std::to_string(ref_.task_id) + " attempt " +
                          std::to_string(ref_.attempt) + " job " + std::to_string(assign_.job_id);
  zmq::socket_t out(context_, zmq::socket_type::push);
  out.set(zmq::sockopt::linger, -1);  // inproc: the agent reads everything before it exits
  out.connect(outbox_);
  spdlog::info("{}: started, frames {}..{}", who, assign_.frame_start, assign_.frame_end);
  Log("attempt " + std::to_string(ref_.attempt) + " started: frames " +
      std::to_string(assign_.frame_start) + ".." + std::to_string(assign_.frame_end) +
      ", renderer " + assign_.renderer + PinnedGpus());
  if (!assign_.resume_checkpoint.empty()) {
    Log("resuming at frame " + std::to_string(assign_.resume_frame) + " from a checkpoint after " +
        std::to_string(assign_.resume_samples) + " samples");
  }

  int frames_done = 0;
  Status status;
  try {
    status = WaitForAssets();
    if (status.ok()) status = RenderAll(out, &frames_done);
  } catch (const std::exception& e) {
    // The renderer (or an allocation for a huge image) threw: fail the task, keep the worker.
    status = Status::Internal(std::string("render failed: ") + e.what());
  }

  if (!status.ok() && handback_.load()) {
    if (static_cast<int64_t>(checkpoint_.size()) > protocol::kMaxResultBytes) {
      Log("checkpoint of " + std::to_string(checkpoint_.size()) +
          " bytes is above the result limit: handed back without it");
      checkpoint_.clear();
    }
    protocol::Handback back;
    back.task_id = ref_.task_id;
    back.attempt = ref_.attempt;
    back.frame = current_frame_.load();
    back.samples_done = checkpoint_.empty() ? 0 : checkpoint_samples_;
    back.reason = utf8::Sanitize(handback_reason_);
    Log("handed back at frame " + std::to_string(back.frame) + ": " + back.reason);
    back.log = log_;
    spdlog::info("{}: handed back at frame {} after {:.2f} s ({}{})", who, back.frame,
                 SecondsSince(start), back.reason,
                 checkpoint_.empty()
                     ? ", no checkpoint"
                     : ", checkpoint after " + std::to_string(back.samples_done) + " samples");
    zmq::message_t payload(checkpoint_.data(), checkpoint_.size());
    (void)Send(out, true,
               protocol::Encode(protocol::MessageType::kHandback, back, std::move(payload)));
  } else if (status.ok()) {
    spdlog::info("{}: done, {} frame(s) in {:.2f} s", who, frames_done, SecondsSince(start));
    Log("done: " + std::to_string(frames_done) + " frame(s) in " +
        std::to_string(SecondsSince(start)) + " s");
    (void)Send(out, true,
               protocol::Encode(protocol::MessageType::kTaskDone,
                                protocol::TaskDone{ref_.task_id, ref_.attempt, log_, files_sent_}));
  } else if (cancel_.load()) {
    // The scheduler (or shutdown) cancelled this attempt: nothing more goes out for it.
    spdlog::info("{}: cancelled after {} frame(s), {:.2f} s", who, frames_done,
                 SecondsSince(start));
    (void)Send(out, true, {});
  } else {
    // A renderer that failed on a full disk says so in its own words, if at all: the room left
    // where task folders go tells (ClassifyWriteFailure never turns other failures into it
    // while there is room).
    status = disk_space::ClassifyWriteFailure(status, DataDir(), 0);
    // The message may quote a renderer, a plugin or a scene: valid UTF-8 before it leaves.
    const std::string message = utf8::Sanitize(status.message());
    spdlog::warn("{}: failed after {} frame(s), {:.2f} s: {}", who, frames_done,
                 SecondsSince(start), message);
    Log("failed: " + message);
    protocol::TaskFailed failed{ref_.task_id, ref_.attempt, message};
    if (!failure_class_.empty()) failed.failure_class = failure_class_;
    if (status.code() == StatusCode::kStorageFull) {
      // This worker's disk (or the shared outputs) is full: not the task's failure.
      failed.failure_class = protocol::kFailureStorageFull;
      failed.charge = false;
    }
    failed.log = log_;
    (void)Send(out, true, protocol::Encode(protocol::MessageType::kTaskFailed, failed));
  }
}

std::string TaskRunner::DataDir() const {
  if (!settings_.data_dir.empty()) return settings_.data_dir;
  std::error_code ec;
  return (std::filesystem::temp_directory_path(ec) /
          ("tessera-worker-" + std::to_string(::getpid())))
      .string();
}

int RenderThreadsFor(int task_cpu_cores, int worker_threads, int slots, int hardware) {
  hardware = std::max(1, hardware);
  if (task_cpu_cores > 0) {
    return std::min(task_cpu_cores, worker_threads > 0 ? worker_threads : hardware);
  }
  if (worker_threads > 0) return worker_threads;
  return std::max(1, hardware / std::max(1, slots));
}

int TaskRunner::RenderThreads() const {
  return RenderThreadsFor(assign_.cpu_cores, settings_.cpu_threads, settings_.slots,
                          static_cast<int>(std::thread::hardware_concurrency()));
}

std::string TaskRunner::PinnedGpus() const {
  if (assign_.gpus.empty()) return "";
  std::string out = assign_.gpus.size() == 1 ? ", GPU " : ", GPUs ";
  for (size_t i = 0; i < assign_.gpus.size(); ++i) {
    out += (i > 0 ? "," : "") + std::to_string(assign_.gpus[i]);
  }
  return out;
}

Status TaskRunner::RenderAll(zmq::socket_t& out, int* frames_done) {
  if (assign_.renderer == spec::kRendererNoop) return Status::Ok();  // nothing to render
  if (const NativePlugin* native = FindNativePlugin(*settings_.native, assign_.renderer)) {
    return RenderNative(*native, out, frames_done);
  }
  if (assign_.renderer == spec::kRendererOpenJd) return RenderOpenJd(out);
  return RenderCommandPlugin(out, frames_done);
}

std::string TaskRunner::status_line() const {
  std::lock_guard<std::mutex> lock(status_mu_);
  if (!status_line_.empty()) return status_line_;
  // An OpenJD task's "frame" is only its index: it says what it does itself, or nothing.
  const int frame = current_frame_.load();
  return frame > 0 && assign_.renderer != spec::kRendererOpenJd ? "frame " + std::to_string(frame)
                                                                : "";
}

Status TaskRunner::RenderOpenJd(zmq::socket_t& out) {
  CommandPluginOptions options = ProgramRunOptions();
  options.on_file = [&](const std::string& name, const std::string& path) {
    return SendFile(out, name, path);
  };
  // This worker's shared-storage mounts (worker.path_map) are its path mapping rules too.
  std::vector<openjd::PathMappingRule> rules;
  for (const auto& [from, to] : settings_.path_map) rules.push_back({"POSIX", from, to, false});
  return RunOpenJdTask(assign_, options, rules);
}

CommandPluginOptions TaskRunner::ProgramRunOptions() {
  CommandPluginOptions options;
  options.data_dir = DataDir();
  options.search_path = EffectivePluginPath(settings_.plugin_path);
  options.command_programs = settings_.command_programs;
  options.run_as = settings_.run_as;
  // {threads} is always a count: renderers read 0 differently (POV-Ray: one thread).
  options.threads = RenderThreads();
  options.cancel = &cancel_;
  options.on_progress = [this](double f) { progress_.store(std::clamp(f, 0.0, 1.0)); };
  options.on_frame_started = [this](int frame) { current_frame_.store(frame); };
  options.on_output = [this](const std::string& line) { Log(line); };
  options.on_status = [this](const std::string& line) {
    std::lock_guard<std::mutex> lock(status_mu_);
    status_line_ = line;
  };
  options.assets = asset_files_;
  options.failure_class = &failure_class_;
  return options;
}

Status TaskRunner::RenderNative(const NativePlugin& plugin, zmq::socket_t& out, int* frames_done) {
  // The job's files (meshes, textures, caches) sit in a task folder, by the paths it gives. The
  // folder exists even without assets: relative paths in a scene resolve there and nowhere else.
  const std::string scene_dir = TaskFolder(DataDir(), assign_);
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      std::error_code ec;
      if (!dir.empty()) std::filesystem::remove_all(dir, ec);
    }
  } cleanup{scene_dir};
  {
    std::error_code ec;
    std::filesystem::create_directories(scene_dir, ec);
    if (ec && disk_space::IsFullErrno(ec.value())) {
      return disk_space::FullError("create the task folder", scene_dir, ec.value());
    }
    if (ec) {
      return Status::Internal("cannot create the task folder " + scene_dir + ": " + ec.message());
    }
  }
  TSR_RETURN_IF_ERROR(LinkAssets(scene_dir, asset_files_));
  nlohmann::json settings = nlohmann::json::object();
  for (const auto& [name, value] : assign_.settings) {
    // Settings come off the wire: JSON cannot carry invalid UTF-8 (the plugin checks values).
    settings[utf8::Sanitize(name)] = utf8::Sanitize(value);
  }
  // Where the scene's files may come from (no job setting can have this name: it overrides).
  settings[TSR_SETTING_INPUT_ROOTS] = settings_.input_roots;

  NativePlugin::Request request;
  request.part = assign_.part;
  request.threads = RenderThreads();
  // The scheduler pins each task to its own GPU(s): the plugin renders on all of them (the path
  // tracer splits each frame over them), within the task's memory budget. No GPU: the CPU.
  request.gpu_index = assign_.gpus.empty() ? -1 : assign_.gpus.front();
  request.gpus = assign_.gpus;
  request.gpu_memory_mb = assign_.gpus.empty() ? 0 : assign_.gpu_memory_mb;
  request.device = settings_.device;
  request.scene = assign_.scene_yaml;
  request.scene_dir = scene_dir;
  request.settings_json = settings.dump();
  // A part of a split frame travels as its exact accumulation when the plugin has one, so the
  // scheduler's merge is bit-identical to the frame rendered whole.
  request.want_accumulation = !assign_.part.whole() && plugin.Can(TSR_CAP_SAMPLE_PARTS);
  request.cancel = &cancel_;
  request.handback = &handback_;
  request.on_log = [this, &plugin](const std::string& line) {
    const std::string clean = utf8::Sanitize(line);
    spdlog::info("task {} attempt {}: {}: {}", ref_.task_id, ref_.attempt, plugin.name(), clean);
    Log(clean);
  };
  request.on_checkpoint = [this](std::string checkpoint, int samples) {
    checkpoint_ = std::move(checkpoint);
    checkpoint_samples_ = samples;
  };
  // Periodic checkpoints: the interval counts from the render's start and from each checkpoint
  // or finished frame (which is delivered: nothing of it to lose).
  const auto interval = std::chrono::seconds(assign_.checkpoint_interval_s);
  auto next_checkpoint = Clock::now() + interval;
  if (assign_.checkpoint_interval_s > 0 && plugin.Can(TSR_CAP_PERIODIC_CHECKPOINT)) {
    request.checkpoint_due = [&next_checkpoint] { return Clock::now() >= next_checkpoint; };
    request.on_periodic_checkpoint = [&](std::string checkpoint, int samples) {
      next_checkpoint = Clock::now() + interval;
      SendCheckpoint(out, current_frame_.load(), samples, std::move(checkpoint));
    };
  }

  const int frame_count = assign_.frame_end - assign_.frame_start + 1;
  // A resumed attempt: the frames before resume_frame were delivered by the one before.
  const int first = std::max(assign_.frame_start, assign_.resume_frame);
  for (int frame = first; frame <= assign_.frame_end; ++frame) {
    if (cancel_.load() || handback_.load()) return Status::Cancelled("cancelled");
    const int index = frame - assign_.frame_start;
    current_frame_.store(frame);
    request.frame = frame;
    request.resume = frame == first ? std::string_view(resume_checkpoint_) : std::string_view();
    request.on_progress = [this, index, frame_count](double fraction) {
      progress_.store((index + fraction) / frame_count);
    };

    const auto frame_start = Clock::now();
    StatusOr<NativePlugin::Result> result = plugin.Render(request);
    if (!result.ok()) {
      // The plugin said the scene is broken (TSR_RENDER_SCENE_ERROR): no attempt can succeed.
      if (result.status().code() == StatusCode::kInvalidArgument) {
        failure_class_ = protocol::kFailureSceneError;
      }
      return result.status().WithContext("frame " + std::to_string(frame));
    }
    const double seconds = SecondsSince(frame_start);
    const image::ImageBuffer& image = result->image;
    if (!result->accumulation.empty()) {
      TSR_RETURN_IF_ERROR(
          SendPart(out, frame, image, result->accumulation, seconds, result->backend));
    } else {
      TSR_RETURN_IF_ERROR(SendFrame(out, frame, image.pixels.data(), image.width, image.height,
                                    image.channels, image.channel_names, seconds, result->backend));
    }
    progress_.store(static_cast<double>(index + 1) / frame_count);
    next_checkpoint = Clock::now() + interval;
    ++*frames_done;
    spdlog::debug("task {} attempt {}: frame {} rendered in {:.2f} s on {}", ref_.task_id,
                  ref_.attempt, frame, seconds, result->backend);
    const protocol::FramePart& part = assign_.part;
    Log("frame " + std::to_string(frame) + ": " + std::to_string(image.width) + "x" +
        std::to_string(image.height) + ", samples " + std::to_string(part.sample_begin) + ".." +
        (part.sample_end < 0 ? std::string("all") : std::to_string(part.sample_end)) + ", " +
        std::to_string(seconds) + " s on " + result->backend);
  }
  return Status::Ok();
}

std::string MapSharedPath(const std::map<std::string, std::string>& path_map,
                          const std::string& path) {
  const std::pair<const std::string, std::string>* best = nullptr;
  for (const auto& entry : path_map) {
    const std::string& from = entry.first;
    const bool under =
        path.compare(0, from.size(), from) == 0 &&
        (path.size() == from.size() || path[from.size()] == '/' || from.ends_with('/'));
    if (under && (best == nullptr || from.size() > best->first.size())) best = &entry;
  }
  return best == nullptr ? path : best->second + path.substr(best->first.size());
}

protocol::FrameResult TaskRunner::ResultOf(int frame, int width, int height, int channels,
                                           double seconds, const std::string& backend) const {
  protocol::FrameResult result;
  result.task_id = ref_.task_id;
  result.attempt = ref_.attempt;
  result.frame = frame;
  result.width = width;
  result.height = height;
  result.channels = channels;
  result.render_seconds = seconds;
  result.backend = backend;
  result.part = assign_.part;
  return result;
}

Status TaskRunner::SendFrame(zmq::socket_t& out, int frame, const float* pixels, int width,
                             int height, int channels,
                             const std::vector<std::string>& channel_names, double seconds,
                             const std::string& backend) {
  const size_t bytes =
      static_cast<size_t>(width) * height * static_cast<size_t>(channels) * sizeof(float);
  if (!assign_.output.dir.empty() && assign_.part.whole()) {
    // Shared storage: the files go straight there; the scheduler gets only the news.
    image::ImageBuffer image{width, height, channels,
                             std::vector<float>(pixels, pixels + bytes / sizeof(float)),
                             channel_names};
    const std::string dir = MapSharedPath(settings_.path_map, assign_.output.dir);
    std::vector<std::string> files;
    TSR_RETURN_IF_ERROR(image::WriteFrameFiles(dir, assign_.output.pattern, frame,
                                               assign_.output.formats, assign_.output.exr_float,
                                               image, &files)
                            .WithContext("frame " + std::to_string(frame) + ": shared storage"));
    Log("frame " + std::to_string(frame) + " written to " + dir);
    protocol::FrameResult result = ResultOf(frame, width, height, channels, seconds, backend);
    result.encoding = protocol::kEncodingWritten;
    return Send(out, false, protocol::Encode(protocol::MessageType::kFrameResult, result));
  }
  if (static_cast<int64_t>(bytes) > protocol::kMaxResultBytes) {
    return Status::ResourceExhausted("frame " + std::to_string(frame) + ": " +
                                     std::to_string(bytes) + " bytes exceed the result limit of " +
                                     std::to_string(protocol::kMaxResultBytes) +
                                     "; split the job into tiles");
  }
  protocol::FrameResult result = ResultOf(frame, width, height, channels, seconds, backend);
  result.channel_names = channel_names;
  zmq::message_t payload(pixels, bytes);
  return Send(out, false,
              protocol::Encode(protocol::MessageType::kFrameResult, result, std::move(payload)));
}

Status TaskRunner::SendPart(zmq::socket_t& out, int frame, const image::ImageBuffer& image,
                            const std::string& accumulation, double seconds,
                            const std::string& backend) {
  if (static_cast<int64_t>(accumulation.size()) > protocol::kMaxResultBytes) {
    return Status::ResourceExhausted(
        "frame " + std::to_string(frame) + ": " + std::to_string(accumulation.size()) +
        " bytes exceed the result limit of " + std::to_string(protocol::kMaxResultBytes) +
        "; split the job into more tiles");
  }
  protocol::FrameResult result =
      ResultOf(frame, image.width, image.height, image.channels, seconds, backend);
  result.channel_names = image.channel_names;
  result.encoding = protocol::kEncodingAccumulation;
  zmq::message_t payload(accumulation.data(), accumulation.size());
  return Send(out, false,
              protocol::Encode(protocol::MessageType::kFrameResult, result, std::move(payload)));
}

Status TaskRunner::RenderCommandPlugin(zmq::socket_t& out, int* frames_done) {
  const CommandPlugin* plugin = FindCommandPlugin(*settings_.command_plugins, assign_.renderer);
  if (plugin == nullptr) {
    return Status::FailedPrecondition("renderer '" + assign_.renderer +
                                      "' is not available on this worker");
  }
  const int frame_count = assign_.frame_end - assign_.frame_start + 1;
  CommandPluginOptions options = ProgramRunOptions();
  const std::string backend =
      plugin->spec.name +
      (assign_.gpus.empty() ? ":cpu" : ":gpu" + std::to_string(assign_.gpus[0]));
  options.on_frame = [&](int frame, image::ImageBuffer image, double seconds) -> Status {
    // Channel names: only pass them on when they differ from the R, G, B, A default.
    std::vector<std::string> names = image.channel_names;
    const std::vector<std::string> standard = {"R", "G", "B", "A"};
    if (names.size() <= 4 && std::equal(names.begin(), names.end(), standard.begin())) {
      names.clear();
    }
    TSR_RETURN_IF_ERROR(SendFrame(out, frame, image.pixels.data(), image.width, image.height,
                                  image.channels, names, seconds, backend));
    ++*frames_done;
    progress_.store(static_cast<double>(frame - assign_.frame_start + 1) / frame_count);
    return Status::Ok();
  };
  options.on_file = [&](const std::string& name, const std::string& path) {
    return SendFile(out, name, path);
  };
  return RunCommandPlugin(*plugin, assign_, options);
}

Status TaskRunner::SendFile(zmq::socket_t& out, const std::string& name, const std::string& path) {
  TSR_ASSIGN_OR_RETURN(std::string bytes, file_io::ReadAll(path));
  protocol::FileResult result{ref_.task_id, ref_.attempt, name, static_cast<int64_t>(bytes.size()),
                              ""};
  ++files_sent_;
  if (!assign_.output.dir.empty()) {
    // Shared storage: the file goes straight there (written aside, then renamed, so a reader
    // never sees half of it); the scheduler gets only the news.
    const std::filesystem::path target =
        std::filesystem::path(MapSharedPath(settings_.path_map, assign_.output.dir)) / name;
    std::error_code ec;
    std::filesystem::create_directories(target.parent_path(), ec);
    TSR_RETURN_IF_ERROR(file_io::WriteAtomically(target.string(), {bytes}, 0644)
                            .WithContext(name + ": shared storage"));
    result.encoding = protocol::kEncodingWritten;
    Log(name + " written to " + target.parent_path().string());
    return Send(out, false, protocol::Encode(protocol::MessageType::kFileResult, result));
  }
  zmq::message_t payload(bytes.data(), bytes.size());
  return Send(out, false,
              protocol::Encode(protocol::MessageType::kFileResult, result, std::move(payload)));
}

}  // namespace tessera::worker
