// Strings the OpenJD specification constrains, and format strings
// (shared/openjd/openjd_internal.h).

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "shared/base/yaml_util.h"
#include "shared/jobs/job_file.h"
#include "shared/openjd/openjd_internal.h"

namespace tessera::openjd::internal {

namespace {

std::vector<std::string> SplitDots(std::string_view s) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t dot = s.find('.', start);
    parts.emplace_back(s.substr(start, dot == std::string_view::npos ? dot : dot - start));
    if (dot == std::string_view::npos) return parts;
    start = dot + 1;
  }
}

// Why `ref` may not be used in `scope`, or Ok.
Status CheckReference(const std::vector<std::string>& p, const Scope& scope) {
  const std::string& head = p[0];
  if (head == "Param" || head == "RawParam") {
    if (p.size() != 2) return Status::InvalidArgument("expected " + head + ".<name>");
    if (scope.params == nullptr || !scope.params->count(p[1])) {
      return Status::InvalidArgument("no job parameter named '" + p[1] + "'");
    }
    if (head == "Param" && !scope.host && scope.path_params && scope.path_params->count(p[1])) {
      return Status::InvalidArgument(p[1] + " is a PATH parameter: Param." + p[1] +
                                     " (path-mapped) is only available in step scripts and "
                                     "environments; use RawParam." +
                                     p[1]);
    }
    return Status::Ok();
  }
  if (head == "Session") {
    if (!scope.host) {
      return Status::InvalidArgument(
          "Session.* is only available in step scripts and environments (evaluated on the "
          "worker)");
    }
    if (p.size() == 2 && (p[1] == "WorkingDirectory" || p[1] == "HasPathMappingRules" ||
                          p[1] == "PathMappingRulesFile")) {
      return Status::Ok();
    }
    return Status::InvalidArgument(
        "unknown Session value (WorkingDirectory, HasPathMappingRules, PathMappingRulesFile)");
  }
  if (head == "Task") {
    if (!scope.task) return Status::InvalidArgument("Task.* is only available in a step's script");
    if (p.size() == 3 && (p[1] == "Param" || p[1] == "RawParam")) {
      if (scope.task_params.count(p[2])) return Status::Ok();
      return Status::InvalidArgument("no task parameter named '" + p[2] + "' in this step");
    }
    if (p.size() == 3 && p[1] == "File") {
      if (scope.files.count(p[2])) return Status::Ok();
      return Status::InvalidArgument("no embedded file named '" + p[2] + "' in this script");
    }
    return Status::InvalidArgument(
        "expected Task.Param.<name>, Task.RawParam.<name> or "
        "Task.File.<name>");
  }
  if (head == "Env") {
    if (!scope.env) {
      return Status::InvalidArgument("Env.File.* is only available in an environment");
    }
    if (p.size() == 3 && p[1] == "File") {
      if (scope.files.count(p[2])) return Status::Ok();
      return Status::InvalidArgument("no embedded file named '" + p[2] + "' in this environment");
    }
    return Status::InvalidArgument("expected Env.File.<name>");
  }
  if (head == "Job" || head == "Step") {
    return Status::InvalidArgument(head +
                                   ".Name needs the OpenJD extension EXPR, which is not supported");
  }
  return Status::InvalidArgument("unknown value (Param, RawParam, Task, Env, Session)");
}

void AppendLiteral(FormatString* out, std::string_view text) {
  if (text.empty()) return;
  if (!out->empty() && !out->back().is_ref) {
    out->back().text += text;
  } else {
    out->push_back({false, std::string(text)});
  }
}

}  // namespace

bool IsIdentifier(std::string_view text) {
  if (text.empty() || text.size() > 64) return false;
  if (!IsLatinAlpha(text[0]) && text[0] != '_') return false;
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return IsLatinAlpha(c) || IsDigit(c) || c == '_'; });
}

size_t CharCount(std::string_view text) {
  return static_cast<size_t>(std::count_if(text.begin(), text.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  }));
}

