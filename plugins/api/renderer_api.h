#pragma once
// The C++ renderer plugin API: a renderer that needs code (not just a command line) is a table of
// C functions. The built-in path tracer is one (plugins/pathtracer/plugin_entry.cpp, compiled
// into the worker); a renderer built outside Tessera is a shared library exporting one C
// function, tsr_renderer_plugin(), which returns its table, and the worker loads it from
// `worker.native_plugins`. The boundary is plain C (fixed-size integers, pointers, no C++
// types), so a plugin built with another compiler or standard library still loads; the worker
// checks the ABI version first and refuses a plugin built against another one.
//
// ABI versions (bump TSR_RENDERER_ABI_VERSION on a change that breaks plugins built before,
// TSR_RENDERER_ABI_MINOR on one they keep working across, and say what changed here):
//   1  first version: one frame (or a tile of it) per call, float pixels out, progress and
//      cancel callbacks, settings as a JSON object of strings.
//   2  what the path tracer needs to be a plugin: the task folder holding the job's assets,
//      the worker's device choice, a log callback, hand-back (stop at a safe point and give a
//      checkpoint) and resume from that checkpoint, an exact accumulation for parts of split
//      frames, channel names and the backend in the result; the table declares capabilities,
//      a description and the settings and scene files a job may give it (plugin.yaml syntax),
//      which the scheduler validates jobs against.
//   2.1 periodic checkpoints: TSR_CAP_PERIODIC_CHECKPOINT and the request's
//      checkpoint_requested(), appended at the end of TsrRenderRequest. The host says its minor
//      version in the high 16 bits of TsrRenderRequest.abi_version (a 2.0 host sends 2, so a 2.1
//      plugin reads checkpoint_requested only when TSR_ABI_MINOR(request->abi_version) >= 1);
//      plugins declare only the major version and load in 2.0 and 2.1 hosts alike.
//   2.2 multi-GPU tasks: every GPU pinned to the task (gpus, gpu_count; gpu_index stays the
//      first) and the task's GPU memory budget (gpu_memory_mb), appended at the end of
//      TsrRenderRequest. A plugin reads them only when TSR_ABI_MINOR(request->abi_version) >= 2;
//      from an older host it has gpu_index alone (-1: a CPU task).
//   2.3 render() may return TSR_RENDER_SCENE_ERROR: the scene is broken, retrying cannot help
//      (an older host reads it as TSR_RENDER_FAILED and retries, as before).

#include <stdint.h>

#define TSR_RENDERER_ABI_VERSION 2u
#define TSR_RENDERER_ABI_MINOR 3u
// TsrRenderRequest.abi_version: the host's major version (low 16 bits) and minor (high 16 bits).
#define TSR_ABI_MAJOR(v) ((v)&0xffffu)
#define TSR_ABI_MINOR(v) ((v) >> 16)

