// Renderer plugin descriptions: the strict parser, settings validation and argv expansion (no
// shell, no option injection, nothing escaping the task folder).

#include "shared/plugins/plugin_file.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "shared/base/yaml_util.h"
#include "shared/jobs/job_file.h"
#include "shared/plugins/plugin_catalog.h"

namespace tessera::plugin {
namespace {

const char* kMinimal = R"(
name: demo
executable: {names: [demo]}
args: ["--in", "{scene}", "-o", "{output}", "--frame={frame:04}", "--q={settings.quality}"]
output: {file: "f{frame:04}.png"}
settings:
  quality: {type: int, min: 1, max: 10, default: 5}
  mode: {type: enum, values: [fast, slow]}
  label: {type: string}
  out: {type: path, args: ["--save", "{value}"]}
  fast: {type: bool, args: ["--fast"]}
)";

PluginSpec Minimal() {
  StatusOr<PluginSpec> p = ParsePluginYaml(kMinimal, "demo");
  EXPECT_TRUE(p.ok()) << p.status().message();
  return *p;
}

RunContext Context(const PluginSpec& p, Settings given) {
  RunContext ctx;
  ctx.task_dir = "/data/tasks/t1";
  ctx.output_dir = "/data/tasks/t1/out";
  ctx.scene = "/data/tasks/t1/scene.pov";
  ctx.frame = ctx.frame_start = ctx.frame_end = 7;
  StatusOr<Settings> s = ResolveSettings(p, given);
  EXPECT_TRUE(s.ok()) << s.status().message();
  if (s.ok()) ctx.settings = *s;
  return ctx;
}

TEST(PluginSpecTest, BuiltinPluginsParse) {
  ASSERT_EQ(BuiltinPluginSources().size(), BuiltinPlugins().size());
  for (const char* name : {"povray", "blender", "command"}) {
    EXPECT_NE(FindBuiltinPlugin(name), nullptr) << name;
  }
  EXPECT_TRUE(FindBuiltinPlugin("povray")->tiles);
  EXPECT_FALSE(FindBuiltinPlugin("blender")->per_frame);
}

TEST(PluginSpecTest, ErrorsNameTheField) {
  auto error = [](const std::string& yaml) {
    StatusOr<PluginSpec> p = ParsePluginYaml(yaml, "plugin.yaml");
    return p.ok() ? std::string("ok") : p.status().message();
  };
  const std::string head = "name: demo\nexecutable: {names: [demo]}\noutput: {file: a.png}\n";
  EXPECT_NE(error(head + "args: [x]\nbogus: 1\n").find("bogus: unknown field"), std::string::npos);
  EXPECT_NE(error(head + "args: [\"{fram}\"]\n").find("args[0]: unknown placeholder {fram}"),
            std::string::npos);
  EXPECT_NE(error(head + "args: [x]\nruns: sometimes\n").find("runs:"), std::string::npos);
  EXPECT_NE(
      error(head + "args: [x]\nprogress: {regex: '(', percent_group: 1}\n").find("progress.regex"),
      std::string::npos);
  EXPECT_NE(error(head + "args: [x]\nsettings: {q: {type: colour}}\n").find("settings.q.type"),
            std::string::npos);
  EXPECT_NE(error(head + "args: [x]\nsettings: {q: {type: int, max: 3, default: 9}}\n")
                .find("settings.q.default"),
            std::string::npos);
  EXPECT_NE(error(head + "args: [{when: sometimes, args: [x]}]\n").find("args[0].when"),
            std::string::npos);
  EXPECT_NE(error("name: demo\nargs: [x]\noutput: {file: a.png}\n").find("executable"),
            std::string::npos);
}

// A plugin that takes another step's frames (plugins/encode): input_frames names a required
// string setting and runs once per task; without output.file it may offer no images; a fixed
// setting is its default, and a job giving another value is refused.
TEST(PluginSpecTest, InputFramesFixedSettingsAndPluginsWithoutImages) {
  const PluginSpec* encode = FindBuiltinPlugin("encode");
  ASSERT_NE(encode, nullptr);
  EXPECT_EQ(encode->input_frames_setting, "frames_from");
  EXPECT_FALSE(encode->per_frame);
  EXPECT_TRUE(encode->output.empty());
  EXPECT_EQ(InputFrameName(0), "frames/000000.png");
  EXPECT_EQ(InputFrameName(9999), "frames/009999.png");

  StatusOr<Settings> resolved = ResolveSettings(*encode, {{"frames_from", "render"}});
  ASSERT_TRUE(resolved.ok()) << resolved.status().message();
  EXPECT_EQ(resolved->at("outputs"), "files");
  EXPECT_EQ(resolved->at("files"), R"(["preview.mp4"])");
  // Resolved settings pass again as they are (a worker resolves them again); another value not.
  EXPECT_TRUE(ResolveSettings(*encode, *resolved).ok());
  StatusOr<Settings> other =
      ResolveSettings(*encode, {{"frames_from", "render"}, {"files", R"(["x.mp4"])"}});
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().message(),
            R"(settings.files: fixed by renderer encode (always ["preview.mp4"]))");
  EXPECT_FALSE(ResolveSettings(*encode, {}).ok());  // frames_from is required
  RunContext ctx;
  ctx.task_dir = "/t";
  ctx.settings = *resolved;
  StatusOr<std::vector<std::string>> argv = BuildArgv(*encode, ctx);
  ASSERT_TRUE(argv.ok()) << argv.status().message();
  const std::string line = [&] {
    std::string joined;
    for (const std::string& w : *argv) joined += w + " ";
    return joined;
  }();
  EXPECT_NE(line.find("-framerate 24 -start_number 0 -i /t/frames/%06d.png"), std::string::npos)
      << line;
  EXPECT_NE(line.find("-crf 23"), std::string::npos) << line;
  EXPECT_NE(line.find("/t/preview.mp4"), std::string::npos) << line;

