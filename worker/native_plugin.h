#pragma once
// Loads renderer plugins written against plugins/api/renderer_api.h (shared libraries) and
// calls them. The library stays loaded while a NativePlugin exists (RAII over dlopen).
// Any thread may call Render(); a plugin must be thread-safe if the worker runs several slots.

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "plugins/api/renderer_api.h"
#include "shared/image_io.h"
#include "shared/protocol.h"
#include "shared/status.h"

namespace tessera::worker {

class NativePlugin {
 public:
  // dlopen()s `path` and checks its ABI version and name.
  static StatusOr<std::unique_ptr<NativePlugin>> Load(const std::string& path);
  ~NativePlugin();
  NativePlugin(const NativePlugin&) = delete;
  NativePlugin& operator=(const NativePlugin&) = delete;

  const std::string& name() const { return name_; }
  const std::string& version() const { return version_; }

  struct Request {
    int frame = 0;
    protocol::FramePart part;
    int threads = 1;
    int gpu_index = -1;
    std::string scene;
    std::string settings_json = "{}";
    const std::atomic<bool>* cancel = nullptr;
    std::function<void(double)> on_progress;
  };
  // Renders; the image is checked against the tile's size.
  StatusOr<image::ImageBuffer> Render(const Request& request) const;

 private:
  NativePlugin() = default;

  void* handle_ = nullptr;
  const TsrRendererPlugin* table_ = nullptr;
  std::string name_, version_;
};

}  // namespace tessera::worker
