#pragma once
// One assigned task rendered on its own thread.
//
// The render thread never touches the agent's DEALER. It owns a PUSH socket connected to the
// agent's inproc "outbox" PULL and sends every message it produces there, already encoded for the
// scheduler and preceded by one internal tag frame (task_id, attempt, last). The agent's I/O
// thread forwards those frames to the scheduler unchanged (or drops them once the attempt was
// cancelled). The message tagged `last` is the runner's final one; after it the thread only
// closes its socket, so the I/O thread can join it without waiting.
//
// Progress is not sent by the render thread: the renderer's callback may run on any of its
// threads, so it only stores the fraction in an atomic, which the I/O thread samples (and
// throttles) itself.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <zmq.hpp>

#include "shared/jobs/job_file.h"
#include "shared/wire/protocol.h"
#include "worker/command_plugin.h"
#include "worker/native_plugin.h"
#include "worker/result_spool.h"

namespace tessera::worker {

// The internal frame in front of every outbox message.
struct OutboxTag {
  protocol::TaskRef ref;
  bool last = false;
};
zmq::message_t EncodeOutboxTag(const OutboxTag& tag);

// A shared-storage path as this machine mounts it: the longest `path_map` prefix (whole path
// components) replaced; unchanged when none matches.
std::string MapSharedPath(const std::map<std::string, std::string>& path_map,
                          const std::string& path);
std::optional<OutboxTag> DecodeOutboxTag(const zmq::message_t& frame);

// Among the files TaskRunner::ProvideAssets gets: the checkpoint a resumed attempt continues
// from (not an asset path: those are never empty).
inline constexpr const char* kCheckpointBlob = "";

// CPU threads one render may use: the task's resources.cpu_cores when it declares them (at most
// worker.threads when that is set), else worker.threads, else its slot's share of the
// `hardware` threads -- tasks running at once never oversubscribe the cores. At least 1.
int RenderThreadsFor(int task_cpu_cores, int worker_threads, int slots, int hardware);

struct RenderSettings {
  // Where C++ plugins render (TsrRenderRequest::device): "auto", "cpu" or "cuda" (worker.backend).
  std::string device = "auto";
  // worker.threads (0: every hardware thread), shared by the `slots` tasks rendering at once.
  int cpu_threads = 0;
  int slots = 1;
  // C++ renderer plugins: the path tracer and those loaded from worker.native_plugins.
  std::shared_ptr<const NativePluginList> native = BuiltinNativePlugins();
  // External renderers this worker found, where task folders go, and the program search path.
  std::shared_ptr<const CommandPluginList> command_plugins = std::make_shared<CommandPluginList>();
  std::string data_dir;
  std::string plugin_path;
  // What jobs may make this worker do (worker/worker_config.h Confinement): the programs the
  // command renderer may run, the user renderers run as, and the folders scenes may read from
  // by absolute path (canonical).
  std::vector<std::string> command_programs;
  std::optional<subprocess::Identity> run_as;
  std::vector<std::string> input_roots;
  // Shared storage mounted elsewhere on this machine: scheduler path prefix -> local prefix.
  std::map<std::string, std::string> path_map;
  // Where the runner writes each result before handing it to the agent (none: not spooled).
  ResultSpool* spool = nullptr;
};

class TaskRunner {
 public:
  // Starts the render thread at once. `context` must outlive the runner; `outbox` is the inproc
  // endpoint the agent has bound its PULL to.
  TaskRunner(zmq::context_t& context, std::string outbox, protocol::Assign assign,
             RenderSettings settings);
  ~TaskRunner();  // joins the render thread
  TaskRunner(const TaskRunner&) = delete;
  TaskRunner& operator=(const TaskRunner&) = delete;

  // Any thread. The renderer polls the flag and stops; the runner then sends only its `last` tag.
  void Cancel() { cancel_.store(true); }
  // Any thread: the worker must leave (spot interruption, second SIGTERM). A C++ plugin that
  // checkpoints (the path tracer: at the end of its current pass) stops and the runner sends a
  // kHandback with the frame's checkpoint as its last message; other renderers stop at once and
  // hand back without one. Cancel() after this still hands back (without a checkpoint if none
  // was taken yet).
  void RequestHandback(const std::string& reason);
  // I/O thread: the assignment's assets are here (path in the task folder -> cached file; a
  // resumed attempt's checkpoint under kCheckpointBlob), or could not be had. The render waits
  // for this when the assignment has assets or a checkpoint.
  void ProvideAssets(Status status, std::map<std::string, std::string> files);
  // Any thread: fraction of the whole task done (0..1) and the frame being rendered.
  double progress() const { return progress_.load(); }
  int current_frame() const { return current_frame_.load(); }
  // Any thread: the task's status line as its program reports it (OpenJD's openjd_status), or
  // "frame N" while it renders one; "" before either.
  std::string status_line() const;