bool HasControlChar(std::string_view text, bool allow_whitespace) {
  for (size_t i = 0; i < text.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7F) {
      if (allow_whitespace && (c == '\n' || c == '\r' || c == '\t')) continue;
      return true;
    }
    // C1 controls U+0080..U+009F are C2 80..C2 9F in UTF-8.
    if (c == 0xC2 && i + 1 < text.size()) {
      unsigned char next = static_cast<unsigned char>(text[i + 1]);
      if (next >= 0x80 && next <= 0x9F) return true;
    }
  }
  return false;
}

StatusOr<FormatString> BindFormat(std::string_view text, const Scope& scope,
                                  const std::string& field) {
  FormatString out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t open = text.find("{{", pos);
    if (open == std::string_view::npos) {
      AppendLiteral(&out, text.substr(pos));
      break;
    }
    AppendLiteral(&out, text.substr(pos, open - pos));
    size_t close = text.find("}}", open + 2);
    if (close == std::string_view::npos) {
      return Status::InvalidArgument(field + ": '{{' at character " + std::to_string(open) +
                                     " has no closing '}}'");
    }
    std::string_view expr = Trim(text.substr(open + 2, close - open - 2));
    const std::string shown = "{{" + std::string(text.substr(open + 2, close - open - 2)) + "}}";
    std::vector<std::string> parts = SplitDots(expr);
    if (!std::all_of(parts.begin(), parts.end(),
                     [](const std::string& s) { return IsIdentifier(s); })) {
      return Status::InvalidArgument(
          field + ": " + shown +
          " is not a value reference like {{Param.Name}} (expressions need the OpenJD extension "
          "EXPR, which is not supported)");
    }
    Status ok = CheckReference(parts, scope);
    if (!ok.ok()) return Status::InvalidArgument(field + ": " + shown + ": " + ok.message());
    const bool job_param = parts[0] == "Param" || parts[0] == "RawParam";
    // Param.X of a PATH parameter is mapped by the worker's rules: it stays a reference there.
    const bool mapped = parts[0] == "Param" && scope.path_params != nullptr &&
                        scope.path_params->count(parts[1]) != 0;
    if (job_param && scope.values != nullptr && !mapped) {
      AppendLiteral(&out, scope.values->at(parts[1]));
    } else {
      out.push_back({true, std::string(expr)});
    }
    pos = close + 2;
  }
  return out;
}

bool IsResolved(const FormatString& format) {
  return std::none_of(format.begin(), format.end(), [](const FormatPart& p) { return p.is_ref; });
}

std::string LiteralText(const FormatString& format) {
  std::string text;
  for (const FormatPart& part : format) text += part.is_ref ? "" : part.text;
  return text;
}

bool AnyLiteral(const FormatString& format, bool (*pred)(std::string_view)) {
  return std::any_of(format.begin(), format.end(),
                     [&](const FormatPart& p) { return !p.is_ref && pred(p.text); });
}

nlohmann::json FormatToJson(const FormatString& format) {
  if (format.empty()) return "";
  if (format.size() == 1 && !format[0].is_ref) return format[0].text;
  nlohmann::json parts = nlohmann::json::array();
  for (const FormatPart& part : format) {
    if (part.is_ref) {
      parts.push_back({{"ref", part.text}});
    } else {
      parts.push_back(part.text);
    }
  }
  return parts;
}

StatusOr<std::string> ResolveFormat(const nlohmann::json& json,
                                    const std::map<std::string, std::string>& values,
                                    const std::string& field, std::set<std::string>* used) {
  if (json.is_string()) return json.get<std::string>();
  if (!json.is_array()) return Status::InvalidArgument(field + ": expected a format string");
  std::string text;
  for (const nlohmann::json& part : json) {
    if (part.is_string()) {
      text += part.get_ref<const std::string&>();
      continue;
    }
    if (!part.is_object() || part.size() != 1 || !part.contains("ref") ||
        !part["ref"].is_string()) {
      return Status::InvalidArgument(field + ": expected text or {\"ref\": NAME}");
    }
    const std::string& ref = part["ref"].get_ref<const std::string&>();
    auto it = values.find(ref);
    if (it == values.end()) {
      return Status::InvalidArgument(field + ": no value for {{" + ref + "}} here");
    }
    if (used) used->insert(ref);
    text += it->second;
  }
  return text;
}

