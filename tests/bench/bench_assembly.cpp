// tessera-bench assembly: what it costs the scheduler to assemble a 4K multi-channel frame split
// into 64 tiles (8x8), against the time the frame takes to render. The tiles are real renders of
// the bundled example scene at 3840x2160 with the albedo, normal and depth AOVs (11 channels):
// --sample-tiles of them are rendered on the CPU and their mean time x 64 estimates the frame's
// render time on this machine; every tile slot is then filled with a rendered tile's exact
// accumulation (assembly does not depend on the pixels). Measured with the real assembler:
// storing each part as it arrives (parse, check, write) and assembling the frame (load 64 parts,
// merge, paste, write EXR + PNG).
// Goal (DESIGN.md): assembly <= 1 % of render time for frames that take a minute or more.

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "plugins/pathtracer/accumulation.h"
#include "plugins/pathtracer/renderer.h"
#include "scheduler/assembler/assembler.h"
#include "tests/bench/bench.h"

namespace tessera::bench {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string RepoDir() {
  std::string path = __FILE__;  // <repo>/tests/bench/bench_assembly.cpp
  for (int i = 0; i < 3; ++i) path = path.substr(0, path.find_last_of('/'));
  return path;
}

}  // namespace

void AddAssemblyCommand(CLI::App& app) {
  struct Options {
    int samples = 40;
    int sample_tiles = 2;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "assembly", "assembly of a 4K 64-tile multi-channel frame vs its render time");
  cmd->add_option("--samples", opts->samples, "samples per pixel of the frame")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--sample-tiles", opts->sample_tiles, "tiles rendered to estimate the frame")
      ->check(CLI::Range(1, 64));
  cmd->callback([opts] {
    const std::string dir = RepoDir() + "/deploy/examples/bouncing-spheres";
    std::ifstream in(dir + "/scene.yaml");
    std::stringstream text;
    text << in.rdbuf();
    auto scene = spec::ParseSceneYaml(text.str(), dir);
    if (!scene.ok()) throw CLI::RuntimeError(scene.status().ToString(), 1);
    constexpr int kWidth = 3840, kHeight = 2160, kTilesX = 8, kTilesY = 8;
    scene->width = kWidth;
    scene->height = kHeight;
    scene->samples = opts->samples;
    scene->aovs = {spec::Aov::kAlbedo, spec::Aov::kNormal, spec::Aov::kDepth};
    const int tile_w = kWidth / kTilesX, tile_h = kHeight / kTilesY;

    // Render a few tiles spread over the frame (a diagonal) to estimate the frame's cost.
    std::vector<pathtracer::RenderedImage> rendered;
    auto render_start = Clock::now();
    for (int i = 0; i < opts->sample_tiles; ++i) {
      const int t = (i * 9 + 27) % 64;  // middle first, then along the diagonal
      pathtracer::RenderRequest request;
      request.backend = pathtracer::Backend::kCpu;
      request.region =
          pathtracer::PixelRegion{(t % kTilesX) * tile_w, (t / kTilesX) * tile_h,
                                  (t % kTilesX + 1) * tile_w, (t / kTilesX + 1) * tile_h};
      auto tile = pathtracer::RenderFrame(*scene, request);
      if (!tile.ok()) throw CLI::RuntimeError(tile.status().ToString(), 1);
      rendered.push_back(std::move(*tile));
    }
    const double render_s = SecondsSince(render_start) / opts->sample_tiles * kTilesX * kTilesY;
    std::printf("render: %d of 64 tiles (%dx%d, %d spp, %d channels) -> frame ~%.1f s\n",
                opts->sample_tiles, tile_w, tile_h, opts->samples, rendered[0].channels, render_s);

    TempDir tmp("tessera-bench-assembly");
    const std::string out = tmp.path() + "/out";
    std::vector<std::string> parts;
    for (int t = 0; t < kTilesX * kTilesY; ++t) {
      pathtracer::RenderedImage part = rendered[t % rendered.size()];
      part.x0 = (t % kTilesX) * tile_w;
      part.y0 = (t / kTilesX) * tile_h;
      auto bytes = pathtracer::SerializeAccumulation(part);
      if (!bytes.ok()) throw CLI::RuntimeError(bytes.status().ToString(), 1);
      parts.push_back(std::move(*bytes));
    }
    double store_s = 0;
    for (int t = 0; t < kTilesX * kTilesY; ++t) {
      assembler::PartJob job;
      job.job_id = 1;
      job.task_id = t + 1;
      job.frame = 1;
      job.parts_dir = assembler::PartsDir(out, 1);
      job.assigned = {(t % kTilesX) * tile_w,
                      (t / kTilesX) * tile_h,
                      (t % kTilesX + 1) * tile_w,
                      (t / kTilesX + 1) * tile_h,
                      0,
                      -1};
      job.accumulation = parts[t];
      auto start = Clock::now();
      assembler::FrameWritten stored = assembler::Assembler::StorePart(job);
      store_s += SecondsSince(start);
      if (!stored.status.ok()) throw CLI::RuntimeError(stored.status.ToString(), 1);
    }
    assembler::AssembleJob job;
    job.job_id = 1;
    job.frame = 1;
    job.output = {out, "frame.####", {"exr", "png"}};
    job.parts = kTilesX * kTilesY;
    auto start = Clock::now();
    assembler::FrameWritten written = assembler::Assembler::AssembleFrame(job);
    const double assemble_s = SecondsSince(start);
    if (!written.status.ok()) throw CLI::RuntimeError(written.status.ToString(), 1);
    std::printf(
        "assembly: 64 parts stored in %.3f s (as they arrive), frame assembled and "
        "written (EXR + PNG) in %.3f s\n",
        store_s, assemble_s);
    const double total = store_s + assemble_s;
    PrintFigures({{"width", std::to_string(kWidth)},
                  {"height", std::to_string(kHeight)},
                  {"tiles", "64"},
                  {"channels", std::to_string(rendered[0].channels)},
                  {"store_parts_s", Fixed(store_s, 3)},
                  {"assemble_s", Fixed(assemble_s, 3)},
                  {"render_s_est", Fixed(render_s, 1)},
                  {"ratio", Fixed(total / render_s, 4)},
                  {"ratio_1min_frame", Fixed(total / 60.0, 4)},
                  {"target_ratio", "0.01"}});
  });
}

}  // namespace tessera::bench