  auto error = [](const std::string& yaml) {
    StatusOr<PluginSpec> p = ParsePluginYaml(yaml, "plugin.yaml");
    return p.ok() ? std::string("ok") : p.status().message();
  };
  const std::string head = "name: demo\nexecutable: {names: [demo]}\nargs: [x]\nruns: task\n";
  const std::string no_images =
      "settings:\n  from: {type: string, required: true}\n"
      "  outputs: {type: enum, values: [files], default: files, fixed: true}\n";
  EXPECT_EQ(error(head + "input_frames: {from_setting: from}\n" + no_images), "ok");
  EXPECT_NE(
      error(head + no_images.substr(0, no_images.find("  outputs"))).find("output.file: required"),
      std::string::npos);
  EXPECT_NE(error(head + "input_frames: {from_setting: nope}\n" + no_images)
                .find("input_frames.from_setting: 'nope' must be a required string setting"),
            std::string::npos);
  EXPECT_NE(error("name: demo\nexecutable: {names: [demo]}\nargs: [x]\n"
                  "input_frames: {from_setting: from}\n" +
                  no_images)
                .find("input_frames: a plugin taking another step's frames runs once per task"),
            std::string::npos);
  EXPECT_NE(error(head + "output: {file: a.png}\nsettings: {q: {type: int, fixed: true}}\n")
                .find("settings.q.fixed: a fixed setting needs its default"),
            std::string::npos);
}

