// External renderers through a real farm: a real tessera-scheduler and real tessera-workers on
// loopback render a small POV-Ray animation and a small Blender (Cycles, CPU) scene, and the
// frames the farm writes are compared with the same renderer run directly. Tests that need a
// renderer skip when it is not installed (fail under CI=true); the feasibility test needs none.

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "shared/base/wall_time.h"
#include "shared/images/image_io.h"
#include "tests/support/farm.h"
#include "tests/support/http_get.h"
#include "tests/support/process.h"
#include "tests/support/require.h"

namespace tessera::testing {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

bool Installed(const std::string& program) {
  return std::system(("command -v " + program + " >/dev/null 2>&1").c_str()) == 0;
}

// Runs a program directly (the reference render); returns its exit status.
int RunDirect(const std::vector<std::string>& argv, const std::string& log) {
  Process p = Process::Start(argv, log);
  std::optional<int> rc = p.Wait(std::chrono::seconds(120));
  return rc.value_or(-1);
}

std::string Which(const std::string& program) {
  for (const char* dir : {"/usr/bin/", "/usr/local/bin/", "/bin/"}) {
    if (fs::exists(std::string(dir) + program)) return dir + program;
  }
  return program;
}

// Largest per-channel difference over the first `channels` channels, relative to the value
// where `relative` (for floating-point images of any brightness).
double MaxDifference(const image::ImageBuffer& a, const image::ImageBuffer& b, int channels,
                     bool relative = false) {
  EXPECT_EQ(a.width, b.width);
  EXPECT_EQ(a.height, b.height);
  if (a.width != b.width || a.height != b.height) return 1e9;
  double worst = 0;
  for (size_t p = 0, n = static_cast<size_t>(a.width) * a.height; p < n; ++p) {
    for (int c = 0; c < channels; ++c) {
      const double x = a.pixels[p * a.channels + c], y = b.pixels[p * b.channels + c];
      const double scale = relative ? std::max(1.0, std::fabs(y)) : 1.0;
      worst = std::max(worst, std::fabs(x - y) / scale);
    }
  }
  return worst;
}

const char* kPovScene = R"(#version 3.7;
global_settings { assumed_gamma 1.0 }
camera { location <0, 1, -4> look_at <0, 0, 0> }
light_source { <2, 4, -3> color rgb 1 }
// clock is the frame number: the sphere moves and changes colour from frame to frame.
sphere { <clock * 0.3 - 0.6, 0, 0>, 1 pigment { color rgb <1, 0.2 + clock * 0.2, 0.2> } }
plane { y, -1 pigment { checker color rgb 1 color rgb 0.1 } }
)";

TEST(PluginFarmTest, PovrayAnimationMatchesADirectRender) {
  TSR_REQUIRE(Installed("povray"), "povray is not installed (apt-get install povray)");
  LocalFarm farm("povray");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  ASSERT_TRUE(farm.StartWorker("w1"));
  ASSERT_TRUE(farm.StartWorker("w2"));
  ASSERT_TRUE(farm.WaitForWorkers(2, 30s));
  // Both workers advertise POV-Ray with its version.
  ASSERT_TRUE(WaitFor(
      [&] {
        nlohmann::json res = farm.Get("/api/v1/plugins");
        int with_povray = 0;
        for (const auto& w : res["workers"]) {
          for (const auto& p : w["plugins"]) with_povray += p["name"] == "povray";
        }
        return with_povray == 2;
      },
      10s));

  std::string error;
  const int64_t id = farm.Submit(
      "name: pov\nrenderer: povray\nscene: anim.pov\nframes: 1-3\n"
      "settings: {width: 64, height: 48, antialias: true}\n"
      "output: {pattern: 'pov.####', formats: [png, exr]}\n",
      kPovScene, &error);
  ASSERT_GT(id, 0) << error;
  nlohmann::json job = farm.WaitForJob(id, 60s);
  ASSERT_EQ(job["state"], "done") << job.dump() << farm.SchedulerLog();
  const std::string out = job["output_dir"];

  const std::string ref_dir = farm.dir() + "/direct";
  fs::create_directories(ref_dir);
  WriteFile(ref_dir + "/anim.pov", kPovScene);
  for (int frame = 1; frame <= 3; ++frame) {
    const std::string ref = ref_dir + "/ref" + std::to_string(frame) + ".png";
    ASSERT_EQ(RunDirect({Which("povray"), "-D", "+I" + ref_dir + "/anim.pov", "+O" + ref, "+FN",
                         "+W64", "+H48", "+K" + std::to_string(frame), "+A", "-J"},
                        ref_dir + "/povray.log"),
              0)
        << ReadFile(ref_dir + "/povray.log");
    char name[32];
    std::snprintf(name, sizeof(name), "/pov.%04d.png", frame);
    StatusOr<image::ImageBuffer> farm_png = image::Read(out + name);
    StatusOr<image::ImageBuffer> direct_png = image::Read(ref);
    ASSERT_TRUE(farm_png.ok()) << farm_png.status().message();
    ASSERT_TRUE(direct_png.ok()) << direct_png.status().message();
    // The farm reads POV-Ray's 8-bit sRGB PNG as linear floats and writes its PNG preview back
    // as 8-bit sRGB: the round trip is exact.
    EXPECT_EQ(MaxDifference(*farm_png, *direct_png, 3), 0.0) << "frame " << frame;
    std::snprintf(name, sizeof(name), "/pov.%04d.exr", frame);
    EXPECT_TRUE(fs::exists(out + name)) << name;
  }
  // Frames differ (clock = frame number), so frames were not mixed up.
  EXPECT_GT(
      MaxDifference(*image::Read(out + "/pov.0001.png"), *image::Read(out + "/pov.0003.png"), 3),
      0.05);
}

