// One render on several devices (a task's GPUs, or shares of the CPU threads): the region's rows,
// or each pass's samples, are split over the devices, each driven by a host thread of its own,
// and their integer sums are added into the one image. Every sample lands in exactly one
// device's sums and integer addition does not depend on order, so the merged accumulation is
// bit-identical to one device's. The calling thread only waits and reports the combined
// progress; with on_pass set, the devices meet at a barrier after each pass, where the merged
// image goes to on_pass (a checkpoint then holds whole passes, as with one device).

#include <algorithm>
#include <atomic>
#include <barrier>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>

#include "plugins/pathtracer/backends.h"

namespace tessera::pathtracer {

std::string FormatMib(int64_t bytes) {
  const int64_t mib = (std::max<int64_t>(bytes, 0) + (int64_t{1} << 20) - 1) >> 20;
  const std::string digits = std::to_string(mib);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out + " MiB";
}

namespace {

template <typename T>
int64_t Bytes(const std::vector<T>& v) {
  return static_cast<int64_t>(v.size() * sizeof(T));
}

}  // namespace

int64_t FlatSceneBytes(const FlatScene& s) {
  // Every array render_cuda.cu uploads.
  return Bytes(s.spheres) + Bytes(s.quads) + Bytes(s.triangles) + Bytes(s.shading) +
         Bytes(s.instances) + Bytes(s.prims) + Bytes(s.nodes) + Bytes(s.materials) +
         Bytes(s.lights) + Bytes(s.textures) + Bytes(s.texels) + Bytes(s.env_rgb) +
         Bytes(s.env_marginal) + Bytes(s.env_conditional);
}

int64_t FrameBufferBytes(const FlatScene& s, int64_t pixels) {
  // Per pixel: one 64-bit sum per channel and a 32-bit ray counter.
  return pixels * (s.channel_map.count * static_cast<int64_t>(sizeof(int64_t)) +
                   static_cast<int64_t>(sizeof(uint32_t)));
}

std::vector<PixelRegion> DeviceParts(const RenderJob& job, DeviceSplit split, int count) {
  const PixelRegion& r = job.region;
  if (split == DeviceSplit::kSamples) {
    const int n = std::clamp(count, 1, std::max(job.end_sample - job.first_sample, 1));
    return std::vector<PixelRegion>(n, r);
  }
  const int64_t rows = r.y1 - r.y0;
  const int n = static_cast<int>(std::clamp<int64_t>(count, 1, std::max<int64_t>(rows, 1)));
  std::vector<PixelRegion> parts;
  for (int i = 0; i < n; ++i) {
    parts.push_back({r.x0, r.y0 + static_cast<int>(rows * i / n), r.x1,
                     r.y0 + static_cast<int>(rows * (i + 1) / n)});
  }
  return parts;
}

namespace {

struct DeviceRun {
  int device = 0;
  PixelRegion part;
  RenderJob job;
  RenderRequest request;
  RenderedImage image;
  Status status;
  double weight = 0;               // its share of the whole render, for the combined progress
  std::atomic<double> fraction{};  // of its own part, written by its backend
  int passes_met = 0;              // barriers it arrived at (its thread only)
};

// image->sums = base plus every device's sums at its place in the region (bands are whole rows,
// so each is one contiguous run).
void Merge(const std::vector<int64_t>& base, const std::vector<std::unique_ptr<DeviceRun>>& runs,
           RenderedImage* image) {
  image->sums = base;
  for (const auto& run : runs) {
    const size_t offset =
        static_cast<size_t>(run->part.y0 - image->y0) * image->width * image->channels;
    const std::vector<int64_t>& sums = run->image.sums;
    for (size_t i = 0; i < sums.size(); ++i) image->sums[offset + i] += sums[i];
  }
}

std::string DeviceName(Backend backend, const DeviceRun& run, size_t index) {
  return backend == Backend::kCuda ? "GPU " + std::to_string(run.device)
                                   : "CPU share " + std::to_string(index);
}

}  // namespace

Status RenderOnDevices(const FlatScene& scene, const RenderJob& job, const RenderRequest& request,
                       Backend backend, const std::vector<int>& devices, RenderedImage* image) {
  const auto render = [&scene, backend](const RenderJob& j, const RenderRequest& r,
                                        RenderedImage* out) {
    return backend == Backend::kCuda ? RenderCuda(scene, j, r, out) : RenderCpu(scene, j, r, out);
  };
  const std::vector<PixelRegion> parts =
      DeviceParts(job, request.split, static_cast<int>(devices.size()));
  if (parts.size() <= 1) {
    RenderRequest one = request;
    one.gpu_index = devices.front();
    return render(job, one, image);
  }

  const int n = static_cast<int>(parts.size());
  const int total_threads =
      request.cpu_threads > 0 ? request.cpu_threads
                              : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const int region_rows = job.region.y1 - job.region.y0;
  std::atomic<bool> abort{false};
  std::vector<std::unique_ptr<DeviceRun>> runs;
  for (int i = 0; i < n; ++i) {
    auto run = std::make_unique<DeviceRun>();
    run->device = devices[i];
    run->part = parts[i];
    run->job = job;
    run->job.region = parts[i];
    if (request.split == DeviceSplit::kSamples) {
      run->job.share_index = i;
      run->job.share_count = n;
      run->weight = 1.0 / n;
    } else {
      run->weight = static_cast<double>(parts[i].y1 - parts[i].y0) / region_rows;
    }
    RenderRequest& r = run->request;
    r.frame = request.frame;
    r.backend = backend;
    r.gpu_index = devices[i];
    r.cpu_threads = std::max(1, total_threads / n + (i < total_threads % n ? 1 : 0));
    // One device failing stops the others; so does the render's own cancel.
    r.cancelled = [&abort, &request] {
      return abort.load(std::memory_order_relaxed) || IsCancelled(request);
    };
    DeviceRun* self = run.get();
    r.on_progress = [self](double f) { self->fraction.store(f, std::memory_order_relaxed); };
    RenderedImage& part = run->image;
    part.frame = image->frame;
    part.frame_width = image->frame_width;
    part.frame_height = image->frame_height;
    part.x0 = parts[i].x0;
    part.y0 = parts[i].y0;
    part.width = parts[i].x1 - parts[i].x0;
    part.height = parts[i].y1 - parts[i].y0;
    part.channels = image->channels;
    part.sample_begin = job.first_sample;
    part.sums.assign(static_cast<size_t>(part.width) * part.height * part.channels, 0);
    runs.push_back(std::move(run));
  }

  // Zeros, or the resumed accumulation every device's samples are added to.
  const std::vector<int64_t> base = image->sums;
  const int base_samples = image->sample_count;
  const int passes = (job.end_sample - job.first_sample + job.pass_samples - 1) / job.pass_samples;
  int pass_first = job.first_sample;  // the barrier's completion only
  Status pass_error;                  // the barrier's completion only; read after the joins
  const auto pass_complete = [&]() noexcept {
    const int pass_end = std::min(pass_first + job.pass_samples, job.end_sample);
    if (!abort.load()) {
      try {
        Merge(base, runs, image);
        FinishPass(job, request, pass_end - pass_first, image);
      } catch (const std::exception& e) {
        pass_error = Status::Internal(std::string("after a pass: ") + e.what());
        abort.store(true);
      }
    }
    pass_first = pass_end;
  };
  std::barrier sync(n, pass_complete);
  if (request.on_pass) {
    for (auto& run : runs) {
      DeviceRun* self = run.get();
      run->job.pass_hook = [self, &sync] {
        ++self->passes_met;
        sync.arrive_and_wait();
      };
    }
  }

  std::mutex mu;
  std::condition_variable cv;
  int running = n;  // guarded by mu
  std::vector<std::thread> threads;
  threads.reserve(n);
  for (auto& owned : runs) {
    threads.emplace_back([&, run = owned.get()] {
      Status s;
      try {
        s = render(run->job, run->request, &run->image);
      } catch (const std::exception& e) {
        s = Status::Internal(std::string("render failed: ") + e.what());
      }
      if (!s.ok()) {
        abort.store(true);
        // Leave the passes it will not reach, so the others do not wait for it.
        if (request.on_pass && run->passes_met < passes) sync.arrive_and_drop();
      }
      run->status = std::move(s);
      std::lock_guard<std::mutex> lock(mu);
      if (--running == 0) cv.notify_all();
    });
  }
  // Progress is the task's, not a device's: the work-weighted mean of the devices' fractions,
  // from this thread only, and 1.0 once when all are merged.
  ProgressThrottle progress(request.on_progress);
  {
    std::unique_lock<std::mutex> lock(mu);
    while (running > 0) {
      cv.wait_for(lock, std::chrono::milliseconds(100));
      if (running == 0) break;
      double done = 0;
      for (const auto& run : runs) done += run->weight * run->fraction.load();
      lock.unlock();
      progress.Report(std::min(done, 0.999));
      lock.lock();
    }
  }
  for (std::thread& t : threads) t.join();

  TSR_RETURN_IF_ERROR(pass_error);
  bool cancelled = false;
  for (size_t i = 0; i < runs.size(); ++i) {
    const Status& s = runs[i]->status;
    if (s.code() == StatusCode::kCancelled) {
      cancelled = true;
    } else if (!s.ok()) {
      return s.WithContext(DeviceName(backend, *runs[i], i));
    }
  }
  if (cancelled) {
    return Status::Cancelled("render of frame " + std::to_string(job.frame) + " cancelled");
  }
  Merge(base, runs, image);
  image->sample_count = base_samples + (job.end_sample - job.first_sample);
  std::string names;
  for (const auto& run : runs) {
    image->rays_traced += run->image.rays_traced;
    names += (names.empty() ? "" : ",") + std::to_string(run->device);
  }
  image->backend = backend == Backend::kCuda ? "cuda:" + names : "cpu";
  progress.Report(1.0);
  return Status::Ok();
}

}  // namespace tessera::pathtracer