TEST(PluginSpecTest, FailureClassesMapExitCodesAndPatterns) {
  // The built-in plugins name their classes: POV-Ray's parse errors, the command convention.
  const PluginSpec* pov = FindBuiltinPlugin("povray");
  ASSERT_FALSE(pov->failure_rules.empty());
  EXPECT_EQ(pov->failure_rules[0].failure_class, "scene_error");
  const PluginSpec* command = FindBuiltinPlugin("command");
  ASSERT_EQ(command->failure_rules.size(), 2u);
  EXPECT_EQ(command->failure_rules[1].failure_class, "license");
  EXPECT_EQ(command->failure_rules[1].exit_codes, std::vector<int>{75});

  auto error = [](const std::string& rules) {
    StatusOr<PluginSpec> p = ParsePluginYaml(
        "name: demo\nexecutable: {names: [demo]}\noutput: {file: a.png}\nargs: [x]\n"
        "failure_classes:\n" +
            rules,
        "plugin.yaml");
    return p.ok() ? std::string("ok") : p.status().message();
  };
  EXPECT_EQ(error("  - {class: license, exit_codes: [75], patterns: ['no licen[cs]e']}\n"), "ok");
  EXPECT_EQ(error("  - {class: bad_luck, exit_codes: [1]}\n"),
            "failure_classes[0].class: 'bad_luck' is not a failure class (scene_error, "
            "out_of_memory, license, crash, timeout)");
  EXPECT_EQ(error("  - {class: crash}\n"), "failure_classes[0]: give exit_codes, patterns or both");
  EXPECT_NE(error("  - {class: crash, patterns: ['(']}\n")
                .find("failure_classes[0].patterns[0]: not a valid regular expression"),
            std::string::npos);
  EXPECT_EQ(error("  - {class: crash, exit_codes: [1], when: 2}\n"),
            "failure_classes[0].when: unknown field (known fields: class, exit_codes, patterns)");
}

TEST(PluginSpecTest, SettingsAreValidatedByType) {
  PluginSpec p = Minimal();
  auto error = [&](Settings s) {
    StatusOr<Settings> r = ResolveSettings(p, s);
    return r.ok() ? std::string("ok") : r.status().message();
  };
  EXPECT_EQ(error({{"quality", "3"}, {"mode", "fast"}}), "ok");
  EXPECT_NE(error({{"qualty", "3"}}).find("settings.qualty: unknown setting"), std::string::npos);
  EXPECT_NE(error({{"quality", "high"}}).find("settings.quality: expected an integer"),
            std::string::npos);
  EXPECT_NE(error({{"quality", "11"}}).find("settings.quality: 11 is not in [1, 10]"),
            std::string::npos);
  EXPECT_NE(error({{"quality", "2.5"}}).find("settings.quality"), std::string::npos);
  EXPECT_NE(error({{"mode", "medium"}}).find("settings.mode: expected one of"), std::string::npos);
  EXPECT_NE(error({{"fast", "maybe"}}).find("settings.fast: expected true or false"),
            std::string::npos);
  // Option injection and escaping the task folder are refused at validation time.
  EXPECT_NE(error({{"label", "--output=/etc/passwd"}}).find("starts with '-'"), std::string::npos);
  EXPECT_NE(error({{"out", "../../etc/cron.d/x"}}).find("leaves the task directory"),
            std::string::npos);
  EXPECT_NE(error({{"out", "/etc/passwd"}}).find("must be relative"), std::string::npos);
  EXPECT_NE(error({{"out", "a/../../b"}}).find("leaves the task directory"), std::string::npos);
  EXPECT_NE(error({{"label", "a\nb"}}).find("control characters"), std::string::npos);
  // Defaults are filled in.
  EXPECT_EQ(ResolveSettings(p, {})->at("quality"), "5");
}

TEST(PluginSpecTest, ArgvIsBuiltWordByWordWithoutAShell) {
  PluginSpec p = Minimal();
  // Shell metacharacters are plain characters in one argv word: nothing interprets them.
  RunContext ctx = Context(p, {{"label", "x; rm -rf / $(reboot) `id` | cat > y"},
                               {"out", "renders/a b;c.png"},
                               {"fast", "true"}});
  StatusOr<std::vector<std::string>> argv = BuildArgv(p, ctx);
  ASSERT_TRUE(argv.ok()) << argv.status().message();
  std::vector<std::string> expected = {"--in",         "/data/tasks/t1/scene.pov",
                                       "-o",           "/data/tasks/t1/out/f0007.png",
                                       "--frame=0007", "--q=5",
                                       "--save",       "/data/tasks/t1/renders/a b;c.png",
                                       "--fast"};
  EXPECT_EQ(*argv, expected);
}