TEST(PluginFarmTest, PovrayTilesAssembleToTheDirectRender) {
  TSR_REQUIRE(Installed("povray"), "povray is not installed (apt-get install povray)");
  LocalFarm farm("povray-tiles");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  ASSERT_TRUE(farm.StartWorker("w1"));
  ASSERT_TRUE(farm.StartWorker("w2"));
  ASSERT_TRUE(farm.WaitForWorkers(2, 30s));
  std::string error;
  // Without antialiasing each pixel is traced on its own, so tiles pasted together must equal
  // the whole frame exactly.
  const int64_t id = farm.Submit(
      "name: pov\nrenderer: povray\nscene: anim.pov\nframes: 2-3\ntiles: 3x2\n"
      "settings: {width: 64, height: 48, antialias: false}\n"
      "output: {pattern: 'pov.####', formats: [png]}\n",
      kPovScene, &error);
  ASSERT_GT(id, 0) << error;
  nlohmann::json job = farm.WaitForJob(id, 90s);
  ASSERT_EQ(job["state"], "done") << job.dump() << farm.SchedulerLog();
  EXPECT_EQ(job["tasks"]["total"], 2 * 6);
  const std::string out = job["output_dir"];
  // Removed right after the commit that records the frame, which the API may see first.
  EXPECT_TRUE(WaitFor([&] { return !fs::exists(out + "/.parts"); }, 10s))
      << "tiles are removed once their frame is written";

  const std::string ref_dir = farm.dir() + "/direct";
  fs::create_directories(ref_dir);
  WriteFile(ref_dir + "/anim.pov", kPovScene);
  for (int frame = 2; frame <= 3; ++frame) {
    const std::string ref = ref_dir + "/ref" + std::to_string(frame) + ".png";
    ASSERT_EQ(RunDirect({Which("povray"), "-D", "+I" + ref_dir + "/anim.pov", "+O" + ref, "+FN",
                         "+W64", "+H48", "+K" + std::to_string(frame), "-A", "-J"},
                        ref_dir + "/povray.log"),
              0)
        << ReadFile(ref_dir + "/povray.log");
    char name[32];
    std::snprintf(name, sizeof(name), "/pov.%04d.png", frame);
    StatusOr<image::ImageBuffer> farm_png = image::Read(out + name);
    StatusOr<image::ImageBuffer> direct_png = image::Read(ref);
    ASSERT_TRUE(farm_png.ok()) << farm_png.status().message();
    ASSERT_TRUE(direct_png.ok()) << direct_png.status().message();
    EXPECT_EQ(farm_png->width, 64);
    EXPECT_EQ(farm_png->height, 48);
    EXPECT_EQ(MaxDifference(*farm_png, *direct_png, 3), 0.0) << "frame " << frame;
  }
}

// Renders frames 1-2 of a Blender scene directly (Cycles, CPU, 4 samples, seed 0) and compares
// them with the farm's bl.0001.exr and bl.0002.exr in `out`.
void ExpectBlenderFramesMatchADirectRender(const std::string& out, const std::string& ref_dir,
                                           const std::vector<std::string>& scene_args);

const char* kBlenderScene = R"(import bpy
scene = bpy.context.scene
for obj in list(bpy.data.objects):
    bpy.data.objects.remove(obj)
bpy.ops.mesh.primitive_uv_sphere_add(radius=1, location=(0, 0, 0))
sphere = bpy.context.object
sphere.location = (-0.5, 0, 0)
sphere.keyframe_insert("location", frame=1)
sphere.location = (0.5, 0, 0)
sphere.keyframe_insert("location", frame=2)
bpy.ops.object.light_add(type='SUN', location=(2, -2, 4))
bpy.ops.object.camera_add(location=(0, -6, 1), rotation=(1.45, 0, 0))
scene.camera = bpy.context.object
scene.render.resolution_x = 64
scene.render.resolution_y = 48
scene.render.resolution_percentage = 100
)";

TEST(PluginFarmTest, BlenderCyclesMatchesADirectRender) {
  TSR_REQUIRE(Installed("blender"), "blender is not installed (apt-get install blender)");
  LocalFarm farm("blender");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  ASSERT_TRUE(farm.StartWorker("w1", 2));
  ASSERT_TRUE(farm.WaitForWorkers(1, 30s));
  std::string error;
  const int64_t id = farm.Submit(
      "name: bl\nrenderer: blender\nscene: build_scene.py\nframes: 1-2\nchunk_size: 2\n"
      "settings: {samples: 4, seed: 0}\noutput: {pattern: 'bl.####', formats: [exr]}\n",
      kBlenderScene, &error);
  ASSERT_GT(id, 0) << error;
  nlohmann::json job = farm.WaitForJob(id, 120s);
  ASSERT_EQ(job["state"], "done") << job.dump() << farm.SchedulerLog();
  const std::string ref_dir = farm.dir() + "/direct";
  fs::create_directories(ref_dir);
  WriteFile(ref_dir + "/build_scene.py", kBlenderScene);
  ExpectBlenderFramesMatchADirectRender(job["output_dir"], ref_dir,
                                        {"--python", ref_dir + "/build_scene.py"});
}

