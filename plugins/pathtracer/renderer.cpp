#include "plugins/pathtracer/renderer.h"

#include "plugins/pathtracer/backends.h"
#include "plugins/pathtracer/scene_flatten.h"

namespace tessera::pathtracer {

#if !defined(TSR_HAVE_CUDA)
int CudaDeviceCount() { return 0; }

std::vector<CudaDevice> ListCudaDevices(std::string* why) {
  if (why) *why = "built without CUDA";
  return {};
}

StatusOr<RenderedImage> RenderCuda(const FlatScene&, int, const RenderRequest&) {
  return Status::FailedPrecondition("this build of the path tracer has no CUDA backend");
}
#endif

bool CudaAvailable() { return CudaDeviceCount() > 0; }

StatusOr<RenderedImage> RenderFrame(const spec::SceneSpec& scene, const RenderRequest& request) {
  // The spec may have been built or changed in code (a job overriding the resolution): check it
  // with the parser's rules before any kernel reads it.
  spec::SceneSpec checked = scene;
  TSR_RETURN_IF_ERROR(spec::ValidateScene(&checked));
  if (IsCancelled(request)) {
    return Status::Cancelled("render of frame " + std::to_string(request.frame) + " cancelled");
  }

  Backend backend = request.backend;
  if (backend == Backend::kAuto || backend == Backend::kCuda) {
    const int devices = CudaDeviceCount();
    if (backend == Backend::kCuda) {
      if (devices == 0) {
        return Status::FailedPrecondition(
#if defined(TSR_HAVE_CUDA)
            "CUDA backend requested but no usable CUDA device was found (no driver or no GPU)"
#else
            "CUDA backend requested but this build of the path tracer has no CUDA support"
#endif
        );
      }
      if (request.gpu_index < 0 || request.gpu_index >= devices) {
        return Status::InvalidArgument("gpu_index: " + std::to_string(request.gpu_index) +
                                       " is not a CUDA device (found " + std::to_string(devices) +
                                       ")");
      }
    } else {
      backend =
          devices > request.gpu_index && request.gpu_index >= 0 ? Backend::kCuda : Backend::kCpu;
    }
  }

  const FlatScene flat = FlattenScene(checked, request.frame);
  if (backend == Backend::kCuda) return RenderCuda(flat, request.frame, request);
  return RenderCpu(flat, request.frame, request);
}

}  // namespace tessera::pathtracer