TEST(PluginSpecTest, ValuesStartingWithADashNeverBecomeOptions) {
  StatusOr<PluginSpec> p = ParsePluginYaml(R"(
name: demo
executable: {names: [demo]}
args: ["{settings.label}", "{frame}"]
output: {file: "f.png"}
settings: {label: {type: string}}
)",
                                           "demo");
  ASSERT_TRUE(p.ok()) << p.status().message();
  RunContext ctx;
  ctx.task_dir = ctx.output_dir = "/t";
  ctx.frame = -3;                     // negative numbers are values, not options
  ctx.settings = {{"label", "-rf"}};  // bypassing ResolveSettings: BuildArgv still refuses
  StatusOr<std::vector<std::string>> argv = BuildArgv(*p, ctx);
  ASSERT_FALSE(argv.ok());
  EXPECT_NE(argv.status().message().find("starts with '-'"), std::string::npos);
  ctx.settings = {{"label", "ok"}};
  argv = BuildArgv(*p, ctx);
  ASSERT_TRUE(argv.ok()) << argv.status().message();
  EXPECT_EQ(*argv, (std::vector<std::string>{"ok", "-3"}));
}

TEST(PluginSpecTest, PovrayTileUsesOneBasedInclusiveRegion) {
  const PluginSpec& p = *FindBuiltinPlugin("povray");
  RunContext ctx = Context(p, {{"width", "64"}, {"height", "48"}});
  ctx.threads = 1;
  ctx.part.x0 = 16;
  ctx.part.y0 = 8;
  ctx.part.x1 = 40;
  ctx.part.y1 = 30;
  StatusOr<std::vector<std::string>> argv = BuildArgv(p, ctx);
  ASSERT_TRUE(argv.ok()) << argv.status().message();
  std::string joined;
  for (const std::string& a : *argv) joined += a + " ";
  EXPECT_NE(joined.find("+SC17 +EC40 +SR9 +ER30"), std::string::npos) << joined;
  EXPECT_NE(joined.find("+W64 +H48 +K7"), std::string::npos) << joined;
  EXPECT_EQ(std::count(argv->begin(), argv->end(), "+A"), 0) << "anti-aliasing is off by default";
}

TEST(PluginSpecTest, BlenderTileBorderNeedsTheFrameSize) {
  const PluginSpec& p = *FindBuiltinPlugin("blender");
  RunContext ctx = Context(p, {{"samples", "4"}});
  ctx.part.x1 = 32;
  ctx.part.y1 = 24;
  StatusOr<std::vector<std::string>> argv = BuildArgv(p, ctx);
  ASSERT_FALSE(argv.ok());
  EXPECT_NE(argv.status().message().find("settings.width"), std::string::npos);
  ctx = Context(p, {{"samples", "4"}, {"width", "64"}, {"height", "48"}});
  ctx.part.x1 = 32;
  ctx.part.y1 = 24;
  argv = BuildArgv(p, ctx);
  ASSERT_TRUE(argv.ok()) << argv.status().message();
  std::string joined;
  for (const std::string& a : *argv) joined += a + "\n";
  EXPECT_NE(joined.find("r.border_min_x = 0; r.border_max_x = 0.5; r.border_min_y = 0.5; "
                        "r.border_max_y = 1"),
            std::string::npos)
      << joined;
}

