// The C++ renderer plugin API (plugins/api/renderer_api.h): loading a shared library, the ABI
// version check, rendering a frame and a tile, progress, cancel, errors, hand-back with a
// checkpoint and resuming from it; and the built-in path tracer behind the same table.

#include "worker/native_plugin.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "shared/images/accumulation.h"
#include "tests/support/scenes.h"

namespace tessera::worker {
namespace {

std::unique_ptr<NativePlugin> LoadGradient() {
  StatusOr<std::unique_ptr<NativePlugin>> plugin = NativePlugin::Load(TSR_TEST_PLUGIN);
  EXPECT_TRUE(plugin.ok()) << plugin.status().message();
  return plugin.ok() ? std::move(*plugin) : nullptr;
}

TEST(NativePluginTest, LoadsAndRendersFramesAndTiles) {
  std::unique_ptr<NativePlugin> plugin = LoadGradient();
  ASSERT_NE(plugin, nullptr);
  EXPECT_EQ(plugin->name(), "gradient");
  EXPECT_EQ(plugin->version(), "1.0");
  EXPECT_EQ(plugin->description(), "test gradient renderer");
  EXPECT_EQ(plugin->path(), TSR_TEST_PLUGIN);
  EXPECT_EQ(plugin->CapabilityNames(), (std::vector<std::string>{"tiles", "checkpoint"}));
  EXPECT_NE(plugin->declaration_yaml().find("row_ms"), std::string::npos);

  NativePlugin::Request request;
  request.frame = 3;
  request.settings_json = R"({"width": "16", "height": "8", "offset": "0.5"})";
  double last_progress = 0;
  request.on_progress = [&](double f) { last_progress = f; };
  StatusOr<NativePlugin::Result> whole = plugin->Render(request);
  ASSERT_TRUE(whole.ok()) << whole.status().message();
  EXPECT_EQ(whole->image.width, 16);
  EXPECT_EQ(whole->image.height, 8);
  EXPECT_EQ(whole->image.channel_names, (std::vector<std::string>{"R", "G", "B", "A"}));
  EXPECT_EQ(whole->backend, "gradient-cpu");
  EXPECT_FLOAT_EQ(whole->image.pixels[2], 3.5f);  // frame + offset: the settings arrived
  EXPECT_DOUBLE_EQ(last_progress, 1.0);

  request.part.x0 = 4;
  request.part.y0 = 2;
  request.part.x1 = 12;
  request.part.y1 = 6;
  StatusOr<NativePlugin::Result> tile = plugin->Render(request);
  ASSERT_TRUE(tile.ok()) << tile.status().message();
  ASSERT_EQ(tile->image.width, 8);
  ASSERT_EQ(tile->image.height, 4);
  for (int y = 0; y < 4; ++y) {
    for (int x = 0; x < 8 * 4; ++x) {
      ASSERT_EQ(tile->image.pixels[y * 8 * 4 + x],
                whole->image.pixels[(y + 2) * 16 * 4 + 4 * 4 + x]);
    }
  }
}

TEST(NativePluginTest, ErrorsAndCancelComeBackAsStatus) {
  std::unique_ptr<NativePlugin> plugin = LoadGradient();
  ASSERT_NE(plugin, nullptr);
  NativePlugin::Request request;
  request.frame = 5;
  request.scene = "fail";
  StatusOr<NativePlugin::Result> failed = plugin->Render(request);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().message(), "gradient: scene asked to fail at frame 5");
  std::atomic<bool> cancel{true};
  request.scene = "";
  request.cancel = &cancel;
  EXPECT_EQ(plugin->Render(request).status().code(), StatusCode::kCancelled);
}

TEST(NativePluginTest, HandsBackWithACheckpointAndResumesFromIt) {
  std::unique_ptr<NativePlugin> plugin = LoadGradient();
  ASSERT_NE(plugin, nullptr);
  NativePlugin::Request request;
  request.frame = 7;
  std::atomic<bool> handback{false};
  request.handback = &handback;
  std::string checkpoint;
  int samples = -1;
  request.on_checkpoint = [&](std::string bytes, int done) {
    checkpoint = std::move(bytes);
    samples = done;
  };
  // Asked to leave once two rows are done: it stops after the current row.
  request.on_progress = [&](double f) {
    if (f >= 2.0 / 8) handback.store(true);
  };
  StatusOr<NativePlugin::Result> stopped = plugin->Render(request);
  ASSERT_EQ(stopped.status().code(), StatusCode::kCancelled);
  EXPECT_EQ(stopped.status().message(), "handed back");
  EXPECT_EQ(checkpoint, "frame 7 rows 2");
  EXPECT_EQ(samples, 2);

  handback.store(false);
  request.on_progress = nullptr;
  request.resume = checkpoint;
  std::vector<std::string> log;
  request.on_log = [&](const std::string& line) { log.push_back(line); };
  StatusOr<NativePlugin::Result> resumed = plugin->Render(request);
  ASSERT_TRUE(resumed.ok()) << resumed.status().message();
  EXPECT_EQ(log, (std::vector<std::string>{"resuming frame 7 at row 2"}));
}

TEST(NativePluginTest, RefusesAnotherAbiOrAMissingLibrary) {
  StatusOr<std::unique_ptr<NativePlugin>> old = NativePlugin::Load(TSR_TEST_PLUGIN_OTHER_ABI);
  ASSERT_FALSE(old.ok());
  EXPECT_NE(old.status().message().find("built for renderer ABI 99"), std::string::npos)
      << old.status().message();
  StatusOr<std::unique_ptr<NativePlugin>> missing = NativePlugin::Load("/no/such/plugin.so");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("cannot load"), std::string::npos);
  // A worker given a library that does not load still starts, with the path tracer.
  NativePluginList list = LoadNativePlugins({"/no/such/plugin.so", TSR_TEST_PLUGIN});
  ASSERT_EQ(list.size(), 2u);
  EXPECT_NE(FindNativePlugin(list, "pathtracer"), nullptr);
  EXPECT_NE(FindNativePlugin(list, "gradient"), nullptr);
}

