#pragma once
// Internal to the path tracer: the two backends behind RenderFrame. Both take a flattened scene
// and produce RGBA float pixels (alpha 1), row-major, top row first.

#include <chrono>
#include <functional>

#include "plugins/pathtracer/renderer.h"
#include "plugins/pathtracer/scene_flatten.h"
#include "shared/status.h"

namespace tessera::pathtracer {

StatusOr<RenderedImage> RenderCpu(const FlatScene& scene, int frame, const RenderRequest& request);

// Number of usable CUDA devices; 0 when the build has no CUDA or the driver/device is missing.
int CudaDeviceCount();

// Only defined when built with TSR_HAVE_CUDA; RenderFrame checks CudaDeviceCount() first.
StatusOr<RenderedImage> RenderCuda(const FlatScene& scene, int frame, const RenderRequest& request);

// Calls on_progress at most every `interval`, plus always for 1.0. Used by the calling thread
// only.
class ProgressThrottle {
 public:
  explicit ProgressThrottle(const std::function<void(double)>& callback,
                            std::chrono::milliseconds interval = std::chrono::milliseconds(250))
      : callback_(callback), interval_(interval) {}

  void Report(double fraction) {
    if (!callback_) return;
    const auto now = std::chrono::steady_clock::now();
    if (fraction < 1.0 && now - last_ < interval_) return;
    last_ = now;
    callback_(fraction);
  }

 private:
  const std::function<void(double)>& callback_;
  std::chrono::milliseconds interval_;
  std::chrono::steady_clock::time_point last_{};
};

inline bool IsCancelled(const RenderRequest& request) {
  return request.cancel != nullptr && request.cancel->load(std::memory_order_relaxed);
}

}  // namespace tessera::pathtracer
