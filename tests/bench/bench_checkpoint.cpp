// tessera-bench checkpoint: what periodic checkpoints cost a render. The same frame is rendered
// through the path tracer's plugin table (as the worker drives it) without checkpoints, with one
// asked for every second, and at the job default of every 300 s; the host copies each
// checkpoint twice, as the worker does (out of the plugin, into the message). Reported: ms per
// checkpoint on the rendering thread (from the host's "now" to the checkpoint handed over), the
// overhead of each interval against the render without (a ratio of medians over interleaved
// rounds in the same run), and the overhead projected at 300 s from the measured cost per
// checkpoint (a frame shorter than 300 s takes none). Target: < 2 % at the default interval.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "plugins/pathtracer/plugin_entry.h"
#include "tests/bench/bench.h"

namespace tessera::bench {
namespace {

using Clock = std::chrono::steady_clock;

std::string Scene(int width, int height, int samples) {
  return "width: " + std::to_string(width) + "\nheight: " + std::to_string(height) +
         "\nsamples: " + std::to_string(samples) + R"(
max_depth: 8
background: {top: [0.5, 0.7, 1.0], bottom: [1.0, 1.0, 1.0]}
camera:
  keyframes: [{frame: 1, position: [0, 1.2, 4.5], look_at: [0, 0.6, 0], fov: 45}]
materials:
  ground: {type: diffuse, color: [0.6, 0.6, 0.6]}
  metal: {type: metal, color: [0.9, 0.8, 0.7], roughness: 0.3}
  glass: {type: glass, ior: 1.5}
  red: {type: diffuse, color: [0.8, 0.2, 0.1]}
objects:
  - {type: quad, corner: [-10, 0, -10], u: [0, 0, 20], v: [20, 0, 0], material: ground}
  - {type: sphere, center: [-1.1, 0.6, 0], radius: 0.6, material: metal}
  - {type: sphere, center: [0.1, 0.5, 0.4], radius: 0.5, material: glass}
  - {type: sphere, center: [1.2, 0.7, -0.3], radius: 0.7, material: red}
)";
}

// The host side of one render: asks for a checkpoint once `interval` has passed since the last
// one (zero: never), and times each from the ask to the checkpoint handed over.
struct Host {
  std::chrono::milliseconds interval{0};
  Clock::time_point next;
  Clock::time_point asked;
  bool pending = false;
  int checkpoints = 0;
  double checkpoint_ms = 0;
  size_t bytes = 0;
  std::string copy;           // out of the plugin (NativePlugin)
  std::vector<char> message;  // into the message the runner sends
};

int Requested(void* h) {
  Host& host = *static_cast<Host*>(h);
  if (host.interval.count() == 0 || Clock::now() < host.next) return 0;
  host.asked = Clock::now();
  host.pending = true;
  return 1;
}

void Checkpoint(void* h, const void* data, uint64_t size, int32_t) {
  Host& host = *static_cast<Host*>(h);
  host.copy.assign(static_cast<const char*>(data), size);
  host.message.resize(size);
  std::memcpy(host.message.data(), host.copy.data(), size);
  const auto now = Clock::now();
  if (host.pending) {
    host.checkpoint_ms += std::chrono::duration<double, std::milli>(now - host.asked).count();
    ++host.checkpoints;
    host.pending = false;
  }
  host.bytes = size;
  host.next = now + host.interval;
}

struct Run {
  double seconds = 0;
  Host host;
};

Run Render(const std::string& scene, int threads, std::chrono::milliseconds interval) {
  const TsrRendererPlugin* plugin = tsr_pathtracer_plugin();
  Run run;
  run.host.interval = interval;
  TsrRenderRequest r{};
  r.abi_version = TSR_RENDERER_ABI_VERSION | TSR_RENDERER_ABI_MINOR << 16;
  r.frame = 1;
  r.sample_end = -1;
  r.threads = threads;
  r.gpu_index = -1;
  r.device = "cpu";
  r.scene = scene.data();
  r.scene_size = scene.size();
  r.scene_dir = "";
  r.settings_json = "{}";
  r.host = &run.host;
  r.progress = [](void*, double) {};
  r.cancelled = [](void*) { return 0; };
  r.log = [](void*, const char*) {};
  r.handback_requested = [](void*) { return 0; };
  r.checkpoint = &Checkpoint;
  r.checkpoint_requested = &Requested;
  TsrImage out{};
  char error[512] = {0};
  const auto start = Clock::now();
  run.host.next = start + interval;
  const int code = plugin->render(&r, &out, error, sizeof(error));
  run.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (code != TSR_RENDER_OK) {
    std::fprintf(stderr, "render failed: %s\n", error);
    run.seconds = -1;
    return run;
  }
  plugin->free_image(&out);
  return run;
}

}  // namespace

void AddCheckpointCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand("checkpoint", "what periodic checkpoints cost a render");
  static int width = 640, height = 360, samples = 64, threads = 0;
  cmd->add_option("--width", width, "frame width")->capture_default_str();
  cmd->add_option("--height", height, "frame height")->capture_default_str();
  cmd->add_option("--samples", samples, "samples per pixel")->capture_default_str();
  cmd->add_option("--threads", threads, "render threads (0: every core)")->capture_default_str();
  static int repeat = 3;
  cmd->add_option("--repeat", repeat, "renders per interval, interleaved; the median counts")
      ->capture_default_str();
  cmd->callback([] {
    const std::string scene = Scene(width, height, samples);
    const int t = threads > 0 ? threads : static_cast<int>(std::thread::hardware_concurrency());
    using std::chrono::milliseconds;
    std::printf(
        "checkpoint: %dx%d, %d samples, %d thread(s), %d round(s); a checkpoint is asked "
        "for between sample passes (16 per frame)\n",
        width, height, samples, t, repeat);
    // Interleaved rounds (off, 1 s, 300 s, ...), so drift on a shared machine hits all three.
    std::vector<double> off, every_s, every_300;
    int checkpoints = 0, checkpoints_300 = 0;
    double checkpoint_ms = 0;
    size_t bytes = 0;
    for (int round = 0; round < std::max(1, repeat); ++round) {
      for (int interval : {0, 1000, 300'000}) {
        Run run = Render(scene, t, milliseconds(interval));
        if (run.seconds <= 0) throw CLI::RuntimeError(1);
        std::printf("  round %d, %-11s %.3f s, %d checkpoint(s)\n", round + 1,
                    interval == 0      ? "off:"
                    : interval == 1000 ? "every 1 s:"
                                       : "every 300 s:",
                    run.seconds, run.host.checkpoints);
        (interval == 0 ? off : interval == 1000 ? every_s : every_300).push_back(run.seconds);
        if (interval == 1000) {
          checkpoints += run.host.checkpoints;
          checkpoint_ms += run.host.checkpoint_ms;
          bytes = run.host.bytes;
        }
        if (interval == 300'000) checkpoints_300 += run.host.checkpoints;
      }
    }
    const double base = Percentile(off, 50);
    const double at_1s = Percentile(every_s, 50);
    const double at_300s = Percentile(every_300, 50);
    const double ms_per = checkpoints > 0 ? checkpoint_ms / checkpoints : 0.0;
    PrintFigures({
        {"render_off_s", Fixed(base, 3)},
        {"ms_per_checkpoint", Fixed(ms_per, 2)},
        {"checkpoint_bytes", std::to_string(bytes)},
        {"checkpoints_per_render_1s", Fixed(static_cast<double>(checkpoints) / every_s.size(), 1)},
        {"ratio_1s", Fixed(at_1s / base, 4)},
        {"overhead_1s_pct", Fixed((at_1s / base - 1) * 100, 2)},
        {"checkpoints_300s", std::to_string(checkpoints_300)},
        {"ratio_300s", Fixed(at_300s / base, 4)},
        {"overhead_300s_pct", Fixed((at_300s / base - 1) * 100, 2)},
        {"projected_overhead_300s_pct", Fixed(ms_per / 300'000 * 100, 4)},
        {"target_pct", "2"},
    });
  });
}

}  // namespace tessera::bench
