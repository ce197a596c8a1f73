#pragma once
// The C++ renderer plugin API: a renderer that needs code (not just a command line) is a shared
// library exporting one C function, tsr_renderer_plugin(), which returns a table of functions.
// The boundary is plain C (fixed-size integers, pointers, no C++ types), so a plugin built with
// another compiler or standard library still loads; the worker checks the ABI version first and
// refuses a plugin built against another one.
//
// ABI versions (bump TSR_RENDERER_ABI_VERSION on any change to the structs or calls below, and
// say what changed here):
//   1  first version: one frame (or a tile of it) per call, float pixels out, progress and
//      cancel callbacks, settings as a JSON object of strings.

#include <stdint.h>

#define TSR_RENDERER_ABI_VERSION 1u

#ifdef __cplusplus
extern "C" {
#endif

// What the host asks for. The plugin reads it during render() only.
typedef struct TsrRenderRequest {
  uint32_t abi_version;  // the host's TSR_RENDERER_ABI_VERSION
  int32_t frame;
  int32_t x0, y0, x1, y1;  // the tile: pixels [x0, x1) x [y0, y1); all zero = the whole frame
  int32_t sample_begin;    // samples [sample_begin, sample_end); sample_end < 0 = all
  int32_t sample_end;
  int32_t threads;    // CPU threads it may use (>= 1)
  int32_t gpu_index;  // the CUDA device pinned to the task, or -1
  const char* scene;  // the job's scene text (not NUL-terminated)
  uint64_t scene_size;
  const char* settings_json;  // NUL-terminated JSON object {"name": "value", ...}
  void* host;                 // passed back to the callbacks
  void (*progress)(void* host, double fraction);  // 0..1 of this call; any thread
  int (*cancelled)(void* host);                   // non-zero: stop soon and return an error
} TsrRenderRequest;

// What the plugin returns: interleaved float pixels (linear), top row first, width x height of
// the tile (or frame). Allocated by the plugin, released by its free_image().
typedef struct TsrImage {
  int32_t width, height, channels;
  float* pixels;
} TsrImage;

typedef struct TsrRendererPlugin {
  uint32_t abi_version;  // the TSR_RENDERER_ABI_VERSION it was built against
  const char* name;      // what jobs give as `renderer:` (lower-case letters, digits, '_')
  const char* version;
  // Renders one frame or tile. Returns 0 and fills *out, or non-zero with a NUL-terminated
  // message in error[0..error_size).
  int (*render)(const TsrRenderRequest* request, TsrImage* out, char* error, uint64_t error_size);
  void (*free_image)(TsrImage* image);
} TsrRendererPlugin;

// The one symbol a plugin library exports.
const TsrRendererPlugin* tsr_renderer_plugin(void);
typedef const TsrRendererPlugin* (*TsrRendererPluginEntry)(void);

#ifdef __cplusplus
}
#endif
