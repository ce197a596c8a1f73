// Hostile job, scene and plugin files: alias bombs, deep nesting, long lists, text that is not
// UTF-8, and frames whose result could never come back. Each is refused with an error that names
// the field (or the document and byte offset) and the limit.

#include <gtest/gtest.h>

#include <string>

#include "shared/base/utf8.h"
#include "shared/base/yaml_util.h"
#include "shared/jobs/job_file.h"
#include "shared/plugins/plugin_catalog.h"
#include "shared/plugins/plugin_file.h"
#include "shared/scenes/scene_file.h"
#include "shared/wire/protocol.h"

namespace tessera::spec {
namespace {

constexpr const char* kJob = "name: shot\nscene: scene.yaml\nframes: 1-4\n";

std::string Contains(const Status& status, const std::string& what) {
  return status.message().find(what) != std::string::npos
             ? ""
             : "'" + status.message() + "' does not contain '" + what + "'";
}

// A list field named `field` with `n` entries made by `item(i)`.
template <typename Fn>
std::string List(const std::string& field, size_t n, Fn item) {
  std::string text = field + ": [";
  for (size_t i = 0; i < n; ++i) text += (i ? ", " : "") + item(i);
  return text + "]\n";
}

TEST(InputLimitsTest, AliasBombInAListFieldIsRefusedBeforeAnyFieldIsRead) {
  // 24 KB of YAML: one 20 KB tag, used 1,000 times through an alias (20 MB once expanded).
  std::string tags = "tags: [&t " + std::string(20000, 'x');
  for (int i = 0; i < 1000; ++i) tags += ", *t";
  tags += "]\n";
  const std::string yaml = std::string(kJob) + tags;
  ASSERT_LT(yaml.size(), 25000u);
  StatusOr<JobSpec> job = ParseJobYaml(yaml);
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Contains(job.status(), "job: aliases expand the document to more than"), "");
  EXPECT_EQ(Contains(job.status(), "4 times its own size"), "");
  EXPECT_EQ(Contains(job.status(), "alias bomb"), "");
}

TEST(InputLimitsTest, NestedAliasBombInASceneIsRefused) {
  std::string yaml = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  const char* names[] = {"a", "b", "c", "d", "e", "f", "g", "h"};
  for (int level = 1; level < 8; ++level) {
    yaml += std::string(names[level]) + ": &" + names[level] + " [";
    for (int i = 0; i < 10; ++i) yaml += std::string(i ? ", *" : "*") + names[level - 1];
    yaml += "]\n";
  }
  StatusOr<SceneSpec> scene = ParseSceneYaml(yaml);
  ASSERT_FALSE(scene.ok());
  EXPECT_EQ(Contains(scene.status(), "scene: aliases expand the document"), "");
}

TEST(InputLimitsTest, AliasesUsedAFewTimesAreFine) {
  StatusOr<JobSpec> job = ParseJobYaml(std::string(kJob) + "pools: &p [gpu, big]\nlimits: *p\n");
  ASSERT_TRUE(job.ok()) << job.status().message();
  EXPECT_EQ(job->limits, (std::vector<std::string>{"gpu", "big"}));
}

TEST(InputLimitsTest, DeepNestingNamesTheLimit) {
  // Within yaml-cpp's own bound: our walk stops it.
  StatusOr<JobSpec> job =
      ParseJobYaml(std::string(kJob) + "tags: " + std::string(100, '[') + std::string(100, ']'));
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(Contains(job.status(), "nested more than 64 levels deep (the limit)"), "");
  EXPECT_EQ(Contains(job.status(), "tags[0][0]"), "") << "names where";
  // Past yaml-cpp's bound (it used to say "bad file").
  job =
      ParseJobYaml(std::string(kJob) + "tags: " + std::string(5000, '[') + std::string(5000, ']'));
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(Contains(job.status(), "nested more than 64 levels deep (the limit)"), "");
  EXPECT_EQ(job.status().message().find("bad file"), std::string::npos);
  StatusOr<SceneSpec> scene =
      ParseSceneYaml("a: " + std::string(3000, '[') + std::string(3000, ']'));
  ASSERT_FALSE(scene.ok());
  EXPECT_EQ(Contains(scene.status(), "nested more than 64 levels deep"), "");
}

TEST(InputLimitsTest, EveryListFieldOfAJobHasAMaximumNamingTheField) {
  auto word = [](size_t i) { return "w" + std::to_string(i); };
  auto id = [](size_t i) { return std::to_string(i + 1); };
  auto path = [](size_t i) { return "tex/t" + std::to_string(i) + ".png"; };
  struct Case {
    std::string field;
    size_t max;
    std::function<std::string(size_t)> item;
  };
  const std::vector<Case> cases = {
      {"tags", kMaxLabels, word},
      {"pools", kMaxLabels, word},
      {"limits", kMaxLabels, word},
      {"depends_on", kMaxDependencies, id},
      {"frame_depends_on", kMaxDependencies, id},
      {"assets", static_cast<size_t>(kMaxAssets), path},
  };
  for (const Case& c : cases) {
    StatusOr<JobSpec> at_max = ParseJobYaml(std::string(kJob) + List(c.field, c.max, c.item));
    EXPECT_TRUE(at_max.ok()) << c.field << ": " << at_max.status().message();
    StatusOr<JobSpec> over = ParseJobYaml(std::string(kJob) + List(c.field, c.max + 1, c.item));
    ASSERT_FALSE(over.ok()) << c.field;
    EXPECT_EQ(over.status().message(), c.field + ": at most " + std::to_string(c.max) +
                                           " entries, got " + std::to_string(c.max + 1));
  }
  StatusOr<JobSpec> formats =
      ParseJobYaml(std::string(kJob) + "output: {formats: [exr, png, jpg, tif, exr]}\n");
  ASSERT_FALSE(formats.ok());
  EXPECT_EQ(formats.status().message(), "output.formats: at most 4 entries, got 5");
  // A tag is a name: at most kMaxNameLength characters.
  StatusOr<JobSpec> long_tag =
      ParseJobYaml(std::string(kJob) + "tags: [" + std::string(kMaxNameLength + 1, 't') + "]\n");
  ASSERT_FALSE(long_tag.ok());
  EXPECT_EQ(long_tag.status().message().rfind("tags[0]: must be a name of 1..128", 0), 0u)
      << long_tag.status().message();
}

TEST(InputLimitsTest, SettingsOfAJobHaveMaximums) {
  const std::string command = "name: c\nrenderer: command\nframes: 1\n";
  // Setting names: a map with too many entries.
  std::string many = "settings: {";
  for (size_t i = 0; i <= kMaxSettings; ++i) many += (i ? ", s" : "s") + std::to_string(i) + ": 1";
  StatusOr<JobSpec> job = ParseJobYaml(command + many + "}\n");
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.status().message(), "settings: at most 64 entries, got 65");
  // A list setting: at most kMaxListWords words...
  auto word = [](size_t i) { return "w" + std::to_string(i); };
  job = ParseJobYaml(command + "settings:\n  program: echo\n  " +
                     List("argv", plugin::kMaxListWords + 1, word));
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.status().message(), "settings.argv: at most 1024 entries, got 1025");
  job = ParseJobYaml(command + "settings:\n  program: echo\n  " +
                     List("argv", plugin::kMaxListWords, word));
  EXPECT_TRUE(job.ok()) << job.status().message();
  // ...of at most kMaxValueBytes bytes each, like a string setting.
  job = ParseJobYaml(command + "settings: {program: echo, argv: [ok, " +
                     std::string(plugin::kMaxValueBytes + 1, 'a') + "]}\n");
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.status().message(), "settings.argv[1]: 4097 bytes, more than the limit of 4096");
  job = ParseJobYaml(command +
                     "settings: {program: " + std::string(plugin::kMaxValueBytes + 1, 'a') + "}\n");
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.status().message(), "settings.program: 4097 bytes, more than the limit of 4096");
}

