#pragma once
// Renderer plugins described in YAML (plugins/<name>/plugin.yaml): how to find an external
// renderer, how to build its argv for a task, how to read its progress, errors and images, and
// which settings a job may give it. The scheduler validates a job's `settings:` against the
// plugin at submit time; the worker builds the argv here and runs it (never through a shell).
//
// Every key of plugin.yaml is documented in plugins/povray/plugin.yaml. Templates are argv words
// with placeholders: {name} or {name:0N} (an integer zero-padded to N digits); "{{" and "}}" are
// literal braces. Placeholders:
//   {scene}         absolute path of the job's scene file in the task directory
//   {task_dir}      the task's working directory;  {output_dir}  where the images go
//   {output}        the image of {frame} (per-frame runs only)
//   {frame} {frame_start} {frame_end}   the frame (per-frame runs) and the task's range
//   {threads}       CPU threads the worker gives a render (worker.threads, else all cores)
//   {gpu}           the first GPU pinned to the task (only in `when: gpu` groups)
//   {gpus}          every GPU pinned to the task, comma-separated in order ("0,1"; `when: gpu`
//                   groups only). The renderer also gets them as CUDA_VISIBLE_DEVICES (empty for
//                   a task without a GPU), so inside it they are devices 0..N-1.
//   {x0} {y0} {x1} {y1}   the tile: pixels [x0, x1) x [y0, y1), top-left origin
//   {col_start} {col_end} {row_start} {row_end}   the same tile, 1-based and inclusive
//   {border_min_x} {border_max_x} {border_min_y} {border_max_y}   the tile as fractions of the
//                   frame with a bottom-left origin (needs settings width and height)
//   {width} {height}   settings.width / settings.height
//   {settings.NAME} a job setting;  {value}  the setting's own value (in its `args`)
// A word that refers to a setting without a value (not given, no default) is left out.
//
// Safety: a value that would start an argv word with '-' is refused (no option injection), as
// are control characters; path settings must stay inside the task directory. Every value (each
// word of a list too) must be valid UTF-8 of at most kMaxValueBytes bytes; a list has at most
// kMaxListWords words. plugin.yaml itself is bounded: at most kMaxArgs argv items, kMaxSettings
// settings, kMaxPatterns error patterns, patterns of at most kMaxRegexBytes.

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "shared/base/status.h"
#include "shared/wire/protocol.h"

namespace tessera::plugin {

inline constexpr size_t kMaxValueBytes = 4096;  // one setting value, or one word of a list
inline constexpr size_t kMaxListWords = 1024;   // words of one list setting
inline constexpr size_t kMaxArgs = 256;         // argv items (and words of a group) in plugin.yaml
inline constexpr size_t kMaxSettings = 128;     // settings a plugin declares
inline constexpr size_t kMaxPatterns = 32;      // error patterns
inline constexpr size_t kMaxRegexBytes = 1024;  // one pattern
inline constexpr size_t kMaxEnvVars = 64;       // variables of one env setting
inline constexpr size_t kMaxEnvBytes = 32768;
inline constexpr size_t kMaxGlobs =
    64;  // patterns of one globs setting   // names and values of one env setting together

// Setting types. env: a map of environment variables the renderer's process gets (names
// [A-Za-z_][A-Za-z0-9_]*, values without control characters -- no newline; never the dynamic
// loader's LD_*, Tessera's TESSERA_* or what the worker sets itself: HOME, USER, LOGNAME, PATH,
// CUDA_VISIBLE_DEVICES).
// globs: a list of file patterns relative to the task folder (fnmatch: *, ?, [...]; '*' never
// crosses a '/'), each without an empty, '.' or '..' part: the files a task returns (the command
// renderer's `outputs: files`); at most kMaxGlobs patterns.
enum class SettingType { kBool, kInt, kFloat, kString, kEnum, kPath, kList, kEnv, kGlobs };
const char* SettingTypeName(SettingType type);

struct SettingSpec {
  std::string name;
  SettingType type = SettingType::kString;
  std::string description;
  std::optional<double> min, max;       // int and float
  std::vector<std::string> values;      // enum: the allowed values
  std::optional<std::string> default_;  // canonical text (list: JSON array)
  bool required = false;
  // Fixed by the plugin (`fixed: true`): always its default; a job that gives it is refused.
  bool fixed = false;
  // Words added where the plugin's args say `insert: settings` (a bool: only when true).
  std::vector<std::string> args;
};

// What a renderer takes as its scene.
enum class SceneKind {
  kRendererFile,  // the renderer's own file (.pov, .py, .blend), named by the job (or none)
  kTesseraScene,  // a Tessera scene (shared/scenes/scene_file.h YAML), uploaded with the files it
                  // names
};

// One item of a plugin's argv template: a word, or a group of words used only `when` the task
// is a tile / the whole frame / pinned to a GPU / on the CPU / its scene file has extension EXT,
// or the place for settings' args.
struct ArgItem {
  std::string word;                // a plain word when `when` and `insert_settings` are unset
  std::string when;                // "", "tile", "whole", "gpu", "cpu", "scene=.EXT"
  std::vector<std::string> words;  // the group's words
  bool insert_settings = false;
};

// plugin.yaml `failure_classes:`: a failed run whose exit code is one of `exit_codes`, or whose
// output has a line matching one of `patterns`, is reported in `failure_class` (scene_error,
// out_of_memory, license, crash or timeout; protocol.h), which decides what the scheduler does
// next (retry, retry elsewhere, wait, fail at once). The first rule that matches wins; a run
// killed by a signal that no rule matches is a crash.
struct FailureRule {
  std::string failure_class;
  std::vector<int> exit_codes;
  std::vector<std::string> patterns;
};
inline constexpr size_t kMaxFailureRules = 16;

struct PluginSpec {
  std::string name;
  std::string description;
  std::vector<std::string> executable_names;  // searched in the worker's plugin path
  std::string executable_setting;             // the job's setting that names the program
  std::vector<std::string> version_args;
  std::string version_regex;  // group 1 is the version
  std::vector<std::string> scene_extensions;
  // Of those, the binary formats (.blend): the scene travels as an asset (a blob in the
  // scheduler's store) instead of as text, and reaches the task folder like other assets.
  std::vector<std::string> binary_scene_extensions;
  bool scene_required = true;
  bool per_frame = true;  // one run per frame; false: one run per task (its frame range)
  std::vector<ArgItem> args;
  // Image file per frame, relative to {output_dir}; empty for a plugin whose `outputs` setting
  // offers no images (it returns files, or nothing).
  std::string output;
  bool output_srgb = true;         // 8-bit images are sRGB-encoded: converted to linear
  bool tiles = false;              // honours tile regions (`when: tile` args)
  std::string progress_regex;      // matched against each output line
  int progress_percent_group = 0;  // 0..100
  int progress_done_group = 0;     // done / total
  int progress_total_group = 0;
  int progress_frame_group = 0;  // the frame being rendered (per-task runs)
  std::vector<std::string> error_regexes;
  std::vector<int> success_exit_codes = {0};
  std::vector<FailureRule> failure_rules;
  std::vector<SettingSpec> settings;
  // `input_frames: {from_setting: NAME}`: the job setting NAME names another step of the job
  // whose PNG frames are this plugin's input. The scheduler gives its one task (the step runs one
  // task over all its frames, kMaxInputFrames at most) those frames as assets named
  // InputFrameName(0), InputFrameName(1), ... in frame order, once that step is done
  // (plugins/encode).
  std::string input_frames_setting;
  // A C++ plugin (plugins/api/renderer_api.h): no program, argv, output or patterns; only the
  // scene and settings a job may give it, and whether it renders tiles.
  bool native = false;
  // Splits a frame's samples: renders sample ranges (a C++ plugin's TSR_CAP_SAMPLE_PARTS).
  bool sample_parts = false;
  // The parts of its split frames are exact accumulations (shared/images/accumulation.h), merged
  // bit-exactly; otherwise tiles of float pixels.
  bool exact_parts = false;
  // Its checkpoints are accumulations (shared/images/accumulation.h) of the task's part, which the
  // scheduler checks before it keeps one; other renderers' checkpoints are their own format.
  bool accumulation_checkpoints = false;
  SceneKind scene_kind = SceneKind::kRendererFile;
  // Compiled into every worker (the path tracer): no worker needs to offer it.
  bool on_every_worker = false;
  std::string declaration;  // native: the `scene:`/`settings:` YAML it was built from

