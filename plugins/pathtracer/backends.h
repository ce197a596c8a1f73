#pragma once
// Internal to the path tracer: the two backends behind RenderFrame. Both take a flattened scene
// and add samples to an accumulation (RenderedImage::sums) in passes; RenderFrame prepares the
// image (region size, channels, a resumed accumulation) and finishes the pixels.

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "plugins/pathtracer/renderer.h"
#include "plugins/pathtracer/scene_flatten.h"
#include "shared/base/status.h"

namespace tessera::pathtracer {

// What to render: samples [first_sample, end_sample) of the region, `pass_samples` at a time.
struct RenderJob {
  int frame = 1;
  PixelRegion region;
  int first_sample = 0;
  int end_sample = 0;
  int pass_samples = 0;  // > 0
  // DeviceSplit::kSamples: this device renders share `share_index` of `share_count` of every
  // pass (PassShare); the default is the whole pass.
  int share_index = 0;
  int share_count = 1;
  // Set by RenderOnDevices when the request has on_pass: called by FinishPass instead of
  // on_pass, after the device's sums of the pass are on the host (it waits for the others).
  std::function<void()> pass_hook;
};

// The samples [*from, *to) of the pass [first, end) that the job's device renders (may be
// empty). Every pass is shared, not the whole range, so all devices finish each pass together
// and a checkpoint between passes holds whole passes.
inline void PassShare(const RenderJob& job, int first, int end, int* from, int* to) {
  const int64_t n = end - first;
  *from = first + static_cast<int>(n * job.share_index / job.share_count);
  *to = first + static_cast<int>(n * (job.share_index + 1) / job.share_count);
}

// Each backend adds the job's samples to image->sums (region width x height x channels, as the
// scene's channel map), adds to rays_traced and, after each pass, calls FinishPass (also for a
// pass whose share is empty). The CUDA backend renders on request.gpu_index.
Status RenderCpu(const FlatScene& scene, const RenderJob& job, const RenderRequest& request,
                 RenderedImage* image);

// Records a finished pass of `samples` samples: updates sample_count, then calls the job's
// pass_hook, or else (when the request has on_pass) updates the pixels and calls on_pass.
void FinishPass(const RenderJob& job, const RenderRequest& request, int samples,
                RenderedImage* image);

// Whether a backend must bring its sums to the host after each pass (for FinishPass).
inline bool WantsPassSums(const RenderJob& job, const RenderRequest& request) {
  return job.pass_hook || request.on_pass;
}

// Number of usable CUDA devices; 0 when the build has no CUDA or the driver/device is missing.
int CudaDeviceCount();

// Only defined when built with TSR_HAVE_CUDA; RenderFrame checks CudaDeviceCount() first.
Status RenderCuda(const FlatScene& scene, const RenderJob& job, const RenderRequest& request,
                  RenderedImage* image);

// Fails (ResourceExhausted, naming the device) when CUDA device `device` has less than `bytes`
// free now. Only called on the CUDA backend.
Status CheckCudaMemory(int device, int64_t bytes);

// "1,234 MiB": bytes in MiB, rounded up, with thousands separators.
std::string FormatMib(int64_t bytes);

// The bytes one device allocates for the scene's arrays and for a part of `pixels` pixels.
int64_t FlatSceneBytes(const FlatScene& scene);
int64_t FrameBufferBytes(const FlatScene& scene, int64_t pixels);

// Renders the job on `devices` (CUDA indices, or CPU thread shares when `backend` is kCpu),
// split as request.split says, and merges their sums into `image` (render_devices.cpp). One
// device: the backend directly, on the calling thread.
Status RenderOnDevices(const FlatScene& scene, const RenderJob& job, const RenderRequest& request,
                       Backend backend, const std::vector<int>& devices, RenderedImage* image);

// The parts a render on `count` devices splits the region into (kRows: bands of rows, at most
// one per row; kSamples: the whole region, at most one per sample of the range).
std::vector<PixelRegion> DeviceParts(const RenderJob& job, DeviceSplit split, int count);

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
