// tessera-bench render: path tracer throughput in rays/s (camera, bounce and shadow rays).
// Scenes (--scene): `box`, a closed box of rough metal, glass and diffuse spheres with a high
// bounce limit, so almost every ray after the first is incoherent; `cornell`, the Cornell box
// lit by its small ceiling lamp through next event estimation; `mesh`, a generated torus of
// >= 100k triangles (BVH traversal) in a lit box; `example`, the bundled bouncing-spheres frame
// at its own resolution (reports seconds per frame). The 1-thread run is the baseline the
// all-threads run is compared to. rays_per_cpu_s_1thread divides the 1-thread run's rays by the
// process CPU time it used (the figure a shared, loaded machine still measures fairly); each frame
// includes flattening the scene and building its BVH, which bvh_build_ms and flatten_ms time alone.
// Goal (DESIGN.md): >= 3 M incoherent rays/s per core on the CPU; >= 1 G rays/s on an H200.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

#include "plugins/pathtracer/renderer.h"
#include "plugins/pathtracer/scene_flatten.h"
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

constexpr const char* kCornellScene = R"(
width: 128
height: 128
samples: 8
max_depth: 8
background: {color: [0, 0, 0]}
camera:
  keyframes: [{frame: 1, position: [0, 1, 3.4], look_at: [0, 1, 0], fov: 40}]
materials:
  white: {type: diffuse, color: [0.73, 0.73, 0.73]}
  red: {type: diffuse, color: [0.65, 0.05, 0.05]}
  green: {type: diffuse, color: [0.12, 0.45, 0.15]}
  metal: {type: principled, base_color: [0.9, 0.8, 0.6], roughness: 0.2, metallic: 1}
  glass: {type: glass, ior: 1.5}
  light: {type: emissive, color: [1, 0.85, 0.6], strength: 15}
objects:
  - {type: quad, corner: [-1, 0, -1], u: [2, 0, 0], v: [0, 0, 2], material: white}
  - {type: quad, corner: [-1, 2, -1], u: [2, 0, 0], v: [0, 0, 2], material: white}
  - {type: quad, corner: [-1, 0, -1], u: [2, 0, 0], v: [0, 2, 0], material: white}
  - {type: quad, corner: [-1, 0, -1], u: [0, 2, 0], v: [0, 0, 2], material: red}
  - {type: quad, corner: [1, 0, -1], u: [0, 2, 0], v: [0, 0, 2], material: green}
  - {type: quad, corner: [-0.25, 1.99, -0.25], u: [0.5, 0, 0], v: [0, 0, 0.5], material: light}
  - {type: sphere, center: [-0.4, 0.35, -0.3], radius: 0.35, material: metal}
  - {type: sphere, center: [0.45, 0.3, 0.3], radius: 0.3, material: glass}
)";

// The mesh scene's room; the torus is added in code.
constexpr const char* kMeshRoom = R"(
width: 256
height: 192
samples: 8
max_depth: 8
background: {top: [0.6, 0.7, 1.0], bottom: [0.2, 0.2, 0.2]}
camera:
  keyframes: [{frame: 1, position: [0, 2.2, 4.5], look_at: [0, 0.6, 0], fov: 45}]
materials:
  floor: {type: diffuse, color: [0.6, 0.6, 0.55]}
  clay: {type: principled, base_color: [0.8, 0.35, 0.2], roughness: 0.5, metallic: 0}
  lamp: {type: emissive, color: [1, 1, 1], strength: 8}
objects:
  - {type: quad, corner: [-5, 0, -5], u: [0, 0, 10], v: [10, 0, 0], material: floor}
  - {type: quad, corner: [-1, 3.5, -1], u: [2, 0, 0], v: [0, 0, 2], material: lamp}
)";

// A torus of rings x sides quads (2 triangles each), with normals and UVs.
std::shared_ptr<spec::MeshData> Torus(int rings, int sides, float major, float minor) {
  auto mesh = std::make_shared<spec::MeshData>();
  for (int i = 0; i < rings; ++i) {
    for (int j = 0; j < sides; ++j) {
      const double u = 2 * M_PI * i / rings, v = 2 * M_PI * j / sides;
      const double nx = std::cos(v) * std::cos(u), ny = std::sin(v), nz = std::cos(v) * std::sin(u);
      mesh->positions.insert(
          mesh->positions.end(),
          {static_cast<float>(major * std::cos(u) + minor * nx), static_cast<float>(minor * ny),
           static_cast<float>(major * std::sin(u) + minor * nz)});
      mesh->normals.insert(mesh->normals.end(), {static_cast<float>(nx), static_cast<float>(ny),
                                                 static_cast<float>(nz)});
      mesh->uvs.insert(mesh->uvs.end(),
                       {static_cast<float>(i) / rings, static_cast<float>(j) / sides});
    }
  }
  auto at = [&](int i, int j) { return (i % rings) * sides + (j % sides); };
  for (int i = 0; i < rings; ++i) {
    for (int j = 0; j < sides; ++j) {
      for (int c :
           {at(i, j), at(i + 1, j), at(i + 1, j + 1), at(i, j), at(i + 1, j + 1), at(i, j + 1)}) {
        mesh->indices.push_back(c);
      }
    }
  }
  mesh->normal_indices = mesh->indices;
  mesh->uv_indices = mesh->indices;
  return mesh;
}

