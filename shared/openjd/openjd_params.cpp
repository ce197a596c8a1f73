// Job parameter definitions of OpenJD templates (spec 2): their constraints and user interface
// hints, the merging of environment templates' definitions with the job template's (spec
// 1.2.1), and the values a job is made with (shared/openjd/openjd_internal.h).

#include <algorithm>
#include <cmath>

#include "shared/base/utf8.h"
#include "shared/base/yaml_util.h"
#include "shared/openjd/openjd_internal.h"

namespace tessera::openjd::internal {

namespace {

constexpr size_t kMaxParameterValueChars = 1024;
constexpr size_t kMaxFileFilters = 20;
constexpr size_t kMaxFilterPatternChars = 20;
constexpr size_t kMaxLabelChars = 64;

std::string Quoted(const std::string& s) { return "'" + s + "'"; }

std::string JoinList(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

// A scalar as text, refusing lists and maps (a value is one scalar).
StatusOr<std::string> ValueText(const YAML::Node& node, const std::string& field) {
  if (!node.IsScalar()) {
    return Status::InvalidArgument(field + ": expected a value, got " + yaml::KindName(node));
  }
  return node.Scalar();
}

bool IsText(const std::string& type) { return type == "STRING" || type == "PATH"; }

// The control a parameter's user interface gets when the template names none (spec 2.1-2.4).
std::string DefaultControl(const ParameterDefinition& p) {
  if (p.allowed) return "DROPDOWN_LIST";
  if (p.type == "STRING") return "LINE_EDIT";
  if (p.type == "PATH") {
    if (p.object_type != "FILE") return "CHOOSE_DIRECTORY";
    return p.data_flow == "OUT" ? "CHOOSE_OUTPUT_FILE" : "CHOOSE_INPUT_FILE";
  }
  return "SPIN_BOX";
}

// <FileDialogFilterPatternStringValue> (spec 2.8): "*", "*.*" or "*." and extension characters.
bool IsFilterPattern(const std::string& pattern) {
  if (pattern == "*" || pattern == "*.*") return true;
  if (pattern.size() < 3 || pattern.compare(0, 2, "*.") != 0) return false;
  if (HasControlChar(pattern) || CharCount(pattern) > kMaxFilterPatternChars) return false;
  return pattern.find_first_of("/\\*?[]#%&{}<>$!'\":@`|=", 2) == std::string::npos;
}

Status ReadFileFilter(const YAML::Node& node, const std::string& field) {
  yaml::MapReader r(node, field);
  std::string label;
  YAML::Node patterns = r.Child("patterns");
  r.Required("label", &label);
  if (r.ok() && (!patterns.IsDefined() || patterns.IsNull())) {
    r.Fail(Status::InvalidArgument(field + ".patterns: required field is missing"));
  }
  TSR_RETURN_IF_ERROR(r.Finish());
  TSR_RETURN_IF_ERROR(CheckText(label, field + ".label", 1, kMaxLabelChars, false));
  TSR_RETURN_IF_ERROR(CheckList(patterns, field + ".patterns", "pattern"));
  TSR_RETURN_IF_ERROR(yaml::CheckListSize(patterns, field + ".patterns", kMaxFileFilters));
  for (size_t i = 0; i < patterns.size(); ++i) {
    TSR_ASSIGN_OR_RETURN(std::string pattern, Scalar(patterns[i], Item(field + ".patterns", i)));
    if (!IsFilterPattern(pattern)) {
      return Status::InvalidArgument(Item(field + ".patterns", i) + ": " + Quoted(pattern) +
                                     " is not a file filter ('*', '*.*' or '*.ext', at most 20 "
                                     "characters, no path separators or wildcards in the "
                                     "extension)");
    }
  }
  return Status::Ok();
}

// <userInterface> (spec 2.1-2.4): only hints for a submitter's dialog, but checked like the rest
// of the template, against the parameter's type and constraints.
Status ReadUserInterface(const YAML::Node& node, const std::string& field,
                         const ParameterDefinition& p) {
  yaml::MapReader r(node, field);
  std::string control, label, group;
  r.Optional("control", &control).Optional("label", &label).Optional("groupLabel", &group);
  // Keys by type: any other is an unknown field (decimals on an INT, fileFilters on a STRING).
  const YAML::Node none(YAML::NodeType::Undefined);
  const YAML::Node filters = p.type == "PATH" ? r.Child("fileFilters") : none;
  const YAML::Node filter_default = p.type == "PATH" ? r.Child("fileFilterDefault") : none;
  const YAML::Node step = IsText(p.type) ? none : r.Child("singleStepDelta");
  const YAML::Node decimals = p.type == "FLOAT" ? r.Child("decimals") : none;
  TSR_RETURN_IF_ERROR(r.Finish());
  std::vector<std::string> controls = {"DROPDOWN_LIST", "HIDDEN"};
  if (p.type == "STRING") {
    controls.insert(controls.end(), {"LINE_EDIT", "MULTILINE_EDIT", "CHECK_BOX"});
  } else if (p.type == "PATH") {
    controls.insert(controls.end(),
                    {"CHOOSE_INPUT_FILE", "CHOOSE_OUTPUT_FILE", "CHOOSE_DIRECTORY"});
  } else {
    controls.push_back("SPIN_BOX");
  }
  if (r.Has("control") && std::find(controls.begin(), controls.end(), control) == controls.end()) {
    return Status::InvalidArgument(field + ".control: " + Quoted(control) +
                                   " is not a control for a " + p.type + " parameter (" +
                                   JoinList(controls) + ")");
  }
  if (!r.Has("control")) control = DefaultControl(p);
  if (r.Has("label")) {
    TSR_RETURN_IF_ERROR(CheckText(label, field + ".label", 1, kMaxLabelChars, false));
  }
  if (r.Has("groupLabel")) {
    TSR_RETURN_IF_ERROR(CheckText(group, field + ".groupLabel", 1, kMaxLabelChars, false));
  }
  const bool needs_allowed = control == "DROPDOWN_LIST" || control == "CHECK_BOX";
  if (needs_allowed && !p.allowed) {
    return Status::InvalidArgument(field + ".control: " + control +
                                   " needs the parameter's allowedValues");
  }
  if (!needs_allowed && control != "HIDDEN" && p.allowed) {
    return Status::InvalidArgument(field + ".control: " + control +
                                   " cannot be used with allowedValues (use DROPDOWN_LIST)");
  }
  if (control == "CHECK_BOX") {
    // Two values, one meaning on and one off: true/false, yes/no, on/off or 1/0, any case.
    static const std::vector<std::set<std::string>> kPairs = {
        {"true", "false"}, {"yes", "no"}, {"on", "off"}, {"1", "0"}};
    std::set<std::string> values;
    for (const std::string& v : *p.allowed) values.insert(Lower(v));
    if (p.allowed->size() != 2 || std::find(kPairs.begin(), kPairs.end(), values) == kPairs.end()) {
      return Status::InvalidArgument(
          field +
          ".control: CHECK_BOX needs allowedValues of two values, true/false, yes/no, "
          "on/off or 1/0 (any case), got [" +
          JoinList(*p.allowed) + "]");
    }
  }
  const bool file_dialog = control == "CHOOSE_INPUT_FILE" || control == "CHOOSE_OUTPUT_FILE";
  for (const auto& [value, key] :
       {std::pair{&filters, "fileFilters"}, std::pair{&filter_default, "fileFilterDefault"}}) {
    if (!value->IsDefined() || value->IsNull()) continue;
    if (!file_dialog) {
      return Status::InvalidArgument(field + "." + key + ": only for the file dialogs " +
                                     "CHOOSE_INPUT_FILE and CHOOSE_OUTPUT_FILE, the control is " +
                                     control);
    }
  }
  if (filters.IsDefined() && !filters.IsNull()) {
    TSR_RETURN_IF_ERROR(CheckList(filters, field + ".fileFilters", "file filter"));
    TSR_RETURN_IF_ERROR(yaml::CheckListSize(filters, field + ".fileFilters", kMaxFileFilters));
    for (size_t i = 0; i < filters.size(); ++i) {
      TSR_RETURN_IF_ERROR(ReadFileFilter(filters[i], Item(field + ".fileFilters", i)));
    }
  }
  if (filter_default.IsDefined() && !filter_default.IsNull()) {
    TSR_RETURN_IF_ERROR(ReadFileFilter(filter_default, field + ".fileFilterDefault"));
  }
  for (const auto& [value, key] :
       {std::pair{&step, "singleStepDelta"}, std::pair{&decimals, "decimals"}}) {
    if (!value->IsDefined() || value->IsNull()) continue;
    const std::string kfield = field + "." + key;
    if (control != "SPIN_BOX") {
      return Status::InvalidArgument(kfield + ": only for a SPIN_BOX, the control is " + control);
    }
    TSR_ASSIGN_OR_RETURN(std::string text, ValueText(*value, kfield));
    int64_t i = 0;
    double d = 0;
    const bool integer = p.type == "INT" || std::string(key) == "decimals";
    if (integer ? !ParseInteger(text, &i) : !ParseFloat(text, &d)) {
      return Status::InvalidArgument(
          kfield + ": expected " + (integer ? "an integer" : "a number") + ", got " + Quoted(text));
    }
    const bool positive = std::string(key) == "decimals" ? i >= 0 : (integer ? i > 0 : d > 0);
    if (!positive) {
      return Status::InvalidArgument(kfield + ": must be " +
                                     (std::string(key) == "decimals" ? "0 or more" : "positive"));
    }
  }
  return Status::Ok();
}

// A numeric bound (minValue, maxValue) of an INT or FLOAT parameter.
Status ReadBound(const YAML::Node& node, const std::string& field, ParameterDefinition* p,
                 bool is_min) {
  if (!node.IsDefined() || node.IsNull()) return Status::Ok();
  TSR_ASSIGN_OR_RETURN(std::string text, ValueText(node, field));
  if (p->type == "INT") {
    int64_t v = 0;
    if (!ParseInteger(text, &v)) {
      return Status::InvalidArgument(field + ": expected an integer within 64 bits, got " +
                                     Quoted(text));
    }
    (is_min ? p->min_int : p->max_int) = v;
  } else {
    double v = 0;
    if (!ParseFloat(text, &v)) {
      return Status::InvalidArgument(field + ": expected a number, got " + Quoted(text));
    }
    (is_min ? p->min_float : p->max_float) = v;
  }
  return Status::Ok();
}

StatusOr<ParameterDefinition> ReadDefinition(const YAML::Node& node, const std::string& field) {
  ParameterDefinition p;
  p.field = field;
  yaml::MapReader r(node, field);
  r.Required("name", &p.name).Required("type", &p.type);
  if (!r.ok()) return r.Finish();
  if (!IsIdentifier(p.name)) {
    return Status::InvalidArgument(field + ".name: " + Quoted(p.name) +
                                   " is not an identifier (latin letters, digits and '_', not "
                                   "starting with a digit, at most 64)");
  }
  static const std::set<std::string> kExprTypes = {"BOOL",       "RANGE_EXPR",     "LIST[STRING]",
                                                   "LIST[PATH]", "LIST[INT]",      "LIST[FLOAT]",
                                                   "LIST[BOOL]", "LIST[LIST[INT]]"};
  if (kExprTypes.count(p.type)) return NeedsExtension(field + ".type " + p.type, "EXPR");
  if (p.type != "STRING" && p.type != "PATH" && p.type != "INT" && p.type != "FLOAT") {
    return Status::InvalidArgument(field + ".type: unknown type " + Quoted(p.type) +
                                   " (STRING, PATH, INT, FLOAT)");
  }
  std::string description;
  r.Optional("description", &description);
  const YAML::Node def = r.Child("default");
  const YAML::Node allowed = r.Child("allowedValues");
  const YAML::Node ui = r.Child("userInterface");
  const bool text = IsText(p.type);
  const YAML::Node none(YAML::NodeType::Undefined);
  const YAML::Node min_node = text ? none : r.Child("minValue");
  const YAML::Node max_node = text ? none : r.Child("maxValue");
  int64_t min_length = 0, max_length = 0;
  if (text) {
    r.Optional("minLength", &min_length).Optional("maxLength", &max_length);
    if (r.Has("minLength")) p.min_length = min_length;
    if (r.Has("maxLength")) p.max_length = max_length;
  }
  if (p.type == "PATH") {
    r.Optional("objectType", &p.object_type).Optional("dataFlow", &p.data_flow);
  }
  TSR_RETURN_IF_ERROR(r.Finish());
  if (r.Has("objectType") && p.object_type != "FILE" && p.object_type != "DIRECTORY") {
    return Status::InvalidArgument(field + ".objectType: expected FILE or DIRECTORY, got " +
                                   Quoted(p.object_type));
  }
  if (r.Has("dataFlow") && p.data_flow != "NONE" && p.data_flow != "IN" && p.data_flow != "OUT" &&
      p.data_flow != "INOUT") {
    return Status::InvalidArgument(field + ".dataFlow: expected NONE, IN, OUT or INOUT, got " +
                                   Quoted(p.data_flow));
  }
  if (r.Has("description")) {
    TSR_RETURN_IF_ERROR(CheckText(description, field + ".description", 1, 2048, true));
  }
  if (text) {
    if (p.min_length && *p.min_length < 0) {
      return Status::InvalidArgument(field + ".minLength: must be 0 or more");
    }
    if (p.max_length && *p.max_length < 1) {
      return Status::InvalidArgument(field + ".maxLength: must be 1 or more");
    }
    if (p.min_length && p.max_length && *p.min_length > *p.max_length) {
      return Status::InvalidArgument(field + ": minLength is above maxLength");
    }
  } else {
    TSR_RETURN_IF_ERROR(ReadBound(min_node, field + ".minValue", &p, true));
    TSR_RETURN_IF_ERROR(ReadBound(max_node, field + ".maxValue", &p, false));
    if ((p.min_int && p.max_int && *p.min_int > *p.max_int) ||
        (p.min_float && p.max_float && *p.min_float > *p.max_float)) {
      return Status::InvalidArgument(field + ": minValue is above maxValue");
    }
  }
  // allowedValues first (they constrain the default), each checked against the other
  // constraints. Given, it is a non-empty list: `allowedValues: null` is refused too.
  if (allowed.IsDefined()) {
    const std::string afield = field + ".allowedValues";
    if (!allowed.IsSequence() || allowed.size() == 0) {
      return Status::InvalidArgument(afield + ": expected a list of at least one value");
    }
    std::vector<std::string> values;
    for (size_t i = 0; i < allowed.size(); ++i) {
      TSR_ASSIGN_OR_RETURN(std::string raw, ValueText(allowed[i], Item(afield, i)));
      std::string v;
      TSR_RETURN_IF_ERROR(CheckParameterValue(p, raw, Item(afield, i), &v));
      values.push_back(std::move(v));
    }
    p.allowed = std::move(values);
  }
  if (def.IsDefined() && !def.IsNull()) {
    TSR_ASSIGN_OR_RETURN(std::string raw, ValueText(def, field + ".default"));
    std::string v;
    TSR_RETURN_IF_ERROR(CheckParameterValue(p, raw, field + ".default", &v));
    p.default_value = v;
  }
  if (ui.IsDefined() && !ui.IsNull()) {
    TSR_RETURN_IF_ERROR(ReadUserInterface(ui, field + ".userInterface", p));
  }
  return p;
}

bool SameValue(const ParameterDefinition& p, const std::string& a, const std::string& b) {
  double x = 0, y = 0;
  return a == b || (p.type == "FLOAT" && ParseFloat(a, &x) && ParseFloat(b, &y) && x == y);
}

template <typename T>
void Tighter(std::optional<T>* into, const std::optional<T>& other, bool is_min) {
  if (!other) return;
  if (!*into || (is_min ? *other > **into : *other < **into)) *into = other;
}

// An absolute path in either form: POSIX ("/x"), or a Windows drive ("P:\\x", "P:/x") or share
// ("\\\\server\\share") written on an artist's machine -- the path mapping rules' business, never
// joined with a POSIX folder.
bool IsAbsolutePath(const std::string& path) {
  if (!path.empty() && path[0] == '/') return true;
  if (path.size() >= 3 && IsLatinAlpha(path[0]) && path[1] == ':' &&
      (path[2] == '\\' || path[2] == '/')) {
    return true;
  }
  return path.size() >= 2 && path[0] == '\\' && path[1] == '\\';
}

}  // namespace

Status CheckParameterValue(const ParameterDefinition& p, const std::string& raw,
                           const std::string& field, std::string* out) {
  if (IsText(p.type)) {
    TSR_RETURN_IF_ERROR(utf8::Check(raw, field));
    const int64_t n = static_cast<int64_t>(CharCount(raw));
    if (n > static_cast<int64_t>(kMaxParameterValueChars)) {
      return Status::InvalidArgument(field + ": at most " +
                                     std::to_string(kMaxParameterValueChars) + " characters, got " +
                                     std::to_string(n));
    }
    if (p.min_length && n < *p.min_length) {
      return Status::InvalidArgument(field + ": " + std::to_string(n) +
                                     " characters, fewer than minLength " +
                                     std::to_string(*p.min_length));
    }
    if (p.max_length && n > *p.max_length) {
      return Status::InvalidArgument(field + ": " + std::to_string(n) +
                                     " characters, more than maxLength " +
                                     std::to_string(*p.max_length));
    }
    *out = raw;
  } else if (p.type == "INT") {
    int64_t v = 0;
    if (!ParseInteger(raw, &v)) {
      return Status::InvalidArgument(field + ": " + Quoted(raw) +
                                     " is not an integer within 64 bits");
    }
    if (p.min_int && v < *p.min_int) {
      return Status::InvalidArgument(field + ": " + std::to_string(v) + " is below minValue " +
                                     std::to_string(*p.min_int));
    }
    if (p.max_int && v > *p.max_int) {
      return Status::InvalidArgument(field + ": " + std::to_string(v) + " is above maxValue " +
                                     std::to_string(*p.max_int));
    }
    *out = std::to_string(v);
  } else {
    double v = 0;
    if (!ParseFloat(raw, &v)) {
      return Status::InvalidArgument(field + ": " + Quoted(raw) + " is not a finite number");
    }
    if ((p.min_float && v < *p.min_float) || (p.max_float && v > *p.max_float)) {
      return Status::InvalidArgument(field + ": " + raw + " is outside [minValue, maxValue]");
    }
    *out = raw;
  }
  if (p.allowed && std::none_of(p.allowed->begin(), p.allowed->end(),
                                [&](const std::string& a) { return SameValue(p, a, *out); })) {
    return Status::InvalidArgument(field + ": " + Quoted(*out) + " is not one of allowedValues (" +
                                   JoinList(*p.allowed) + ")");
  }
  return Status::Ok();
}

StatusOr<std::vector<ParameterDefinition>> ReadParameterDefinitions(const YAML::Node& node) {
  std::vector<ParameterDefinition> defs;
  if (!node.IsDefined()) return defs;
  if (!node.IsSequence() || node.size() == 0) {
    return Status::InvalidArgument(
        "parameterDefinitions: expected a list of at least one parameter");
  }
  TSR_RETURN_IF_ERROR(yaml::CheckListSize(node, "parameterDefinitions", kMaxJobParameters));
  for (size_t i = 0; i < node.size(); ++i) {
    const std::string field = Item("parameterDefinitions", i);
    TSR_ASSIGN_OR_RETURN(ParameterDefinition p, ReadDefinition(node[i], field));
    for (const ParameterDefinition& other : defs) {
      if (other.name == p.name) {
        return Status::InvalidArgument(field + ".name: another parameter is named '" + p.name +
                                       "'");
      }
    }
    defs.push_back(std::move(p));
  }
  return defs;
}

StatusOr<std::vector<ParameterDefinition>> MergeDefinitions(
    const std::vector<std::vector<ParameterDefinition>>& documents) {
  std::vector<ParameterDefinition> merged;
  for (const std::vector<ParameterDefinition>& defs : documents) {
    for (const ParameterDefinition& p : defs) {
      auto it = std::find_if(merged.begin(), merged.end(),
                             [&](const ParameterDefinition& m) { return m.name == p.name; });
      if (it == merged.end()) {
        merged.push_back(p);
        continue;
      }
      ParameterDefinition& m = *it;
      const std::string both = m.field + " and " + p.field;
      if (m.type != p.type) {
        return Status::InvalidArgument(both + ": parameter " + p.name +
                                       " is defined with two types (" + m.type + ", " + p.type +
                                       ")");
      }
      for (const auto& [mine, theirs, key] :
           {std::tuple{&m.object_type, &p.object_type, "objectType"},
            std::tuple{&m.data_flow, &p.data_flow, "dataFlow"}}) {
        if (!mine->empty() && !theirs->empty() && *mine != *theirs) {
          return Status::InvalidArgument(both + ": parameter " + p.name + " has two " + key + " (" +
                                         *mine + ", " + *theirs + ")");
        }
        if (mine->empty()) *mine = *theirs;
      }
      Tighter(&m.min_length, p.min_length, true);
      Tighter(&m.max_length, p.max_length, false);
      Tighter(&m.min_int, p.min_int, true);
      Tighter(&m.max_int, p.max_int, false);
      Tighter(&m.min_float, p.min_float, true);
      Tighter(&m.max_float, p.max_float, false);
      if (p.allowed) {
        if (!m.allowed) {
          m.allowed = p.allowed;
        } else {
          std::vector<std::string> common;
          for (const std::string& v : *m.allowed) {
            if (std::any_of(p.allowed->begin(), p.allowed->end(),
                            [&](const std::string& w) { return SameValue(m, v, w); })) {
              common.push_back(v);
            }
          }
          if (common.empty()) {
            return Status::InvalidArgument(both + ": parameter " + p.name +
                                           " has allowedValues with nothing in common");
          }
          m.allowed = std::move(common);
        }
      }
      if (p.default_value) m.default_value = p.default_value;
      m.field = p.field;
    }
  }
  for (const ParameterDefinition& m : merged) {
    if ((m.min_length && m.max_length && *m.min_length > *m.max_length) ||
        (m.min_int && m.max_int && *m.min_int > *m.max_int) ||
        (m.min_float && m.max_float && *m.min_float > *m.max_float)) {
      return Status::InvalidArgument("parameter " + m.name +
                                     ": its definitions' constraints leave no value");
    }
    if (m.default_value) {
      std::string v;
      TSR_RETURN_IF_ERROR(CheckParameterValue(m, *m.default_value,
                                              "parameter " + m.name + " (default, merged)", &v));
    }
  }
  return merged;
}

Status ResolveParameterValues(const std::vector<ParameterDefinition>& defs, const JobInputs& inputs,
                              std::map<std::string, std::string>* values,
                              std::map<std::string, PathValue>* paths) {
  for (const auto& given : inputs.parameters) {
    const std::string& name = given.first;
    const bool defined = std::any_of(defs.begin(), defs.end(),
                                     [&](const ParameterDefinition& p) { return p.name == name; });
    if (!defined) {
      std::vector<std::string> names;
      for (const ParameterDefinition& p : defs) names.push_back(p.name);
      return Status::InvalidArgument("parameter " + name.substr(0, 128) +
                                     ": the template defines no such parameter (" +
                                     (names.empty() ? "it has none" : JoinList(names)) + ")");
    }
    TSR_RETURN_IF_ERROR(utf8::Check(given.second, "parameter " + name));
  }
  for (const ParameterDefinition& p : defs) {
    const std::string field = "parameter " + p.name;
    auto given = inputs.parameters.find(p.name);
    std::string raw;
    if (given != inputs.parameters.end()) {
      raw = given->second;
      if (p.type == "PATH" && !raw.empty() && !IsAbsolutePath(raw)) {
        // A relative value is the submitter's, from where they stood (spec 2.2).
        if (inputs.working_dir.empty()) {
          return Status::InvalidArgument(field + ": " + Quoted(raw) +
                                         " is relative, and the submission gives no working "
                                         "folder to join it with");
        }
        raw = JoinPosix(inputs.working_dir, raw);
      }
    } else if (p.default_value) {
      raw = *p.default_value;
      if (p.type == "PATH") {
        // A default is relative to the template's folder and stays inside it (spec 2.2).
        if (IsAbsolutePath(raw)) {
          return Status::InvalidArgument(
              field + ": the default " + Quoted(raw) +
              " is absolute; a PATH default is relative to the template's folder");
        }
        if (inputs.template_dir.empty()) {
          return Status::InvalidArgument(field + ": the default " + Quoted(raw) +
                                         " is relative to the template's folder, which the "
                                         "submission does not give");
        }
        const std::string dir = NormalizePosix(inputs.template_dir);
        raw = JoinPosix(dir, raw);
        if (!IsWithin(dir, raw)) {
          return Status::InvalidArgument(field + ": the default " + Quoted(*p.default_value) +
                                         " leaves the template's folder");
        }
      }
    } else {
      return Status::InvalidArgument(field + ": no value given (-p " + p.name +
                                     "=VALUE) and the template gives no default");
    }
    std::string value;
    TSR_RETURN_IF_ERROR(CheckParameterValue(p, raw, field, &value));
    (*values)[p.name] = value;
    if (p.type == "PATH") {
      PathValue& path = (*paths)[p.name];
      path.value = value;
      if (!p.object_type.empty()) path.object_type = p.object_type;
      if (!p.data_flow.empty()) path.data_flow = p.data_flow;
    }
  }
  return Status::Ok();
}

}  // namespace tessera::openjd::internal
