// Command-line renderer plugins running real programs: no shell, process-group kill at the timeout,
// crashes, a renderer that exits 0 without an image, a missing program, and POV-Ray tiles (when
// installed) cropped to the region and identical to the same pixels of a whole-frame render.
// What a job may make it run: only programs on the worker's allow-list, as worker.run_as,
// without the worker's TESSERA_* environment; what a renderer prints is kept as valid UTF-8.

#include "worker/command_plugin.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <thread>

#include "shared/base/utf8.h"
#include "shared/plugins/plugin_catalog.h"
#include "tests/support/require.h"

namespace tessera::worker {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct RunOutcome {
  Status status;
  std::vector<std::pair<int, image::ImageBuffer>> frames;
  std::vector<double> progress;
  std::vector<std::string> output;  // every line the renderer printed, as the worker keeps it
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
    CommandPlugin plugin;
    plugin.spec = *plugin::FindBuiltinPlugin(renderer);
    if (plugin.spec.executable_setting.empty()) {
      auto found = FindProgram(plugin.spec.executable_names.front(), EffectivePluginPath(""));
      plugin.executable = found.value_or("");
    }
    assign.renderer = renderer;
    RunOutcome run;
    CommandPluginOptions options;
    options.data_dir = dir_;
    options.search_path = EffectivePluginPath("");
    options.command_programs = programs_;
    options.run_as = run_as_;
    options.threads = 1;
    options.cancel = &cancel_;
    options.on_progress = [&](double f) { run.progress.push_back(f); };
    options.on_output = [&](const std::string& line) { run.output.push_back(line); };
    options.on_frame = [&](int frame, image::ImageBuffer img, double) {
      run.frames.emplace_back(frame, std::move(img));
      return Status::Ok();
    };
    run.status = RunCommandPlugin(plugin, assign, options);
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

  // Writes an executable script into the test folder; returns its path.
  std::string Script(const std::string& name, const std::string& body) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << "#!/bin/sh\n" << body;
    ::chmod(path.c_str(), 0755);
    return path;
  }

