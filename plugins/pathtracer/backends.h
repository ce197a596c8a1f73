#pragma once
// Internal to the path tracer: the two backends behind RenderFrame. Both take a flattened scene
// and add samples to an accumulation (RenderedImage::sums) in passes; RenderFrame prepares the
// image (region size, channels, a resumed accumulation) and finishes the pixels.

#include <chrono>
#include <functional>

#include "plugins/pathtracer/renderer.h"
#include "plugins/pathtracer/scene_flatten.h"
#include "shared/status.h"

namespace tessera::pathtracer {

// What to render: samples [first_sample, end_sample) of the region, `pass_samples` at a time.
struct RenderJob {
  int frame = 1;
  PixelRegion region;
  int first_sample = 0;
  int end_sample = 0;
  int pass_samples = 0;  // > 0
};

// Each backend adds the job's samples to image->sums (region width x height x channels, as the
// scene's channel map), adds to rays_traced and, after each pass, calls FinishPass.
Status RenderCpu(const FlatScene& scene, const RenderJob& job, const RenderRequest& request,
                 RenderedImage* image);

// Records a finished pass of `samples` samples: updates sample_count and, when the request has
// on_pass, the pixels, then calls it.
void FinishPass(const RenderRequest& request, int samples, RenderedImage* image);

// Number of usable CUDA devices; 0 when the build has no CUDA or the driver/device is missing.
int CudaDeviceCount();

// Only defined when built with TSR_HAVE_CUDA; RenderFrame checks CudaDeviceCount() first.
Status RenderCuda(const FlatScene& scene, const RenderJob& job, const RenderRequest& request,
                  RenderedImage* image);

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
  return (request.cancel != nullptr && request.cancel->load(std::memory_order_relaxed)) ||
         (request.cancelled && request.cancelled());
}

}  // namespace tessera::pathtracer
