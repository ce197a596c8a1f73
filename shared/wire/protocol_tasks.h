#pragma once
// The worker protocol's messages about tasks (shared/wire/protocol.h has the whole conversation,
// the limits and the message types): the assignment, progress, results (frames and files), the
// end of an attempt (done, failed, handed back), checkpoints, cancels and acknowledgements.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "shared/wire/msgpack.h"

namespace tessera::protocol {

// One attempt of a task: what every message about a task names (fencing, protocol.h).
struct TaskRef {
  int64_t task_id = 0;
  int attempt = 0;
  bool operator==(const TaskRef&) const = default;
};

// Part of a frame split across tasks: pixels [x0, x1) x [y0, y1) of the whole frame (a tile;
// all zero means the whole frame), and samples [sample_begin, sample_end) of every pixel
// (sample_end < 0 means all of the scene's samples).
struct FramePart {
  int x0 = 0;
  int y0 = 0;
  int x1 = 0;
  int y1 = 0;
  int sample_begin = 0;
  int sample_end = -1;
  bool whole_region() const { return x1 <= x0 || y1 <= y0; }
  bool whole() const { return whole_region() && sample_begin == 0 && sample_end < 0; }
};

struct SharedOutput {
  std::string dir;
  std::string pattern;  // "name.####"
  std::vector<std::string> formats;
  bool exr_float = false;
};

struct Assign {
  int64_t task_id = 0;
  int attempt = 0;
  int64_t job_id = 0;
  int frame_start = 0;
  int frame_end = 0;  // inclusive
  std::string scene_yaml;
  std::string renderer = "pathtracer";  // spec::kRenderer*: noop tasks report done at once
  std::vector<int> gpus;                // CUDA device indices pinned to this task (may be empty)
  FramePart part;                       // the part of each frame this task renders
  // Renderer plugins: the file name the scene text is written under in the task's folder, the
  // job's settings with the plugin's defaults filled in, and the job's task_timeout (seconds,
  // 0 = none), at which the worker kills the renderer itself.
  std::string scene_name;
  std::map<std::string, std::string> settings;
  int timeout_s = 0;
  // Resuming a handed-back attempt: frames before resume_frame are already delivered, and
  // resume_checkpoint, when set, is the SHA-256 of the blob holding the checkpoint (the path
  // tracer's accumulation, as in kFrameResult) of resume_frame to continue from, fetched like an
  // asset. 0: render every frame from the start.
  int resume_frame = 0;
  std::string resume_checkpoint;
  // Samples the checkpoint holds (what the resumed attempt does not render again); 0 without one.
  int resume_samples = 0;
  // Seconds between the kCheckpoint messages the attempt sends while it renders (the job's
  // checkpoint_interval_s); 0: none. Older schedulers send none.
  int checkpoint_interval_s = 0;
  // The job's resources.gpu_memory_mb: the memory the task may use on each of its GPUs (MiB);
  // 0: no limit. A renderer that needs more fails the task before it allocates.
  int64_t gpu_memory_mb = 0;
  // The job's resources.cpu_cores: the CPU threads the task's render may use (its share of a
  // worker running several tasks at once); 0: the worker's own share per slot.
  int cpu_cores = 0;
  // The job's assets: path (relative to the scene's folder) -> SHA-256 of the blob. The worker
  // fetches those its cache lacks (kBlobRequest) before the render starts.
  std::map<std::string, std::string> assets;
  // Shared-storage jobs (whole frames only): the worker writes each frame's files into `dir`
  // (the scheduler's path, through the worker's path_map) and reports kFrameResult with
  // encoding kEncodingWritten and no pixels. Empty dir: send the pixels.
  SharedOutput output;
  // Results of this worker's earlier attempts that are now durable, as kResultAck would say
  // (workers with kFeatureAcksInAssign only).
  std::vector<TaskRef> acks;
};

struct Progress {
  int64_t task_id = 0;
  int attempt = 0;
  double fraction = 0;  // 0..1 over the whole task
  std::string message;
};

struct FrameResult {
  int64_t task_id = 0;
  int attempt = 0;
  int frame = 0;
  int width = 0;
  int height = 0;
  int channels = 0;  // float32 channels per pixel in the payload, 1..kMaxChannels
  double render_seconds = 0;
  std::string backend;  // "cpu" or "cuda:N"
  // EXR channel names, beauty first ("R", "G", "B", "A", "albedo.R", ..., "Z"); empty means
  // R, G, B, A.
  std::vector<std::string> channel_names;
  FramePart part;  // which part of the frame the pixels are (width x height is the part's size)
  // How the payload is encoded: "" = float32 pixels (width x height x channels);
  // kEncodingAccumulation = an exact accumulation (shared/images/accumulation.h: the path tracer's,
  // or a sample-parts plugin's), which the scheduler merges with the frame's other parts.
  std::string encoding;
};

inline constexpr const char* kEncodingAccumulation = "accumulation";
// The worker wrote the frame's files to shared storage itself (Assign::output); no payload.
inline constexpr const char* kEncodingWritten = "written";

// A task's log: what the worker and the renderer said while it ran, its last kMaxTaskLogBytes
// (sent with the attempt's final message; kept by the scheduler for `tessera logs`).
inline constexpr size_t kMaxTaskLogBytes = 64 * 1024;
// A task's status line (Progress.message: what its program says it does), as the scheduler keeps
// it.
inline constexpr size_t kMaxStatusLineBytes = 256;

// One file a task made (a command task's `outputs: files`): its path relative to the task's
// folder, which is where it lands in the job's output folder. The payload is its bytes (at most
// kMaxResultBytes; sent in pieces like frames), or none with encoding kEncodingWritten when the
// worker put it on the job's shared storage itself. Names are relative paths as
// spec::ValidateAssetPath allows them: nothing a file's name says can leave the output folder.
struct FileResult {
  int64_t task_id = 0;
  int attempt = 0;
  std::string name;
  int64_t size = 0;
  std::string encoding;  // "" or kEncodingWritten
};
// Files one task may send back.
inline constexpr int kMaxOutputFiles = 1000;

struct TaskDone {
  int64_t task_id = 0;
  int attempt = 0;
  std::string log;
  // kFileResult messages this attempt sent before it (the scheduler records the task done only
  // once that many of its files are written).
  int files = 0;
};

// Failure classes a worker reports (TaskFailed::failure_class). Unknown names from a newer
// worker are read as kFailureRender.
inline constexpr const char* kFailureRender = "render";             // the renderer or its input
inline constexpr const char* kFailureStorageFull = "storage_full";  // the worker's disk is full
inline constexpr const char* kFailureAsset = "asset";               // an asset could not be had
inline constexpr const char* kFailureTimeout = "timeout";           // ran past the job's timeout
inline constexpr const char* kFailureNoSlot = "no_slot";            // the worker had no free slot
// Classes a plugin's `failure_classes` (shared/plugins/plugin_file.h) or the path tracer name; the
// scheduler treats each by its policy (a job's `failure_policy`, shared/jobs/job_file.h):
inline constexpr const char* kFailureSceneError = "scene_error";  // the scene is broken: no retry
inline constexpr const char* kFailureOutOfMemory = "out_of_memory";  // RAM or GPU memory ran out
inline constexpr const char* kFailureLicense = "license";  // no licence free: later, uncharged
inline constexpr const char* kFailureCrash = "crash";      // the renderer crashed

struct TaskFailed {
  int64_t task_id = 0;
  int attempt = 0;
  std::string message;
  // Whether the failure counts against the task's retry budget. False when the task is not at
  // fault (the worker had no free slot); the scheduler requeues it uncharged.
  bool charge = true;
  std::string log;
  // What kind of failure (a FailureClass name, below): how the scheduler records the attempt and
  // whether it waits for something (room on a disk) before trying again.
  std::string failure_class = kFailureRender;
};

struct Cancel {
  int64_t task_id = 0;
  int attempt = 0;
};

// The worker must leave before the task is done. Frames before `frame` were delivered; the
// payload, when present, is the checkpoint of `frame` (the path tracer's accumulation of
// samples [part.sample_begin, part.sample_begin + samples_done)).
struct Handback {
  int64_t task_id = 0;
  int attempt = 0;
  int frame = 0;
  int samples_done = 0;
  std::string reason;
  std::string log;
};

// A periodic checkpoint of a running attempt: the payload is the accumulation of `frame`
// (samples [part.sample_begin, part.sample_begin + samples_done)), as in kHandback; frames before
// `frame` were delivered. Sent in pieces like any large payload.
struct Checkpoint {
  int64_t task_id = 0;
  int attempt = 0;
  int frame = 0;
  int samples_done = 0;
};

// Results of (task_id, attempt) are durable at the scheduler: the worker drops them from its spool.
struct ResultAck {
  int64_t task_id = 0;
  int attempt = 0;
};

// Missing fields take their defaults (forward compatibility); mistyped fields are errors.
TSR_MESSAGE_FIELDS(TaskRef, task_id, attempt)
TSR_MESSAGE_FIELDS(FramePart, x0, y0, x1, y1, sample_begin, sample_end)
TSR_MESSAGE_FIELDS(SharedOutput, dir, pattern, formats, exr_float)
TSR_MESSAGE_FIELDS(Assign, task_id, attempt, job_id, frame_start, frame_end, scene_yaml, renderer,
                   gpus, part, scene_name, settings, timeout_s, resume_frame, assets, output,
                   resume_checkpoint, acks, resume_samples, checkpoint_interval_s, gpu_memory_mb,
                   cpu_cores)
TSR_MESSAGE_FIELDS(Progress, task_id, attempt, fraction, message)
TSR_MESSAGE_FIELDS(FrameResult, task_id, attempt, frame, width, height, channels, render_seconds,
                   backend, channel_names, part, encoding)
TSR_MESSAGE_FIELDS(FileResult, task_id, attempt, name, size, encoding)
TSR_MESSAGE_FIELDS(TaskDone, task_id, attempt, log, files)
TSR_MESSAGE_FIELDS(TaskFailed, task_id, attempt, message, charge, log, failure_class)
TSR_MESSAGE_FIELDS(Cancel, task_id, attempt)
TSR_MESSAGE_FIELDS(Handback, task_id, attempt, frame, samples_done, reason, log)
TSR_MESSAGE_FIELDS(Checkpoint, task_id, attempt, frame, samples_done)
TSR_MESSAGE_FIELDS(ResultAck, task_id, attempt)

}  // namespace tessera::protocol
