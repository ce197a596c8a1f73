// tessera-bench assembly: what it costs the scheduler to assemble a 4K multi-channel frame split
// into 64 tiles (8x8), against the time the frame takes to render. The tiles are real renders of
// the bundled example scene at 3840x2160 with the albedo, normal and depth AOVs (11 channels):
// --sample-tiles of them are rendered on the CPU and their mean time x 64 estimates the frame's
// render time on this machine; every tile slot is then filled with a rendered tile's exact
// accumulation (assembly does not depend on the pixels). --sample-parts N splits every tile into
// N sample ranges as well (parts arrive sample part by sample part, as the broker hands them out).
// Measured with the real assembler, synchronously:
//   - storing each part as it arrives (parse, check, keep on disk, resolve its tile in memory):
//     work done while the frame's other parts still render;
//   - after the frame's last part arrives: storing that part and assembling the frame (paste,
//     write EXR + PNG + thumbnail) -- the latency the ratio to the render time is about;
//   - the same frame assembled by a fresh assembler from the parts' files alone (as after a
//     scheduler restart), whose pixels must equal the first one's.
// Goal (DESIGN.md): assembly <= 1 % of render time for frames that take a minute or more.

#include <chrono>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>

#include "plugins/pathtracer/renderer.h"
#include "scheduler/assembler/assembler.h"
#include "shared/images/accumulation.h"
#include "shared/images/image_io.h"
#include "shared/jobs/job_file.h"
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

// The frame `pattern` names in `dir`, read back (EXR or PNG).
image::ImageBuffer ReadOutput(const std::string& dir, const std::string& pattern,
                              const std::string& format) {
  auto image = image::Read(dir + "/" + spec::OutputFileName(pattern, 1, format));
  if (!image.ok()) throw CLI::RuntimeError(image.status().ToString(), 1);
  return std::move(*image);
}

}  // namespace

