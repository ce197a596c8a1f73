// CUDA backend: one thread per pixel running the shared kernel. A frame is rendered in passes of
// a few samples each, accumulated on the device in sample order; cancellation and progress are
// checked between passes. Every CUDA call is checked and becomes a Status, never an abort.

#include <cuda_runtime.h>

#include <algorithm>
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

__global__ void RenderPassKernel(kernel::SceneView scene, uint32_t frame, int first_sample,
                                 int end_sample, float* accum, uint32_t* rays) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= scene.width || y >= scene.height) return;
  const size_t i = static_cast<size_t>(y) * scene.width + x;
  kernel::Float3 sum = {accum[3 * i], accum[3 * i + 1], accum[3 * i + 2]};
  uint32_t pixel_rays = rays[i];
  for (int s = first_sample; s < end_sample; ++s) {
    sum += kernel::SanitizeSample(
        kernel::TracePixelSample(scene, frame, x, y, static_cast<uint32_t>(s), &pixel_rays));
  }
  accum[3 * i] = sum.x;
  accum[3 * i + 1] = sum.y;
  accum[3 * i + 2] = sum.z;
  rays[i] = pixel_rays;
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

std::vector<CudaDevice> ListCudaDevices(std::string* why) {
  std::vector<CudaDevice> devices;
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();
    if (why) *why = cudaGetErrorString(err);
    return devices;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    err = cudaGetDeviceProperties(&prop, i);
    if (err != cudaSuccess) {
      cudaGetLastError();
      if (why) *why = "device " + std::to_string(i) + ": " + cudaGetErrorString(err);
      continue;
    }
    devices.push_back(
        {i, prop.name, static_cast<int64_t>(prop.totalGlobalMem >> 20), prop.major, prop.minor});
  }
  if (devices.empty() && why && why->empty()) *why = "no CUDA devices";
  return devices;
}

StatusOr<RenderedImage> RenderCuda(const FlatScene& scene, int frame,
                                   const RenderRequest& request) {
  TSR_CUDA_RETURN_IF_ERROR(cudaSetDevice(request.gpu_index));

  const size_t pixels = static_cast<size_t>(scene.width) * scene.height;
  DeviceBuffer spheres, quads, materials, accum, rays;
  TSR_RETURN_IF_ERROR(spheres.Upload(scene.spheres));
  TSR_RETURN_IF_ERROR(quads.Upload(scene.quads));
  TSR_RETURN_IF_ERROR(materials.Upload(scene.materials));
  TSR_RETURN_IF_ERROR(accum.Allocate(pixels * 3 * sizeof(float)));
  TSR_RETURN_IF_ERROR(rays.Allocate(pixels * sizeof(uint32_t)));
  TSR_CUDA_RETURN_IF_ERROR(cudaMemset(accum.get<float>(), 0, pixels * 3 * sizeof(float)));
  TSR_CUDA_RETURN_IF_ERROR(cudaMemset(rays.get<uint32_t>(), 0, pixels * sizeof(uint32_t)));

  kernel::SceneView view = scene.View();
  view.spheres = spheres.get<kernel::Sphere>();
  view.quads = quads.get<kernel::Quad>();
  view.materials = materials.get<kernel::Material>();

  // About 16M paths per launch: long enough to fill a large GPU, short enough that cancel and
  // progress stay responsive.
  const int per_pass = static_cast<int>(
      std::clamp<size_t>((size_t{1} << 24) / std::max<size_t>(pixels, 1), 1, scene.samples));
  const dim3 block(16, 16);
  const dim3 grid((scene.width + block.x - 1) / block.x, (scene.height + block.y - 1) / block.y);
  ProgressThrottle progress(request.on_progress);
  for (int first = 0; first < scene.samples; first += per_pass) {
    if (IsCancelled(request)) {
      return Status::Cancelled("render of frame " + std::to_string(frame) + " cancelled");
    }
    const int end = std::min(first + per_pass, scene.samples);
    RenderPassKernel<<<grid, block>>>(view, static_cast<uint32_t>(frame), first, end,
                                      accum.get<float>(), rays.get<uint32_t>());
    TSR_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    TSR_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
    progress.Report(static_cast<double>(end) / scene.samples);
  }

  std::vector<float> sums(pixels * 3);
  std::vector<uint32_t> ray_counts(pixels);
  TSR_CUDA_RETURN_IF_ERROR(cudaMemcpy(sums.data(), accum.get<float>(), sums.size() * sizeof(float),
                                      cudaMemcpyDeviceToHost));
  TSR_CUDA_RETURN_IF_ERROR(cudaMemcpy(ray_counts.data(), rays.get<uint32_t>(),
                                      ray_counts.size() * sizeof(uint32_t),
                                      cudaMemcpyDeviceToHost));

  RenderedImage image;
  image.width = scene.width;
  image.height = scene.height;
  image.channels = 4;
  image.backend = "cuda:" + std::to_string(request.gpu_index);
  image.pixels.resize(pixels * 4);
  for (size_t i = 0; i < pixels; ++i) {
    const kernel::Float3 c =
        kernel::FinishPixel({sums[3 * i], sums[3 * i + 1], sums[3 * i + 2]}, scene.samples);
    image.pixels[4 * i + 0] = c.x;
    image.pixels[4 * i + 1] = c.y;
    image.pixels[4 * i + 2] = c.z;
    image.pixels[4 * i + 3] = 1.0f;
    image.rays_traced += ray_counts[i];
  }
  return image;
}

}  // namespace tessera::pathtracer
