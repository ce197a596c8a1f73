// Path tracer throughput: rays per second on the CPU backend (and on CUDA when a device is
// present). The scene is a closed box of rough metal and diffuse spheres with a high bounce
// limit, so almost every ray after the first is incoherent. Goal (DESIGN.md): >= 3 M incoherent
// rays/s per core on the CPU.

#include <benchmark/benchmark.h>

#include <string>
#include <thread>

#include "plugins/pathtracer/renderer.h"

namespace tessera::pathtracer {
namespace {

constexpr const char* kIncoherentScene = R"(
width: 160
height: 90
samples: 8
max_depth: 32
background: {top: [1.0, 1.0, 1.0], bottom: [0.3, 0.3, 0.3]}
camera:
  keyframes: [{frame: 1, position: [0, 1.5, 3.5], look_at: [0, 1, 0], fov: 60}]
materials:
  wall: {type: diffuse, color: [0.85, 0.85, 0.8]}
  red: {type: diffuse, color: [0.9, 0.3, 0.2]}
  rough: {type: metal, color: [0.9, 0.9, 0.9], roughness: 0.6}
  glass: {type: glass, ior: 1.5}
  light: {type: emissive, color: [1, 1, 1], strength: 3}
objects:
  - {type: quad, corner: [-3, 0, -3], u: [6, 0, 0], v: [0, 0, 7], material: wall}
  - {type: quad, corner: [-3, 4, -3], u: [6, 0, 0], v: [0, 0, 7], material: wall}
  - {type: quad, corner: [-3, 0, -3], u: [0, 4, 0], v: [0, 0, 7], material: red}
  - {type: quad, corner: [3, 0, -3], u: [0, 4, 0], v: [0, 0, 7], material: wall}
  - {type: quad, corner: [-3, 0, -3], u: [6, 0, 0], v: [0, 4, 0], material: wall}
  - {type: quad, corner: [-1, 3.99, -1], u: [2, 0, 0], v: [0, 0, 2], material: light}
  - {type: sphere, center: [-1.2, 0.8, -0.5], radius: 0.8, material: rough}
  - {type: sphere, center: [1.1, 0.7, 0], radius: 0.7, material: glass}
  - {type: sphere, center: [0, 0.4, 1], radius: 0.4, material: wall}
  - {type: sphere, center: [0.3, 2.2, -1.5], radius: 0.6, material: red}
)";

const spec::SceneSpec& Scene() {
  static const spec::SceneSpec scene = [] {
    StatusOr<spec::SceneSpec> s = spec::ParseSceneYaml(kIncoherentScene);
    if (!s.ok()) {
      std::fprintf(stderr, "bad bench scene: %s\n", s.status().ToString().c_str());
      std::abort();
    }
    return *s;
  }();
  return scene;
}

void RunRender(benchmark::State& state, Backend backend, int threads) {
  RenderRequest request;
  request.backend = backend;
  request.cpu_threads = threads;
  uint64_t rays = 0;
  for (auto _ : state) {
    StatusOr<RenderedImage> image = RenderFrame(Scene(), request);
    if (!image.ok()) {
      state.SkipWithError(image.status().ToString().c_str());
      return;
    }
    rays += image->rays_traced;
    benchmark::DoNotOptimize(image->pixels.data());
  }
  const int cores = threads > 0 ? threads : static_cast<int>(std::thread::hardware_concurrency());
  state.counters["rays_per_s"] =
      benchmark::Counter(static_cast<double>(rays), benchmark::Counter::kIsRate);
  if (backend == Backend::kCpu) {
    state.counters["rays_per_s_per_core"] =
        benchmark::Counter(static_cast<double>(rays) / cores, benchmark::Counter::kIsRate);
  }
  state.counters["rays_per_frame"] =
      static_cast<double>(rays) / static_cast<double>(state.iterations());
}

void BM_CpuOneThread(benchmark::State& state) { RunRender(state, Backend::kCpu, 1); }
void BM_CpuAllThreads(benchmark::State& state) { RunRender(state, Backend::kCpu, 0); }
void BM_Cuda(benchmark::State& state) {
  if (!CudaAvailable()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  RunRender(state, Backend::kCuda, 0);
}

// Wall-clock time: the renderer's work happens on its own threads.
BENCHMARK(BM_CpuOneThread)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_CpuAllThreads)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Cuda)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace tessera::pathtracer

BENCHMARK_MAIN();
