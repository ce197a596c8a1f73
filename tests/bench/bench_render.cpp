// tessera-bench render: path tracer throughput in rays/s on a closed box of rough metal, glass
// and diffuse spheres with a high bounce limit, so almost every ray after the first is
// incoherent. The 1-thread run is the baseline the all-threads run is compared to.
// Goal (DESIGN.md): >= 3 M incoherent rays/s per core on the CPU; >= 1 G rays/s on an H200.

#include <chrono>
#include <cstdio>
#include <thread>

#include "plugins/pathtracer/renderer.h"
#include "tests/bench/bench.h"

namespace tessera::bench {
namespace {

using pathtracer::Backend;

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

struct RenderRate {
  double rays_per_s = 0;
  double samples_per_s = 0;
};

// Renders frames until `seconds` have passed (at least one); fails on a render error.
StatusOr<RenderRate> Measure(const spec::SceneSpec& scene, Backend backend, int threads,
                             double seconds) {
  pathtracer::RenderRequest request;
  request.backend = backend;
  request.cpu_threads = threads;
  uint64_t rays = 0, samples = 0;
  const auto start = std::chrono::steady_clock::now();
  double elapsed = 0;
  do {
    TSR_ASSIGN_OR_RETURN(pathtracer::RenderedImage image, pathtracer::RenderFrame(scene, request));
    rays += image.rays_traced;
    samples += static_cast<uint64_t>(scene.width) * scene.height * scene.samples;
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  } while (elapsed < seconds);
  return RenderRate{rays / elapsed, samples / elapsed};
}

}  // namespace

void AddRenderCommand(CLI::App& app) {
  struct Options {
    std::string backend = "cpu";
    int threads = 0;
    double seconds = 3;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("render", "path tracer rays/s (box scene, incoherent rays)");
  cmd->add_option("--backend", opts->backend, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->add_option("--threads", opts->threads, "CPU threads for the main run (0: all)");
  cmd->add_option("--seconds", opts->seconds, "minimum time per measurement");
  cmd->callback([opts] {
    StatusOr<spec::SceneSpec> scene = spec::ParseSceneYaml(kIncoherentScene);
    if (!scene.ok()) throw CLI::RuntimeError("bench scene: " + scene.status().ToString(), 1);
    const int threads =
        opts->threads > 0 ? opts->threads : static_cast<int>(std::thread::hardware_concurrency());
    Figures figures = {{"backend", opts->backend}, {"scene", "box"}};
    auto baseline = Measure(*scene, Backend::kCpu, 1, opts->seconds);
    if (!baseline.ok()) throw CLI::RuntimeError(baseline.status().ToString(), 1);
    std::printf("cpu, 1 thread: %.2f M rays/s\n", baseline->rays_per_s / 1e6);
    if (opts->backend == "cuda") {
      auto gpu = Measure(*scene, Backend::kCuda, 0, opts->seconds);
      if (!gpu.ok()) throw CLI::RuntimeError(gpu.status().ToString(), 1);
      figures.insert(figures.end(),
                     {{"rays_per_s", Fixed(gpu->rays_per_s)},
                      {"samples_per_s", Fixed(gpu->samples_per_s)},
                      {"cpu_1thread_rays_per_s", Fixed(baseline->rays_per_s)},
                      {"ratio_to_1_cpu_thread", Fixed(gpu->rays_per_s / baseline->rays_per_s, 1)}});
    } else {
      auto all = Measure(*scene, Backend::kCpu, threads, opts->seconds);
      if (!all.ok()) throw CLI::RuntimeError(all.status().ToString(), 1);
      std::printf("cpu, %d threads: %.2f M rays/s\n", threads, all->rays_per_s / 1e6);
      figures.insert(figures.end(),
                     {{"threads", std::to_string(threads)},
                      {"rays_per_s", Fixed(all->rays_per_s)},
                      {"rays_per_s_per_core", Fixed(all->rays_per_s / threads)},
                      {"samples_per_s", Fixed(all->samples_per_s)},
                      {"rays_per_s_1thread", Fixed(baseline->rays_per_s)},
                      {"scaling", Fixed(all->rays_per_s / baseline->rays_per_s, 2)}});
    }
    PrintFigures(figures);
  });
}

}  // namespace tessera::bench