TEST(InputLimitsTest, InvalidUtf8InAJobFileIsRefusedWithTheByteOffset) {
  const std::string yaml = std::string(kJob) + "tags: [caf\xe9]\n";
  StatusOr<JobSpec> job = ParseJobYaml(yaml);
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.status().message(),
            "job: not valid UTF-8 (byte " + std::to_string(yaml.find('\xe9')) + ")");
  // In a list setting's word (an argv word of the command renderer).
  const std::string argv =
      "name: c\nrenderer: command\nframes: 1\nsettings: {program: echo, argv: [ok, \"\xff\"]}\n";
  job = ParseJobYaml(argv);
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.status().message(),
            "job: not valid UTF-8 (byte " + std::to_string(argv.find('\xff')) + ")");
  // An escape that would make a lone surrogate (refused by the YAML reader where it stands), or
  // a NUL (refused naming the field's path).
  job = ParseJobYaml(std::string(kJob) + "tags: [ok, \"a\\ud800\"]\n");
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.status().message(),
            "job: YAML syntax error at line 4, column 20: invalid unicode: 55296");
  job = ParseJobYaml(std::string(kJob) + "output: {pattern: \"a\\0#\"}\n");
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.status().message(), "job: output.pattern: contains a NUL character");
}

TEST(InputLimitsTest, InvalidUtf8InASceneIsRefusedWithTheByteOffset) {
  const std::string yaml = "width: 8\nheight: 8 # \xc3\x28\n";
  StatusOr<SceneSpec> scene = ParseSceneYaml(yaml);
  ASSERT_FALSE(scene.ok());
  EXPECT_EQ(scene.status().message(),
            "scene: not valid UTF-8 (byte " + std::to_string(yaml.find('\xc3')) + ")");
  // A plugin's scene (a .pov file) is not parsed, but it is text the scheduler stores: the job
  // is refused when its scene text is not UTF-8.
  StatusOr<JobSpec> job = ParseJobYaml("name: p\nrenderer: povray\nscene: a.pov\nframes: 1\n");
  ASSERT_TRUE(job.ok()) << job.status().message();
  job->scene_yaml = "#declare A = 1; // \x80\n";
  Status s = ValidateJob(*job);
  EXPECT_EQ(s.message(), "scene: not valid UTF-8 (byte 19)");
}