// A broken scene (one that does not parse, a mesh that is not there) is a scene error (ABI 2.3,
// TSR_RENDER_SCENE_ERROR): the host reports it as InvalidArgument, which the worker sends as
// failure class scene_error, so the scheduler does not retry it. Other failures stay Internal.
TEST(NativePluginTest, PathTracerSaysWhenTheSceneIsBroken) {
  const NativePlugin* pt = FindNativePlugin(*BuiltinNativePlugins(), "pathtracer");
  ASSERT_NE(pt, nullptr);
  NativePlugin::Request request;
  request.frame = 1;
  request.device = "cpu";
  request.threads = 1;
  request.scene = "width: [";
  StatusOr<NativePlugin::Result> bad = pt->Render(request);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument) << bad.status().message();
  request.scene =
      testing::TinySceneYaml(16, 12, 1) + "  - {type: mesh, file: missing.obj, material: ground}\n";
  StatusOr<NativePlugin::Result> missing = pt->Render(request);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kInvalidArgument) << missing.status().message();
  EXPECT_NE(missing.status().message().find("missing.obj"), std::string::npos);
  // The test plugin's own failure is an ordinary one.
  std::unique_ptr<NativePlugin> gradient = LoadGradient();
  ASSERT_NE(gradient, nullptr);
  request.scene = "fail";
  EXPECT_EQ(gradient->Render(request).status().code(), StatusCode::kInternal);
}

// Periodic checkpoints (ABI 2.1): the path tracer gives one at each safe point where the host
// asks, goes on rendering, and a render resumed from any of them ends bit-identical to the
// uninterrupted one. A plugin without the capability is never asked.
TEST(NativePluginTest, PathTracerGivesPeriodicCheckpointsAndGoesOn) {
  const NativePlugin* pt = FindNativePlugin(*BuiltinNativePlugins(), "pathtracer");
  ASSERT_NE(pt, nullptr);
  ASSERT_TRUE(pt->Can(TSR_CAP_PERIODIC_CHECKPOINT));
  NativePlugin::Request request;
  request.frame = 2;
  request.device = "cpu";
  request.threads = 2;
  request.scene = testing::TinySceneYaml(32, 24, 64);
  StatusOr<NativePlugin::Result> whole = pt->Render(request);
  ASSERT_TRUE(whole.ok()) << whole.status().message();

  // Due at every other pass.
  int asked = 0;
  std::vector<std::pair<std::string, int>> checkpoints;
  NativePlugin::Request periodic = request;
  periodic.checkpoint_due = [&] { return ++asked % 2 == 0; };
  periodic.on_periodic_checkpoint = [&](std::string bytes, int samples) {
    checkpoints.emplace_back(std::move(bytes), samples);
  };
  bool handback_checkpoint = false;
  periodic.on_checkpoint = [&](std::string, int) { handback_checkpoint = true; };
  StatusOr<NativePlugin::Result> done = pt->Render(periodic);
  ASSERT_TRUE(done.ok()) << done.status().message();
  EXPECT_FALSE(handback_checkpoint) << "a periodic checkpoint is not a hand-back";
  EXPECT_EQ(done->image.pixels, whole->image.pixels) << "checkpointing changed the pixels";
  ASSERT_GE(checkpoints.size(), 3u) << "asked " << asked << " times";
  for (size_t i = 1; i < checkpoints.size(); ++i) {
    EXPECT_GT(checkpoints[i].second, checkpoints[i - 1].second);
  }
  EXPECT_LT(checkpoints.back().second, 64) << "none after the last pass";

  const auto& [bytes, samples] = checkpoints[checkpoints.size() / 2];
  StatusOr<accumulation::RenderedImage> parsed = accumulation::ParseAccumulation(bytes);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(parsed->frame, 2);
  EXPECT_EQ(parsed->sample_count, samples);
  NativePlugin::Request resumed = request;
  resumed.resume = bytes;
  StatusOr<NativePlugin::Result> from_checkpoint = pt->Render(resumed);
  ASSERT_TRUE(from_checkpoint.ok()) << from_checkpoint.status().message();
  EXPECT_EQ(from_checkpoint->image.pixels, whole->image.pixels);

  std::unique_ptr<NativePlugin> gradient = LoadGradient();
  ASSERT_NE(gradient, nullptr);
  EXPECT_FALSE(gradient->Can(TSR_CAP_PERIODIC_CHECKPOINT));
  NativePlugin::Request plain;
  plain.frame = 3;
  plain.settings_json = R"({"width": "16", "height": "8"})";
  int gradient_asked = 0;
  plain.checkpoint_due = [&] { return ++gradient_asked > 0; };
  plain.on_periodic_checkpoint = [&](std::string, int) { ADD_FAILURE() << "not asked for"; };
  ASSERT_TRUE(gradient->Render(plain).ok());
  EXPECT_EQ(gradient_asked, 0);
}

