// The plugin host running real programs: no shell, process-group kill at the timeout, crashes,
// a renderer that exits 0 without an image, a missing program, and POV-Ray tiles (when
// installed) cropped to the region and identical to the same pixels of a whole-frame render.

#include "worker/plugin_host.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <thread>

#include "shared/plugin_catalog.h"

namespace tessera::worker {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct RunOutcome {
  Status status;
  std::vector<std::pair<int, image::ImageBuffer>> frames;
  std::vector<double> progress;
};

class PluginHostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() /
            ("tessera-plugin-host-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  RunOutcome Execute(const std::string& renderer, protocol::Assign assign) {
    AvailablePlugin plugin;
    plugin.spec = *plugin::FindBuiltinPlugin(renderer);
    if (plugin.spec.executable_setting.empty()) {
      auto found = FindProgram(plugin.spec.executable_names.front(), EffectivePluginPath(""));
      plugin.executable = found.value_or("");
    }
    assign.renderer = renderer;
    RunOutcome run;
    PluginTaskOptions options;
    options.data_dir = dir_;
    options.search_path = EffectivePluginPath("");
    options.threads = 1;
    options.cancel = &cancel_;
    options.on_progress = [&](double f) { run.progress.push_back(f); };
    options.on_frame = [&](int frame, image::ImageBuffer img, double) {
      run.frames.emplace_back(frame, std::move(img));
      return Status::Ok();
    };
    run.status = RunPluginTask(plugin, assign, options);
    return run;
  }

  static protocol::Assign Command(std::vector<std::string> argv, const std::string& program) {
    protocol::Assign a;
    a.task_id = 1;
    a.attempt = 1;
    a.job_id = 1;
    a.frame_start = a.frame_end = 1;
    a.settings = {{"program", program}, {"argv", nlohmann::json(argv).dump()}};
    return a;
  }

  std::string dir_;
  std::atomic<bool> cancel_{false};
};

bool Installed(const std::string& name) {
  return FindProgram(name, EffectivePluginPath("")).has_value();
}

TEST_F(PluginHostTest, ShellMetacharactersAreHarmlessWithoutAShell) {
  const std::string marker = dir_ + "/pwned";
  // If a shell ever saw these words, it would create the marker file.
  protocol::Assign a = Command({"x; touch " + marker, "$(touch " + marker + ")",
                                "`touch " + marker + "`", "| touch " + marker},
                               "echo");
  a.scene_name = "scene;touch pwned $(id).txt";
  a.scene_yaml = "text";
  RunOutcome run = Execute("command", a);
  EXPECT_FALSE(run.status.ok());
  EXPECT_TRUE(fs::exists(dir_) && !fs::exists(dir_ + "/tasks/job1-task1-a1"))
      << "the task folder is removed";
  EXPECT_NE(run.status.message().find("wrote no image for frame 1"), std::string::npos)
      << run.status.message();
  EXPECT_NE(run.status.message().find("x; touch"), std::string::npos)
      << "the words reach echo literally: " << run.status.message();
  EXPECT_FALSE(fs::exists(marker));
}

TEST_F(PluginHostTest, ProgressAndErrorPatternsAreParsed) {
  RunOutcome run =
      Execute("command", Command({"-c", "echo PROGRESS 50%; echo 'ERROR: out of cheese'"}, "sh"));
  ASSERT_FALSE(run.status.ok());
  EXPECT_NE(run.status.message().find("reported errors: ERROR: out of cheese"), std::string::npos)
      << run.status.message();
  ASSERT_FALSE(run.progress.empty());
  EXPECT_DOUBLE_EQ(run.progress.front(), 0.5);
}