TEST(InputLimitsTest, PluginSettingValuesMustBeUtf8AndBounded) {
  const plugin::PluginSpec* command = plugin::FindBuiltinPlugin("command");
  ASSERT_NE(command, nullptr);
  // A string value off the wire (a worker re-checks every assignment).
  StatusOr<plugin::Settings> s = plugin::ResolveSettings(*command, {{"program", "ec\xffho"}});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(), "settings.program: not valid UTF-8 (byte 2)");
  // Each word of a list, as a string value: length and control characters.
  s = plugin::ResolveSettings(
      *command,
      {{"program", "echo"}, {"argv", nlohmann::json({"a", std::string(5000, 'b')}).dump()}});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(), "settings.argv[1]: 5000 bytes, more than the limit of 4096");
  std::vector<std::string> words(plugin::kMaxListWords + 1, "w");
  s = plugin::ResolveSettings(*command,
                              {{"program", "echo"}, {"argv", nlohmann::json(words).dump()}});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(), "settings.argv: at most 1024 words, got 1025");
}

TEST(InputLimitsTest, PluginYamlIsBounded) {
  const std::string base =
      "name: p\nexecutable: {names: [p]}\nargs: ['{scene}']\noutput: {file: 'f{frame}.png'}\n";
  StatusOr<plugin::PluginSpec> p = plugin::ParsePluginYaml(base, "plugin.yaml");
  ASSERT_TRUE(p.ok()) << p.status().message();
  p = plugin::ParsePluginYaml(base + "errors: ['" + std::string(2000, 'a') + "']\n", "plugin.yaml");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(),
            "errors[0]: a pattern of 2000 bytes, more than the limit of 1024");
  std::string args = "name: p\nexecutable: {names: [p]}\noutput: {file: 'f{frame}.png'}\nargs: [";
  for (size_t i = 0; i <= plugin::kMaxArgs; ++i) args += (i ? ", a" : "a");
  p = plugin::ParsePluginYaml(args + "]\n", "plugin.yaml");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(), "args: at most 256 entries, got 257");
  p = plugin::ParsePluginYaml(base + "description: \"\xfe\"\n", "plugins/p/plugin.yaml");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(), "plugins/p/plugin.yaml: not valid UTF-8 (byte " +
                                      std::to_string(base.size() + 14) + ")");
  // A C++ plugin's declaration comes from a worker: bounded like any document.
  std::string bomb = "settings:\n  s: {type: string, description: &d " + std::string(30000, 'd');
  bomb += "}\n  t: {type: enum, values: [";
  for (int i = 0; i < 200; ++i) bomb += (i ? ", *d" : "*d");
  bomb += "]}\n";
  p = plugin::NativePluginSpec("bomb", "", false, false, bomb);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(Contains(p.status(), "alias bomb"), "");
}

