#pragma once
// Job specs: what a user submits. Parsed strictly from YAML (the CLI's job file and the HTTP API's
// body use the same parser, so both give the same error for the same mistake).
//
// Job file format (every key; defaults in brackets):
//   name: spheres            # required; letters, digits, '.', '_' and '-', at most 128 chars
//   renderer: pathtracer     # [pathtracer] the built-in path tracer; noop: tasks that do nothing
//                            #   and report done (a farm check, and how the dispatch benchmark
//                            #   measures overhead); or a renderer plugin (plugins/<name>/
//                            #   plugin.yaml): povray, blender, command
//   scene: scene.yaml        # required (not for noop; optional for command); a path relative to
//                            #   the job file, or the scene inline (map; pathtracer only). For a
//                            #   plugin it is a text file with an extension the plugin takes
//                            #   (.pov, .py); binary .blend files are refused for now
//   settings:                # [none] plugin renderers only: values checked against the settings
//     samples: 16            #   the plugin declares (type, range, allowed values); unknown names,
//     argv: [a, b]           #   wrong types and strings starting with '-' are errors
//   project: show-a          # [default] fair share is split between projects first (weights and
//                            #   caps in the scheduler config `projects:`), then users, then jobs
//   user: ana                # [the submitting user; the CLI fills in $USER] same name rules
//   frames: 1-12             # required; "A-B" inclusive, or a single frame number
//   chunk_size: 1            # [1] frames per task, 1..1000 (1 when frames are split)
//   tiles: 4x2               # [1x1] split each frame into columns x rows tiles (each side
//                            #   1..kMaxTilesPerSide, at most the frame's pixels); pathtracer, or a
//                            #   plugin that renders tiles (its settings.width/height are the
//                            frame)
//   sample_parts: 4          # [1] split each frame's samples into this many disjoint ranges
//                            #   (1..kMaxSampleParts, at most the scene's samples); pathtracer
//                            #   only. Tiles x parts tasks per frame; the scheduler merges them
//                            #   exactly (bit-identical to the frame rendered whole) as soon as a
//                            #   frame's last part arrives
//   priority: 50             # [50] 0..100, higher runs first
//   max_retries: 3           # [3] render failures a task may have before it fails, 0..100
//   task_timeout: 0          # [0 = none] seconds a task may run before it counts as failed
//   progress_timeout: 0      # [0 = none] seconds a task may go without reporting progress
//   checkpoint_interval_s: 300  # [300; 0 = off] seconds between the checkpoints a renderer
//                            #   that can take them (the path tracer) sends while it renders,
//                            #   kCheckpointIntervalMin..kCheckpointIntervalMax; a lost attempt's
//                            #   next one resumes from the latest
//   blocklist_after: 3       # [3] failures on one worker before the job avoids it; 0 = never
//   depends_on: [12, 13]     # [none] ids of jobs that must finish (done) before this one starts
//   frame_depends_on: [12]   # [none] frame-on-frame: a task waits until the tasks holding the
//                            #   same frames in these jobs are done (frames they lack hold nothing)
//   fail_after_workers: 0    # [0 = off] a task fails once it has failed on this many different
//                            #   workers, even with retries left
//   limits: [blender]        # [none] named farm limits each running task holds one unit of
//   pools: [gpu]             # [any] run only on workers in one of these pools
//   tags: [cuda12]           # [none] run only on workers that have all of these tags
//   resources:               # [none] what one task needs from a worker
//     gpus: 1                #   CUDA GPUs, each with at least gpu_memory_mb and compute >= below
//     gpu_memory_mb: 16000   #   GPU memory a task uses (on a shared GPU: what it may take of it)
//     gpu_share: 0.25        #   (0, 1]: part of one GPU, on workers that share their GPUs
//                            #   (a whole GPU elsewhere); not with gpus > 1  [0 = whole GPUs]
//     compute_capability: 8.0
//     cpu_cores: 4
//     ram_mb: 8000
//   assets: [tex/wood.png]   # [none] files the renderer reads besides the scene, relative to the
//                            #   scene's folder (POV-Ray includes, textures, .blend libraries);
//                            #   the CLI uploads them (and every file a path-tracer scene names)
//                            #   as content-addressed blobs, and workers fetch each once
//   failure_policy:          # what a failed attempt of a class a renderer names leads to
//     scene_error: fail      #   [fail] at once, no retries (the scene is broken); or retry
//     out_of_memory: bigger  #   [bigger] retried only on workers with more RAM (GPU memory
//                            #   for a GPU task) than the one it ran out on, failed when none
//                            #   is connected; or retry (anywhere, charged)
//     license_wait_s: 60     #   [60] license: back to the queue uncharged after this long
//                            #   (0..kMaxLicenseWaitSeconds)
//   output:
//     directory: shots/sh010 # [<name>-<job id>] relative to the scheduler's output root
//     pattern: "beauty.####" # [<name>.####] '#' run = zero-padded frame number
//     formats: [exr, png]    # [exr, png] linear EXR and/or an sRGB PNG preview
//     shared_dir: /mnt/projects/sh010  # [none] shared-storage farms: workers write the frames
//                            #   straight into this folder (absolute, inside one of the
//                            #   scheduler's storage.shared_roots; instead of `directory`)
//     reuse: false           # [false] allow a folder that holds another job's frames (only
//                            #   jobs of the same user; another user's folder is always refused)
//
// Limits: at most kMaxFramesPerJob frames and kMaxTasksPerJob tasks per job, frame numbers within
// [kMinFrame, kMaxFrame]. Lists: tags, pools and limits at most kMaxLabels entries each (each a
// name of 1..kMaxNameLength characters), depends_on and frame_depends_on kMaxDependencies each,
// assets kMaxAssets, output.formats 4, settings kMaxSettings names (a list setting at most
// plugin::kMaxListWords words of plugin::kMaxValueBytes bytes each). The file must be valid UTF-8
// (an error gives the byte offset) and is refused past the bounds of shared/base/yaml_util.h
// (depth, alias expansion) before any field is read. A frame (or the part of one a task renders)
// must fit in one result message: width x height x channels x 4 bytes (8 for the exact accumulation
// of a split path-tracer frame) at most protocol::kMaxResultBytes, each side at most kMaxImageSide;
// larger frames are refused at submit, to be split into tiles.

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "shared/base/status.h"
#include "shared/base/wall_time.h"
#include "shared/plugins/renderer_names.h"
#include "shared/wire/protocol.h"