// A binary .blend scene: `tessera submit` uploads it like an asset, and the worker opens it.
TEST(PluginFarmTest, BlenderBlendFileSubmittedWithTheCliMatchesADirectRender) {
  TSR_REQUIRE(Installed("blender"), "blender is not installed (apt-get install blender)");
  LocalFarm farm("blend");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  ASSERT_TRUE(farm.StartWorker("w1", 2));
  ASSERT_TRUE(farm.WaitForWorkers(1, 30s));
  const std::string job_dir = farm.dir() + "/job";
  fs::create_directories(job_dir + "/shots");
  WriteFile(job_dir + "/build_scene.py", kBlenderScene);
  ASSERT_EQ(RunDirect({Which("blender"), "-b", "--factory-startup", "-noaudio", "--python",
                       job_dir + "/build_scene.py", "--python-expr",
                       "import bpy; bpy.ops.wm.save_as_mainfile(filepath='" + job_dir +
                           "/shots/shot.blend')"},
                      job_dir + "/save.log"),
            0)
      << ReadFile(job_dir + "/save.log");
  ASSERT_TRUE(fs::exists(job_dir + "/shots/shot.blend")) << ReadFile(job_dir + "/save.log");
  WriteFile(job_dir + "/job.yaml",
            "name: blend\nrenderer: blender\nscene: shots/shot.blend\nframes: 1-2\n"
            "chunk_size: 2\nsettings: {samples: 4, seed: 0}\n"
            "output: {pattern: 'bl.####', formats: [exr]}\n");
  RunResult submitted =
      RunProcess({Bin("tessera"), "submit", job_dir + "/job.yaml"}, 60s,
                 {"TESSERA_SERVER=" + farm.api_url(), "TESSERA_TOKEN=" + farm.token()});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.out << submitted.err;
  nlohmann::json job = farm.WaitForJob(std::stoll(submitted.out), 120s);
  ASSERT_EQ(job["state"], "done") << job.dump() << farm.SchedulerLog();
  ExpectBlenderFramesMatchADirectRender(job["output_dir"], job_dir,
                                        {job_dir + "/shots/shot.blend"});

  // Through the API without the upload, the binary scene is missing: refused, naming it.
  std::string error;
  EXPECT_EQ(farm.Submit("name: b\nrenderer: blender\nscene: shot.blend\nframes: 1\n", "", &error),
            -1);
  EXPECT_NE(error.find("'shot.blend', which was not uploaded"), std::string::npos) << error;
}

void ExpectBlenderFramesMatchADirectRender(const std::string& out, const std::string& ref_dir,
                                           const std::vector<std::string>& scene_args) {
  std::vector<std::string> argv = {Which("blender"), "-b", "--factory-startup", "-noaudio"};
  argv.insert(argv.end(), scene_args.begin(), scene_args.end());
  argv.insert(argv.end(),
              {"--python-expr",
               "import bpy; s = bpy.context.scene; s.render.engine = 'CYCLES'; "
               "s.cycles.device = 'CPU'; s.cycles.use_denoising = False; "
               "s.cycles.samples = 4; s.cycles.seed = 0",
               "-o", ref_dir + "/ref_####", "-F", "OPEN_EXR", "-s", "1", "-e", "2", "-a"});
  ASSERT_EQ(RunDirect(argv, ref_dir + "/blender.log"), 0) << ReadFile(ref_dir + "/blender.log");
  for (int frame = 1; frame <= 2; ++frame) {
    char name[64];
    std::snprintf(name, sizeof(name), "/bl.%04d.exr", frame);
    StatusOr<image::ImageBuffer> farm_exr = image::Read(out + name);
    std::snprintf(name, sizeof(name), "/ref_%04d.exr", frame);
    StatusOr<image::ImageBuffer> direct_exr = image::Read(ref_dir + name);
    ASSERT_TRUE(farm_exr.ok()) << farm_exr.status().message();
    ASSERT_TRUE(direct_exr.ok()) << direct_exr.status().message();
    // Cycles on the CPU with a fixed seed is deterministic; the farm stores half floats, so
    // the tolerance is half precision (2^-11 relative).
    EXPECT_LE(MaxDifference(*farm_exr, *direct_exr, 3, /*relative=*/true), 1e-3)
        << "frame " << frame;
  }
}