TEST(PluginSpecTest, SceneNamesAreCheckedAndBinaryScenesKnown) {
  const PluginSpec& pov = *FindBuiltinPlugin("povray");
  EXPECT_EQ(*CheckSceneName(pov, "shots/a.pov"), "a.pov");
  EXPECT_FALSE(CheckSceneName(pov, "a.py").ok());
  EXPECT_FALSE(CheckSceneName(pov, "-rf.pov").ok());
  EXPECT_FALSE(CheckSceneName(pov, "").ok());
  EXPECT_FALSE(IsBinaryScene(pov, "a.pov"));
  const PluginSpec& blender = *FindBuiltinPlugin("blender");
  EXPECT_EQ(*CheckSceneName(blender, "shots/Shot.BLEND"), "Shot.BLEND");
  EXPECT_TRUE(IsBinaryScene(blender, "shots/Shot.BLEND"));
  EXPECT_FALSE(IsBinaryScene(blender, "build.py"));
  EXPECT_FALSE(IsBinaryScene(blender, "shots.blend/build.py"));
  EXPECT_EQ(*CheckSceneName(*FindBuiltinPlugin("command"), ""), "");
  EXPECT_NE(ParsePluginYaml("name: x\nexecutable: {names: [x]}\nargs: [a]\noutput: {file: f}\n"
                            "scene: {extensions: [.a], binary: [.b]}\n",
                            "t")
                .status()
                .message()
                .find("scene.binary[0]: not among scene.extensions"),
            std::string::npos);
}

TEST(PluginSpecTest, BlenderOpensABlendFileOrRunsAScript) {
  const PluginSpec& p = *FindBuiltinPlugin("blender");
  RunContext ctx = Context(p, {});
  ctx.scene = "/data/tasks/t1/shot.blend";
  StatusOr<std::vector<std::string>> argv = BuildArgv(p, ctx);
  ASSERT_TRUE(argv.ok()) << argv.status().message();
  EXPECT_EQ(std::vector<std::string>(argv->begin(), argv->begin() + 4),
            (std::vector<std::string>{"-b", "--factory-startup", "-noaudio", ctx.scene}));
  EXPECT_EQ(std::count(argv->begin(), argv->end(), "--python"), 0);
  ctx.scene = "/data/tasks/t1/build.py";
  argv = BuildArgv(p, ctx);
  ASSERT_TRUE(argv.ok()) << argv.status().message();
  EXPECT_EQ(std::vector<std::string>(argv->begin() + 3, argv->begin() + 5),
            (std::vector<std::string>{"--python", ctx.scene}));
}

// A task pinned to several GPUs: Blender turns on every device of its gpu_api (it sees only
// the task's GPUs, through CUDA_VISIBLE_DEVICES), none chosen by index, and no CPU device.
TEST(PluginSpecTest, BlenderUsesEveryGpuOfItsApi) {
  const PluginSpec& p = *FindBuiltinPlugin("blender");
  RunContext ctx = Context(p, {{"gpu_api", "OPTIX"}});
  ctx.scene = "/data/tasks/t1/shot.blend";
  StatusOr<std::vector<std::string>> cpu = BuildArgv(p, ctx);
  ASSERT_TRUE(cpu.ok()) << cpu.status().message();
  ctx.gpus = {2, 3, 5};
  StatusOr<std::vector<std::string>> argv = BuildArgv(p, ctx);
  ASSERT_TRUE(argv.ok()) << argv.status().message();
  std::vector<std::string> gpu_words;
  for (const std::string& word : *argv) {
    if (word.find("compute_device_type") != std::string::npos) gpu_words.push_back(word);
  }
  ASSERT_EQ(gpu_words.size(), 1u);
  const std::string& expr = gpu_words[0];
  EXPECT_NE(expr.find("p.compute_device_type = 'OPTIX'"), std::string::npos) << expr;
  EXPECT_NE(expr.find("setattr(d, 'use', d.type == 'OPTIX') for d in p.devices"), std::string::npos)
      << expr;
  EXPECT_NE(expr.find("cycles.device = 'GPU'"), std::string::npos) << expr;
  EXPECT_EQ(expr.find("== 2"), std::string::npos) << "no device chosen by index: " << expr;
  EXPECT_EQ(argv->size(), cpu->size() + 2) << "one --python-expr pair more than a CPU task";
}

