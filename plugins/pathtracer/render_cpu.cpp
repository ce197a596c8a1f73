// CPU backend: a pool of std::threads pulls rows from an atomic counter; each pixel is the mean
// of its samples, computed by the shared kernel. The calling thread only waits, reports progress
// and is woken when the workers finish.

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "plugins/pathtracer/backends.h"
#include "plugins/pathtracer/kernel.h"

namespace tessera::pathtracer {

StatusOr<RenderedImage> RenderCpu(const FlatScene& scene, int frame, const RenderRequest& request) {
  const int width = scene.width;
  const int height = scene.height;
  int threads = request.cpu_threads > 0 ? request.cpu_threads
                                        : static_cast<int>(std::thread::hardware_concurrency());
  threads = std::clamp(threads, 1, height);

  RenderedImage image;
  image.width = width;
  image.height = height;
  image.channels = 4;
  image.backend = "cpu";
  image.pixels.resize(static_cast<size_t>(width) * height * 4);

  const kernel::SceneView view = scene.View();
  const uint32_t frame_key = static_cast<uint32_t>(frame);
  const int samples = scene.samples;
  float* const pixels = image.pixels.data();

  std::atomic<int> next_row{0};
  std::atomic<int> rows_done{0};
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> total_rays{0};
  std::mutex mu;
  std::condition_variable cv;
  int running = threads;  // guarded by mu

  auto work = [&]() {
    uint64_t rays = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      const int y = next_row.fetch_add(1, std::memory_order_relaxed);
      if (y >= height) break;
      float* row = pixels + static_cast<size_t>(y) * width * 4;
      bool complete = true;
      for (int x = 0; x < width; ++x) {
        if (IsCancelled(request)) {
          stop.store(true, std::memory_order_relaxed);
          complete = false;
          break;
        }
        kernel::Float3 sum = {0.0f, 0.0f, 0.0f};
        uint32_t pixel_rays = 0;
        for (int s = 0; s < samples; ++s) {
          sum += kernel::SanitizeSample(kernel::TracePixelSample(
              view, frame_key, x, y, static_cast<uint32_t>(s), &pixel_rays));
        }
        rays += pixel_rays;
        const kernel::Float3 c = kernel::FinishPixel(sum, samples);
        row[4 * x + 0] = c.x;
        row[4 * x + 1] = c.y;
        row[4 * x + 2] = c.z;
        row[4 * x + 3] = 1.0f;
      }
      if (complete) rows_done.fetch_add(1, std::memory_order_relaxed);
    }
    total_rays.fetch_add(rays, std::memory_order_relaxed);
    std::lock_guard<std::mutex> lock(mu);
    if (--running == 0) cv.notify_all();
  };

  std::vector<std::thread> pool;
  pool.reserve(threads);
  for (int i = 0; i < threads; ++i) pool.emplace_back(work);

  ProgressThrottle progress(request.on_progress);
  {
    std::unique_lock<std::mutex> lock(mu);
    while (running > 0) {
      cv.wait_for(lock, std::chrono::milliseconds(50));
      if (running > 0 && IsCancelled(request)) stop.store(true, std::memory_order_relaxed);
      const double done = static_cast<double>(rows_done.load(std::memory_order_relaxed)) / height;
      if (running > 0 && done < 1.0) {
        lock.unlock();
        progress.Report(done);
        lock.lock();
      }
    }
  }
  for (auto& t : pool) t.join();

  if (rows_done.load() < height) {
    return Status::Cancelled("render of frame " + std::to_string(frame) + " cancelled");
  }
  progress.Report(1.0);
  image.rays_traced = total_rays.load();
  return image;
}

}  // namespace tessera::pathtracer