TEST(PluginFarmTest, WorkerWithoutTheRendererDoesNotOfferItAndTheJobIsInfeasible) {
  LocalFarm farm("noplugin");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  // This worker searches an empty folder for renderer programs: it finds none.
  const std::string empty = farm.dir() + "/empty-bin";
  fs::create_directories(empty);
  ::setenv("TESSERA_WORKER_PLUGIN_PATH", empty.c_str(), 1);
  const bool started = farm.StartWorker("bare");
  ::unsetenv("TESSERA_WORKER_PLUGIN_PATH");
  ASSERT_TRUE(started);
  ASSERT_TRUE(farm.WaitForWorkers(1, 30s));
  nlohmann::json plugins = farm.Get("/api/v1/plugins");
  ASSERT_EQ(plugins["workers"].size(), 1u) << plugins.dump();
  for (const auto& p : plugins["workers"][0]["plugins"]) {
    EXPECT_NE(p["name"], "povray");
    EXPECT_NE(p["name"], "blender");
  }
  std::string error;
  const int64_t id =
      farm.Submit("name: pov\nrenderer: povray\nscene: a.pov\nframes: 1\n", kPovScene, &error);
  ASSERT_GT(id, 0) << error;
  nlohmann::json job;
  ASSERT_TRUE(WaitFor(
      [&] {
        job = farm.Get("/api/v1/jobs/" + std::to_string(id))["job"];
        return job["notice"].is_string();
      },
      10s))
      << job.dump();
  EXPECT_NE(job["notice"].get<std::string>().find("does not offer the renderer 'povray'"),
            std::string::npos)
      << job.dump();
  EXPECT_EQ(job["state"], "queued");
}

TEST(PluginFarmTest, BadSettingsAreRefusedAtSubmit) {
  LocalFarm farm("badsettings");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  std::string error;
  EXPECT_EQ(farm.Submit("name: a\nrenderer: povray\nscene: a.pov\nframes: 1\n"
                        "settings: {quality: '-Q0'}\n",
                        kPovScene, &error),
            -1);
  EXPECT_NE(error.find("settings.quality"), std::string::npos) << error;
  EXPECT_EQ(farm.Submit("name: a\nrenderer: blender\nscene: shot.blend\nframes: 1\n", "x", &error),
            -1);
  EXPECT_NE(error.find(".blend"), std::string::npos) << error;
  EXPECT_EQ(farm.Submit("name: a\nrenderer: command\nframes: 1\n"
                        "settings: {program: sh, output: ../../x}\n",
                        "", &error),
            -1);
  EXPECT_NE(error.find("settings.output: unknown setting"), std::string::npos) << error;
}

TEST(PluginFarmTest, FailingRendererFailsTheTaskAndTheWorkerKeepsRunning) {
  LocalFarm farm("cmdfail");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  ASSERT_TRUE(farm.StartWorker("w1"));
  ASSERT_TRUE(farm.WaitForWorkers(1, 30s));
  std::string error;
  // Promises images, exits 0 without writing one; no retries.
  int64_t id = farm.Submit(
      "name: noimage\nrenderer: command\nframes: 1\nmax_retries: 0\n"
      "settings: {program: 'true', outputs: images}\n",
      "", &error);
  ASSERT_GT(id, 0) << error;
  nlohmann::json job = farm.WaitForJob(id, 30s);
  EXPECT_EQ(job["state"], "failed") << job.dump();
  nlohmann::json tasks = farm.Get("/api/v1/jobs/" + std::to_string(id) + "/tasks")["tasks"];
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_NE(tasks[0]["message"].dump().find("wrote no image"), std::string::npos) << tasks.dump();
  // Hangs: killed at the task timeout.
  id = farm.Submit(
      "name: hang\nrenderer: command\nframes: 1\nmax_retries: 0\ntask_timeout: 1\n"
      "settings: {program: sleep, argv: ['30']}\n",
      "", &error);
  ASSERT_GT(id, 0) << error;
  job = farm.WaitForJob(id, 30s);
  EXPECT_EQ(job["state"], "failed") << job.dump();
  EXPECT_TRUE(farm.worker("w1").running()) << "the worker survives its renderers' failures";
}