// The built-in path tracer is a plugin like any other: its table renders frames, tiles with
// their exact accumulation, and hands back and resumes to the same pixels.
TEST(NativePluginTest, PathTracerRunsBehindTheSameTable) {
  const NativePlugin* pt = FindNativePlugin(*BuiltinNativePlugins(), "pathtracer");
  ASSERT_NE(pt, nullptr);
  EXPECT_TRUE(pt->path().empty());
  EXPECT_EQ(pt->CapabilityNames(), (std::vector<std::string>{"tiles", "sample_parts", "checkpoint",
                                                             "periodic_checkpoint"}));

  NativePlugin::Request request;
  request.frame = 1;
  request.device = "cpu";
  request.threads = 2;
  request.scene = testing::TinySceneYaml(32, 24, 32);
  StatusOr<NativePlugin::Result> whole = pt->Render(request);
  ASSERT_TRUE(whole.ok()) << whole.status().message();
  EXPECT_EQ(whole->image.width, 32);
  EXPECT_EQ(whole->backend, "cpu");
  EXPECT_TRUE(whole->accumulation.empty());

  // A tile asked for its accumulation: parsed, it is exactly the frame's pixels there.
  NativePlugin::Request tile = request;
  tile.part.x0 = 8;
  tile.part.y0 = 4;
  tile.part.x1 = 24;
  tile.part.y1 = 20;
  tile.want_accumulation = true;
  StatusOr<NativePlugin::Result> part = pt->Render(tile);
  ASSERT_TRUE(part.ok()) << part.status().message();
  StatusOr<accumulation::RenderedImage> sums = accumulation::ParseAccumulation(part->accumulation);
  ASSERT_TRUE(sums.ok()) << sums.status().message();
  EXPECT_EQ(sums->x0, 8);
  EXPECT_EQ(sums->sample_count, 32);
  const int c = whole->image.channels;
  for (int y = 0; y < 16; ++y) {
    for (int x = 0; x < 16 * c; ++x) {
      ASSERT_EQ(part->image.pixels[y * 16 * c + x],
                whole->image.pixels[(y + 4) * 32 * c + 8 * c + x]);
    }
  }

  // Hand-back after the first pass, then resume from the checkpoint: the same pixels.
  std::atomic<bool> handback{true};
  std::string checkpoint;
  int samples = 0;
  NativePlugin::Request first = request;
  first.handback = &handback;
  first.on_checkpoint = [&](std::string bytes, int done) {
    checkpoint = std::move(bytes);
    samples = done;
  };
  EXPECT_EQ(pt->Render(first).status().message(), "handed back");
  ASSERT_FALSE(checkpoint.empty());
  EXPECT_GT(samples, 0);
  EXPECT_LT(samples, 32);
  NativePlugin::Request second = request;
  second.resume = checkpoint;
  std::vector<std::string> log;
  second.on_log = [&](const std::string& line) { log.push_back(line); };
  StatusOr<NativePlugin::Result> resumed = pt->Render(second);
  ASSERT_TRUE(resumed.ok()) << resumed.status().message();
  ASSERT_EQ(log.size(), 1u);
  EXPECT_NE(log[0].find("resuming frame 1 from a checkpoint of"), std::string::npos) << log[0];
  EXPECT_EQ(resumed->image.pixels, whole->image.pixels);

  // A bad scene is an error naming the field, through the C boundary.
  request.scene = "width: -3\n";
  StatusOr<NativePlugin::Result> bad = pt->Render(request);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("pathtracer: scene"), std::string::npos)
      << bad.status().message();
}