// The repository root, from this file's path (tests/bench/bench_render.cpp).
std::string SourceDir() {
  std::string path = __FILE__;
  for (int i = 0; i < 3; ++i)
    path = path.substr(0, path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/'));
  return path.empty() ? "." : path;
}

StatusOr<spec::SceneSpec> BenchScene(const std::string& name) {
  if (name == "box") return spec::ParseSceneYaml(kIncoherentScene);
  if (name == "cornell") return spec::ParseSceneYaml(kCornellScene);
  if (name == "example") {
    const std::string path = SourceDir() + "/deploy/examples/bouncing-spheres/scene.yaml";
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    if (!in) return Status::NotFound(path + ": cannot read");
    return spec::ParseSceneYaml(text.str(), SourceDir() + "/deploy/examples/bouncing-spheres");
  }
  TSR_ASSIGN_OR_RETURN(spec::SceneSpec scene, spec::ParseSceneYaml(kMeshRoom));
  spec::MeshSpec torus;
  torus.data = Torus(320, 160, 1.0f, 0.4f);  // 102,400 triangles
  torus.material = "clay";
  torus.transform.translate = {0, 0.75, 0};
  torus.transform.rotate_deg = {25, 0, 0};
  scene.meshes.push_back(torus);
  TSR_RETURN_IF_ERROR(spec::ValidateScene(&scene));
  return scene;
}

struct RenderRate {
  double rays_per_s = 0;
  double samples_per_s = 0;
  double seconds_per_frame = 0;
  double rays_per_cpu_s = 0;  // rays over the process CPU time of the run
};

double ProcessCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

struct BuildTimes {
  double bvh_build_ms = 0;
  double flatten_ms = 0;
};

// The fastest of a few flattenings of frame 1 (the machine is shared: the minimum is the cost).
StatusOr<BuildTimes> MeasureBuild(const spec::SceneSpec& scene) {
  BuildTimes best{1e30, 1e30};
  for (int i = 0; i < 5; ++i) {
    const auto start = std::chrono::steady_clock::now();
    TSR_ASSIGN_OR_RETURN(pathtracer::FlatScene flat, pathtracer::FlattenScene(scene, 1));
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    best.flatten_ms = std::min(best.flatten_ms, ms);
    best.bvh_build_ms = std::min(best.bvh_build_ms, flat.bvh_build_ms);
  }
  return best;
}

// How the worker polls for cancellation through the C plugin table (worker/native_plugin.cpp):
// a C callback reading an atomic, wrapped in the path tracer's std::function.
std::atomic<bool> abi_cancel{false};
int AbiCancelled(void* host) { return static_cast<std::atomic<bool>*>(host)->load() ? 1 : 0; }

// Renders frames until `seconds` have passed (at least one); fails on a render error. With
// `through_abi` the render polls cancellation the way it does behind the plugin table.
StatusOr<RenderRate> Measure(const spec::SceneSpec& scene, Backend backend, int threads,
                             double seconds, bool through_abi = false) {
  pathtracer::RenderRequest request;
  request.backend = backend;
  request.cpu_threads = threads;
  int (*poll)(void*) = &AbiCancelled;
  if (through_abi) request.cancelled = [poll] { return poll(&abi_cancel) != 0; };
  uint64_t rays = 0, samples = 0;
  int frames = 0;
  const auto start = std::chrono::steady_clock::now();
  const double cpu_start = ProcessCpuSeconds();
  double elapsed = 0;
  do {
    TSR_ASSIGN_OR_RETURN(accumulation::RenderedImage image,
                         pathtracer::RenderFrame(scene, request));
    rays += image.rays_traced;
    samples += static_cast<uint64_t>(scene.width) * scene.height * scene.samples;
    ++frames;
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  } while (elapsed < seconds);
  const double cpu = ProcessCpuSeconds() - cpu_start;
  return RenderRate{rays / elapsed, samples / elapsed, elapsed / frames, cpu > 0 ? rays / cpu : 0};
}

}  // namespace