void AddAssemblyCommand(CLI::App& app) {
  struct Options {
    int samples = 40;
    int sample_tiles = 2;
    int sample_parts = 1;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "assembly", "assembly of a 4K 64-tile multi-channel frame vs its render time");
  cmd->add_option("--samples", opts->samples, "samples per pixel of the frame")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--sample-tiles", opts->sample_tiles, "tiles rendered to estimate the frame")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--sample-parts", opts->sample_parts, "sample ranges each tile is split into")
      ->check(CLI::Range(1, 16));
  cmd->callback([opts] {
    if (opts->sample_parts > opts->samples) {
      throw CLI::ValidationError("--sample-parts", "more parts than samples");
    }
    const std::string dir = RepoDir() + "/deploy/examples/bouncing-spheres";
    std::ifstream in(dir + "/scene.yaml");
    std::stringstream text;
    text << in.rdbuf();
    auto scene = spec::ParseSceneYaml(text.str(), dir);
    if (!scene.ok()) throw CLI::RuntimeError(scene.status().ToString(), 1);
    constexpr int kWidth = 3840, kHeight = 2160, kTilesX = 8, kTilesY = 8, kTiles = 64;
    const int parts_per_tile = opts->sample_parts;
    scene->width = kWidth;
    scene->height = kHeight;
    scene->samples = opts->samples;
    scene->aovs = {spec::Aov::kAlbedo, spec::Aov::kNormal, spec::Aov::kDepth};
    const int tile_w = kWidth / kTilesX, tile_h = kHeight / kTilesY;
    auto sample_begin = [&](int p) { return opts->samples * p / parts_per_tile; };

    // Render a few tiles spread over the frame (a diagonal) to estimate the frame's cost; each
    // tile as its sample parts (rendered[tile][part]).
    std::vector<std::vector<accumulation::RenderedImage>> rendered;
    auto render_start = Clock::now();
    for (int i = 0; i < opts->sample_tiles; ++i) {
      const int t = (i * 9 + 27) % kTiles;  // middle first, then along the diagonal
      rendered.emplace_back();
      for (int p = 0; p < parts_per_tile; ++p) {
        pathtracer::RenderRequest request;
        request.backend = pathtracer::Backend::kCpu;
        request.region =
            pathtracer::PixelRegion{(t % kTilesX) * tile_w, (t / kTilesX) * tile_h,
                                    (t % kTilesX + 1) * tile_w, (t / kTilesX + 1) * tile_h};
        request.sample_begin = sample_begin(p);
        request.sample_end = sample_begin(p + 1);
        auto tile = pathtracer::RenderFrame(*scene, request);
        if (!tile.ok()) throw CLI::RuntimeError(tile.status().ToString(), 1);
        rendered.back().push_back(std::move(*tile));
      }
    }
    const double render_s = SecondsSince(render_start) / opts->sample_tiles * kTiles;
    const int channels = rendered[0][0].channels;
    std::printf("render: %d of 64 tiles (%dx%d, %d spp, %d channels) -> frame ~%.1f s\n",
                opts->sample_tiles, tile_w, tile_h, opts->samples, channels, render_s);

    // The parts in the order the broker hands them out: sample part by sample part.
    TempDir tmp("tessera-bench-assembly");
    const std::string out = tmp.path() + "/out";
    std::vector<assembler::PartJob> parts;
    for (int p = 0; p < parts_per_tile; ++p) {
      for (int t = 0; t < kTiles; ++t) {
        accumulation::RenderedImage part = rendered[t % rendered.size()][p];
        part.x0 = (t % kTilesX) * tile_w;
        part.y0 = (t / kTilesX) * tile_h;
        auto bytes = accumulation::SerializeAccumulation(part);
        if (!bytes.ok()) throw CLI::RuntimeError(bytes.status().ToString(), 1);
        assembler::PartJob job;
        job.job_id = 1;
        job.task_id = static_cast<int64_t>(p) * kTiles + t + 1;
        job.frame = 1;
        job.parts_dir = assembler::PartsDir(out, 1);
        job.assigned = {part.x0,          part.y0,
                        part.x0 + tile_w, part.y0 + tile_h,
                        sample_begin(p),  parts_per_tile > 1 ? sample_begin(p + 1) : -1};
        job.accumulation = std::move(*bytes);
        parts.push_back(std::move(job));
      }
    }
    const int total_parts = static_cast<int>(parts.size());
    assembler::Assembler assembler(
        1, [](assembler::Result) {}, tessera::Clock::Real());
    std::vector<double> store_ms;
    for (int i = 0; i + 1 < total_parts; ++i) {
      auto start = Clock::now();
      assembler::PartStored stored = assembler.StorePart(parts[i]);
      store_ms.push_back(SecondsSince(start) * 1000);
      if (!stored.status.ok()) throw CLI::RuntimeError(stored.status.ToString(), 1);
      parts[i].accumulation.clear();
    }
    const double store_s = std::accumulate(store_ms.begin(), store_ms.end(), 0.0) / 1000;

    // The frame's last part arrives: it is stored, then the frame is assembled.
    assembler::AssembleJob job;
    job.job_id = 1;
    job.frame = 1;
    job.output = {out, "frame.####", {"exr", "png"}};
    job.parts = total_parts;
    auto last_start = Clock::now();
    assembler::PartStored stored = assembler.StorePart(parts.back());
    const double last_store_s = SecondsSince(last_start);
    if (!stored.status.ok()) throw CLI::RuntimeError(stored.status.ToString(), 1);
    auto assemble_start = Clock::now();
    assembler::FrameAssembled written = assembler.AssembleFrame(job);
    const double assemble_s = SecondsSince(assemble_start);
    const double after_last_s = SecondsSince(last_start);
    if (!written.status.ok()) throw CLI::RuntimeError(written.status.ToString(), 1);
    std::printf(
        "parts: %d stored as they arrive in %.3f s (p50 %.1f ms, max %.1f ms each)\n"
        "after the last part: %.3f s (its store %.3f s, then paste and write EXR + PNG %.3f s)\n",
        total_parts, store_s, Percentile(store_ms, 50), Percentile(store_ms, 100), after_last_s,
        last_store_s, assemble_s);

    // A fresh assembler has nothing in memory: the frame comes from the parts' files alone.
    assembler::Assembler restarted(
        1, [](assembler::Result) {}, tessera::Clock::Real());
    job.output.pattern = "cold.####";
    auto cold_start = Clock::now();
    assembler::FrameAssembled cold = restarted.AssembleFrame(job);
    const double cold_s = SecondsSince(cold_start);
    if (!cold.status.ok()) throw CLI::RuntimeError(cold.status.ToString(), 1);
    bool identical = true;
    for (const std::string format : {"exr", "png"}) {
      identical = identical && ReadOutput(out, "frame.####", format).pixels ==
                                   ReadOutput(out, "cold.####", format).pixels;
    }
    std::printf("from the files alone (after a restart): %.3f s; same pixels: %s\n", cold_s,
                identical ? "yes" : "NO");
    if (!identical) throw CLI::RuntimeError("the frame assembled from files differs", 1);
    PrintFigures({{"width", std::to_string(kWidth)},
                  {"height", std::to_string(kHeight)},
                  {"tiles", std::to_string(kTiles)},
                  {"sample_parts", std::to_string(parts_per_tile)},
                  {"channels", std::to_string(channels)},
                  {"render_s_est", Fixed(render_s, 1)},
                  {"store_parts_s", Fixed(store_s, 3)},
                  {"store_ratio", Fixed(store_s / render_s, 4)},
                  {"after_last_part_s", Fixed(after_last_s, 3)},
                  {"ratio", Fixed(after_last_s / render_s, 4)},
                  {"target_ratio", "0.01"},
                  {"cold_assemble_s", Fixed(cold_s, 3)},
                  {"cold_ratio", Fixed(cold_s / render_s, 4)}});
  });
}

}  // namespace tessera::bench
