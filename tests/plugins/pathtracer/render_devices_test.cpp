// One render over several devices (render_devices.cpp) and the memory check before a render.
// Without a GPU here, the devices are shares of the CPU threads: the split, the threads and the
// merge are the same code the CUDA backend goes through.

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "plugins/pathtracer/plugin_entry.h"
#include "plugins/pathtracer/renderer.h"
#include "shared/base/yaml_util.h"
#include "tests/plugins/pathtracer/test_scenes.h"

namespace tessera::pathtracer {
namespace {

using testing::BitIdentical;
using testing::ExampleScene;

spec::SceneSpec SceneWithAovs() {
  spec::SceneSpec scene = ExampleScene(24, 17, 6);
  scene.aovs = {spec::Aov::kAlbedo, spec::Aov::kNormal, spec::Aov::kDepth};
  return scene;
}

RenderRequest CpuRequest(int devices, DeviceSplit split) {
  RenderRequest request;
  request.frame = 2;
  request.backend = Backend::kCpu;
  request.cpu_threads = 3;
  for (int i = 0; i < devices; ++i) request.devices.push_back(i);
  request.split = split;
  return request;
}

RenderedImage MustRender(const spec::SceneSpec& scene, const RenderRequest& request) {
  StatusOr<RenderedImage> image = RenderFrame(scene, request);
  EXPECT_TRUE(image.ok()) << image.status().ToString();
  return image.ok() ? std::move(image).value() : RenderedImage{};
}

TEST(RenderDevicesTest, OneTwoAndThreeDevicesGiveTheSameBytesInBothSplits) {
  const spec::SceneSpec scene = SceneWithAovs();
  const RenderedImage one = MustRender(scene, CpuRequest(1, DeviceSplit::kRows));
  ASSERT_EQ(one.channels, 11);
  for (DeviceSplit split : {DeviceSplit::kRows, DeviceSplit::kSamples}) {
    for (int devices : {1, 2, 3}) {
      SCOPED_TRACE(std::to_string(devices) + " devices, split " +
                   (split == DeviceSplit::kRows ? "rows" : "samples"));
      const RenderedImage image = MustRender(scene, CpuRequest(devices, split));
      EXPECT_TRUE(BitIdentical(image, one));
      EXPECT_EQ(image.sample_count, one.sample_count);
      EXPECT_EQ(image.rays_traced, one.rays_traced);
      EXPECT_EQ(image.backend, "cpu");
    }
  }
}

// A tile, a sample range, a resumed accumulation and passes with checkpoints: each pass's merged
// image (what on_pass gets) equals the one device's pass, byte for byte.
TEST(RenderDevicesTest, PassesOfARegionAndAResumeMergeExactly) {
  const spec::SceneSpec scene = SceneWithAovs();
  const auto render = [&](int devices, DeviceSplit split, std::vector<RenderedImage>* passes) {
    RenderRequest first = CpuRequest(1, DeviceSplit::kRows);
    first.region = PixelRegion{3, 2, 20, 15};
    first.sample_begin = 1;
    first.sample_end = 3;
    const RenderedImage resume = MustRender(scene, first);
    RenderRequest request = CpuRequest(devices, split);
    request.region = first.region;
    request.sample_begin = 1;
    request.sample_end = 8;
    request.resume = &resume;
    request.pass_samples = 2;  // 3 passes: 2, 2 and 1 samples
    request.on_pass = [passes](const RenderedImage& so_far) { passes->push_back(so_far); };
    return MustRender(scene, request);
  };
  std::vector<RenderedImage> want_passes;
  const RenderedImage want = render(1, DeviceSplit::kRows, &want_passes);
  ASSERT_EQ(want_passes.size(), 3u);
  EXPECT_EQ(want.sample_count, 7);
  for (DeviceSplit split : {DeviceSplit::kRows, DeviceSplit::kSamples}) {
    for (int devices : {2, 3}) {
      SCOPED_TRACE(std::to_string(devices) + " devices, split " +
                   (split == DeviceSplit::kRows ? "rows" : "samples"));
      std::vector<RenderedImage> passes;
      const RenderedImage image = render(devices, split, &passes);
      EXPECT_TRUE(BitIdentical(image, want));
      EXPECT_EQ(image.sample_count, want.sample_count);
      ASSERT_EQ(passes.size(), want_passes.size());
      for (size_t i = 0; i < passes.size(); ++i) {
        EXPECT_TRUE(BitIdentical(passes[i], want_passes[i])) << "pass " << i;
        EXPECT_EQ(passes[i].sample_count, want_passes[i].sample_count) << "pass " << i;
      }
    }
  }
}

TEST(RenderDevicesTest, ProgressIsTheRendersOnceNotEachDevices) {
  const spec::SceneSpec scene = ExampleScene(32, 24, 8);
  for (DeviceSplit split : {DeviceSplit::kRows, DeviceSplit::kSamples}) {
    RenderRequest request = CpuRequest(3, split);
    request.pass_samples = 2;
    std::mutex mu;
    std::vector<double> seen;
    std::set<std::thread::id> threads;
    request.on_progress = [&](double f) {
      std::lock_guard<std::mutex> lock(mu);
      seen.push_back(f);
      threads.insert(std::this_thread::get_id());
    };
    MustRender(scene, request);
    ASSERT_FALSE(seen.empty());
    EXPECT_EQ(threads.size(), 1u) << "one reporter for the render";
    EXPECT_EQ(seen.back(), 1.0);
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 1.0), 1) << "1.0 once, not once per device";
    EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end()));
  }
}

