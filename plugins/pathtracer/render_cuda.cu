// CUDA backend: one thread per pixel running the shared kernel. A frame is rendered in passes of
// a few samples each, accumulated on the device in sample order; cancellation and progress are
// checked between passes. Every CUDA call is checked and becomes a Status, never an abort.

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "plugins/pathtracer/backends.h"
#include "plugins/pathtracer/kernel.h"

namespace tessera::pathtracer {
namespace {

Status CudaStatus(cudaError_t err, const char* what) {
  return Status::Internal(std::string("CUDA ") + what + " failed: " + cudaGetErrorName(err) + ": " +
                          cudaGetErrorString(err));
}

#define TSR_CUDA_RETURN_IF_ERROR(call)                           \
  do {                                                           \
    cudaError_t tsr_cuda_err_ = (call);                          \
    if (tsr_cuda_err_ != cudaSuccess) {                          \
      cudaGetLastError(); /* clear the sticky non-fatal error */ \
      return CudaStatus(tsr_cuda_err_, #call);                   \
    }                                                            \
  } while (0)

// Owns one device allocation.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }

  Status Allocate(size_t bytes) {
    if (bytes == 0) return Status::Ok();
    TSR_CUDA_RETURN_IF_ERROR(cudaMalloc(&ptr_, bytes));
    return Status::Ok();
  }

  template <typename T>
  Status Upload(const std::vector<T>& data) {
    TSR_RETURN_IF_ERROR(Allocate(data.size() * sizeof(T)));
    if (!data.empty()) {
      TSR_CUDA_RETURN_IF_ERROR(
          cudaMemcpy(ptr_, data.data(), data.size() * sizeof(T), cudaMemcpyHostToDevice));
    }
    return Status::Ok();
  }

  template <typename T>
  T* get() const {
    return static_cast<T*>(ptr_);
  }

 private:
  void* ptr_ = nullptr;
};

__global__ void RenderPassKernel(kernel::SceneView scene, kernel::ChannelMap map, uint32_t frame,
                                 PixelRegion region, int first_sample, int end_sample,
                                 int64_t* sums, uint32_t* rays) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  const int width = region.x1 - region.x0;
  if (col >= width || row >= region.y1 - region.y0) return;
  const size_t i = static_cast<size_t>(row) * width + col;
  kernel::AccumulatePixel(scene, frame, region.x0 + col, region.y0 + row, first_sample, end_sample,
                          map, sums + i * map.count, &rays[i]);
}

}  // namespace

int CudaDeviceCount() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

Status CheckCudaMemory(int device, int64_t bytes) {
  TSR_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  size_t free_bytes = 0, total_bytes = 0;
  TSR_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes));
  if (static_cast<uint64_t>(bytes) > free_bytes) {
    return Status::ResourceExhausted("scene needs " + FormatMib(bytes) + " of GPU memory, GPU " +
                                     std::to_string(device) + " has " +
                                     FormatMib(static_cast<int64_t>(free_bytes)) + " free (of " +
                                     FormatMib(static_cast<int64_t>(total_bytes)) + ")");
  }
  return Status::Ok();
}

