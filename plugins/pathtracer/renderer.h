#pragma once
// Public entry point of the built-in path tracer. The worker calls RenderFrame for each frame of
// a task; the backend (CUDA or host CPU) runs the same kernel code (see kernel.h).

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "shared/rendered_image.h"
#include "shared/scene_spec.h"
#include "shared/status.h"

namespace tessera::pathtracer {

// What a render returns: the farm's accumulation format (shared/rendered_image.h).
using accumulation::RenderedImage;

enum class Backend { kAuto, kCpu, kCuda };

// A rectangle of the frame: columns [x0, x1), rows [y0, y1), row 0 at the top.
struct PixelRegion {
  int x0 = 0;
  int y0 = 0;
  int x1 = 0;
  int y1 = 0;
};

struct RenderRequest {
  int frame = 1;
  Backend backend = Backend::kAuto;
  int gpu_index = 0;    // which CUDA device to use when the backend is CUDA
  int cpu_threads = 0;  // 0: all hardware threads
  // Polled between units of work; when it becomes true the render stops with kCancelled.
  const std::atomic<bool>* cancel = nullptr;
  // Polled with `cancel` (a host behind the C plugin API asks through a callback); true stops.
  std::function<bool()> cancelled;
  // Called from the rendering thread with the fraction done (0..1), at most a few times a second.
  std::function<void(double)> on_progress;

  // ---- Farm splits (all optional; the defaults render the whole frame, all samples) ----
  // Only this part of the frame; the image is the region's size. Pixels keep the random numbers
  // of their place in the whole frame, so tiles pasted together equal the whole frame.
  std::optional<PixelRegion> region;
  // Samples [sample_begin, sample_end) of each pixel; sample_end < 0 means scene.samples.
  int sample_begin = 0;
  int sample_end = -1;
  // Continue this accumulation (e.g. LoadCheckpoint's result): it must be of the same scene,
  // frame, region and channels, and start at sample_begin; rendering goes on from its last
  // sample to sample_end. Not owned; must outlive the call.
  const RenderedImage* resume = nullptr;
  // Samples per progressive pass (0: all remaining samples in one pass; the CUDA backend still
  // splits a pass into launches of ~16M paths). After each pass, on_pass (if set) gets the
  // accumulation so far, on the rendering thread: a preview, or a checkpoint to SaveCheckpoint.
  // Pass sizes never change the pixels.
  int pass_samples = 0;
  std::function<void(const RenderedImage&)> on_pass;
};

// True when this build has the CUDA backend and a usable device is present.
bool CudaAvailable();

struct CudaDevice {
  int index = 0;
  std::string name;
  int64_t memory_mb = 0;
  int compute_major = 0;
  int compute_minor = 0;
  std::string driver_version;   // the newest CUDA version the driver supports, "12.4"
  std::string runtime_version;  // the CUDA runtime this build links, "12.4"
};

// The CUDA devices this build can render on (the worker advertises them when it registers).
// Empty when the build has no CUDA backend or no driver/device is present; `why` then says which.
std::vector<CudaDevice> ListCudaDevices(std::string* why = nullptr);

// Renders one frame of the scene (or the request's region and sample range of it). A CUDA error,
// a missing or bad asset (naming the object and the file) or a cancellation is returned as a
// Status; the caller (the worker) never crashes because of a render. Helpers to merge parts,
// assemble tiles and checkpoint: shared/accumulation.h.
StatusOr<RenderedImage> RenderFrame(const spec::SceneSpec& scene, const RenderRequest& request);

}  // namespace tessera::pathtracer