TEST(InputLimitsTest, AFrameWhoseResultCannotComeBackIsRefusedAtSubmit) {
  StatusOr<JobSpec> job = ParseJobYaml(kJob);
  ASSERT_TRUE(job.ok());
  // 16384 x 16384 x 4 floats = 4 GiB, over the 1 GiB a result may be.
  Status s = SplitFrames(&*job, 16384, 16384, 16, 4);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "tiles: a 16384x16384 frame with 4 channels is 4294967296 bytes, more "
            "than the result limit of " +
                std::to_string(protocol::kMaxResultBytes) +
                " bytes a worker can send back; split the frame into (more) tiles");
  // Eleven channels (every AOV) of 8192 x 8192: 2.75 GiB.
  s = SplitFrames(&*job, 8192, 8192, 16, 11);
  EXPECT_EQ(Contains(s, "8192x8192 frame with 11 channels"), "");
  EXPECT_TRUE(SplitFrames(&*job, 8192, 8192, 16, 4).ok()) << "1 GiB exactly fits";
  // Split into 4x4 tiles, each part comes back on its own: fine...
  job->tiles_x = job->tiles_y = 4;
  EXPECT_TRUE(SplitFrames(&*job, 16384, 16384, 16, 4).ok());
  // ...but 2x2 tiles of a path-tracer frame travel as exact accumulations (8 bytes a channel).
  job->tiles_x = job->tiles_y = 2;
  s = SplitFrames(&*job, 16384, 16384, 16, 4);
  EXPECT_EQ(Contains(s, "tiles: one tile of a 16384x16384 frame with 4 channels"), "");
  // Over the largest side the scheduler takes.
  s = SplitFrames(&*job, 16385, 64, 16, 4);
  EXPECT_EQ(Contains(s, "each side at most 16384"), "");
  // A shared-storage job's whole frames are written by the worker: no result to send.
  StatusOr<JobSpec> shared =
      ParseJobYaml(std::string(kJob) + "output: {shared_dir: /mnt/projects/a}\n");
  ASSERT_TRUE(shared.ok()) << shared.status().message();
  EXPECT_TRUE(SplitFrames(&*shared, 16384, 16384, 16, 4).ok());
  // A plugin's frame size from its settings.
  StatusOr<JobSpec> pov = ParseJobYaml(
      "name: p\nrenderer: povray\nscene: a.pov\nframes: 1\nsettings: {width: 16384, height: "
      "16384}\n");
  ASSERT_TRUE(pov.ok()) << pov.status().message();
  EXPECT_EQ(Contains(SplitPluginFrames(&*pov), "16384x16384 frame with 4 channels"), "");
}

TEST(InputLimitsTest, ResultChannelsCountTheAovs) {
  SceneSpec scene;
  EXPECT_EQ(ResultChannels(scene), 4);
  scene.aovs = {Aov::kAlbedo, Aov::kNormal, Aov::kDepth};
  EXPECT_EQ(ResultChannels(scene), 11);
}

}  // namespace
}  // namespace tessera::spec