Status RenderCuda(const FlatScene& scene, const RenderJob& job, const RenderRequest& request,
                  RenderedImage* image) {
  TSR_CUDA_RETURN_IF_ERROR(cudaSetDevice(request.gpu_index));
  image->backend = "cuda:" + std::to_string(request.gpu_index);

  const PixelRegion& region = job.region;
  const int width = region.x1 - region.x0;
  const int height = region.y1 - region.y0;
  const size_t pixels = static_cast<size_t>(width) * height;
  DeviceBuffer spheres, quads, triangles, shading, instances, prims, nodes, materials, lights,
      textures, texels, env_rgb, env_marginal, env_conditional, sums, rays;
  TSR_RETURN_IF_ERROR(spheres.Upload(scene.spheres));
  TSR_RETURN_IF_ERROR(quads.Upload(scene.quads));
  TSR_RETURN_IF_ERROR(triangles.Upload(scene.triangles));
  TSR_RETURN_IF_ERROR(shading.Upload(scene.shading));
  TSR_RETURN_IF_ERROR(instances.Upload(scene.instances));
  TSR_RETURN_IF_ERROR(prims.Upload(scene.prims));
  TSR_RETURN_IF_ERROR(nodes.Upload(scene.nodes));
  TSR_RETURN_IF_ERROR(materials.Upload(scene.materials));
  TSR_RETURN_IF_ERROR(lights.Upload(scene.lights));
  TSR_RETURN_IF_ERROR(textures.Upload(scene.textures));
  TSR_RETURN_IF_ERROR(texels.Upload(scene.texels));
  TSR_RETURN_IF_ERROR(env_rgb.Upload(scene.env_rgb));
  TSR_RETURN_IF_ERROR(env_marginal.Upload(scene.env_marginal));
  TSR_RETURN_IF_ERROR(env_conditional.Upload(scene.env_conditional));
  TSR_RETURN_IF_ERROR(sums.Upload(image->sums));  // zeros, or the resumed accumulation
  TSR_RETURN_IF_ERROR(rays.Allocate(pixels * sizeof(uint32_t)));
  TSR_CUDA_RETURN_IF_ERROR(cudaMemset(rays.get<uint32_t>(), 0, pixels * sizeof(uint32_t)));

  kernel::SceneView view = scene.View();
  view.spheres = spheres.get<kernel::Sphere>();
  view.quads = quads.get<kernel::Quad>();
  view.triangles = triangles.get<kernel::Triangle>();
  view.shading = shading.get<kernel::TriangleShading>();
  view.instances = instances.get<kernel::Instance>();
  view.prims = prims.get<kernel::PrimRef>();
  view.nodes = nodes.get<kernel::BvhNode>();
  view.materials = materials.get<kernel::Material>();
  view.lights = lights.get<kernel::Light>();
  view.textures = textures.get<kernel::Texture>();
  view.texels = texels.get<float>();
  if (view.env.rgb != nullptr) {
    view.env.rgb = env_rgb.get<float>();
    view.env.marginal = env_marginal.get<float>();
    view.env.conditional = env_conditional.get<float>();
  }

  // About 16M paths per launch: long enough to fill a large GPU, short enough that cancel and
  // progress stay responsive. A requested pass size splits further, never merges passes.
  const int total = job.end_sample - job.first_sample;
  const int per_launch = static_cast<int>(std::clamp<size_t>(
      (size_t{1} << 24) / std::max<size_t>(pixels, 1), 1, std::max(job.pass_samples, 1)));
  const dim3 block(16, 16);
  const dim3 grid((width + block.x - 1) / block.x, (height + block.y - 1) / block.y);
  ProgressThrottle progress(request.on_progress);
  for (int pass = job.first_sample; pass < job.end_sample; pass += job.pass_samples) {
    const int pass_end = std::min(pass + job.pass_samples, job.end_sample);
    int share_begin = 0, share_end = 0;
    PassShare(job, pass, pass_end, &share_begin, &share_end);
    if (IsCancelled(request)) {
      return Status::Cancelled("render of frame " + std::to_string(job.frame) + " cancelled");
    }
    for (int first = share_begin; first < share_end; first += per_launch) {
      if (IsCancelled(request)) {
        return Status::Cancelled("render of frame " + std::to_string(job.frame) + " cancelled");
      }
      const int end = std::min(first + per_launch, share_end);
      RenderPassKernel<<<grid, block>>>(view, scene.channel_map, static_cast<uint32_t>(job.frame),
                                        region, first, end, sums.get<int64_t>(),
                                        rays.get<uint32_t>());
      TSR_CUDA_RETURN_IF_ERROR(cudaGetLastError());
      TSR_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
      const double in_pass = static_cast<double>(end - share_begin) / (share_end - share_begin);
      progress.Report(((pass - job.first_sample) + (pass_end - pass) * in_pass) / total);
    }
    if (WantsPassSums(job, request)) {
      TSR_CUDA_RETURN_IF_ERROR(cudaMemcpy(image->sums.data(), sums.get<int64_t>(),
                                          image->sums.size() * sizeof(int64_t),
                                          cudaMemcpyDeviceToHost));
    }
    FinishPass(job, request, share_end - share_begin, image);
  }

  TSR_CUDA_RETURN_IF_ERROR(cudaMemcpy(image->sums.data(), sums.get<int64_t>(),
                                      image->sums.size() * sizeof(int64_t),
                                      cudaMemcpyDeviceToHost));
  std::vector<uint32_t> ray_counts(pixels);
  TSR_CUDA_RETURN_IF_ERROR(cudaMemcpy(ray_counts.data(), rays.get<uint32_t>(),
                                      ray_counts.size() * sizeof(uint32_t),
                                      cudaMemcpyDeviceToHost));
  for (uint32_t r : ray_counts) image->rays_traced += r;
  return Status::Ok();
}

}  // namespace tessera::pathtracer