// A command job without outputs (the default): its tasks succeed on their exit code and return
// no frames; the job is done with nothing to assemble. What the program did is what counts.
TEST(PluginFarmTest, CommandTasksWithoutOutputsAreDoneOnTheirExitCode) {
  LocalFarm farm("cmd-no-outputs");
  const std::string marks = farm.dir() + "/marks";
  ASSERT_TRUE(std::filesystem::create_directories(marks));
  const std::string script = farm.dir() + "/mark.sh";
  WriteFile(script,
            "#!/bin/sh\ni=$2\nwhile [ \"$i\" -le \"$3\" ]; do : > \"$1/$i\"; "
            "i=$((i + 1)); done\n");
  ::chmod(script.c_str(), 0755);
  farm.set_command_programs({script, "false"});
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  ASSERT_TRUE(farm.StartWorker("w1"));
  ASSERT_TRUE(farm.WaitForWorkers(1, 30s));
  std::string error;
  const int64_t id = farm.Submit(
      "name: sim\nrenderer: command\nframes: 1-6\nchunk_size: 2\n"
      "settings: {program: " +
          script + ", argv: ['" + marks + "', '{frame_start}', '{frame_end}']}\n",
      "", &error);
  ASSERT_GT(id, 0) << error;
  const nlohmann::json job = farm.WaitForJob(id, 60s);
  ASSERT_EQ(job["state"], "done") << job.dump() << farm.SchedulerLog();
  const nlohmann::json tasks = Tasks(farm, id);
  ASSERT_EQ(tasks.size(), 3u);
  for (const nlohmann::json& t : tasks) EXPECT_EQ(t["state"], "done") << t.dump();
  for (int f = 1; f <= 6; ++f) {
    EXPECT_TRUE(std::filesystem::exists(marks + "/" + std::to_string(f))) << "frame " << f;
  }
  // A failing exit code still fails the task, with the code.
  const int64_t failing = farm.Submit(
      "name: bad\nrenderer: command\nframes: 1\nmax_retries: 0\nsettings: {program: 'false'}\n", "",
      &error);
  ASSERT_GT(failing, 0) << error;
  EXPECT_EQ(farm.WaitForJob(failing, 60s)["state"], "failed");
  EXPECT_NE(Tasks(farm, failing)[0]["message"].dump().find("failed with exit code 1"),
            std::string::npos)
      << Tasks(farm, failing).dump();
  // Anything but none, images or files is refused at submit, naming the setting.
  EXPECT_EQ(farm.Submit("name: x\nrenderer: command\nframes: 1\n"
                        "settings: {program: 'false', outputs: archive}\n",
                        "", &error),
            -1);
  EXPECT_NE(error.find("settings.outputs"), std::string::npos) << error;
  // So are environment variables the worker owns, and values with a newline; nothing is stored.
  EXPECT_EQ(farm.Submit("name: x\nrenderer: command\nframes: 1\n"
                        "settings: {program: 'false', env: {LD_PRELOAD: /tmp/x.so}}\n",
                        "", &error),
            -1);
  EXPECT_NE(error.find("settings.env.LD_PRELOAD"), std::string::npos) << error;
  EXPECT_EQ(farm.Submit("name: x\nrenderer: command\nframes: 1\n"
                        "settings: {program: 'false', env: {A: \"1\\n2\"}}\n",
                        "", &error),
            -1);
  EXPECT_NE(error.find("settings.env.A: control characters"), std::string::npos) << error;
  EXPECT_EQ(farm.Get("/api/v1/jobs")["jobs"].size(), 2u);
}

// `outputs: files`: the files a command task makes travel back like frames (a 3 MB one in
// pieces) and land in the job's output folder under their path in the task folder; the API lists
// and serves them (never anything outside the folder), and patterns that would leave the task
// folder, match nothing or match a link are refused -- at submit, or by failing the task.
TEST(PluginFarmTest, CommandTasksReturnTheFilesTheirPatternsMatch) {
  LocalFarm farm("cmd-files");
  const std::string script = farm.dir() + "/cache.sh";
  WriteFile(script,
            "#!/bin/sh\nmkdir -p cache\ni=$1\nwhile [ \"$i\" -le \"$2\" ]; do\n"
            "  echo \"frame $i\" > cache/part_$i.txt; i=$((i + 1))\ndone\n"
            "head -c 3000000 /dev/zero | tr '\\0' x > big_$1.bin\n"
            "echo not returned > other.log\n"
            "if [ \"$3\" = link ]; then ln -s /etc/hostname cache/evil.txt; fi\n");
  ::chmod(script.c_str(), 0755);
  farm.set_command_programs({script});
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  ASSERT_TRUE(farm.StartWorker("w1"));
  ASSERT_TRUE(farm.WaitForWorkers(1, 30s));
  auto job_file = [&](const std::string& name, const std::string& extra_arg,
                      const std::string& files) {
    return "name: " + name +
           "\nrenderer: command\nframes: 1-4\nchunk_size: 2\nmax_retries: 0\n"
           "settings: {program: " +
           script + ", argv: ['{frame_start}', '{frame_end}'" + extra_arg +
           "], outputs: files, files: " + files + "}\n";
  };
  std::string error;
  const int64_t id = farm.Submit(job_file("cache", "", "['cache/*.txt', 'big_*.bin']"), "", &error);
  ASSERT_GT(id, 0) << error;
  const nlohmann::json job = farm.WaitForJob(id, 60s);
  ASSERT_EQ(job["state"], "done") << job.dump() << farm.SchedulerLog();
  const std::string out = job["output_dir"];
  for (int f = 1; f <= 4; ++f) {
    const std::string name = "cache/part_" + std::to_string(f) + ".txt";
    EXPECT_EQ(ReadFile(out + "/" + name), "frame " + std::to_string(f) + "\n") << name;
  }
  for (const char* big : {"/big_1.bin", "/big_3.bin"}) {
    std::error_code ec;
    EXPECT_EQ(fs::file_size(out + big, ec), 3000000u) << big;
  }
  EXPECT_FALSE(fs::exists(out + "/other.log"));  // made, but no pattern asked for it
  // Listed and served by their path in the output folder; a returned file is a download.
  const nlohmann::json listing = farm.Get("/api/v1/jobs/" + std::to_string(id) + "/outputs");
  std::set<std::string> names;
  for (const nlohmann::json& f : listing["files"]) names.insert(f["name"].get<std::string>());
  EXPECT_EQ(names,
            (std::set<std::string>{"big_1.bin", "big_3.bin", "cache/part_1.txt", "cache/part_2.txt",
                                   "cache/part_3.txt", "cache/part_4.txt"}))
      << listing.dump();
  const std::string base = "/api/v1/jobs/" + std::to_string(id) + "/outputs/";
  int status = 0;
  httplib::Headers headers;
  EXPECT_EQ(RawGet(farm, base + "cache/part_3.txt", &status, &headers), "frame 3\n");
  EXPECT_EQ(status, 200);
  EXPECT_EQ(headers.find("Content-Disposition")->second, "attachment");
  // Nothing outside the output folder, hidden or through a link.
  fs::create_symlink("/etc/hostname", out + "/cache/link.txt");
  for (const char* bad : {"../../scheduler.yaml", "cache/../../x", "cache/link.txt", ".thumbnails",
                          "cache%2F..%2F..%2Fscheduler.yaml"}) {
    RawGet(farm, base + bad, &status);
    EXPECT_EQ(status, 404) << bad;
  }
  // Patterns must stay in the task folder; files needs outputs: files and the other way round.
  for (const auto& [yaml, field] :
       {std::pair{job_file("x", "", "['../escape']"), "settings.files[0]"},
        std::pair{job_file("x", "", "['/etc/passwd']"), "settings.files[0]"},
        std::pair{job_file("x", "", "[]"), "settings.files"}}) {
    EXPECT_EQ(farm.Submit(yaml, "", &error), -1) << yaml;
    EXPECT_NE(error.find(field), std::string::npos) << error;
  }
  // A pattern matching nothing, and a match that is a link, fail the task with that reason.
  const int64_t none = farm.Submit(job_file("none", "", "['cache/*.vdb']"), "", &error);
  ASSERT_GT(none, 0) << error;
  EXPECT_EQ(farm.WaitForJob(none, 60s)["state"], "failed");
  EXPECT_NE(Tasks(farm, none).dump().find("'cache/*.vdb' matched no file"), std::string::npos)
      << Tasks(farm, none).dump();
  const int64_t link = farm.Submit(job_file("link", ", link", "['cache/*.txt']"), "", &error);
  ASSERT_GT(link, 0) << error;
  EXPECT_EQ(farm.WaitForJob(link, 60s)["state"], "failed");
  EXPECT_NE(Tasks(farm, link).dump().find("cache/evil.txt is a link"), std::string::npos)
      << Tasks(farm, link).dump();
}