  const protocol::TaskRef& ref() const { return ref_; }
  const protocol::Assign& assign() const { return assign_; }

 private:
  void Run();  // the render thread
  Status WaitForAssets();
  Status RenderAll(zmq::socket_t& out, int* frames_done);
  // Where task folders go: settings.data_dir, else a folder of this process under the temp dir.
  std::string DataDir() const;
  // CPU threads a render may use (RenderThreadsFor).
  int RenderThreads() const;
  // ", GPU 1" / ", GPUs 0,1" for a task pinned to GPUs (what the task log says it runs on); empty
  // for a CPU task.
  std::string PinnedGpus() const;
  // A C++ plugin (the path tracer among them), frame by frame in this thread.
  Status RenderNative(const NativePlugin& plugin, zmq::socket_t& out, int* frames_done);
  // What a task that runs programs (a command plugin, an OpenJD task) is given.
  CommandPluginOptions ProgramRunOptions();
  // An external program described by its plugin.yaml.
  Status RenderCommandPlugin(zmq::socket_t& out, int* frames_done);
  // One task of an OpenJD step (worker/openjd_task.h); what its session returns goes as files.
  Status RenderOpenJd(zmq::socket_t& out);
  // A part of a split frame as its exact accumulation (shared/images/accumulation.h).
  Status SendPart(zmq::socket_t& out, int frame, const image::ImageBuffer& image,
                  const std::string& accumulation, double seconds, const std::string& backend);
  // Sends one frame's pixels (of the task's part) as a kFrameResult.
  Status SendFrame(zmq::socket_t& out, int frame, const float* pixels, int width, int height,
                   int channels, const std::vector<std::string>& channel_names, double seconds,
                   const std::string& backend);
  // One file of a command task's `outputs: files` (its path relative to the task folder, and
  // where it is) as a kFileResult: its bytes, or the news that it is on shared storage.
  Status SendFile(zmq::socket_t& out, const std::string& name, const std::string& path);
  // Spools (when there is a spool) and hands the message to the agent. A result the spool could
  // not keep for want of room is not sent: StorageFull, and the render stops.
  Status Send(zmq::socket_t& out, bool last, std::vector<zmq::message_t> frames);
  // A periodic checkpoint of `frame` (kCheckpoint), straight to the agent: not spooled.
  void SendCheckpoint(zmq::socket_t& out, int frame, int samples, std::string checkpoint);
  // A kFrameResult header for one frame of this attempt's part.
  protocol::FrameResult ResultOf(int frame, int width, int height, int channels, double seconds,
                                 const std::string& backend) const;
  // Appends a line to the task's log (any thread), keeping its last
  // protocol::kMaxTaskLogBytes. Invalid UTF-8 (a renderer's or plugin's bytes) becomes U+FFFD.
  void Log(const std::string& line);

  zmq::context_t& context_;
  const std::string outbox_;
  const protocol::Assign assign_;
  const protocol::TaskRef ref_;
  const RenderSettings settings_;
  std::atomic<bool> cancel_{false};
  std::atomic<bool> handback_{false};
  std::string handback_reason_;    // written before handback_ is set, read after
  std::string resume_checkpoint_;  // read from the checkpoint blob before the render
  std::mutex assets_mu_;
  std::condition_variable assets_cv_;
  bool assets_ready_ = false;                       // guarded by assets_mu_
  Status assets_status_;                            // guarded by assets_mu_
  std::map<std::string, std::string> asset_files_;  // guarded by assets_mu_ until ready
  // Given by a C++ plugin that stopped for a hand-back (render thread).
  std::string checkpoint_;
  int checkpoint_samples_ = 0;
  std::mutex log_mu_;  // a plugin may log from any of its threads
  std::string log_;    // guarded by log_mu_; sent with the final message
  // A failed render's class (protocol.h kFailure*), when the renderer or its plugin file says;
  // written and read on the render thread only.
  std::string failure_class_;
  int files_sent_ = 0;  // kFileResult messages sent (render thread); TaskDone says how many
  std::atomic<double> progress_{0.0};
  std::atomic<int> current_frame_{0};
  mutable std::mutex status_mu_;
  std::string status_line_;  // guarded by status_mu_
  std::thread thread_;       // last: starts after every member above is ready
};

}  // namespace tessera::worker