// The path tracer confined the way a worker runs it: absolute paths only inside the input
// roots, relative ones only inside the task folder, both after symlinks and '..'.
class PathTracerInputsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (std::filesystem::temp_directory_path() /
            ("tessera-inputs-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    std::filesystem::create_directories(dir_ + "/root");
    std::filesystem::create_directories(dir_ + "/task");
    std::ofstream(dir_ + "/root/tri.obj") << kTriangle;
    std::ofstream(dir_ + "/outside.obj") << kTriangle;
    std::ofstream(dir_ + "/task/local.obj") << kTriangle;
    std::filesystem::create_symlink(dir_ + "/outside.obj", dir_ + "/root/escape.obj");
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  // Renders a scene whose one object is a mesh from `file`, the worker's way.
  Status Render(const std::string& file, const std::vector<std::string>& roots) {
    const NativePlugin* tracer = FindNativePlugin(*BuiltinNativePlugins(), "pathtracer");
    NativePlugin::Request request;
    request.frame = 1;
    request.scene =
        "width: 8\nheight: 8\nsamples: 1\nmax_depth: 1\nbackground: {color: [1, 1, 1]}\n"
        "camera: {keyframes: [{frame: 1, position: [0, 0, 3], look_at: [0, 0, 0], fov: 40}]}\n"
        "materials: {m: {type: diffuse, color: [0.5, 0.5, 0.5]}}\n"
        "objects: [{type: mesh, file: '" +
        file + "', material: m}]\n";
    request.scene_dir = dir_ + "/task";
    request.settings_json = nlohmann::json{{TSR_SETTING_INPUT_ROOTS, nlohmann::json(roots)}}.dump();
    return tracer->Render(request).status();
  }

  static constexpr const char* kTriangle = "v -1 -1 0\nv 1 -1 0\nv 0 1 0\nf 1 2 3\n";
  std::string dir_;
};

TEST_F(PathTracerInputsTest, AbsolutePathsAreRefusedWithoutInputRoots) {
  Status s = Render("/etc/shadow", {});
  EXPECT_EQ(s.message(),
            "pathtracer: objects[0].file: '/etc/shadow' is an absolute path; this worker reads no "
            "files outside the task folder (worker.input_roots is empty)");
  // Any absolute path, even one that exists and is harmless.
  s = Render(dir_ + "/root/tri.obj", {});
  EXPECT_NE(s.message().find("worker.input_roots is empty"), std::string::npos) << s.message();
}

TEST_F(PathTracerInputsTest, PathsInsideARootRenderAndLinksOutOfItAreRefused) {
  const std::string root = std::filesystem::canonical(dir_ + "/root").string();
  EXPECT_TRUE(Render(dir_ + "/root/tri.obj", {root}).ok());
  Status s = Render(dir_ + "/root/escape.obj", {root});
  EXPECT_EQ(s.message(), "pathtracer: objects[0].file: '" + dir_ + "/root/escape.obj' (" +
                             std::filesystem::canonical(dir_ + "/outside.obj").string() +
                             ") is outside this worker's input roots (" + root + ")");
  s = Render(dir_ + "/root/../outside.obj", {root});
  EXPECT_NE(s.message().find("is outside this worker's input roots"), std::string::npos)
      << s.message();
  s = Render("/etc/passwd", {root});
  EXPECT_NE(s.message().find("'/etc/passwd' is outside this worker's input roots"),
            std::string::npos)
      << s.message();
}

TEST_F(PathTracerInputsTest, RelativePathsStayInsideTheTaskFolder) {
  EXPECT_TRUE(Render("local.obj", {}).ok());
  Status s = Render("../outside.obj", {});
  EXPECT_EQ(s.message(),
            "pathtracer: objects[0].file: '../outside.obj' leads outside the task folder");
  std::filesystem::create_symlink(dir_ + "/outside.obj", dir_ + "/task/link.obj");
  s = Render("link.obj", {});
  EXPECT_EQ(s.message(), "pathtracer: objects[0].file: 'link.obj' leads outside the task folder");
}

}  // namespace
}  // namespace tessera::worker