// A cancel seen by the devices between passes stops all of them (none waits for the others at
// the pass barrier).
TEST(RenderDevicesTest, CancelStopsEveryDevice) {
  const spec::SceneSpec scene = ExampleScene(32, 24, 8);
  for (DeviceSplit split : {DeviceSplit::kRows, DeviceSplit::kSamples}) {
    RenderRequest request = CpuRequest(3, split);
    request.pass_samples = 1;
    std::atomic<bool> cancel{false};
    int passes = 0;
    request.cancel = &cancel;
    request.on_pass = [&](const RenderedImage&) {
      ++passes;
      cancel.store(true);
    };
    StatusOr<RenderedImage> image = RenderFrame(scene, request);
    EXPECT_EQ(image.status().code(), StatusCode::kCancelled) << image.status().ToString();
    EXPECT_EQ(passes, 1);
  }
}

TEST(RenderDevicesTest, BudgetTooSmallFailsBeforeRenderingNamingNeedAndBudget) {
  // 1024 x 1024 pixels of four 64-bit sums and a ray counter: 36 MiB of frame buffers.
  const spec::SceneSpec scene = ExampleScene(1024, 1024, 64);
  RenderRequest request = CpuRequest(1, DeviceSplit::kRows);
  StatusOr<DeviceMemoryEstimate> need = EstimateDeviceMemory(scene, request);
  ASSERT_TRUE(need.ok()) << need.status().ToString();
  EXPECT_EQ(need->buffer_bytes, 1024 * 1024 * (4 * 8 + 4));
  EXPECT_GT(need->scene_bytes, 0);
  EXPECT_EQ(need->total(), need->scene_bytes + need->buffer_bytes);

  request.gpu_memory_mb = 20;
  std::atomic<int> progress_calls{0};
  request.on_progress = [&](double) { ++progress_calls; };
  StatusOr<RenderedImage> image = RenderFrame(scene, request);
  ASSERT_EQ(image.status().code(), StatusCode::kResourceExhausted) << image.status().ToString();
  const int64_t need_mib = (need->total() + (1 << 20) - 1) >> 20;
  EXPECT_NE(image.status().message().find(
                "scene needs " + std::to_string(need_mib) +
                " MiB of GPU memory, the task's budget is 20 MiB (resources.gpu_memory_mb)"),
            std::string::npos)
      << image.status().message();
  EXPECT_EQ(progress_calls.load(), 0) << "failed before rendering anything";
}

// The check compares the per-device estimate with the budget: a budget of exactly the need
// renders, one MiB less fails; two devices splitting rows hold half the frame buffers each.
TEST(RenderDevicesTest, EstimateAgainstBudgetPerDevice) {
  const spec::SceneSpec scene = ExampleScene(256, 256, 1);
  RenderRequest request = CpuRequest(1, DeviceSplit::kRows);
  StatusOr<DeviceMemoryEstimate> one = EstimateDeviceMemory(scene, request);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  const int64_t need_mib = (one->total() + (1 << 20) - 1) >> 20;
  ASSERT_GE(need_mib, 3);

  request.gpu_memory_mb = need_mib;
  EXPECT_TRUE(RenderFrame(scene, request).ok());
  request.gpu_memory_mb = need_mib - 1;
  EXPECT_EQ(RenderFrame(scene, request).status().code(), StatusCode::kResourceExhausted);

  RenderRequest two = CpuRequest(2, DeviceSplit::kRows);
  StatusOr<DeviceMemoryEstimate> half = EstimateDeviceMemory(scene, two);
  ASSERT_TRUE(half.ok());
  EXPECT_EQ(half->scene_bytes, one->scene_bytes);
  EXPECT_EQ(half->buffer_bytes * 2, one->buffer_bytes);
  two.gpu_memory_mb = need_mib - 1;
  EXPECT_TRUE(RenderFrame(scene, two).ok()) << "each device holds half the frame buffers";
  // Splitting samples, each device holds the whole region's buffers.
  RenderRequest samples = CpuRequest(2, DeviceSplit::kSamples);
  StatusOr<DeviceMemoryEstimate> whole = EstimateDeviceMemory(scene, samples);
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(whole->total(), one->total());
}

// Through the plugin table, as the worker calls it.
struct PluginRun {
  int code = -1;
  std::string backend;
  std::string error;
};

