// tessera-bench steps: a 3-step job on a real farm (scheduler + 2 workers, real processes): a
// 100-frame `command` sim chunked by 10, a 100-frame path-tracer render depending on it frame by
// frame, and an `encode` step (ffmpeg: an H.264 preview movie of the render's frames) after the
// whole render. Figures: the whole job's time, how long after its sim chunk each render frame
// started (median, worst), how long after the render's last frame the encode started (target:
// within 1 s; its frames are stored as its input in between) and how long it ran.

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "shared/base/wall_time.h"
#include "tests/bench/bench.h"
#include "tests/support/farm.h"
#include "tests/support/scenes.h"

namespace tessera::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Unix ms of the API's times ("2026-12-06T21:40:09.123Z"); 0 for anything else.
int64_t Ms(const nlohmann::json& iso) {
  if (!iso.is_string() || iso.get<std::string>().size() != 24) return 0;
  const std::string text = iso.get<std::string>();
  StatusOr<int64_t> s = wall_time::ParseIsoTime(text.substr(0, 19) + "Z");
  return s.ok() ? *s + std::stoi(text.substr(20, 3)) : 0;
}

void Run(int frames) {
  if (::access("/usr/bin/ffmpeg", X_OK) != 0) {
    std::fprintf(stderr, "the encode step needs /usr/bin/ffmpeg (apt-get install ffmpeg)\n");
    return;
  }
  testing::LocalFarm farm("bench-steps");
  farm.set_log_level("info");
  farm.set_command_programs({"true"});
  if (!farm.StartScheduler() || !farm.StartWorker("w1") || !farm.StartWorker("w2") ||
      !farm.WaitForWorkers(2, std::chrono::seconds(30))) {
    std::fprintf(stderr, "the farm did not start:\n%s\n", farm.SchedulerLog().c_str());
    return;
  }
  const std::string job_yaml =
      "name: shot\nframes: 1-" + std::to_string(frames) +
      "\nsteps:\n"
      "  - {name: sim, renderer: command, chunk_size: 10, settings: {program: 'true'}}\n"
      "  - {name: render, scene: scene.yaml, depends_on: [{step: sim, per_frame: true}]}\n"
      "  - {name: encode, renderer: encode, settings: {frames_from: render}}\n";
  int status = 0;
  const auto start = Clock::now();
  nlohmann::json reply = farm.Post(
      "/api/v1/jobs",
      {{"job_yaml", job_yaml}, {"step_scenes", {{"render", testing::TinySceneYaml(64, 48, 4)}}}},
      &status);
  if (status != 201) {
    std::fprintf(stderr, "submit failed: %s\n", reply.dump().c_str());
    return;
  }
  const int64_t id = reply["job"]["id"];
  const nlohmann::json done = farm.WaitForJob(id, std::chrono::seconds(600));
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (done.value("state", "") != "done") {
    std::fprintf(stderr, "the job ended %s\n", done.dump(2).c_str());
    return;
  }
  const nlohmann::json job = farm.Get("/api/v1/jobs/" + std::to_string(id))["job"];
  std::map<std::string, nlohmann::json> tasks;
  for (const nlohmann::json& step : job["steps"]) {
    tasks[step["step"]] = testing::Tasks(farm, step["id"]);
  }
  std::vector<int64_t> waits;  // each render frame: its start after its sim chunk's end
  int64_t last_render = 0;
  for (const nlohmann::json& r : tasks["render"]) {
    const int frame = r["frame_start"];
    for (const nlohmann::json& s : tasks["sim"]) {
      if (s["frame_start"] <= frame && frame <= s["frame_end"]) {
        waits.push_back(Ms(r["started_at"]) - Ms(s["finished_at"]));
      }
    }
    last_render = std::max(last_render, Ms(r["finished_at"]));
  }
  std::sort(waits.begin(), waits.end());
  const int64_t encode_after = Ms(tasks["encode"][0]["started_at"]) - last_render;
  const int64_t encode_ms =
      Ms(tasks["encode"][0]["finished_at"]) - Ms(tasks["encode"][0]["started_at"]);
  std::printf(
      "3-step job, %d frames on 2 workers: %.2f s; encode started %lld ms after the "
      "last render frame\n",
      frames, seconds, static_cast<long long>(encode_after));
  PrintFigures({{"frames", std::to_string(frames)},
                {"tasks", std::to_string(job["tasks"]["total"].get<int64_t>())},
                {"job_s", Fixed(seconds, 2)},
                {"render_after_sim_ms_median", std::to_string(waits[waits.size() / 2])},
                {"render_after_sim_ms_max", std::to_string(waits.back())},
                {"encode_after_last_frame_ms", std::to_string(encode_after)},
                {"target_encode_after_ms", "1000"},
                {"encode_ms", std::to_string(encode_ms)}});
}

}  // namespace

void AddStepsCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "steps",
      "A 3-step job (sim, per-frame render, encode) on a real farm (target: the last "
      "step within 1 s of the last frame)");
  static int frames = 100;
  cmd->add_option("--frames", frames, "frames of the sim and render steps")
      ->capture_default_str()
      ->check(CLI::Range(10, 10000));
  cmd->callback([] { Run(frames); });
}

}  // namespace tessera::bench