// Failure classes (the command plugin's sysexits convention): exit 65 is a scene error, failed
// at once whatever the retries left; exit 75 is "no licence", requeued uncharged after the job's
// license_wait_s; both are counted by class on /metrics and kept in the attempt history.
TEST(PluginFarmTest, FailureClassesDecideWhatAFailedAttemptLeadsTo) {
  LocalFarm farm("cmd-failure-classes");
  const std::string broken = farm.dir() + "/broken.sh", licence = farm.dir() + "/licence.sh";
  const std::string marker = farm.dir() + "/licence-taken";
  WriteFile(broken, "#!/bin/sh\necho 'cannot parse shot.usd'\nexit 65\n");
  WriteFile(licence, "#!/bin/sh\nif [ -e \"$1\" ]; then exit 0; fi\n: > \"$1\"\nexit 75\n");
  ::chmod(broken.c_str(), 0755);
  ::chmod(licence.c_str(), 0755);
  farm.set_command_programs({broken, licence});
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  ASSERT_TRUE(farm.StartWorker("w1"));
  ASSERT_TRUE(farm.WaitForWorkers(1, 30s));
  std::string error;
  const int64_t scene = farm.Submit(
      "name: scene\nrenderer: command\nframes: 1\nmax_retries: 3\n"
      "settings: {program: " +
          broken + "}\n",
      "", &error);
  ASSERT_GT(scene, 0) << error;
  EXPECT_EQ(farm.WaitForJob(scene, 60s)["state"], "failed");
  const int64_t scene_task = Tasks(farm, scene)[0]["id"];
  nlohmann::json log = farm.Get("/api/v1/tasks/" + std::to_string(scene_task) + "/log");
  ASSERT_EQ(log["attempts"].size(), 1u) << log.dump(2);
  EXPECT_EQ(log["attempts"][0]["failure_class"], "scene_error");
  EXPECT_NE(log["message"].get<std::string>().find("scene error: retrying cannot help"),
            std::string::npos)
      << log.dump(2);

  const int64_t wait = farm.Submit(
      "name: licence\nrenderer: command\nframes: 1\nmax_retries: 0\n"
      "failure_policy: {license_wait_s: 2}\n"
      "settings: {program: " +
          licence + ", argv: ['" + marker + "']}\n",
      "", &error);
  ASSERT_GT(wait, 0) << error;
  EXPECT_EQ(farm.WaitForJob(wait, 60s)["state"], "done") << farm.SchedulerLog();
  const int64_t wait_task = Tasks(farm, wait)[0]["id"];
  log = farm.Get("/api/v1/tasks/" + std::to_string(wait_task) + "/log");
  ASSERT_EQ(log["attempts"].size(), 2u) << log.dump(2);
  EXPECT_EQ(log["attempts"][0]["failure_class"], "license");
  EXPECT_EQ(log["attempts"][0]["charged"], false);
  EXPECT_EQ(log["failures_total"], 0) << "a licence failure is nobody's fault";
  // The second attempt waited the job's license_wait_s.
  const auto ms = [](const nlohmann::json& t) {  // "2026-12-06T21:40:09.123Z"
    const std::string text = t.get<std::string>();
    return wall_time::ParseIsoTime(text.substr(0, 19) + "Z").value() +
           std::stoi(text.substr(20, 3));
  };
  EXPECT_GE(ms(log["attempts"][1]["started_at"]) - ms(log["attempts"][0]["ended_at"]), 1500)
      << log.dump(2);
  // A policy that is not one is refused at submit, naming the field.
  EXPECT_EQ(farm.Submit("name: x\nrenderer: command\nframes: 1\nfailure_policy: {scene_error: "
                        "ignore}\nsettings: {program: " +
                            broken + "}\n",
                        "", &error),
            -1);
  EXPECT_EQ(error, "failure_policy.scene_error: expected fail or retry, got 'ignore'");

  const std::string metrics = Metrics(farm);
  EXPECT_NE(metrics.find("tessera_task_failures_total{class=\"scene_error\"} 1"), std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("tessera_task_failures_total{class=\"license\"} 1"), std::string::npos);
}