namespace YAML {
class Node;
}

namespace tessera::spec {

inline constexpr int64_t kMaxFramesPerJob = 100000;
inline constexpr int kMinFrame = -1000000;
inline constexpr int kMaxFrame = 10000000;
inline constexpr int kMaxChunkSize = 1000;
inline constexpr int64_t kMaxTasksPerJob = 1000000;
inline constexpr int kMaxTilesPerSide = 64;
inline constexpr int kMaxSampleParts = 256;
inline constexpr int kMaxRetries = 100;
inline constexpr int kMaxTaskTimeoutSeconds = 7 * 24 * 3600;
// checkpoint_interval_s: 0 (off) or within these bounds. Below the minimum, sending the
// accumulation would cost more than the render time it saves.
inline constexpr int kDefaultCheckpointIntervalSeconds = 300;
inline constexpr int kMinCheckpointIntervalSeconds = 5;
inline constexpr int kMaxCheckpointIntervalSeconds = 86400;
inline constexpr size_t kMaxDependencies = 100;
inline constexpr size_t kMaxNameLength = 128;
inline constexpr size_t kMaxSceneBytes = 16 * 1024 * 1024;
inline constexpr int kMaxDeadlineDays = 366;
inline constexpr size_t kMaxLabels = 64;    // tags, pools, limits: entries of each list
inline constexpr size_t kMaxSettings = 64;  // setting names in one job
inline constexpr size_t kMaxJobYamlBytes = kMaxSceneBytes + (1 << 20);  // inline scene and all
// The largest image side a frame result may have (the scheduler's broker refuses larger ones).
inline constexpr int kMaxImageSide = 16384;

struct OutputSpec {
  std::string directory;                              // relative; empty = "<name>-<job id>"
  std::string pattern;                                // empty = "<name>.####"
  std::vector<std::string> formats = {"exr", "png"};  // exr (linear), png, jpg, tif (8-bit sRGB)
  bool exr_float = false;  // `exr: float`: 32-bit float EXR channels instead of half
  // Shared-storage farms: an absolute folder on storage the scheduler and the workers both
  // mount (inside one of the scheduler's storage.shared_roots). Workers write whole frames
  // there themselves (each through its worker.path_map) instead of sending the pixels back;
  // split frames are assembled there by the scheduler. Empty: outputs go through the scheduler.
  std::string shared_dir;
  // `reuse: true`: write into a folder that already holds frames of another job of the same
  // user (a re-render into last night's folder). Without it, or for another user's job, a folder
  // in use is refused at submit.
  bool reuse = false;
};

// What one task of a job needs from the worker that runs it (0: no requirement).
struct ResourceSpec {
  int gpus = 0;
  int64_t gpu_memory_mb = 0;
  double compute_capability = 0;
  int cpu_cores = 0;
  int64_t ram_mb = 0;
  // Part of one GPU, in (0, 1]; 0: whole GPUs. On a worker that shares its GPUs
  // (worker.gpu_sharing: shared) the task takes ceil(gpu_share x slots_per_gpu) of one GPU's
  // slots; on any other worker it gets a whole GPU.
  double gpu_share = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(ResourceSpec, gpus, gpu_memory_mb,
                                                compute_capability, cpu_cores, ram_mb, gpu_share)

// What the scheduler does with a failed attempt of each class a renderer names (protocol.h
// kFailure*; plugin.yaml failure_classes). Other classes (crash, render, timeout) are charged
// retries as always.
struct FailurePolicy {
  std::string scene_error = "fail";      // fail: at once, no retries; retry: like a crash
  std::string out_of_memory = "bigger";  // bigger: only on workers with more memory, else fail;
                                         // retry: like a crash
  int license_wait_s = 60;               // license: requeued uncharged after this long
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(FailurePolicy, scene_error, out_of_memory,
                                                license_wait_s)
inline constexpr int kMaxLicenseWaitSeconds = 86400;
// The error of a resources.gpu_share out of range (also of `gpu_share: 0` written out).
inline constexpr const char* kGpuShareRangeMessage =
    "resources.gpu_share: must be a fraction in (0, 1], e.g. 0.25";

struct JobSpec {
  std::string name;
  std::string renderer = kDefaultRenderer;
  std::string project = "default";
  std::string user;        // empty: "unknown"
  std::string scene_path;  // set when `scene:` is a path (resolved by the CLI)
  std::string scene_yaml;  // set when `scene:` is inline, or filled in by the CLI/API
  int frame_start = 0;
  int frame_end = 0;  // inclusive
  int chunk_size = 1;
  int tiles_x = 1;  // columns
  int tiles_y = 1;  // rows
  int sample_parts = 1;
  // The part of each frame each task renders (filled in by SplitFrames once the scene is known;
  // empty means one task renders the whole frame).
  std::vector<protocol::FramePart> parts;
  int priority = 50;
  int max_retries = 3;
  int task_timeout = 0;      // seconds; 0 = none
  int progress_timeout = 0;  // seconds without progress; 0 = none
  int checkpoint_interval_s = kDefaultCheckpointIntervalSeconds;  // 0 = no periodic checkpoints
  int blocklist_after = 3;                                        // 0 = never blocklist
  std::vector<int64_t> depends_on;                                // job ids that must be done first
  std::vector<int64_t> frame_depends_on;  // job ids whose same frames must be done first
  int fail_after_workers = 0;             // 0 = off
  std::vector<std::string> limits;        // named farm limits (scheduler config `limits:`)
  std::vector<std::string> pools;         // empty: any pool
  std::vector<std::string> tags;          // all required
  ResourceSpec resources;
  FailurePolicy failure_policy;
  OutputSpec output;
  // Capacity: whether its tasks may run on spot nodes (which the cloud can take back), and when
  // it must be done (unix ms; the autoscaler adds nodes when the forecast misses it).
  bool interruptible = true;
  std::optional<int64_t> deadline_ms;
  // Plugin settings as given: scalar text, or a JSON array of strings for a list.
  std::map<std::string, std::string> settings;
  // Files the renderer reads besides the scene (meshes, textures, includes, .blend files), by
  // their path relative to the scene's folder, which is where the worker puts them. The job file
  // lists extra ones (`asset_files`; the CLI adds the files a path-tracer scene names); the CLI
  // uploads each as a blob and the scheduler receives `assets`: path -> SHA-256.
  std::vector<std::string> asset_files;
  std::map<std::string, std::string> assets;

