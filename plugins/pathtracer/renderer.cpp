#include "plugins/pathtracer/renderer.h"

#include <algorithm>

#include "plugins/pathtracer/backends.h"
#include "plugins/pathtracer/scene_flatten.h"
#include "shared/images/accumulation.h"

namespace tessera::pathtracer {

#if !defined(TSR_HAVE_CUDA)
int CudaDeviceCount() { return 0; }

Status RenderCuda(const FlatScene&, const RenderJob&, const RenderRequest&, RenderedImage*) {
  return Status::FailedPrecondition("this build of the path tracer has no CUDA backend");
}

Status CheckCudaMemory(int, int64_t) {
  return Status::FailedPrecondition("this build of the path tracer has no CUDA backend");
}
#endif

bool CudaAvailable() { return CudaDeviceCount() > 0; }

void FinishPass(const RenderJob& job, const RenderRequest& request, int samples,
                RenderedImage* image) {
  image->sample_count += samples;
  if (job.pass_hook) {
    job.pass_hook();
  } else if (request.on_pass) {
    FinishPixels(image);
    request.on_pass(*image);
  }
}

namespace {

// Checks the request's region, sample range and resume point against the scene and fills the
// job and the image's frame fields and starting accumulation.
Status PlanRender(const FlatScene& flat, const RenderRequest& request, RenderJob* job,
                  RenderedImage* image) {
  job->frame = request.frame;
  job->region = request.region.value_or(PixelRegion{0, 0, flat.width, flat.height});
  const PixelRegion& r = job->region;
  if (r.x0 < 0 || r.y0 < 0 || r.x1 > flat.width || r.y1 > flat.height || r.x0 >= r.x1 ||
      r.y0 >= r.y1) {
    return Status::InvalidArgument(
        "region: [" + std::to_string(r.x0) + ", " + std::to_string(r.x1) + ") x [" +
        std::to_string(r.y0) + ", " + std::to_string(r.y1) + ") is empty or outside the " +
        std::to_string(flat.width) + "x" + std::to_string(flat.height) + " frame");
  }
  const int begin = request.sample_begin;
  const int end = request.sample_end < 0 ? flat.samples : request.sample_end;
  if (begin < 0 || end <= begin || end > spec::kMaxSamples) {
    return Status::InvalidArgument("samples: range [" + std::to_string(begin) + ", " +
                                   std::to_string(end) + ") is empty or out of range");
  }
  image->frame = request.frame;
  image->frame_width = flat.width;
  image->frame_height = flat.height;
  image->x0 = r.x0;
  image->y0 = r.y0;
  image->width = r.x1 - r.x0;
  image->height = r.y1 - r.y0;
  image->channels = flat.channel_map.count;
  image->channel_names = flat.channel_names;
  image->sample_begin = begin;
  image->sample_count = 0;
  image->scene_hash = SceneHash(flat);
  image->sums.assign(static_cast<size_t>(image->width) * image->height * image->channels, 0);
  job->first_sample = begin;
  job->end_sample = end;
  if (request.resume != nullptr) {
    const RenderedImage& from = *request.resume;
    if (from.scene_hash != image->scene_hash || from.frame != image->frame ||
        from.x0 != image->x0 || from.y0 != image->y0 || from.width != image->width ||
        from.height != image->height || from.channel_names != image->channel_names ||
        from.sums.size() != image->sums.size()) {
      return Status::FailedPrecondition(
          "resume: the checkpoint is of another scene, frame, region or channel set");
    }
    if (from.sample_begin != begin || from.sample_count < 0 || begin + from.sample_count > end) {
      return Status::FailedPrecondition(
          "resume: the checkpoint holds samples [" + std::to_string(from.sample_begin) + ", " +
          std::to_string(from.sample_begin + from.sample_count) + "), not a start of [" +
          std::to_string(begin) + ", " + std::to_string(end) + ")");
    }
    image->sums = from.sums;
    image->sample_count = from.sample_count;
    job->first_sample = begin + from.sample_count;
  }
  const int remaining = job->end_sample - job->first_sample;
  job->pass_samples = request.pass_samples > 0 ? request.pass_samples : std::max(remaining, 1);
  return Status::Ok();
}

// More devices than any machine has: a bound on the threads a request can start.
constexpr size_t kMaxDevices = 64;

// What the devices need (the one with the largest part), before anything is allocated.
DeviceMemoryEstimate Estimate(const FlatScene& flat, const RenderJob& job, DeviceSplit split,
                              size_t devices) {
  int64_t pixels = 0;
  for (const PixelRegion& p : DeviceParts(job, split, static_cast<int>(devices))) {
    pixels = std::max<int64_t>(pixels, int64_t{p.x1 - p.x0} * (p.y1 - p.y0));
  }
  return {FlatSceneBytes(flat), FrameBufferBytes(flat, pixels)};
}

// The task's budget (on every backend: a task renders the same wherever it lands), then, on
// CUDA, each device's free memory. Failing here is a clear message instead of an out-of-memory
// error halfway through the uploads.
Status CheckMemory(const DeviceMemoryEstimate& need, const RenderRequest& request, Backend backend,
                   const std::vector<int>& devices) {
  const int64_t budget_mb = std::min<int64_t>(request.gpu_memory_mb, int64_t{1} << 40);
  if (budget_mb > 0 && need.total() > (budget_mb << 20)) {
    return Status::ResourceExhausted(
        "scene needs " + FormatMib(need.total()) + " of GPU memory, the task's budget is " +
        FormatMib(budget_mb << 20) + " (resources.gpu_memory_mb); per GPU: " +
        FormatMib(need.scene_bytes) + " of scene data (BVH, geometry, materials, textures) and " +
        FormatMib(need.buffer_bytes) + " of frame buffers");
  }
  if (backend == Backend::kCuda) {
    for (int device : devices) TSR_RETURN_IF_ERROR(CheckCudaMemory(device, need.total()));
  }
  return Status::Ok();
}

std::vector<int> RequestDevices(const RenderRequest& request) {
  return request.devices.empty() ? std::vector<int>{request.gpu_index} : request.devices;
}

}  // namespace

StatusOr<DeviceMemoryEstimate> EstimateDeviceMemory(const spec::SceneSpec& scene,
                                                    const RenderRequest& request) {
  spec::SceneSpec checked = scene;
  TSR_RETURN_IF_ERROR(spec::ValidateScene(&checked));
  TSR_ASSIGN_OR_RETURN(const FlatScene flat, FlattenScene(checked, request.frame));
  RenderJob job;
  RenderedImage image;
  TSR_RETURN_IF_ERROR(PlanRender(flat, request, &job, &image));
  return Estimate(flat, job, request.split, RequestDevices(request).size());
}

StatusOr<RenderedImage> RenderFrame(const spec::SceneSpec& scene, const RenderRequest& request) {
  // The spec may have been built or changed in code (a job overriding the resolution): check it
  // with the parser's rules before any kernel reads it.
  spec::SceneSpec checked = scene;
  TSR_RETURN_IF_ERROR(spec::ValidateScene(&checked));
  if (IsCancelled(request)) {
    return Status::Cancelled("render of frame " + std::to_string(request.frame) + " cancelled");
  }

  const std::vector<int> devices = RequestDevices(request);
  if (devices.size() > kMaxDevices) {
    return Status::InvalidArgument("devices: " + std::to_string(devices.size()) +
                                   " devices, at most " + std::to_string(kMaxDevices));
  }
  const bool pinned =
      std::all_of(devices.begin(), devices.end(), [](int device) { return device >= 0; });
  Backend backend = request.backend;
  if (backend == Backend::kCuda) {
    const int count = CudaDeviceCount();
    if (count == 0) {
      return Status::FailedPrecondition(
#if defined(TSR_HAVE_CUDA)
          "CUDA backend requested but no usable CUDA device was found (no driver or no GPU)"
#else
          "CUDA backend requested but this build of the path tracer has no CUDA support"
#endif
      );
    }
    for (int device : devices) {
      if (device < 0 || device >= count) {
        return Status::InvalidArgument("gpu_index: " + std::to_string(device) +
                                       " is not a CUDA device (found " + std::to_string(count) +
                                       ")");
      }
    }
  } else if (backend == Backend::kAuto) {
    // No device pinned (a CPU task): the CPU, without asking the driver anything.
    backend = Backend::kCpu;
    if (pinned) {
      const int count = CudaDeviceCount();
      if (std::all_of(devices.begin(), devices.end(),
                      [count](int device) { return device < count; })) {
        backend = Backend::kCuda;
      }
    }
  }

  TSR_ASSIGN_OR_RETURN(const FlatScene flat, FlattenScene(checked, request.frame));
  RenderJob job;
  RenderedImage image;
  TSR_RETURN_IF_ERROR(PlanRender(flat, request, &job, &image));
  TSR_RETURN_IF_ERROR(
      CheckMemory(Estimate(flat, job, request.split, devices.size()), request, backend, devices));
  TSR_RETURN_IF_ERROR(RenderOnDevices(flat, job, request, backend, devices, &image));
  FinishPixels(&image);
  return image;
}

}  // namespace tessera::pathtracer
