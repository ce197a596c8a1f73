#pragma once
// Public entry point of the built-in path tracer. The worker calls RenderFrame for each frame of
// a task; the backend (CUDA or host CPU) runs the same kernel code (see kernel.h).

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "shared/base/status.h"
#include "shared/images/rendered_image.h"
#include "shared/scenes/scene_file.h"

namespace tessera::pathtracer {

// What a render returns: the farm's accumulation format (shared/images/rendered_image.h).
using accumulation::RenderedImage;

enum class Backend { kAuto, kCpu, kCuda };

// How a render on several devices shares the work. Either way the merged accumulation is
// bit-identical to one device's: every sample is added to its pixel's integer sums on exactly
// one device, and integer sums do not depend on the order they are added in.
enum class DeviceSplit {
  kRows,     // each device renders a band of rows of the region, all samples
  kSamples,  // each device renders a share of every pass's samples, all pixels
};

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
  int gpu_index = 0;    // the CUDA device when `devices` is empty; < 0: none (the CPU renders)
  int cpu_threads = 0;  // 0: all hardware threads
  // The devices to render on, in order (a task's GPUs): CUDA device indices, split as `split`
  // says, each driven by a host thread of its own. On the CPU backend (no CUDA, or the worker
  // chose the CPU) each entry is one share of cpu_threads, so the split runs there too.
  // Empty: {gpu_index}.
  std::vector<int> devices;
  DeviceSplit split = DeviceSplit::kRows;
  // The task's GPU memory budget per device in MiB (resources.gpu_memory_mb); 0: none. A render
  // whose estimate (EstimateDeviceMemory) exceeds it, or a CUDA device's free memory, fails
  // before anything is allocated.
  int64_t gpu_memory_mb = 0;
  // Polled between units of work; when it becomes true the render stops with kCancelled.
  const std::atomic<bool>* cancel = nullptr;
  // Polled with `cancel` (a host behind the C plugin API asks through a callback); true stops.
  std::function<bool()> cancelled;
  // Called with the fraction done (0..1) of the whole render (all devices together), from one
  // thread at a time, at most a few times a second; 1.0 exactly once, at the end.
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
  // accumulation so far (every device's part merged), on one rendering thread at a time while
  // the devices wait: a preview, or a checkpoint to SaveCheckpoint. Pass sizes never change the
  // pixels.
  int pass_samples = 0;
  std::function<void(const RenderedImage&)> on_pass;
};

// True when this build has the CUDA backend and a usable device is present.
bool CudaAvailable();

// What one device holds to render the request: the flattened scene's arrays (BVH nodes,
// primitives, materials, textures, environment map) plus its frame buffers (the integer sums and
// ray counters of its part of the region). Every device holds a copy of the scene.
struct DeviceMemoryEstimate {
  int64_t scene_bytes = 0;
  int64_t buffer_bytes = 0;  // of the device with the largest part
  int64_t total() const { return scene_bytes + buffer_bytes; }
};
StatusOr<DeviceMemoryEstimate> EstimateDeviceMemory(const spec::SceneSpec& scene,
                                                    const RenderRequest& request);

// Renders one frame of the scene (or the request's region and sample range of it). A CUDA error,
// a missing or bad asset (naming the object and the file) or a cancellation is returned as a
// Status; the caller (the worker) never crashes because of a render. Helpers to merge parts,
// assemble tiles and checkpoint: shared/images/accumulation.h.
StatusOr<RenderedImage> RenderFrame(const spec::SceneSpec& scene, const RenderRequest& request);

}  // namespace tessera::pathtracer