  int64_t frame_count() const { return int64_t{frame_end} - frame_start + 1; }
  bool splits_frames() const { return tiles_x * tiles_y * sample_parts > 1; }
  // Whether its tasks send frame results (noop tasks only report done).
  bool produces_frames() const { return renderer != kRendererNoop; }
  // Whether its renderer takes a Tessera scene (shared/scenes/scene_file.h YAML: the path tracer).
  bool takes_tessera_scene() const;
  // Whether an external renderer plugin renders it, from its own scene file and settings
  // (anything but noop and a renderer that takes a Tessera scene).
  bool uses_plugin() const { return produces_frames() && !takes_tessera_scene(); }
};

// One task's share of a job: frames [frame_start, frame_end].
struct FrameChunk {
  int index = 0;
  int frame_start = 0;
  int frame_end = 0;
};

// ParseIsoTime (deadlines) is in shared/base/wall_time.h.
using wall_time::ParseIsoTime;

inline constexpr int kMaxAssets = 4096;
// An asset's path: relative, inside the task's folder ('..', '.', empty parts and absolute paths
// refused), at most 512 characters of letters, digits, ' ', '.', '_', '+', '-' and '/', no part
// starting with '-'. Errors name `field`.
Status ValidateAssetPath(const std::string& path, const std::string& field);
// Checks an upload's asset map (path -> SHA-256 hex) and puts it in job->assets.
Status SetAssets(const nlohmann::json& assets, JobSpec* job);

// Parses and validates a job file. Errors name the field ("frames: start 12 is after end 3").
StatusOr<JobSpec> ParseJobYaml(std::string_view yaml_text);

// The same for a document already parsed (a job file read once, shared/jobs/parsed_job_file.h;
// one step of a job with steps, merged with the job's keys): nothing is parsed again.
StatusOr<JobSpec> ParseJobNode(const YAML::Node& root);

// Validates an already-built spec (ParseJobYaml calls this; the checks are in job_checks.cpp). For
// a plugin renderer it also checks the scene file name and the settings against the plugin
// (shared/plugins/plugin_catalog.h).
Status ValidateJob(const JobSpec& job);

// ---- how a job divides into tasks (job_tasks.cpp) ----------------------------------------

// Splits the frame range into tasks of chunk_size frames (the last one may be shorter).
std::vector<FrameChunk> ExpandFrames(const JobSpec& job);

// The tasks a job divides into: its chunks of frames times the parts of a frame (once
// SplitFrames has filled them in; one when frames are whole). Counted without building them.
int64_t TaskCount(const JobSpec& job);

// Fills job->parts from tiles and sample_parts for a frame of width x height pixels and `samples`
// samples per pixel; an error names the field that does not fit the scene. Also refuses a frame
// (or part) whose result could never come back: larger than protocol::kMaxResultBytes with
// `channels` float channels (spec::ResultChannels of the scene), or a side above kMaxImageSide.
Status SplitFrames(JobSpec* job, int width, int height, int samples, int channels = 4);

// The bytes of the largest result one task of `job` sends for a width x height frame with
// `channels` channels (a tile when split; an exact accumulation for split path-tracer frames).
int64_t LargestResultBytes(const JobSpec& job, int width, int height, int channels);

// The effective output pattern and file name for a frame: "beauty.####" + 7 + "exr" ->
// "beauty.0007.exr". Negative frames keep their sign: "beauty.-007.exr".
std::string EffectivePattern(const JobSpec& job);
std::string OutputFileName(const std::string& pattern, int frame, const std::string& extension);

// SplitFrames for a plugin renderer that renders tiles: the frame is its width x height settings.
Status SplitPluginFrames(JobSpec* job);

// ---- checks (job_checks.cpp) and plugin lookups (job_file.cpp) -----------------------------

// Whether c may appear in a name (job, step, project, user, label): a letter, digit, '.', '_'
// or '-'.
bool IsNameChar(char c);

// Checks a relative output directory or pattern cannot escape the output root.
Status ValidateRelativePath(const std::string& path, const std::string& field);

// For a plugin renderer: the settings with the plugin's defaults filled in, and the file name
// the worker writes the scene under ("" when there is none).
StatusOr<std::map<std::string, std::string>> ResolvedSettings(const JobSpec& job);
StatusOr<std::string> SceneFileName(const JobSpec& job);

// Parses "A-B" or "A" into an inclusive range.
Status ParseFrameRange(const std::string& text, int* start, int* end);

}  // namespace tessera::spec
