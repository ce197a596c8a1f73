#pragma once
// Pieces of the OpenJD library (shared/openjd.h) shared by the submit side (openjd_template.cpp)
// and the worker side (openjd_session.cpp): format strings, parameter spaces and their JSON.

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <initializer_list>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "shared/job_spec.h"
#include "shared/openjd.h"
#include "shared/status.h"

namespace tessera::openjd::internal {

// ---- strings the spec constrains ----------------------------------------------------------

// An element's place in an error message: "steps[2]".
inline std::string Item(const std::string& field, size_t i) {
  return field + "[" + std::to_string(i) + "]";
}

// <Identifier>: latin letters, digits and '_', not starting with a digit, 1..64 characters.
bool IsIdentifier(std::string_view text);
// Characters (code points) in valid UTF-8 text.
size_t CharCount(std::string_view text);
// Whether the text holds a character of the Cc category (C0, DEL, C1). `allow_whitespace`
// permits newline, carriage return and tab (descriptions).
bool HasControlChar(std::string_view text, bool allow_whitespace = false);

// A base-10 integer ("-12", "+7"; nothing else around it) / a finite floating point number.
bool ParseInteger(std::string_view text, int64_t* out);
bool ParseFloat(std::string_view text, double* out);

// ---- format strings ------------------------------------------------------------------------

// A format string as literal text and value references ("Task.Param.Frame"), so substituted
// values are never parsed again.
struct FormatPart {
  bool is_ref = false;
  std::string text;  // literal text, or the dotted name of the reference
};
using FormatString = std::vector<FormatPart>;

// What a format string may refer to where it is evaluated (the spec's scopes, 7.3.1).
struct Scope {
  const std::map<std::string, std::string>* params = nullptr;  // job parameter values
  const std::set<std::string>* path_params = nullptr;  // PATH parameters (Param.X host-only)
  bool host = false;  // evaluated on the worker: Session.*, Param.<PATH>
  bool task = false;  // a step script: Task.Param.*, Task.RawParam.*, Task.File.*
  std::set<std::string> task_params;
  std::set<std::string> files;  // Task.File.* (task) or Env.File.* (environment)
  bool env = false;             // an environment: Env.File.*
};

// Parses `text`, checks every reference against `scope` and substitutes the job parameters.
// Errors name `field` and the reference.
StatusOr<FormatString> BindFormat(std::string_view text, const Scope& scope,
                                  const std::string& field);
// The text of a format string with no references left (template-time fields).
std::string LiteralText(const FormatString& format);
// Literal text only (no references), for checks of what the template itself wrote.
bool AnyLiteral(const FormatString& format, bool (*pred)(std::string_view));

nlohmann::json FormatToJson(const FormatString& format);
// Resolves a format string from a session JSON with `values` (reference -> text).
StatusOr<std::string> ResolveFormat(const nlohmann::json& json,
                                    const std::map<std::string, std::string>& values,
                                    const std::string& field, std::set<std::string>* used);

// ---- parameter spaces ----------------------------------------------------------------------

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
  int64_t count() const;
  std::string ValueAt(int64_t index) const;
};

struct CombinationNode {
  enum class Kind { kParam, kProduct, kZip };
  Kind kind = Kind::kParam;
  size_t param = 0;
  std::vector<CombinationNode> children;
  int64_t count = 0;  // filled in by CheckSpace
};

struct ParameterSpace {
  std::vector<TaskParameter> params;  // empty: one task
  CombinationNode root;
  int64_t count = 1;
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
// parameter appears exactly once. Fills in the counts.
Status CheckSpace(ParameterSpace* space, int64_t max_tasks, const std::string& field);
// The value text of each parameter for task `index` (< space.count).
std::vector<std::string> ValuesAt(const ParameterSpace& space, int64_t index);

nlohmann::json SpaceToJson(const ParameterSpace& space);
StatusOr<ParameterSpace> SpaceFromJson(const nlohmann::json& json, int64_t max_tasks);

// ---- reading a template (openjd_template.cpp, openjd_steps.cpp) ----------------------------

// What the whole template knows once the job parameters have values.
struct TemplateContext {
  std::map<std::string, std::string> values;  // job parameter -> value text
  std::set<std::string> path_params;          // PATH parameters
  std::set<std::string> job_environment_names;
  std::string job_name;  // resolved
  // Fields resolved when the job is made (the job name, ranges, attribute values).
  Scope TemplateScope() const {
    Scope s;
    s.params = &values;
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

Status NeedsExtension(const std::string& field, const std::string& extension);
// Refuses the first of `keys` (key -> the extension it belongs to) present in the map `node`.
Status RefuseExtensionKeys(const YAML::Node& node, const std::string& path,
                           std::initializer_list<std::pair<const char*, const char*>> keys);
// min..max characters; control characters refused (but newline, CR and tab when `multiline`).
Status CheckText(const std::string& text, const std::string& field, size_t min_chars,
                 size_t max_chars, bool multiline);
// `text` as a Tessera name: each character outside spec::IsNameChar becomes '-'; at most
// spec::kMaxNameLength characters; never empty.
std::string TesseraName(std::string_view text);

// An <Environment> as session JSON; *name is its name. `scope`: "job" or "step".
StatusOr<nlohmann::json> ParseEnvironment(const YAML::Node& node, const std::string& field,
                                          const TemplateContext& ctx, const char* scope,
                                          std::string* name);
// A step's <HostRequirements> as Tessera resources and (required) tags; what Tessera cannot
// express is refused naming the requirement (openjd_host.cpp).
Status ReadHostRequirements(const YAML::Node& node, const std::string& field,
                            const TemplateContext& ctx, spec::ResourceSpec* resources,
                            std::vector<std::string>* tags);
// Reads the template's `steps` and makes the translation: the Tessera job file and each step's
// session JSON (which holds `job_environments` too).
StatusOr<Translation> TranslateSteps(const YAML::Node& steps, const TemplateContext& ctx,
                                     const nlohmann::json& job_environments);

}  // namespace tessera::openjd::internal