#ifdef __cplusplus
extern "C" {
#endif

// The settings_json key by which a host tells a plugin where a scene's files may come from: a
// JSON array of canonical folders. The worker sends it with every request, over any job setting
// of that name. A plugin that reads the files a scene names keeps them inside the request's
// scene_dir (relative paths) or one of these folders (absolute paths), and fails the render
// naming the key and the path otherwise.
#define TSR_SETTING_INPUT_ROOTS "tessera.input_roots"

// What render() returns.
enum {
  TSR_RENDER_OK = 0,
  TSR_RENDER_FAILED = 1,       // error[] says why
  TSR_RENDER_CANCELLED = 2,    // cancelled() turned non-zero
  TSR_RENDER_HANDED_BACK = 3,  // handback_requested() turned non-zero; checkpoint() was called
  // (2.3) The scene, or a file it names, is broken (error[] says why): no attempt of the task
  // can succeed, so the scheduler fails it at once instead of retrying (a scene_error). Hosts
  // before 2.3 read it as TSR_RENDER_FAILED.
  TSR_RENDER_SCENE_ERROR = 4,
};

// Capabilities a plugin declares (TsrRendererPlugin.capabilities).
enum {
  // Renders the tile [x0, x1) x [y0, y1) alone; the scheduler then splits frames into tiles
  // (the plugin's settings must then include `width` and `height`).
  TSR_CAP_TILES = 1u << 0,
  // Renders sample ranges and returns each part's exact accumulation in Tessera's format
  // (shared/images/accumulation.h), which the scheduler merges bit-exactly.
  TSR_CAP_SAMPLE_PARTS = 1u << 1,
  // Stops at a safe point when a hand-back is asked for, gives a checkpoint, and continues from
  // it when a later attempt passes it back in `resume`.
  TSR_CAP_CHECKPOINT = 1u << 2,
  // (2.1) Also gives a checkpoint while it goes on rendering, at its next safe point after
  // checkpoint_requested() turned non-zero, through the same checkpoint() callback; a later
  // attempt resumes from the latest one it gave. The host asks only plugins that declare it.
  TSR_CAP_PERIODIC_CHECKPOINT = 1u << 3,
};

// What the host asks for. The plugin reads it during render() only.
typedef struct TsrRenderRequest {
  // The host's TSR_RENDERER_ABI_VERSION | TSR_RENDERER_ABI_MINOR << 16 (2.0 hosts: 2).
  uint32_t abi_version;
  int32_t frame;
  int32_t x0, y0, x1, y1;  // the tile: pixels [x0, x1) x [y0, y1); all zero = the whole frame
  int32_t sample_begin;    // samples [sample_begin, sample_end); sample_end < 0 = all
  int32_t sample_end;
  int32_t threads;     // CPU threads it may use (>= 1)
  int32_t gpu_index;   // the (first) CUDA device pinned to the task, or -1: render on the CPU
  const char* device;  // NUL-terminated: "auto", "cpu" or "cuda" (the worker's render.backend)
  const char* scene;   // the job's scene text (not NUL-terminated)
  uint64_t scene_size;
  // NUL-terminated absolute path of the task folder, where the job's assets (meshes, textures,
  // caches) are at the relative paths the job gave them; "" when the job has none.
  const char* scene_dir;
  const char* settings_json;  // NUL-terminated JSON object {"name": "value", ...}
  // TSR_CAP_CHECKPOINT: the checkpoint an earlier attempt of this frame gave, or NULL. A plugin
  // that cannot use it (another frame, a changed scene) logs why and starts over.
  const void* resume;
  uint64_t resume_size;
  // Non-zero: return the part's accumulation too (TSR_CAP_SAMPLE_PARTS plugins, for parts of
  // split frames).
  int32_t want_accumulation;
  void* host;                                     // passed back to the callbacks
  void (*progress)(void* host, double fraction);  // 0..1 of this call; any thread
  int (*cancelled)(void* host);                   // non-zero: stop soon, TSR_RENDER_CANCELLED
  void (*log)(void* host, const char* line);      // a line for the task's log; any thread
  int (*handback_requested)(void* host);          // non-zero: the worker must leave
  // TSR_CAP_CHECKPOINT: called once, before returning TSR_RENDER_HANDED_BACK, with the state to
  // resume from and how many samples it holds. The host copies the bytes. (2.1) Also called,
  // the render going on, each time the plugin answers checkpoint_requested().
  void (*checkpoint)(void* host, const void* data, uint64_t size, int32_t samples_done);
  // (2.1 hosts only, see above; may be NULL) TSR_CAP_PERIODIC_CHECKPOINT: non-zero when the host
  // wants a checkpoint now. A plugin polls it at its safe points (the path tracer: between
  // sample passes) and answers with checkpoint(); the request is cleared by that call.
  int (*checkpoint_requested)(void* host);
  // (2.2 hosts only) The CUDA devices pinned to the task, in order (gpus[0] == gpu_index), as
  // the worker numbers them; NULL and 0 for a task without a GPU, which must not use one.
  const int32_t* gpus;
  int32_t gpu_count;
  // (2.2) The task's GPU memory budget per GPU in MiB (its resources.gpu_memory_mb); 0: none.
  // A plugin that can tell it needs more fails the render saying so, before allocating.
  int64_t gpu_memory_mb;
} TsrRenderRequest;

// What the plugin returns: interleaved float pixels (linear), top row first, width x height of
// the tile (or frame). Allocated by the plugin, released by its free_image(); the host copies
// what it keeps before that.
typedef struct TsrImage {
  int32_t width, height, channels;
  float* pixels;
  // NUL-terminated, comma-separated channel names ("R,G,B,A,albedo.R,..."); NULL = R,G,B,A.
  const char* channel_names;
  const char* backend;  // what rendered it ("cpu", "cuda:0"); NULL = the plugin's name
  // The part's exact accumulation when want_accumulation was set (else NULL, 0).
  const void* accumulation;
  uint64_t accumulation_size;
  void* plugin_data;  // the plugin's own, for free_image()
} TsrImage;

typedef struct TsrRendererPlugin {
  uint32_t abi_version;  // the TSR_RENDERER_ABI_VERSION it was built against
  const char* name;      // what jobs give as `renderer:` (lower-case letters, digits, '_')
  const char* version;
  const char* description;  // one line for `tessera plugins`
  uint32_t capabilities;    // TSR_CAP_* bits
  // What a job may give it, in plugin.yaml syntax (shared/plugins/plugin_file.h): the `scene:` and
  // `settings:` keys only; NULL or "" = no scene file restrictions and no settings.
  const char* declaration_yaml;
  // Renders one frame or tile: a TSR_RENDER_* code. On TSR_RENDER_OK *out is filled; on
  // TSR_RENDER_FAILED error[0..error_size) holds a NUL-terminated message.
  int (*render)(const TsrRenderRequest* request, TsrImage* out, char* error, uint64_t error_size);
  void (*free_image)(TsrImage* image);
} TsrRendererPlugin;

// The one symbol a plugin library exports.
const TsrRendererPlugin* tsr_renderer_plugin(void);
typedef const TsrRendererPlugin* (*TsrRendererPluginEntry)(void);

#ifdef __cplusplus
}
#endif