// A plugin job's settings and scene name are resolved from its job file once, at submit, and
// stored with the job: after a restart they still reach the worker, though the stored job file
// no longer parses (nothing parses it again).
TEST(PluginFarmTest, SettingsReachTheWorkerAfterARestartWithoutTheJobFileParsed) {
  LocalFarm farm("settings-restart");
  // The task: copy a PNG made here to every frame of the task.
  const std::string png = farm.dir() + "/frame.png";
  image::ImageBuffer image{8, 8, 3, std::vector<float>(8 * 8 * 3, 0.5f), {}};
  ASSERT_TRUE(image::WriteSrgb8(png, image).ok());
  const std::string script = farm.dir() + "/frames.sh";
  WriteFile(script, "#!/bin/sh\ni=$2\nwhile [ \"$i\" -le \"$3\" ]; do\n  cp '" + png +
                        "' \"$1/$(printf 'frame_%06d.png' \"$i\")\"\n  i=$((i + 1))\ndone\n");
  ::chmod(script.c_str(), 0755);
  farm.set_command_programs({script});
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  std::string error;
  const int64_t id = farm.Submit(
      "name: copy\nrenderer: command\nframes: 1-2\nmax_retries: 0\n"
      "output: {pattern: 'copy.####', formats: [png]}\nsettings: {program: " +
          script + ", outputs: images, argv: ['{output_dir}', '{frame_start}', '{frame_end}']}\n",
      "", &error);
  ASSERT_GT(id, 0) << error;
  // No worker yet: the job waits. The scheduler stops, and the job file it stored is damaged.
  farm.KillScheduler();
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((farm.dir() + "/data/tessera.db").c_str(), &db), SQLITE_OK);
  const std::string sql =
      "UPDATE jobs SET job_yaml = 'renderer: [not, a, job' WHERE id = " + std::to_string(id);
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr);
  sqlite3_close(db);
  ASSERT_EQ(rc, SQLITE_OK);

  ASSERT_TRUE(farm.StartScheduler(/*reuse_ports=*/true)) << farm.SchedulerLog();
  ASSERT_TRUE(farm.StartWorker("w1"));
  ASSERT_TRUE(farm.WaitForWorkers(1, 30s));
  nlohmann::json job = farm.WaitForJob(id, 60s);
  ASSERT_EQ(job["state"], "done") << job.dump() << farm.SchedulerLog() << farm.WorkerLog("w1");
  const std::string out = job["output_dir"];
  EXPECT_TRUE(fs::exists(out + "/copy.0001.png"));
  EXPECT_TRUE(fs::exists(out + "/copy.0002.png"));
  EXPECT_EQ(farm.SchedulerLog().find("no longer parses"), std::string::npos);
}

}  // namespace
}  // namespace tessera::testing

namespace tessera::testing {
namespace {

// The gradient test plugin's pixel (x, y) of `frame` in a width x height frame.
void ExpectGradient(const image::ImageBuffer& img, int width, int height, float blue) {
  ASSERT_EQ(img.width, width);
  ASSERT_EQ(img.height, height);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      const float* p = &img.pixels[(static_cast<size_t>(y) * width + x) * img.channels];
      ASSERT_NEAR(p[0], static_cast<float>(x) / width, 1e-6) << x << "," << y;
      ASSERT_NEAR(p[1], static_cast<float>(y) / height, 1e-6) << x << "," << y;
      ASSERT_NEAR(p[2], blue, 1e-6) << x << "," << y;
    }
  }
}