bool ParseInteger(std::string_view s, int64_t* out) {
  if (!s.empty() && s[0] == '+') {
    s.remove_prefix(1);
    if (!s.empty() && (s[0] == '+' || s[0] == '-')) return false;  // "+-5"
  }
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size() && !s.empty();
}

bool ParseFloat(std::string_view s, double* out) {
  // Decimal notation only ("1.5", "-.5", "2e3"): no "inf", "nan" or hexadecimal, as the
  // specification's <floatstring> is a base-10 number.
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
  size_t digits = 0;
  while (i < s.size() && IsDigit(s[i])) ++i, ++digits;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && IsDigit(s[i])) ++i, ++digits;
  }
  if (digits == 0) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    size_t exponent = 0;
    while (i < s.size() && IsDigit(s[i])) ++i, ++exponent;
    if (exponent == 0) return false;
  }
  if (i != s.size()) return false;
  const std::string text(s);
  const double v = std::strtod(text.c_str(), nullptr);
  if (!std::isfinite(v)) return false;  // 1e309
  *out = v;
  return true;
}

std::string Lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

Status CheckText(const std::string& text, const std::string& field, size_t min_chars,
                 size_t max_chars, bool multiline) {
  const size_t n = CharCount(text);
  if (n < min_chars) {
    return Status::InvalidArgument(
        field + (min_chars == 1 ? ": must not be empty"
                                : ": at least " + std::to_string(min_chars) + " characters"));
  }
  if (n > max_chars) {
    return Status::InvalidArgument(field + ": at most " + std::to_string(max_chars) +
                                   " characters, got " + std::to_string(n));
  }
  if (HasControlChar(text, multiline)) {
    return Status::InvalidArgument(field + ": holds a control character");
  }
  return Status::Ok();
}

Status CheckList(const YAML::Node& node, const std::string& field, const char* what) {
  if (!node.IsSequence() || node.size() == 0) {
    return Status::InvalidArgument(field + ": expected a list of at least one " + what +
                                   (node.IsSequence() ? "" : ", got " + yaml::KindName(node)));
  }
  return Status::Ok();
}

StatusOr<std::string> Scalar(const YAML::Node& node, const std::string& field) {
  if (!node.IsScalar()) {
    return Status::InvalidArgument(field + ": expected a string, got " + yaml::KindName(node));
  }
  return node.Scalar();
}

Status NeedsExtension(const std::string& field, const std::string& extension) {
  return Status::InvalidArgument(field + ": needs the OpenJD extension " + extension +
                                 ", which Tessera does not support");
}

Status RefuseExtensionKeys(const YAML::Node& node, const std::string& path,
                           std::initializer_list<std::pair<const char*, const char*>> keys) {
  if (!node.IsMap()) return Status::Ok();
  for (const auto& [key, extension] : keys) {
    const YAML::Node& map = node;  // a const lookup never inserts the key
    if (map[key].IsDefined()) {
      return NeedsExtension(path.empty() ? key : path + "." + key, extension);
    }
  }
  return Status::Ok();
}

std::string TesseraName(std::string_view text) {
  std::string name;
  for (size_t i = 0; i < text.size() && name.size() < spec::kMaxNameLength; ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      while (i + 1 < text.size() && (static_cast<unsigned char>(text[i + 1]) & 0xC0) == 0x80) ++i;
      name += '-';
    } else {
      name += spec::IsNameChar(static_cast<char>(c)) ? static_cast<char>(c) : '-';
    }
  }
  return name.empty() ? "openjd" : name;
}

}  // namespace tessera::openjd::internal