TEST(PluginSpecTest, GpusPlaceholderListsEveryGpuInOrder) {
  StatusOr<PluginSpec> p = ParsePluginYaml(R"(
name: demo
executable: {names: [demo]}
args:
  - when: gpu
    args: ["--devices", "{gpus}", "--first", "{gpu}"]
output: {file: "f.png"}
)",
                                           "demo");
  ASSERT_TRUE(p.ok()) << p.status().message();
  RunContext ctx;
  ctx.task_dir = ctx.output_dir = "/t";
  ctx.gpus = {3, 1};
  StatusOr<std::vector<std::string>> argv = BuildArgv(*p, ctx);
  ASSERT_TRUE(argv.ok()) << argv.status().message();
  EXPECT_EQ(*argv, (std::vector<std::string>{"--devices", "3,1", "--first", "3"}));
  ctx.gpus.clear();
  argv = BuildArgv(*p, ctx);
  ASSERT_TRUE(argv.ok()) << argv.status().message();
  EXPECT_TRUE(argv->empty()) << "a CPU task leaves the GPU group out";
}

TEST(PluginSpecTest, NativePluginsDeclareOnlySceneAndSettings) {
  StatusOr<PluginSpec> spec = NativePluginSpec(
      "grad", "a gradient", true, false,
      "scene: {extensions: [.grad]}\nsettings:\n  width: {type: int, min: 1, default: 16}\n");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_TRUE(spec->native);
  EXPECT_TRUE(spec->tiles);
  EXPECT_FALSE(spec->sample_parts);
  EXPECT_EQ(*ResolveSettings(*spec, {}), (Settings{{"width", "16"}}));
  EXPECT_NE(ResolveSettings(*spec, {{"height", "3"}}).status().message().find("settings.height"),
            std::string::npos);
  EXPECT_TRUE(NativePluginSpec("bare", "", false, false, "").ok());
  EXPECT_NE(NativePluginSpec("grad", "", false, false, "args: [x]\n")
                .status()
                .message()
                .find("only scene and settings may be declared"),
            std::string::npos);
  EXPECT_NE(NativePluginSpec("Bad Name", "", false, false, "").status().message().find("name:"),
            std::string::npos);
  // Registered, a native plugin is found like a built-in one; a built-in name is refused.
  ASSERT_TRUE(RegisterNativePlugin(*spec).ok());
  ASSERT_NE(FindPlugin("grad"), nullptr);
  EXPECT_TRUE(FindPlugin("grad")->native);
  EXPECT_FALSE(FindPlugin("povray")->native);
  StatusOr<PluginSpec> clash = NativePluginSpec("povray", "", false, false, "");
  ASSERT_TRUE(clash.ok());
  EXPECT_EQ(RegisterNativePlugin(*clash).code(), StatusCode::kAlreadyExists);
  StatusOr<spec::JobSpec> job = spec::ParseJobYaml(
      "name: g\nrenderer: grad\nscene: a.grad\nframes: 1\ntiles: 2x1\nsettings: {width: 8}\n");
  EXPECT_TRUE(job.ok()) << job.status().message();
}