// A C++ plugin loaded by one worker from worker.native_plugins (the gradient test plugin): the
// scheduler learns its declaration from that worker, validates jobs against it, sends its tasks
// only there, assembles its tiles, and still knows it after a restart.
TEST(PluginFarmTest, NativePluginFromAWorkerRendersTilesThroughTheFarm) {
  LocalFarm farm("native");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  const std::string job_yaml =
      "name: grad\nrenderer: gradient\nscene: ramp.grad\nframes: 1-2\ntiles: 2x2\n"
      "settings: {width: 32, height: 16, offset: 0.25}\n"
      "output: {pattern: 'grad.####', formats: [exr], exr: float}\n";
  std::string error;
  // No worker has offered it yet: not a renderer of this farm.
  EXPECT_EQ(farm.Submit(job_yaml, "ramp", &error), -1);
  EXPECT_NE(error.find("renderer: 'gradient' is not a renderer this farm has"), std::string::npos)
      << error;

  const std::string config = farm.dir() + "/native-worker.yaml";
  WriteFile(config, std::string("worker:\n  native_plugins: [") + TSR_TEST_PLUGIN + "]\n");
  ASSERT_TRUE(farm.StartWorkerWith("native", {"--config", config}));
  ASSERT_TRUE(farm.StartWorker("plain"));
  ASSERT_TRUE(farm.WaitForWorkers(2, 30s));
  nlohmann::json plugins;
  ASSERT_TRUE(WaitFor(
      [&] {
        plugins = farm.Get("/api/v1/plugins");
        for (const auto& p : plugins["plugins"]) {
          if (p["name"] == "gradient") return true;
        }
        return false;
      },
      10s))
      << plugins.dump();
  for (const auto& p : plugins["plugins"]) {
    if (p["name"] != "gradient") continue;
    EXPECT_EQ(p["kind"], "native");
    EXPECT_EQ(p["tiles"], true);
    EXPECT_EQ(p["description"], "test gradient renderer");
    EXPECT_EQ(p["settings"].size(), 4u) << p.dump();
  }

  // Settings are checked against what the plugin declared, naming the field.
  EXPECT_EQ(
      farm.Submit("name: g\nrenderer: gradient\nscene: a.grad\nsettings: {bogus: 1}\nframes: 1\n",
                  "ramp", &error),
      -1);
  EXPECT_NE(error.find("settings.bogus"), std::string::npos) << error;
  EXPECT_EQ(
      farm.Submit("name: g\nrenderer: gradient\nscene: a.grad\nsettings: {width: -4}\nframes: 1\n",
                  "ramp", &error),
      -1);
  EXPECT_NE(error.find("settings.width"), std::string::npos) << error;
  EXPECT_EQ(farm.Submit("name: g\nrenderer: gradient\nscene: a.pov\nframes: 1\n", "ramp", &error),
            -1);
  EXPECT_NE(error.find(".grad"), std::string::npos) << error;

  const int64_t id = farm.Submit(job_yaml, "ramp", &error);
  ASSERT_GT(id, 0) << error;
  nlohmann::json job = farm.WaitForJob(id, 60s);
  ASSERT_EQ(job["state"], "done") << job.dump() << farm.SchedulerLog();
  const std::string out = job["output_dir"];
  for (int frame = 1; frame <= 2; ++frame) {
    StatusOr<image::ImageBuffer> img =
        image::Read(out + "/grad.000" + std::to_string(frame) + ".exr");
    ASSERT_TRUE(img.ok()) << img.status().message();
    ExpectGradient(*img, 32, 16, static_cast<float>(frame) + 0.25f);
  }
  // Every task went to the worker that has the plugin.
  EXPECT_EQ(farm.WorkerLog("plain").find("started, frames"), std::string::npos)
      << farm.WorkerLog("plain");

  // The CLI learns the plugin's declaration from the scheduler and checks a job file with it.
  const std::vector<std::string> env = {"TESSERA_SERVER=" + farm.api_url(),
                                        "TESSERA_TOKEN=" + farm.token()};
  WriteFile(farm.dir() + "/ramp.grad", "ramp");
  WriteFile(farm.dir() + "/bad.yaml",
            "name: bad\nrenderer: gradient\nscene: ramp.grad\nsettings: {row_ms: -1}\nframes: 1\n");
  RunResult bad = RunProcess({Bin("tessera"), "submit", farm.dir() + "/bad.yaml"}, 30s, env);
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("settings.row_ms"), std::string::npos) << bad.out << bad.err;
  RunResult listed = RunProcess({Bin("tessera"), "plugins"}, 30s, env);
  EXPECT_NE(listed.out.find("gradient (native)"), std::string::npos) << listed.out << listed.err;
  WriteFile(farm.dir() + "/good.yaml", job_yaml);
  RunResult good = RunProcess({Bin("tessera"), "submit", farm.dir() + "/good.yaml"}, 30s, env);
  ASSERT_EQ(good.exit_code, 0) << good.out << good.err;
  EXPECT_EQ(farm.WaitForJob(std::stoll(good.out), 60s)["state"], "done");

  // After a restart, before any worker is back, jobs naming it are still accepted.
  farm.worker("native").Stop();
  farm.KillScheduler();
  ASSERT_TRUE(farm.StartScheduler(/*reuse_ports=*/true)) << farm.SchedulerLog();
  const int64_t again = farm.Submit(job_yaml, "ramp", &error);
  EXPECT_GT(again, 0) << error;
}

}  // namespace
}  // namespace tessera::testing