void AddRenderCommand(CLI::App& app) {
  struct Options {
    std::string backend = "cpu";
    std::string scene = "box";
    int threads = 0;
    double seconds = 3;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("render", "path tracer rays/s (box, cornell, mesh, example)");
  cmd->add_option("--scene", opts->scene, "box, cornell, mesh (>= 100k triangles) or example")
      ->check(CLI::IsMember({"box", "cornell", "mesh", "example"}));
  cmd->add_option("--backend", opts->backend, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->add_option("--threads", opts->threads, "CPU threads for the main run (0: all)");
  cmd->add_option("--seconds", opts->seconds, "minimum time per measurement");
  cmd->callback([opts] {
    StatusOr<spec::SceneSpec> scene = BenchScene(opts->scene);
    if (!scene.ok()) throw CLI::RuntimeError("bench scene: " + scene.status().ToString(), 1);
    const int threads =
        opts->threads > 0 ? opts->threads : static_cast<int>(std::thread::hardware_concurrency());
    Figures figures = {{"backend", opts->backend}, {"scene", opts->scene}};
    auto baseline = Measure(*scene, Backend::kCpu, 1, opts->seconds);
    if (!baseline.ok()) throw CLI::RuntimeError(baseline.status().ToString(), 1);
    std::printf("cpu, 1 thread: %.2f M rays/s (%.2f M per CPU-second), %.3f s/frame\n",
                baseline->rays_per_s / 1e6, baseline->rays_per_cpu_s / 1e6,
                baseline->seconds_per_frame);
    auto build = MeasureBuild(*scene);
    if (!build.ok()) throw CLI::RuntimeError(build.status().ToString(), 1);
    std::printf("bvh build: %.2f ms (flatten %.2f ms)\n", build->bvh_build_ms, build->flatten_ms);
    figures.insert(figures.end(), {{"rays_per_cpu_s_1thread", Fixed(baseline->rays_per_cpu_s)},
                                   {"bvh_build_ms", Fixed(build->bvh_build_ms, 2)},
                                   {"flatten_ms", Fixed(build->flatten_ms, 2)}});
    if (opts->backend == "cuda") {
      // A GPU needs far more paths per launch than the CPU baseline's frame to be measured, not
      // its launch and upload overhead: 4x the resolution each way, 8x the samples.
      spec::SceneSpec big = *scene;
      big.width *= 4;
      big.height *= 4;
      big.samples = std::min(big.samples * 8, spec::kMaxSamples);
      auto gpu = Measure(big, Backend::kCuda, 0, opts->seconds);
      if (!gpu.ok()) throw CLI::RuntimeError(gpu.status().ToString(), 1);
      figures.insert(figures.end(),
                     {{"rays_per_s", Fixed(gpu->rays_per_s)},
                      {"samples_per_s", Fixed(gpu->samples_per_s)},
                      {"cpu_1thread_rays_per_s", Fixed(baseline->rays_per_s)},
                      {"ratio_to_1_cpu_thread", Fixed(gpu->rays_per_s / baseline->rays_per_s, 1)}});
    } else {
      auto all = Measure(*scene, Backend::kCpu, threads, opts->seconds);
      if (!all.ok()) throw CLI::RuntimeError(all.status().ToString(), 1);
      // The worker renders through the C plugin table; its only per-pixel cost is the poll.
      auto abi = Measure(*scene, Backend::kCpu, 1, opts->seconds, /*through_abi=*/true);
      if (!abi.ok()) throw CLI::RuntimeError(abi.status().ToString(), 1);
      std::printf("cpu, %d threads: %.2f M rays/s\n", threads, all->rays_per_s / 1e6);
      figures.insert(figures.end(),
                     {{"threads", std::to_string(threads)},
                      {"rays_per_s", Fixed(all->rays_per_s)},
                      {"rays_per_s_per_core", Fixed(all->rays_per_s / threads)},
                      {"samples_per_s", Fixed(all->samples_per_s)},
                      {"rays_per_s_1thread", Fixed(baseline->rays_per_s)},
                      {"s_per_frame_1thread", Fixed(baseline->seconds_per_frame, 3)},
                      {"scaling", Fixed(all->rays_per_s / baseline->rays_per_s, 2)},
                      {"abi_ratio_1thread", Fixed(abi->rays_per_s / baseline->rays_per_s, 3)}});
    }
    PrintFigures(figures);
  });
}

}  // namespace tessera::bench