TEST_F(PluginHostTest, HangingRendererIsKilledWithItsChildrenAtTheTimeout) {
  const std::string pidfile = dir_ + "/child.pid";
  // The program starts a grandchild that would outlive it; the whole group must go.
  protocol::Assign a = Command({"-c", "sleep 60 & echo $! > " + pidfile + "; wait"}, "sh");
  a.timeout_s = 1;
  const auto start = Clock::now();
  RunOutcome run = Execute("command", a);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
  ASSERT_FALSE(run.status.ok());
  EXPECT_NE(run.status.message().find("killed at the task timeout (1 s)"), std::string::npos)
      << run.status.message();
  std::ifstream in(pidfile);
  pid_t child = 0;
  ASSERT_TRUE(in >> child);
  // The grandchild was killed (allow the kernel a moment to reap it).
  bool gone = false;
  for (int i = 0; i < 50 && !gone; ++i) {
    // Killed: gone, or a zombie waiting for a reaper that is not ours.
    std::ifstream stat("/proc/" + std::to_string(child) + "/stat");
    std::string pid_text, comm, state;
    gone = ::kill(child, 0) != 0 || !(stat >> pid_text >> comm >> state) || state == "Z";
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(gone) << "sleep " << child << " survived";
}

TEST_F(PluginHostTest, CancelStopsTheRenderer) {
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    cancel_.store(true);
  });
  const auto start = Clock::now();
  RunOutcome run = Execute("command", Command({"60"}, "sleep"));
  canceller.join();
  EXPECT_EQ(run.status.code(), StatusCode::kCancelled) << run.status.message();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
}

TEST_F(PluginHostTest, CrashIsReportedWithTheSignal) {
  RunOutcome run = Execute("command", Command({"-c", "echo rendering; kill -SEGV $$"}, "sh"));
  ASSERT_FALSE(run.status.ok());
  EXPECT_NE(run.status.message().find("crashed (killed by signal 11"), std::string::npos)
      << run.status.message();
  EXPECT_NE(run.status.message().find("rendering"), std::string::npos) << "last output is shown";
}

TEST_F(PluginHostTest, FailingExitCodeAndMissingImageAndMissingProgram) {
  RunOutcome run = Execute("command", Command({"-c", "exit 3"}, "sh"));
  EXPECT_NE(run.status.message().find("failed with exit code 3"), std::string::npos)
      << run.status.message();
  run = Execute("command", Command({}, "true"));
  EXPECT_NE(run.status.message().find("exited with code 0 but wrote no image for frame 1"),
            std::string::npos)
      << run.status.message();
  protocol::Assign samples = Command({}, "true");
  samples.part.sample_end = 4;  // a sample range: only the path tracer can split samples
  run = Execute("command", samples);
  EXPECT_NE(run.status.message().find("cannot render a range of samples"), std::string::npos)
      << run.status.message();
  run = Execute("command", Command({}, "no-such-renderer-here"));
  EXPECT_NE(run.status.message().find("is not found on this worker"), std::string::npos)
      << run.status.message();
}

TEST_F(PluginHostTest, CommandImagesAreReadPerFrame) {
  if (!Installed("oiiotool")) GTEST_SKIP() << "oiiotool is not installed";
  protocol::Assign a = Command({"--pattern", "constant:color=0.5,0.25,1", "8x4", "3", "-d", "uint8",
                                "-o", "{output_dir}/frame_{frame:06}.png"},
                               "oiiotool");
  RunOutcome run = Execute("command", a);
  ASSERT_TRUE(run.status.ok()) << run.status.message();
  ASSERT_EQ(run.frames.size(), 1u);
  const image::ImageBuffer& img = run.frames[0].second;
  EXPECT_EQ(img.width, 8);
  EXPECT_EQ(img.height, 4);
  // 8-bit sRGB came back linear: about 0.5 in sRGB is about 0.21 linear.
  EXPECT_NEAR(img.pixels[0], image::SrgbToLinear(0.5f), 0.005);
}