  std::string dir_;
  std::atomic<bool> cancel_{false};
  // The worker's worker.command_programs for these runs.
  std::vector<std::string> programs_ = {"echo", "sh",       "sleep",
                                        "true", "oiiotool", "no-such-renderer-here"};
  std::optional<subprocess::Identity> run_as_;
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

TEST_F(PluginHostTest, EnvSettingsReachTheProgramButNeverTheWorkersOwnVariables) {
  const std::string script = Script("env.sh", "echo \"$SIM_QUALITY|$HOME|$PATH\" > \"$1/seen\"\n");
  programs_.push_back(script);
  protocol::Assign a = Command({dir_}, script);
  a.settings["outputs"] = "none";
  a.settings["env"] = R"({"SIM_QUALITY": "high"})";
  RunOutcome run = Execute("command", a);
  ASSERT_TRUE(run.status.ok()) << run.status.message();
  std::ifstream in(dir_ + "/seen");
  std::string seen;
  std::getline(in, seen);
  EXPECT_EQ(seen.substr(0, seen.find('|')), "high") << seen;
  EXPECT_NE(seen.find("|/"), std::string::npos) << "HOME is the task folder: " << seen;
  // An assignment naming a variable the worker owns (as a scheduler that did not check might
  // send) fails the task before anything runs, naming it.
  fs::remove(dir_ + "/seen");
  a.settings["env"] = R"({"SIM_QUALITY": "high", "LD_PRELOAD": "/tmp/evil.so"})";
  run = Execute("command", a);
  EXPECT_EQ(run.status.message(),
            "settings.env.LD_PRELOAD: the dynamic loader's variables may not be set");
  EXPECT_FALSE(fs::exists(dir_ + "/seen"));
}

TEST_F(PluginHostTest, WithoutOutputsSuccessIsTheExitCodeAndNothingIsReadBack) {
  // A task of three frames that writes a file per frame somewhere of its own, and no image.
  const std::string script =
      Script("sim.sh",
             "i=$2\nwhile [ \"$i\" -le \"$3\" ]; do echo \"$i\" > \"$1/cache.$i\"; "
             "i=$((i + 1)); done\n");
  programs_.push_back(script);
  protocol::Assign a = Command({dir_, "{frame_start}", "{frame_end}"}, script);
  a.frame_start = 1;
  a.frame_end = 3;
  a.settings["outputs"] = "none";
  RunOutcome run = Execute("command", a);
  ASSERT_TRUE(run.status.ok()) << run.status.message();
  EXPECT_TRUE(run.frames.empty()) << "nothing read back";
  for (int f = 1; f <= 3; ++f) EXPECT_TRUE(fs::exists(dir_ + "/cache." + std::to_string(f)));

  // The exit code and the error pattern still fail it; "images" still wants its images.
  a = Command({"-c", "exit 3"}, "sh");
  a.settings["outputs"] = "none";
  run = Execute("command", a);
  EXPECT_NE(run.status.message().find("failed with exit code 3"), std::string::npos)
      << run.status.message();
  a = Command({"ERROR: the cache is corrupt"}, "echo");
  a.settings["outputs"] = "none";
  run = Execute("command", a);
  EXPECT_NE(run.status.message().find("reported errors: ERROR: the cache is corrupt"),
            std::string::npos)
      << run.status.message();
  a = Command({}, "true");
  a.settings["outputs"] = "images";
  run = Execute("command", a);
  EXPECT_NE(run.status.message().find("wrote no image for frame 1"), std::string::npos)
      << run.status.message();
}

TEST_F(PluginHostTest, OutputFilePatternsMatchOnlyPlainFilesInsideTheTaskFolder) {
  const std::string task = dir_ + "/task";
  fs::create_directories(task + "/cache/deep");
  fs::create_directories(task + "/.hidden");
  for (const char* f : {"cache/a.vdb", "cache/b.vdb", "cache/deep/c.vdb", "cache/.d.vdb",
                        ".hidden/e.vdb", "log.txt"}) {
    std::ofstream(task + "/" + f) << f;
  }
  // '*' stays within a folder, a leading '.' only by name; the result is sorted and unique.
  auto files = MatchOutputFiles(task, {"cache/*.vdb", "cache/a.*"});
  ASSERT_TRUE(files.ok()) << files.status().message();
  EXPECT_EQ(*files, (std::vector<std::string>{"cache/a.vdb", "cache/b.vdb"}));
  files = MatchOutputFiles(task, {"cache/*/*.vdb", "*.txt"});
  ASSERT_TRUE(files.ok()) << files.status().message();
  EXPECT_EQ(*files, (std::vector<std::string>{"cache/deep/c.vdb", "log.txt"}));
  // Every pattern must match; a link (to anything) is never read; nor a name a job's output
  // may not have.
  files = MatchOutputFiles(task, {"cache/*.vdb", "*.exr"});
  EXPECT_EQ(files.status().message(), "settings.files: '*.exr' matched no file");
  fs::create_symlink("/etc/hostname", task + "/cache/z.vdb");
  files = MatchOutputFiles(task, {"cache/*.vdb"});
  EXPECT_EQ(files.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(files.status().message().find("cache/z.vdb is a link"), std::string::npos);
  fs::remove(task + "/cache/z.vdb");
  std::ofstream(task + "/cache/bad;name.vdb") << "x";
  files = MatchOutputFiles(task, {"cache/*.vdb"});
  EXPECT_NE(files.status().message().find("may hold only letters"), std::string::npos)
      << files.status().message();
}

TEST_F(PluginHostTest, OnlyProgramsOnTheAllowListRun) {
  const std::string marker = dir_ + "/pwned";
  programs_ = {"echo", "python3"};
  // `program: sh, argv: [-c, ...]` is a shell: not allowed unless sh itself is listed.
  RunOutcome run = Execute("command", Command({"-c", "touch " + marker}, "sh"));
  ASSERT_FALSE(run.status.ok());
  EXPECT_EQ(run.status.code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(run.status.message(),
            "settings.program: 'sh' is not a program this worker allows "
            "(worker.command_programs: echo, python3)");
  EXPECT_FALSE(fs::exists(marker));
  EXPECT_TRUE(run.output.empty()) << "nothing was started";
  // An interpreter on the list implies nothing else, and a name is not its absolute path.
  run = Execute("command", Command({"-c", "touch " + marker}, "/bin/sh"));
  EXPECT_EQ(run.status.code(), StatusCode::kPermissionDenied) << run.status.message();
  if (auto python = FindProgram("python3", EffectivePluginPath(""))) {
    run = Execute("command", Command({"-c", "print(1)"}, *python));
    EXPECT_EQ(run.status.code(), StatusCode::kPermissionDenied) << run.status.message();
  }
  EXPECT_FALSE(fs::exists(marker));
  // A listed program runs.
  run = Execute("command", Command({"allowed-and-ran"}, "echo"));
  EXPECT_NE(run.status.message().find("wrote no image"), std::string::npos) << run.status.message();
  ASSERT_EQ(run.output.size(), 2u);
  EXPECT_EQ(run.output[1], "allowed-and-ran");
  // An absolute path is allowed when the list names that path.
  const std::string script = Script("render.sh", "echo script-ran\n");
  programs_ = {script};
  run = Execute("command", Command({}, script));
  ASSERT_EQ(run.output.size(), 2u) << run.status.message();
  EXPECT_EQ(run.output[1], "script-ran");
}

TEST_F(PluginHostTest, AnEmptyAllowListTurnsTheCommandRendererOff) {
  programs_.clear();
  RunOutcome run = Execute("command", Command({"hello"}, "echo"));
  EXPECT_EQ(run.status.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(run.status.message(),
            "renderer command is off on this worker: worker.command_programs lists no program a "
            "job may run");
  // And the worker does not offer it to the scheduler.
  for (const CommandPlugin& p : DetectCommandPlugins(EffectivePluginPath(""), {})) {
    EXPECT_NE(p.spec.name, "command");
  }
  bool offered = false;
  for (const CommandPlugin& p : DetectCommandPlugins(EffectivePluginPath(""), {"echo"})) {
    offered |= p.spec.name == "command";
  }
  EXPECT_TRUE(offered);
}

TEST_F(PluginHostTest, RenderersGetNoneOfTheWorkersTesseraEnvironment) {
  ::setenv("TESSERA_SCHEDULER_JOIN_TOKEN", "tsrj-secret-of-the-worker", 1);
  programs_ = {"sh"};
  RunOutcome run = Execute("command", Command({"-c", "env; echo HOME=$HOME"}, "sh"));
  ::unsetenv("TESSERA_SCHEDULER_JOIN_TOKEN");
  bool home = false;
  for (const std::string& line : run.output) {
    EXPECT_EQ(line.find("tsrj-secret-of-the-worker"), std::string::npos) << line;
    home |= line == "HOME=" + dir_ + "/tasks/job1-task1-a1";
  }
  EXPECT_TRUE(home) << "HOME is the task folder";
}

// A renderer sees the task's GPUs as CUDA_VISIBLE_DEVICES, in order; a task without a GPU sees
// it set and empty, so CUDA gives it no device at all.
TEST_F(PluginHostTest, RendererSeesOnlyTheTasksGpus) {
  programs_ = {"sh"};
  // "{{" and "}}" are literal braces (a lone "{" starts a placeholder).
  const std::vector<std::string> argv = {"-c", "echo \"CUDA=[${{CUDA_VISIBLE_DEVICES-unset}}]\""};
  protocol::Assign two = Command(argv, "sh");
  two.gpus = {1, 3};
  RunOutcome run = Execute("command", two);
  EXPECT_NE(std::find(run.output.begin(), run.output.end(), "CUDA=[1,3]"), run.output.end())
      << ::testing::PrintToString(run.output);
  run = Execute("command", Command(argv, "sh"));
  EXPECT_NE(std::find(run.output.begin(), run.output.end(), "CUDA=[]"), run.output.end())
      << ::testing::PrintToString(run.output);
}

TEST_F(PluginHostTest, RendererOutputThatIsNotUtf8IsKeptSanitised) {
  const std::string script =
      Script("garbage.sh", "printf 'frame \\377\\376 done\\n'; printf 'ERROR: bad \\300\\n'\n");
  programs_ = {script};
  RunOutcome run = Execute("command", Command({}, script));
  ASSERT_FALSE(run.status.ok());
  for (const std::string& line : run.output) EXPECT_TRUE(utf8::IsValid(line)) << line;
  ASSERT_GE(run.output.size(), 3u);
  EXPECT_EQ(run.output[1], "frame \xEF\xBF\xBD\xEF\xBF\xBD done");
  EXPECT_TRUE(utf8::IsValid(run.status.message())) << run.status.message();
  EXPECT_NE(run.status.message().find("ERROR: bad \xEF\xBF\xBD"), std::string::npos)
      << run.status.message();
}

TEST_F(PluginHostTest, AnImageThatIsALinkIsRefused) {
  programs_ = {"sh"};
  const std::string secret = dir_ + "/secret.png";
  std::ofstream(secret) << "not for the renderer";
  RunOutcome run = Execute(
      "command",
      Command({"-c", "ln -s " + secret + " \"$1\"/frame_000001.png", "sh", "{output_dir}"}, "sh"));
  EXPECT_EQ(run.status.code(), StatusCode::kPermissionDenied) << run.status.message();
  EXPECT_NE(run.status.message().find("as a link or special file"), std::string::npos)
      << run.status.message();
}

TEST_F(PluginHostTest, RenderersRunAsTheConfiguredUser) {
  TSR_REQUIRE(::geteuid() == 0, "needs root to change user");
  StatusOr<subprocess::Identity> nobody = subprocess::LookupUser("nobody");
  ASSERT_TRUE(nobody.ok()) << nobody.status().message();
  run_as_ = *nobody;
  programs_ = {"id", "sh"};
  RunOutcome run = Execute("command", Command({"-u"}, "id"));
  ASSERT_GE(run.output.size(), 2u) << run.status.message();
  EXPECT_EQ(run.output[1], std::to_string(nobody->uid));
  run = Execute("command", Command({"-G"}, "id"));
  ASSERT_GE(run.output.size(), 2u) << run.status.message();
  EXPECT_EQ(run.output[1].find(" 0"), std::string::npos) << "no root group: " << run.output[1];
  // It can write its images in the task folder (handed to it), and nothing of root's.
  const std::string marker = dir_ + "/root-only";
  ::mkdir(marker.c_str(), 0755);
  run =
      Execute("command",
              Command({"-c", "touch \"$1\"/x && echo wrote; touch " + marker + "/y || echo refused",
                       "sh", "{output_dir}"},
                      "sh"));
  ASSERT_GE(run.output.size(), 3u) << run.status.message();
  EXPECT_EQ(run.output[1], "wrote");
  EXPECT_EQ(run.output.back(), "refused");
  EXPECT_FALSE(fs::exists(marker + "/y"));
}

TEST_F(PluginHostTest, CommandImagesAreReadPerFrame) {
  TSR_REQUIRE(Installed("oiiotool"),
              "oiiotool is not installed (apt-get install openimageio-tools)");
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
  TSR_REQUIRE(Installed("povray"), "povray is not installed (apt-get install povray)");
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
  TSR_REQUIRE(Installed("blender"), "blender is not installed (apt-get install blender)");
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
