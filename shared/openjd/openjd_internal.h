#pragma once
// Pieces of the OpenJD library (shared/openjd/openjd.h) shared by its files:
//   openjd_format.cpp     strings the spec constrains, format strings
//   openjd_space.cpp      parameter spaces (ranges, combinations) and their JSON
//   openjd_params.cpp     job parameter definitions, environment-template merging, values
//   openjd_paths.cpp      POSIX path joins and path mapping rules
//   openjd_scripts.cpp    actions, embedded files and environments
//   openjd_host.cpp       host requirements
//   openjd_steps.cpp      steps and the Tessera job file
//   openjd_template.cpp   the two root documents (job and environment templates)
//   openjd_session.cpp    the worker side: one task as files and commands
//
// A template is read in one of two modes. Checking (CheckTemplate) knows the parameters' names
// but not their values: a format string keeps its Param references, and a field whose value
// depends on one is checked only once values exist. Creating a job (TranslateTemplate) knows
// every value: Param and RawParam are substituted where the field is evaluated, except Param.X
// of a PATH parameter in a field the worker evaluates, which stays a reference so the worker
// applies its path mapping rules to it.

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <initializer_list>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "shared/base/status.h"
#include "shared/jobs/job_file.h"
#include "shared/openjd/openjd.h"

namespace tessera::openjd::internal {

// ---- strings the spec constrains (openjd_format.cpp) ----------------------------------------

// An element's place in an error message: "steps[2]".
inline std::string Item(const std::string& field, size_t i) {
  return field + "[" + std::to_string(i) + "]";
}

inline bool IsLatinAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
inline bool IsDigit(char c) { return c >= '0' && c <= '9'; }
inline bool IsSpace(char c) { return c == ' ' || c == '\t'; }
inline std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

// <Identifier>: latin letters, digits and '_', not starting with a digit, 1..64 characters.
bool IsIdentifier(std::string_view text);
// Characters (code points) in valid UTF-8 text.
size_t CharCount(std::string_view text);
// Whether the text holds a character of the Cc category (C0, DEL, C1). `allow_whitespace`
// permits newline, carriage return and tab (descriptions).
bool HasControlChar(std::string_view text, bool allow_whitespace = false);
// ASCII lower case.
std::string Lower(std::string text);

// A base-10 integer ("-12", "+7", "007"; nothing else around it, within int64) / a finite
// floating point number.
bool ParseInteger(std::string_view text, int64_t* out);
bool ParseFloat(std::string_view text, double* out);

// min..max characters; control characters refused (but newline, CR and tab when `multiline`).
Status CheckText(const std::string& text, const std::string& field, size_t min_chars,
                 size_t max_chars, bool multiline);
// A non-empty list (`what` names one element in the message).
Status CheckList(const YAML::Node& node, const std::string& field, const char* what);
// The text of a scalar, else an error naming the field.
StatusOr<std::string> Scalar(const YAML::Node& node, const std::string& field);
Status NeedsExtension(const std::string& field, const std::string& extension);
// Refuses the first of `keys` (key -> the extension it belongs to) present in the map `node`.
Status RefuseExtensionKeys(const YAML::Node& node, const std::string& path,
                           std::initializer_list<std::pair<const char*, const char*>> keys);
// `text` as a Tessera name: each character outside spec::IsNameChar becomes '-'; at most
// spec::kMaxNameLength characters; never empty.
std::string TesseraName(std::string_view text);

// ---- format strings (openjd_format.cpp) -----------------------------------------------------

// A format string as literal text and value references ("Task.Param.Frame"), so substituted
// values are never parsed again.
struct FormatPart {
  bool is_ref = false;
  std::string text;  // literal text, or the dotted name of the reference
};
using FormatString = std::vector<FormatPart>;

// What a format string may refer to where it is evaluated (the spec's scopes, 7.3.1).
struct Scope {
  const std::set<std::string>* params = nullptr;  // the job parameters' names
  // Their values (nullptr while checking a template: Param references stay references).
  const std::map<std::string, std::string>* values = nullptr;
  const std::set<std::string>* path_params = nullptr;  // PATH parameters (Param.X host-only)
  bool host = false;  // evaluated on the worker: Session.*, Param.<PATH>
  bool task = false;  // a step script: Task.Param.*, Task.RawParam.*, Task.File.*
  std::set<std::string> task_params;
  std::set<std::string> files;  // Task.File.* (task) or Env.File.* (environment)
  bool env = false;             // an environment: Env.File.*
};

// Parses `text`, checks every reference against `scope` and substitutes the job parameters
// whose values are known. Errors name `field` and the reference.
StatusOr<FormatString> BindFormat(std::string_view text, const Scope& scope,
                                  const std::string& field);
// Whether no reference is left (the field's value is known now).
bool IsResolved(const FormatString& format);
// The text of a format string (its literal parts; the value when IsResolved).
std::string LiteralText(const FormatString& format);
// Literal text only (no references), for checks of what the template itself wrote.
bool AnyLiteral(const FormatString& format, bool (*pred)(std::string_view));

nlohmann::json FormatToJson(const FormatString& format);
// Resolves a format string from a session JSON with `values` (reference -> text).
StatusOr<std::string> ResolveFormat(const nlohmann::json& json,
                                    const std::map<std::string, std::string>& values,
                                    const std::string& field, std::set<std::string>* used);

// ---- parameter spaces (openjd_space.cpp) ----------------------------------------------------

// The spec's most values of one task parameter (a range list, or what a range expression
// makes), and of task parameters in one step.
inline constexpr int64_t kMaxTaskParameterValues = 1024;
inline constexpr size_t kMaxTaskParameters = 16;

// first, first + step, ..., count values (step >= 1).
struct IntRun {
  int64_t first = 0;
  int64_t step = 1;
  int64_t count = 1;
};

struct TaskParameter {
  std::string name;
  std::string type;                 // INT, FLOAT, STRING, PATH
  std::vector<IntRun> runs;         // INT
  std::vector<std::string> values;  // the others
  bool known = true;                // false while checking: its range names a job parameter
  int64_t count() const;            // -1 when not known
  std::string ValueAt(int64_t index) const;
};

struct CombinationNode {
  enum class Kind { kParam, kProduct, kZip };
  Kind kind = Kind::kParam;
  size_t param = 0;
  std::vector<CombinationNode> children;
  int64_t count = 0;  // filled in by CheckSpace; -1 when not known
};

struct ParameterSpace {
  std::vector<TaskParameter> params;  // empty: one task
  CombinationNode root;
  int64_t count = 1;  // -1 when not known (checking a template)
};

// An <IntRangeExpr> ("1-100:2, 200"): runs in increasing order; overlapping ranges and more
// than `max_values` values are refused naming `field`.
StatusOr<std::vector<IntRun>> ParseIntRangeExpr(std::string_view text, int64_t max_values,
                                                const std::string& field);
// A <CombinationExpr> over `names` (each exactly once).
StatusOr<CombinationNode> ParseCombination(std::string_view text,
                                           const std::vector<std::string>& names,
                                           const std::string& field);
// Counts tasks (at most `max_tasks`), checks associations have equal lengths and that every
// parameter appears exactly once. Fills in the counts (unknown ones stay -1).
Status CheckSpace(ParameterSpace* space, int64_t max_tasks, const std::string& field);
// The value text of each parameter for task `index` (< space.count).
std::vector<std::string> ValuesAt(const ParameterSpace& space, int64_t index);

nlohmann::json SpaceToJson(const ParameterSpace& space);
StatusOr<ParameterSpace> SpaceFromJson(const nlohmann::json& json, int64_t max_tasks);

// ---- job parameters (openjd_params.cpp) -----------------------------------------------------

// A <JobParameterDefinition> (spec 2), as checked, with its constraints. Values are kept as
// text: an INT's in base 10 ("007" is "7"), others as given.
struct ParameterDefinition {
  std::string name;
  std::string type;   // STRING, PATH, INT, FLOAT
  std::string field;  // where it was defined ("parameterDefinitions[2]")
  std::optional<std::string> default_value;
  std::optional<std::vector<std::string>> allowed;
  std::optional<int64_t> min_length, max_length;  // STRING, PATH
  std::optional<int64_t> min_int, max_int;        // INT
  std::optional<double> min_float, max_float;     // FLOAT
  std::string object_type, data_flow;             // PATH; "" when not given
};

// A template's `parameterDefinitions` (absent: none). `what` names the document in messages.
StatusOr<std::vector<ParameterDefinition>> ReadParameterDefinitions(const YAML::Node& node);

// Checks `raw` against the definition's constraints; *out is the value's text (an INT in base
// 10). Errors name `field`.
Status CheckParameterValue(const ParameterDefinition& p, const std::string& raw,
                           const std::string& field, std::string* out);

// Merges the definitions of the environment templates (in order) and then the job template's
// (spec 1.2.1): one definition per name, types and PATH kinds agreeing, each constraint the
// tightest given, the default the last one given; the merged default must meet the merged
// constraints. Names are in first-defined order.
StatusOr<std::vector<ParameterDefinition>> MergeDefinitions(
    const std::vector<std::vector<ParameterDefinition>>& documents);

// A PATH parameter's value as the job sees it.
struct PathValue {
  std::string value;  // absolute (or as given when it was)
  std::string object_type = "DIRECTORY", data_flow = "NONE";
};
// The job parameters' values: given values (a relative PATH joined with inputs.working_dir),
// else defaults (a relative PATH default joined with inputs.template_dir, never leaving it; an
// absolute one refused), each checked after the join. Unknown names and missing values are
// refused.
Status ResolveParameterValues(const std::vector<ParameterDefinition>& defs, const JobInputs& inputs,
                              std::map<std::string, std::string>* values,
                              std::map<std::string, PathValue>* paths);

// ---- POSIX paths (openjd_paths.cpp) ---------------------------------------------------------

// Like Python's os.path.normpath for POSIX paths: no "." parts, ".." folded where it can be,
// one slash between parts.
std::string NormalizePosix(std::string_view path);
// `path` if absolute, else `base`/`path`; normalized either way.
std::string JoinPosix(std::string_view base, std::string_view path);
// Whether normalized `path` is `dir` or inside it.
bool IsWithin(std::string_view dir, std::string_view path);
// Path mapping rules in a step's session JSON: the specification's fields and `in_session`.
nlohmann::json RulesToSession(const std::vector<PathMappingRule>& rules);
StatusOr<std::vector<PathMappingRule>> RulesFromSession(const nlohmann::json& json);
// A bundle's attached folders (inputs.input_roots, inputs.output_dirs) as rules into the session
// (appended to `rules`) and the session's `outputs` ([{"dir", "name"}]).
Status AttachFolders(const JobInputs& inputs, std::vector<PathMappingRule>* rules,
                     nlohmann::json* outputs);

// ---- what the whole template knows (openjd_template.cpp, openjd_steps.cpp) -------------------

struct TemplateContext {
  std::set<std::string> names;                // job parameters
  std::map<std::string, std::string> values;  // their values (empty while checking)
  std::set<std::string> path_params;          // PATH parameters
  bool checking = false;                      // values unknown
  std::set<std::string> job_environment_names;
  std::string job_name;  // resolved (or as written, while checking)
  // Seconds an environment's onEnter may run when the template gives no timeout (0: none).
  int environment_timeout_s = 0;
  // Fields resolved when the job is made (the job name, ranges, host requirements).
  Scope TemplateScope() const {
    Scope s;
    s.params = &names;
    s.values = checking ? nullptr : &values;
    s.path_params = &path_params;
    return s;
  }
  // Fields the worker resolves (actions, embedded files, variables).
  Scope HostScope() const {
    Scope s = TemplateScope();
    s.host = true;
    return s;
  }
};

// An <Environment> as session JSON; *name is its name. `scope`: "external" (an environment
// template), "job" or "step".
StatusOr<nlohmann::json> ParseEnvironment(const YAML::Node& node, const std::string& field,
                                          const TemplateContext& ctx, const char* scope,
                                          std::string* name);
// An <Action> (spec 5). `on_run`: the step's onRun (its notify period defaults to 120, others
// 30); `default_timeout`: seconds when the template gives none (0: none).
StatusOr<nlohmann::json> ParseAction(const YAML::Node& node, const std::string& field,
                                     const Scope& scope, bool on_run, int default_timeout);
// An <EmbeddedFile> as written, before its data is bound (a file's data may name any file of
// its script, so all names are known first).
struct RawFile {
  std::string name, filename, data, field;
  bool runnable = false;
};
// A script's `embeddedFiles` (absent: none): names, file names and types checked.
StatusOr<std::vector<RawFile>> ReadEmbeddedFiles(const YAML::Node& node, const std::string& field);
// The files' session JSON, their data bound in `scope`.
StatusOr<nlohmann::json> FilesToJson(const std::vector<RawFile>& files, const Scope& scope);
// A script's `let` and the FEATURE_BUNDLE_1 sugar are refused by name.
Status RefuseScriptExtensions(const YAML::Node& node, const std::string& field);

// What a step's <HostRequirements> ask of Tessera: resources, required tags (an entry "a|b"
// needs one of them) and named limits (a limit listed n times holds n).
struct HostNeeds {
  spec::ResourceSpec resources;
  std::vector<std::string> tags;
  std::vector<std::string> limits;
};
// Reads a step's <HostRequirements>; what Tessera cannot express is refused naming the
// requirement (openjd_host.cpp).
Status ReadHostRequirements(const YAML::Node& node, const std::string& field,
                            const TemplateContext& ctx, HostNeeds* needs);

// Reads the template's `steps` and makes the translation: the Tessera job file and each step's
// session JSON, which starts from `session_base` (the job's environments, path parameters and
// rules).
StatusOr<Translation> TranslateSteps(const YAML::Node& steps, const TemplateContext& ctx,
                                     const nlohmann::json& session_base,
                                     const JobSettings& settings);

}  // namespace tessera::openjd::internal
