// CPU backend: for each pass, a pool of std::threads pulls rows of the region from an atomic
// counter; each pixel adds the pass's samples to its fixed-point sums with the shared kernel.
// The calling thread only waits, reports progress and is woken when the workers finish.

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "plugins/pathtracer/backends.h"
#include "plugins/pathtracer/kernel.h"

namespace tessera::pathtracer {
namespace {

// Runs samples [first, end) (this device's share of the pass [pass_first, pass_end)) over every
// row of the region; false when cancelled.
bool RunPass(const kernel::SceneView& view, const kernel::ChannelMap& map, const RenderJob& job,
             int pass_first, int pass_end, int first, int end, int threads,
             const RenderRequest& request, ProgressThrottle* progress, RenderedImage* image) {
  const PixelRegion& r = job.region;
  const int width = r.x1 - r.x0;
  const int height = r.y1 - r.y0;
  const uint32_t frame_key = static_cast<uint32_t>(job.frame);
  int64_t* const sums = image->sums.data();
  const double total = job.end_sample - job.first_sample;

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
      const int row = next_row.fetch_add(1, std::memory_order_relaxed);
      if (row >= height) break;
      bool complete = true;
      for (int col = 0; col < width; ++col) {
        // Every 8 pixels: behind the plugin table the poll is a call across the C boundary.
        if ((col & 7) == 0 && IsCancelled(request)) {
          stop.store(true, std::memory_order_relaxed);
          complete = false;
          break;
        }
        uint32_t pixel_rays = 0;
        kernel::AccumulatePixel(view, frame_key, r.x0 + col, r.y0 + row, first, end, map,
                                sums + (static_cast<size_t>(row) * width + col) * map.count,
                                &pixel_rays);
        rays += pixel_rays;
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
  {
    std::unique_lock<std::mutex> lock(mu);
    while (running > 0) {
      cv.wait_for(lock, std::chrono::milliseconds(50));
      if (running > 0 && IsCancelled(request)) stop.store(true, std::memory_order_relaxed);
      const double in_pass =
          static_cast<double>(rows_done.load(std::memory_order_relaxed)) / height;
      const double done =
          ((pass_first - job.first_sample) + (pass_end - pass_first) * in_pass) / total;
      if (running > 0 && done < 1.0) {
        lock.unlock();
        progress->Report(done);
        lock.lock();
      }
    }
  }
  for (auto& t : pool) t.join();
  image->rays_traced += total_rays.load();
  return rows_done.load() == height;
}

}  // namespace

Status RenderCpu(const FlatScene& scene, const RenderJob& job, const RenderRequest& request,
                 RenderedImage* image) {
  const int height = job.region.y1 - job.region.y0;
  int threads = request.cpu_threads > 0 ? request.cpu_threads
                                        : static_cast<int>(std::thread::hardware_concurrency());
  threads = std::clamp(threads, 1, height);
  image->backend = "cpu";
  const kernel::SceneView view = scene.View();
  ProgressThrottle progress(request.on_progress);
  for (int pass = job.first_sample; pass < job.end_sample; pass += job.pass_samples) {
    const int pass_end = std::min(pass + job.pass_samples, job.end_sample);
    int first = 0, end = 0;
    PassShare(job, pass, pass_end, &first, &end);
    if (IsCancelled(request) ||
        (first < end && !RunPass(view, scene.channel_map, job, pass, pass_end, first, end, threads,
                                 request, &progress, image))) {
      return Status::Cancelled("render of frame " + std::to_string(job.frame) + " cancelled");
    }
    FinishPass(job, request, end - first, image);
  }
  progress.Report(1.0);
  return Status::Ok();
}

}  // namespace tessera::pathtracer