PluginRun RenderThroughPlugin(uint32_t minor, const char* device, const std::vector<int32_t>& gpus,
                              int32_t gpu_index, int64_t gpu_memory_mb, int size) {
  // The bundled example at another size and one sample.
  std::string scene = testing::ReadFile(std::string(TSR_SOURCE_DIR) +
                                        "/deploy/examples/bouncing-spheres/scene.yaml");
  const std::string from = "width: 480\nheight: 270\nsamples: 40\n";
  const size_t at = scene.find(from);
  EXPECT_NE(at, std::string::npos);
  if (at != std::string::npos) {
    scene.replace(
        at, from.size(),
        "width: " + std::to_string(size) + "\nheight: " + std::to_string(size) + "\nsamples: 1\n");
  }
  TsrRenderRequest r{};
  r.abi_version = TSR_RENDERER_ABI_VERSION | minor << 16;
  r.frame = 1;
  r.sample_end = -1;
  r.threads = 2;
  r.gpu_index = gpu_index;
  r.device = device;
  r.scene = scene.data();
  r.scene_size = scene.size();
  r.scene_dir = "";
  r.settings_json = "{}";
  r.progress = [](void*, double) {};
  r.cancelled = [](void*) { return 0; };
  r.log = [](void*, const char*) {};
  r.handback_requested = [](void*) { return 0; };
  r.checkpoint = [](void*, const void*, uint64_t, int32_t) {};
  if (minor >= 2) {
    r.gpus = gpus.empty() ? nullptr : gpus.data();
    r.gpu_count = static_cast<int32_t>(gpus.size());
    r.gpu_memory_mb = gpu_memory_mb;
  }
  const TsrRendererPlugin* plugin = tsr_pathtracer_plugin();
  TsrImage out{};
  char error[1024] = {0};
  PluginRun run;
  run.code = plugin->render(&r, &out, error, sizeof(error));
  run.error = error;
  if (run.code == TSR_RENDER_OK) {
    run.backend = out.backend != nullptr ? out.backend : "";
    plugin->free_image(&out);
  }
  return run;
}

// A worker renders every frame of a job's tasks with the same scene: the plugin parses it once,
// and another scene once too.
TEST(RenderDevicesTest, PluginParsesEachSceneOnce) {
  const int64_t before = yaml::DocumentsParsedOnThisThread();
  for (int i = 0; i < 3; ++i) {
    PluginRun run = RenderThroughPlugin(2, "cpu", {}, -1, 0, 11);
    EXPECT_EQ(run.code, TSR_RENDER_OK) << run.error;
  }
  EXPECT_EQ(yaml::DocumentsParsedOnThisThread() - before, 1);
  PluginRun other = RenderThroughPlugin(2, "cpu", {}, -1, 0, 13);
  EXPECT_EQ(other.code, TSR_RENDER_OK) << other.error;
  EXPECT_EQ(yaml::DocumentsParsedOnThisThread() - before, 2);
}

// A task without a GPU never asks for one, even on a worker whose backend is CUDA: here (no
// GPU) `cuda` with a GPU pinned fails, without one it renders on the CPU.
TEST(RenderDevicesTest, PluginTaskWithoutGpuRendersOnTheCpu) {
  PluginRun none = RenderThroughPlugin(2, "cuda", {}, -1, 0, 16);
  EXPECT_EQ(none.code, TSR_RENDER_OK) << none.error;
  EXPECT_EQ(none.backend, "cpu");
  PluginRun old_host = RenderThroughPlugin(1, "cuda", {}, -1, 0, 16);
  EXPECT_EQ(old_host.code, TSR_RENDER_OK) << old_host.error;
  EXPECT_EQ(old_host.backend, "cpu");
  if (!CudaAvailable()) {
    PluginRun pinned = RenderThroughPlugin(2, "cuda", {0}, 0, 0, 16);
    EXPECT_EQ(pinned.code, TSR_RENDER_FAILED);
  }
}

TEST(RenderDevicesTest, PluginGetsEveryGpuAndTheBudget) {
  // Two GPUs on the CPU backend: two CPU shares; the result is "cpu" like one.
  PluginRun two = RenderThroughPlugin(2, "cpu", {0, 1}, 0, 0, 16);
  EXPECT_EQ(two.code, TSR_RENDER_OK) << two.error;
  EXPECT_EQ(two.backend, "cpu");
  // The budget travels: 1 MiB is too little for 1024 x 1024 frame buffers.
  PluginRun small = RenderThroughPlugin(2, "cpu", {0, 1}, 0, 1, 1024);
  EXPECT_EQ(small.code, TSR_RENDER_FAILED);
  EXPECT_NE(small.error.find("the task's budget is 1 MiB (resources.gpu_memory_mb)"),
            std::string::npos)
      << small.error;
  // A 2.1 host has no budget field: the plugin does not read past what the host sent.
  PluginRun old_host = RenderThroughPlugin(1, "cpu", {}, 0, 0, 16);
  EXPECT_EQ(old_host.code, TSR_RENDER_OK) << old_host.error;
}

}  // namespace
}  // namespace tessera::pathtracer
