#pragma once
// Public entry point of the built-in path tracer. The worker calls RenderFrame for each frame of
// a task; the backend (CUDA or host CPU) runs the same kernel code (see kernel.h).

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "shared/scene_spec.h"
#include "shared/status.h"

namespace tessera::pathtracer {

enum class Backend { kAuto, kCpu, kCuda };

struct RenderRequest {
  int frame = 1;
  Backend backend = Backend::kAuto;
  int gpu_index = 0;    // which CUDA device to use when the backend is CUDA
  int cpu_threads = 0;  // 0: all hardware threads
  // Polled between units of work; when it becomes true the render stops with kCancelled.
  const std::atomic<bool>* cancel = nullptr;
  // Called from the rendering thread with the fraction done (0..1), at most a few times a second.
  std::function<void(double)> on_progress;
};

struct RenderedImage {
  int width = 0;
  int height = 0;
  int channels = 4;  // RGBA, linear float, row-major, top row first
  std::vector<float> pixels;
  std::string backend;       // "cpu" or "cuda:N": what actually rendered it
  uint64_t rays_traced = 0;  // rays the kernel traced (camera rays + bounces), for benchmarks
};

// True when this build has the CUDA backend and a usable device is present.
bool CudaAvailable();

struct CudaDevice {
  int index = 0;
  std::string name;
  int64_t memory_mb = 0;
  int compute_major = 0;
  int compute_minor = 0;
};

// The CUDA devices this build can render on (the worker advertises them when it registers).
// Empty when the build has no CUDA backend or no driver/device is present; `why` then says which.
std::vector<CudaDevice> ListCudaDevices(std::string* why = nullptr);

// Renders one frame of the scene. A CUDA error or a cancellation is returned as a Status; the
// caller (the worker) never crashes because of a render.
StatusOr<RenderedImage> RenderFrame(const spec::SceneSpec& scene, const RenderRequest& request);

}  // namespace tessera::pathtracer