TEST_F(PluginHostTest, PovrayTileMatchesTheSameRegionOfTheWholeFrame) {
  if (!Installed("povray")) GTEST_SKIP() << "povray is not installed (apt-get install povray)";
  protocol::Assign a;
  a.task_id = 2;
  a.attempt = 1;
  a.frame_start = a.frame_end = 2;
  a.scene_name = "tile.pov";
  a.scene_yaml =
      "#version 3.7;\nglobal_settings { assumed_gamma 1.0 }\n"
      "camera { location <0,1,-4> look_at <0,0,0> }\n"
      "light_source { <2,4,-3> color rgb 1 }\n"
      "sphere { <clock*0.2,0,0>, 1 pigment { color rgb <1,0.3,0.2> } }\n"
      "plane { y, -1 pigment { checker color rgb 1 color rgb 0.1 } }\n";
  a.settings = {{"width", "64"}, {"height", "48"}};
  RunOutcome whole = Execute("povray", a);
  ASSERT_TRUE(whole.status.ok()) << whole.status.message();
  ASSERT_EQ(whole.frames.size(), 1u);
  a.part.x0 = 16;
  a.part.y0 = 8;
  a.part.x1 = 40;
  a.part.y1 = 30;
  RunOutcome tile = Execute("povray", a);
  ASSERT_TRUE(tile.status.ok()) << tile.status.message();
  ASSERT_EQ(tile.frames.size(), 1u);
  const image::ImageBuffer& w = whole.frames[0].second;
  const image::ImageBuffer& t = tile.frames[0].second;
  ASSERT_EQ(t.width, 24);
  ASSERT_EQ(t.height, 22);
  ASSERT_EQ(t.channels, w.channels);
  int differing = 0;
  for (int y = 0; y < t.height; ++y) {
    for (int x = 0; x < t.width * t.channels; ++x) {
      differing += t.pixels[y * t.width * t.channels + x] !=
                   w.pixels[(y + 8) * w.width * w.channels + 16 * w.channels + x];
    }
  }
  EXPECT_EQ(differing, 0);
  EXPECT_FALSE(tile.progress.empty()) << "POV-Ray's 'Rendered N of M pixels' is progress";
}

TEST_F(PluginHostTest, BlenderBorderTileMatchesTheSameRegionOfTheWholeFrame) {
  if (!Installed("blender")) GTEST_SKIP() << "blender is not installed (apt-get install blender)";
  protocol::Assign a;
  a.task_id = 3;
  a.attempt = 1;
  a.frame_start = a.frame_end = 1;
  a.scene_name = "scene.py";
  a.scene_yaml =
      "import bpy\n"
      "scene = bpy.context.scene\n"
      "for obj in list(bpy.data.objects):\n"
      "    bpy.data.objects.remove(obj)\n"
      "bpy.ops.mesh.primitive_uv_sphere_add(radius=1, location=(0, 0, 0))\n"
      "bpy.ops.object.light_add(type='SUN', location=(2, -2, 4))\n"
      "bpy.ops.object.camera_add(location=(0, -6, 1), rotation=(1.45, 0, 0))\n"
      "scene.camera = bpy.context.object\n";
  a.settings = {{"width", "64"}, {"height", "48"}, {"samples", "4"}, {"seed", "0"}};
  RunOutcome whole = Execute("blender", a);
  ASSERT_TRUE(whole.status.ok()) << whole.status.message();
  ASSERT_EQ(whole.frames.size(), 1u);
  a.part.x0 = 32;
  a.part.y0 = 24;
  a.part.x1 = 64;
  a.part.y1 = 48;
  RunOutcome tile = Execute("blender", a);
  ASSERT_TRUE(tile.status.ok()) << tile.status.message();
  ASSERT_EQ(tile.frames.size(), 1u);
  const image::ImageBuffer& w = whole.frames[0].second;
  const image::ImageBuffer& t = tile.frames[0].second;
  ASSERT_EQ(w.width, 64);
  ASSERT_EQ(t.width, 32);
  ASSERT_EQ(t.height, 24);
  double worst = 0;
  for (int y = 0; y < t.height; ++y) {
    for (int x = 0; x < t.width * t.channels; ++x) {
      worst = std::max<double>(
          worst, std::fabs(t.pixels[y * t.width * t.channels + x] -
                           w.pixels[(y + 24) * w.width * w.channels + 32 * w.channels + x]));
    }
  }
  // Cycles seeds each pixel by its position, so a border render repeats the frame's pixels.
  EXPECT_LE(worst, 1e-5);
  EXPECT_FALSE(whole.progress.empty()) << "Blender's 'Sample N/M' is progress";
}

}  // namespace
}  // namespace tessera::worker