TEST(PluginSpecTest, JobSpecTakesPluginRenderersAndSettings) {
  StatusOr<spec::JobSpec> job = spec::ParseJobYaml(
      "name: pov\nrenderer: povray\nscene: s.pov\nframes: 1-3\n"
      "settings: {width: 64, height: 48, antialias: true}\n");
  ASSERT_TRUE(job.ok()) << job.status().message();
  EXPECT_EQ(job->settings.at("width"), "64");
  auto error = [](const std::string& yaml) {
    StatusOr<spec::JobSpec> j = spec::ParseJobYaml(yaml);
    return j.ok() ? std::string("ok") : j.status().message();
  };
  EXPECT_NE(error("name: a\nrenderer: povray\nscene: s.pov\nframes: 1\nsettings: {widht: 3}\n")
                .find("settings.widht: unknown setting"),
            std::string::npos);
  EXPECT_NE(error("name: a\nrenderer: povray\nscene: s.pov\nframes: 1\nsettings: {width: big}\n")
                .find("settings.width: expected an integer"),
            std::string::npos);
  EXPECT_NE(error("name: a\nrenderer: maya\nscene: s.mb\nframes: 1\n").find("renderer: 'maya'"),
            std::string::npos);
  EXPECT_NE(error("name: a\nscene: s.yaml\nframes: 1\nsettings: {x: 1}\n").find("settings:"),
            std::string::npos);
  EXPECT_EQ(error("name: a\nrenderer: blender\nscene: s.blend\nframes: 1\n"), "ok");
  EXPECT_NE(error("name: a\nrenderer: blender\nscene: s.blender\nframes: 1\n").find(".blend"),
            std::string::npos);
  EXPECT_EQ(error("name: a\nrenderer: command\nframes: 1\n"
                  "settings: {program: ffmpeg, argv: [-i, in.mov, out.mp4]}\n"),
            "ok");
  EXPECT_NE(error("name: a\nrenderer: command\nframes: 1\nsettings: {program: --evil}\n")
                .find("settings.program"),
            std::string::npos);
}

TEST(PluginSpecTest, EnvSettingsAreCheckedNamingTheVariable) {
  auto parse = [](const std::string& env) {
    return spec::ParseJobYaml(
        "name: a\nrenderer: command\nframes: 1\nsettings:\n  program: sim\n"
        "  env: " +
        env + "\n");
  };
  auto error = [&](const std::string& env) {
    StatusOr<spec::JobSpec> j = parse(env);
    return j.ok() ? std::string("ok") : j.status().message();
  };
  StatusOr<spec::JobSpec> job = parse("{SIM_QUALITY: high, OMP_NUM_THREADS: 4}");
  ASSERT_TRUE(job.ok()) << job.status().message();
  EXPECT_EQ(nlohmann::json::parse(job->settings.at("env")),
            (nlohmann::json{{"SIM_QUALITY", "high"}, {"OMP_NUM_THREADS", "4"}}));
  EXPECT_EQ(error("{A: \"one\\ntwo\"}"), "settings.env.A: control characters");
  EXPECT_EQ(error("{LD_PRELOAD: /tmp/x.so}"),
            "settings.env.LD_PRELOAD: the dynamic loader's variables may not be set");
  EXPECT_EQ(error("{PATH: /tmp}"), "settings.env.PATH: set by the worker for every task");
  EXPECT_EQ(error("{TESSERA_TOKEN: x}"),
            "settings.env.TESSERA_TOKEN: Tessera's own variables may not be set");
  EXPECT_EQ(error("{'1A': x}"),
            "settings.env.1A: not a variable name (letters, digits and _, not starting with a "
            "digit)");
  EXPECT_EQ(error("{'A=B': x}").rfind("settings.env.A=B: not a variable name", 0), 0u);
  EXPECT_EQ(error("{A: [x]}"), "settings.env.A: expected a value, got a list");
  std::string many = "{";
  for (int i = 0; i < 65; ++i) many += (i ? ", V" : "V") + std::to_string(i) + ": x";
  EXPECT_NE(error(many + "}").find("settings.env"), std::string::npos) << error(many + "}");
  const std::string big(4000, 'x');
  std::string heavy = "{";
  for (int i = 0; i < 9; ++i) heavy += (i ? ", V" : "V") + std::to_string(i) + ": " + big;
  EXPECT_NE(error(heavy + "}").find("more than the limit of 32768"), std::string::npos);
  EXPECT_EQ(error("[A=B]"), "settings.env: expected a map of NAME: value");
}

