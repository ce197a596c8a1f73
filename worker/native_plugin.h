#pragma once
// C++ renderer plugins (plugins/api/renderer_api.h) as the worker sees them: the built-in ones
// (the path tracer, compiled in: plugins/builtin_plugins.h) and shared libraries named in
// `worker.native_plugins` (RAII over dlopen: the library stays loaded while its NativePlugin
// exists). Both are only their ABI tables here: the worker includes no plugin's own headers. Any
// thread may call Render(); a plugin must be thread-safe when the worker runs several slots.

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "plugins/api/renderer_api.h"
#include "shared/base/status.h"
#include "shared/images/image_io.h"
#include "shared/wire/protocol.h"

namespace tessera::worker {

class NativePlugin {
 public:
  // dlopen()s `path` and checks its table (ABI version, name, functions).
  static StatusOr<std::unique_ptr<NativePlugin>> Load(const std::string& path);
  // A plugin compiled into this program; `what` names it in errors.
  static StatusOr<std::unique_ptr<NativePlugin>> FromTable(const TsrRendererPlugin* table,
                                                           const std::string& what);
  ~NativePlugin();
  NativePlugin(const NativePlugin&) = delete;
  NativePlugin& operator=(const NativePlugin&) = delete;

  const std::string& name() const { return name_; }
  const std::string& version() const { return version_; }
  const std::string& description() const { return description_; }
  // The library it was loaded from; empty when compiled in.
  const std::string& path() const { return path_; }
  // What a job may give it: `scene:` and `settings:` in plugin.yaml syntax (may be empty).
  const std::string& declaration_yaml() const { return declaration_; }
  bool Can(uint32_t capability) const { return (table_->capabilities & capability) != 0; }
  std::vector<std::string> CapabilityNames() const;

  struct Request {
    int frame = 0;
    protocol::FramePart part;
    int threads = 1;
    int gpu_index = -1;
    std::vector<int> gpus;        // every GPU pinned to the task (ABI 2.2); empty: a CPU task
    int64_t gpu_memory_mb = 0;    // the task's budget per GPU; 0: none
    std::string device = "auto";  // "auto", "cpu", "cuda"
    std::string scene;
    std::string scene_dir;  // the task folder with the job's assets; empty when none
    std::string settings_json = "{}";
    std::string_view resume;  // a checkpoint of this frame from an earlier attempt
    bool want_accumulation = false;
    const std::atomic<bool>* cancel = nullptr;
    const std::atomic<bool>* handback = nullptr;     // true: stop at a safe point, checkpoint
    std::function<void(double)> on_progress;         // any thread
    std::function<void(const std::string&)> on_log;  // any thread
    std::function<void(std::string checkpoint, int samples_done)> on_checkpoint;
    // TSR_CAP_PERIODIC_CHECKPOINT plugins (others are never asked): polled at the plugin's safe
    // points, true when a checkpoint is due; the plugin then gives one to on_periodic_checkpoint
    // (on the thread that called Render) and goes on rendering.
    std::function<bool()> checkpoint_due;
    std::function<void(std::string checkpoint, int samples_done)> on_periodic_checkpoint;
  };
  struct Result {
    image::ImageBuffer image;  // the tile (or frame); channel names filled in
    std::string backend;       // what rendered it
    std::string accumulation;  // when asked for (want_accumulation) and the plugin gave it
  };
  // Renders; the image is checked against the tile's size. Cancelled when cancelled or handed
  // back (on_checkpoint then had the checkpoint, if the plugin took one).
  StatusOr<Result> Render(const Request& request) const;

 private:
  NativePlugin() = default;
  Status Check(const std::string& what);

  void* handle_ = nullptr;
  const TsrRendererPlugin* table_ = nullptr;
  std::string name_, version_, description_, declaration_, path_;
};

using NativePluginList = std::vector<std::shared_ptr<const NativePlugin>>;
const NativePlugin* FindNativePlugin(const NativePluginList& plugins, std::string_view name);

// The plugins compiled in (plugins/builtin_plugins.h: the path tracer), loaded once.
std::shared_ptr<const NativePluginList> BuiltinNativePlugins();
// The path tracer plus each library in `paths` that loads (a library that does not is logged
// and left out, like an external renderer whose program is missing).
NativePluginList LoadNativePlugins(const std::vector<std::string>& paths);

}  // namespace tessera::worker
