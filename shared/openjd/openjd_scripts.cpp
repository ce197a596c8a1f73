// Scripts of OpenJD templates: actions (spec 5), embedded files (spec 6) and environments
// (spec 4), as the session JSON a worker runs (shared/openjd/openjd_internal.h).

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <set>

#include "shared/base/yaml_util.h"
#include "shared/jobs/job_file.h"
#include "shared/openjd/openjd_internal.h"

namespace tessera::openjd::internal {

namespace {

constexpr size_t kMaxNameChars = 64;  // environment names, embedded file names
constexpr size_t kMaxVariableNameChars = 256;
constexpr size_t kMaxVariableValueChars = 2048;
constexpr int kMaxNotifyPeriodSeconds = 600;
constexpr int kDefaultOnExitTimeoutSeconds = 300;

bool HasNewline(std::string_view s) { return s.find_first_of("\r\n") != std::string_view::npos; }
bool HasCc(std::string_view s) { return HasControlChar(s); }
// An argument may span lines (a `python -c` script): other control characters are refused.
bool HasCcButWhitespace(std::string_view s) { return HasControlChar(s, true); }

}  // namespace

// <Action> (spec 5). `on_run`: the step's onRun (its notify period defaults to 120, others 30).
StatusOr<nlohmann::json> ParseAction(const YAML::Node& node, const std::string& field,
                                     const Scope& scope, bool on_run, int default_timeout) {
  yaml::MapReader r(node, field);
  std::string command;
  int timeout = default_timeout;
  r.Required("command", &command).Optional("timeout", &timeout);
  YAML::Node args = r.Child("args");
  YAML::Node cancelation = r.Child("cancelation");
  TSR_RETURN_IF_ERROR(r.Finish());
  if (r.Has("timeout") && (timeout <= 0 || timeout > spec::kMaxTaskTimeoutSeconds)) {
    return Status::InvalidArgument(field + ".timeout: must be 1.." +
                                   std::to_string(spec::kMaxTaskTimeoutSeconds) + " seconds");
  }
  if (command.empty()) return Status::InvalidArgument(field + ".command: must not be empty");
  TSR_ASSIGN_OR_RETURN(FormatString cmd, BindFormat(command, scope, field + ".command"));
  if (AnyLiteral(cmd, HasCc)) {
    return Status::InvalidArgument(field + ".command: holds a control character");
  }
  nlohmann::json json_args = nlohmann::json::array();
  if (args.IsDefined() && !args.IsNull()) {
    if (!args.IsSequence()) return Status::InvalidArgument(field + ".args: expected a list");
    for (size_t i = 0; i < args.size(); ++i) {
      TSR_ASSIGN_OR_RETURN(std::string text, Scalar(args[i], Item(field + ".args", i)));
      TSR_ASSIGN_OR_RETURN(FormatString arg, BindFormat(text, scope, Item(field + ".args", i)));
      if (AnyLiteral(arg, HasCcButWhitespace)) {
        return Status::InvalidArgument(Item(field + ".args", i) +
                                       ": holds a control character (other than a line break or "
                                       "tab)");
      }
      json_args.push_back(FormatToJson(arg));
    }
  }
  std::string mode = "TERMINATE";
  int notify = 0;
  if (cancelation.IsDefined() && !cancelation.IsNull()) {
    yaml::MapReader c(cancelation, field + ".cancelation");
    c.Required("mode", &mode);
    if (mode == "NOTIFY_THEN_TERMINATE") {
      notify = on_run ? 120 : 30;
      c.Optional("notifyPeriodInSeconds", &notify);
    }
    TSR_RETURN_IF_ERROR(c.Finish());
    if (mode != "TERMINATE" && mode != "NOTIFY_THEN_TERMINATE") {
      return Status::InvalidArgument(field +
                                     ".cancelation.mode: expected TERMINATE or "
                                     "NOTIFY_THEN_TERMINATE, got '" +
                                     mode + "'");
    }
    if (mode == "NOTIFY_THEN_TERMINATE" && (notify < 1 || notify > kMaxNotifyPeriodSeconds)) {
      return Status::InvalidArgument(field + ".cancelation.notifyPeriodInSeconds: must be 1.." +
                                     std::to_string(kMaxNotifyPeriodSeconds));
    }
  }
  return nlohmann::json{{"command", FormatToJson(cmd)},
                        {"args", json_args},
                        {"timeout_s", timeout},
                        {"cancel_mode", mode},
                        {"notify_period_s", notify}};
}

StatusOr<std::vector<RawFile>> ReadEmbeddedFiles(const YAML::Node& node, const std::string& field) {
  std::vector<RawFile> files;
  if (!node.IsDefined() || node.IsNull()) return files;
  TSR_RETURN_IF_ERROR(CheckList(node, field, "embedded file"));
  std::set<std::string> names, written;
  for (size_t i = 0; i < node.size(); ++i) {
    RawFile f;
    f.field = Item(field, i);
    TSR_RETURN_IF_ERROR(RefuseExtensionKeys(node[i], f.field, {{"endOfLine", "FEATURE_BUNDLE_1"}}));
    yaml::MapReader r(node[i], f.field);
    std::string type;
    r.Required("name", &f.name).Required("type", &type).Optional("filename", &f.filename);
    r.Optional("runnable", &f.runnable).Required("data", &f.data);
    TSR_RETURN_IF_ERROR(r.Finish());
    if (!IsIdentifier(f.name)) {
      return Status::InvalidArgument(f.field + ".name: '" + f.name + "' is not an identifier");
    }
    if (!names.insert(f.name).second) {
      return Status::InvalidArgument(f.field + ".name: another embedded file is named '" + f.name +
                                     "'");
    }
    if (type != "TEXT") {
      return Status::InvalidArgument(f.field + ".type: expected TEXT, got '" + type + "'");
    }
    if (r.Has("filename")) {
      TSR_RETURN_IF_ERROR(CheckText(f.filename, f.field + ".filename", 1, kMaxNameChars, false));
      if (f.filename.find_first_of("/\\") != std::string::npos || f.filename == "." ||
          f.filename == "..") {
        return Status::InvalidArgument(f.field + ".filename: '" + f.filename +
                                       "' must be a file name, without folders");
      }
    } else {
      f.filename = f.name;
    }
    if (!written.insert(f.filename).second) {
      return Status::InvalidArgument(f.field +
                                     ".filename: another embedded file of this script "
                                     "is written as '" +
                                     f.filename + "'");
    }
    if (f.data.empty()) return Status::InvalidArgument(f.field + ".data: must not be empty");
    files.push_back(std::move(f));
  }
  return files;
}

StatusOr<nlohmann::json> FilesToJson(const std::vector<RawFile>& files, const Scope& scope) {
  nlohmann::json out = nlohmann::json::array();
  for (const RawFile& f : files) {
    TSR_ASSIGN_OR_RETURN(FormatString data, BindFormat(f.data, scope, f.field + ".data"));
    out.push_back({{"name", f.name},
                   {"filename", f.filename},
                   {"runnable", f.runnable},
                   {"data", FormatToJson(data)}});
  }
  return out;
}

// A script's `actions` and `embeddedFiles` (the parts both kinds of script share).
Status RefuseScriptExtensions(const YAML::Node& node, const std::string& field) {
  return RefuseExtensionKeys(node, field,
                             {{"let", "EXPR"},
                              {"bash", "FEATURE_BUNDLE_1"},
                              {"cmd", "FEATURE_BUNDLE_1"},
                              {"node", "FEATURE_BUNDLE_1"},
                              {"powershell", "FEATURE_BUNDLE_1"},
                              {"python", "FEATURE_BUNDLE_1"}});
}

StatusOr<nlohmann::json> ParseEnvironment(const YAML::Node& node, const std::string& field,
                                          const TemplateContext& ctx, const char* scope_name,
                                          std::string* name) {
  TSR_RETURN_IF_ERROR(RefuseExtensionKeys(node, field, {{"let", "EXPR"}}));
  yaml::MapReader r(node, field);
  std::string description;
  r.Required("name", name).Optional("description", &description);
  YAML::Node script = r.Child("script");
  YAML::Node variables = r.Child("variables");
  TSR_RETURN_IF_ERROR(r.Finish());
  TSR_RETURN_IF_ERROR(CheckText(*name, field + ".name", 1, kMaxNameChars, false));
  if (r.Has("description")) {
    TSR_RETURN_IF_ERROR(CheckText(description, field + ".description", 1, 2048, true));
  }
  if (!r.Has("script") && !r.Has("variables")) {
    return Status::InvalidArgument(field + ": an environment needs a script or variables");
  }
  nlohmann::json env = {{"name", *name},
                        {"scope", scope_name},
                        {"variables", nlohmann::json::array()},
                        {"files", nlohmann::json::array()},
                        {"on_enter", nullptr},
                        {"on_exit", nullptr}};
  Scope scope = ctx.HostScope();
  scope.env = true;
  if (r.Has("script")) {
    const std::string sfield = field + ".script";
    TSR_RETURN_IF_ERROR(RefuseScriptExtensions(script, sfield));
    yaml::MapReader s(script, sfield);
    YAML::Node actions = s.Child("actions");
    YAML::Node files_node = s.Child("embeddedFiles");
    TSR_RETURN_IF_ERROR(s.Finish());
    TSR_ASSIGN_OR_RETURN(std::vector<RawFile> files,
                         ReadEmbeddedFiles(files_node, sfield + ".embeddedFiles"));
    for (const RawFile& f : files) scope.files.insert(f.name);
    TSR_ASSIGN_OR_RETURN(env["files"], FilesToJson(files, scope));
    yaml::MapReader a(actions, sfield + ".actions");
    YAML::Node on_enter = a.Child("onEnter");
    YAML::Node on_exit = a.Child("onExit");
    if (!actions.IsDefined() || actions.IsNull()) {
      a.Fail(Status::InvalidArgument(sfield + ".actions: required field is missing"));
    }
    TSR_RETURN_IF_ERROR(a.Finish());
    if (!a.Has("onEnter") && !a.Has("onExit")) {
      return Status::InvalidArgument(sfield + ".actions: needs onEnter or onExit");
    }
    if (a.Has("onEnter")) {
      TSR_ASSIGN_OR_RETURN(env["on_enter"], ParseAction(on_enter, sfield + ".actions.onEnter",
                                                        scope, false, ctx.environment_timeout_s));
    }
    if (a.Has("onExit")) {
      TSR_ASSIGN_OR_RETURN(env["on_exit"], ParseAction(on_exit, sfield + ".actions.onExit", scope,
                                                       false, kDefaultOnExitTimeoutSeconds));
    }
  }
  if (r.Has("variables")) {
    const std::string vfield = field + ".variables";
    if (!variables.IsMap() || variables.size() == 0) {
      return Status::InvalidArgument(vfield + ": expected a map of NAME: value");
    }
    std::set<std::string> seen;
    for (const auto& kv : variables) {
      const std::string var = kv.first.IsScalar() ? kv.first.Scalar() : "?";
      const std::string vf = vfield + "." + var;
      const bool valid = !var.empty() && var.size() <= kMaxVariableNameChars &&
                         !(var[0] >= '0' && var[0] <= '9') &&
                         std::all_of(var.begin(), var.end(), [](char c) {
                           return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                                  (c >= '0' && c <= '9') || c == '_';
                         });
      if (!valid) {
        return Status::InvalidArgument(vf +
                                       ": not a variable name (latin letters, digits and "
                                       "'_', not starting with a digit, at most 256)");
      }
      if (!seen.insert(var).second) return Status::InvalidArgument(vf + ": given twice");
      TSR_ASSIGN_OR_RETURN(std::string text, Scalar(kv.second, vf));
      TSR_ASSIGN_OR_RETURN(FormatString value, BindFormat(text, scope, vf));
      if (AnyLiteral(value, HasNewline)) {
        return Status::InvalidArgument(vf + ": a variable's value may not hold a newline");
      }
      if (CharCount(LiteralText(value)) > kMaxVariableValueChars) {
        return Status::InvalidArgument(vf + ": at most " + std::to_string(kMaxVariableValueChars) +
                                       " characters");
      }
      env["variables"].push_back({var, FormatToJson(value)});
    }
  }
  return env;
}

}  // namespace tessera::openjd::internal