// The built-in path tracer is a renderer spec like the plugins: what the farm asks of a renderer
// (splits, exact parts, checkpoints, the scene it takes) it reads there, not from the name.
TEST(PluginSpecTest, ThePathTracerIsDescribedByItsSpec) {
  const PluginSpec& pt = PathTracerSpec();
  EXPECT_EQ(pt.name, "pathtracer");
  EXPECT_TRUE(pt.tiles);
  EXPECT_TRUE(pt.sample_parts);
  EXPECT_TRUE(pt.exact_parts);
  EXPECT_TRUE(pt.accumulation_checkpoints);
  EXPECT_TRUE(pt.takes_tessera_scene());
  EXPECT_TRUE(pt.on_every_worker);
  ASSERT_NE(FindRenderer("pathtracer"), nullptr);
  EXPECT_EQ(FindRenderer("pathtracer").get(), &pt);
  EXPECT_TRUE(TakesTesseraScene("pathtracer"));
  // Not a plugin.yaml: `tessera plugins` and a job's settings: still treat it apart.
  EXPECT_EQ(FindPlugin("pathtracer"), nullptr);
  EXPECT_TRUE(std::none_of(BuiltinPlugins().begin(), BuiltinPlugins().end(),
                           [](const PluginSpec& p) { return p.name == "pathtracer"; }));
  // The plugins are renderers too; noop and unknown names are not.
  ASSERT_NE(FindRenderer("povray"), nullptr);
  EXPECT_FALSE(FindRenderer("povray")->takes_tessera_scene());
  EXPECT_FALSE(FindRenderer("povray")->exact_parts);
  EXPECT_FALSE(FindRenderer("povray")->on_every_worker);
  EXPECT_FALSE(TakesTesseraScene("povray"));
  EXPECT_EQ(FindRenderer("noop"), nullptr);
  EXPECT_EQ(FindRenderer("no-such-renderer"), nullptr);
  // A C++ plugin that splits samples returns exact accumulations (TSR_CAP_SAMPLE_PARTS).
  StatusOr<PluginSpec> sums = NativePluginSpec("sums", "", true, true, "");
  ASSERT_TRUE(sums.ok());
  EXPECT_TRUE(sums->exact_parts);
  EXPECT_FALSE(sums->accumulation_checkpoints);
  StatusOr<PluginSpec> clash = NativePluginSpec("pathtracer", "", true, true, "");
  ASSERT_TRUE(clash.ok());
  EXPECT_EQ(RegisterNativePlugin(*clash).code(), StatusCode::kAlreadyExists);
}

// plugin.yaml is read in stages (its keys, the program, the patterns, the failure classes, the
// settings, the settings with a role, a dry run of the templates): a file wrong in several ways
// is refused for the earliest stage, and each plugin.yaml is parsed once.
TEST(PluginSpecTest, TheFirstProblemInCheckOrderIsReported) {
  auto error = [](const std::string& yaml) {
    StatusOr<PluginSpec> p = ParsePluginYaml(yaml, "plugin.yaml");
    return p.ok() ? std::string("ok") : p.status().message();
  };
  const std::string bad_regex = "progress: {regex: '(', percent_group: 1}\n";
  const std::string bad_setting = "settings: {q: {type: colour}}\n";
  const std::string bad_template = "args: [\"{fram}\"]\n";
  const std::string head = "name: demo\nexecutable: {names: [demo]}\noutput: {file: a.png}\n";
  EXPECT_EQ(error("name: Demo\n" + bad_regex + bad_setting + bad_template).rfind("name:", 0), 0u);
  EXPECT_EQ(error(head + bad_template + bad_regex + bad_setting).rfind("progress.regex", 0), 0u);
  EXPECT_EQ(error(head + bad_template + bad_setting).rfind("settings.q.type", 0), 0u);
  EXPECT_EQ(error(head + bad_template).rfind("args[0]: unknown placeholder {fram}", 0), 0u);
  const int64_t before = yaml::DocumentsParsedOnThisThread();
  EXPECT_EQ(error(head + "args: [x]\n"), "ok");
  EXPECT_EQ(yaml::DocumentsParsedOnThisThread() - before, 1);
}

}  // namespace
}  // namespace tessera::plugin