  const SettingSpec* FindSetting(std::string_view name) const;
  bool takes_tessera_scene() const { return scene_kind == SceneKind::kTesseraScene; }
};

inline constexpr int kMaxInputFrames = 10000;
// The asset name of the i-th input frame (0-based): "frames/000000.png".
std::string InputFrameName(int index);

// Parses plugin.yaml; errors name the field ("args[3]: unknown placeholder {fram}").
StatusOr<PluginSpec> ParsePluginYaml(std::string_view yaml_text, const std::string& what);
// The spec of a C++ plugin from what its table declares (TsrRendererPlugin): its name,
// description, whether it renders tiles and sample parts, and its `scene:`/`settings:` declaration
// in plugin.yaml syntax (empty: none).
StatusOr<PluginSpec> NativePluginSpec(const std::string& name, const std::string& description,
                                      bool tiles, bool sample_parts,
                                      std::string_view declaration_yaml);

// A job's settings as given (scalar text, or a JSON array for lists).
using Settings = std::map<std::string, std::string>;

// Checks a job's settings against the plugin (types, ranges, allowed values, unknown names,
// option injection) and returns them with defaults filled in. Errors name "settings.NAME".
StatusOr<Settings> ResolveSettings(const PluginSpec& plugin, const Settings& given);

// Checks the scene file name a job gives the plugin ("shot.pov"); returns the name the worker
// writes it under (the last path component).
StatusOr<std::string> CheckSceneName(const PluginSpec& plugin, const std::string& scene_path);
// Whether the scene file is one of the plugin's binary scene formats (it travels as an asset).
bool IsBinaryScene(const PluginSpec& plugin, const std::string& scene_path);

// Everything one run of the renderer needs to build its argv.
struct RunContext {
  std::string task_dir;
  std::string output_dir;
  std::string scene;  // absolute path, or empty
  int frame = 0;      // per-frame runs
  int frame_start = 0, frame_end = 0;
  int threads = 0;
  std::vector<int> gpus;
  protocol::FramePart part;
  Settings settings;  // resolved
};

// The renderer's argv after the executable. Never passed to a shell.
StatusOr<std::vector<std::string>> BuildArgv(const PluginSpec& plugin, const RunContext& ctx);
// The absolute path of the image of `frame`.
StatusOr<std::string> OutputPath(const PluginSpec& plugin, const RunContext& ctx, int frame);

// Parses "2-5" style values; the settings' list type is a JSON array of strings.
StatusOr<std::vector<std::string>> ListValue(const std::string& json_text);
// The env type's value: a JSON object of strings.
StatusOr<std::map<std::string, std::string>> EnvValue(const std::string& json_text);
// Why `name` may not be set through an env setting ("" when it may).
std::string WhyNotAnEnvName(const std::string& name);

}  // namespace tessera::plugin
