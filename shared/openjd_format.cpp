// Format strings and parameter spaces of OpenJD templates (shared/openjd_internal.h).

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "shared/openjd_internal.h"

namespace tessera::openjd::internal {

namespace {

bool IsLatinAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsSpace(char c) { return c == ' ' || c == '\t'; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

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
    if (parts[0] == "Param" || parts[0] == "RawParam") {
      // No path mapping rules on Tessera: Param and RawParam are the same text.
      AppendLiteral(&out, scope.params->at(parts[1]));
    } else {
      out.push_back({true, std::string(expr)});
    }
    pos = close + 2;
  }
  return out;
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

// ---- parameter spaces ----------------------------------------------------------------------

int64_t TaskParameter::count() const {
  if (type != "INT") return static_cast<int64_t>(values.size());
  int64_t n = 0;
  for (const IntRun& run : runs) n += run.count;
  return n;
}

std::string TaskParameter::ValueAt(int64_t index) const {
  if (type != "INT") return values[static_cast<size_t>(index)];
  for (const IntRun& run : runs) {
    if (index < run.count) return std::to_string(run.first + run.step * index);
    index -= run.count;
  }
  return "";
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
  if (s.empty() || IsSpace(s.front()) || IsSpace(s.back())) return false;
  std::string text(s);
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || errno == ERANGE || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

namespace {

// Reads an optionally signed integer at `*pos`, skipping spaces before it.
bool ReadInt(std::string_view s, size_t* pos, int64_t* out) {
  while (*pos < s.size() && IsSpace(s[*pos])) ++*pos;
  size_t start = *pos;
  if (*pos < s.size() && (s[*pos] == '-' || s[*pos] == '+')) ++*pos;
  while (*pos < s.size() && IsDigit(s[*pos])) ++*pos;
  return ParseInteger(s.substr(start, *pos - start), out);
}

struct RangeElement {
  int64_t low = 0, high = 0;  // the written bounds, ordered (for the overlap check)
  IntRun run;
};

}  // namespace

StatusOr<std::vector<IntRun>> ParseIntRangeExpr(std::string_view text, int64_t max_values,
                                                const std::string& field) {
  std::vector<RangeElement> elements;
  size_t start = 0;
  int64_t total = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string_view item = text.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    const std::string bad = field + ": '" + std::string(Trim(item)) +
                            "' is not an integer, a range 'A-B' or 'A-B:STEP'";
    size_t pos = 0;
    int64_t x = 0, y = 0, skip = 1;
    if (!ReadInt(item, &pos, &x)) return Status::InvalidArgument(bad);
    while (pos < item.size() && IsSpace(item[pos])) ++pos;
    bool is_range = pos < item.size() && item[pos] == '-';
    if (is_range) {
      ++pos;
      if (!ReadInt(item, &pos, &y)) return Status::InvalidArgument(bad);
      while (pos < item.size() && IsSpace(item[pos])) ++pos;
      if (pos < item.size() && item[pos] == ':') {
        ++pos;
        if (!ReadInt(item, &pos, &skip) || skip == 0) return Status::InvalidArgument(bad);
      }
    } else {
      y = x;
    }
    if (!Trim(item.substr(pos)).empty()) return Status::InvalidArgument(bad);
    // x, then x + m*skip toward y: none past y when the direction is wrong ("1 - -1" is [1]).
    RangeElement e;
    e.low = std::min(x, y);
    e.high = std::max(x, y);
    int64_t span = 0;
    if ((skip > 0 && y > x) || (skip < 0 && y < x)) {
      if (__builtin_sub_overflow(std::max(x, y), std::min(x, y), &span)) {
        return Status::InvalidArgument(field + ": range '" + std::string(Trim(item)) +
                                       "' is too large");
      }
    }
    uint64_t abs_skip = skip < 0 ? 0 - static_cast<uint64_t>(skip) : static_cast<uint64_t>(skip);
    uint64_t count = static_cast<uint64_t>(span) / abs_skip + 1;
    if (count > static_cast<uint64_t>(max_values) ||
        total + static_cast<int64_t>(count) > max_values) {
      return Status::ResourceExhausted(field + ": more than " + std::to_string(max_values) +
                                       " values (a Tessera step runs at most that many tasks)");
    }
    e.run.count = static_cast<int64_t>(count);
    e.run.step = static_cast<int64_t>(abs_skip);
    // Kept increasing: a negative skip starts from its last value.
    e.run.first = skip > 0 ? x : x + skip * (e.run.count - 1);
    if (e.run.count == 1) e.run.step = 1;
    total += e.run.count;
    elements.push_back(e);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  std::sort(elements.begin(), elements.end(),
            [](const RangeElement& a, const RangeElement& b) { return a.low < b.low; });
  std::vector<IntRun> runs;
  for (size_t i = 0; i < elements.size(); ++i) {
    if (i > 0 && elements[i].low <= elements[i - 1].high) {
      return Status::InvalidArgument(
          field + ": ranges overlap (" + std::to_string(elements[i - 1].low) + "-" +
          std::to_string(elements[i - 1].high) + " and " + std::to_string(elements[i].low) + "-" +
          std::to_string(elements[i].high) + ")");
    }
    runs.push_back(elements[i].run);
  }
  return runs;
}

namespace {

class CombinationParser {
 public:
  CombinationParser(std::string_view text, const std::vector<std::string>& names,
                    const std::string& field)
      : text_(text), names_(names), field_(field) {}

  StatusOr<CombinationNode> Parse() {
    TSR_ASSIGN_OR_RETURN(CombinationNode root, Expr(0));
    SkipSpaces();
    if (pos_ != text_.size()) return Error("unexpected '" + std::string(1, text_[pos_]) + "'");
    return root;
  }

 private:
  StatusOr<CombinationNode> Expr(int depth) {
    if (depth > 32) return Error("nested too deeply");
    CombinationNode product;
    product.kind = CombinationNode::Kind::kProduct;
    while (true) {
      TSR_ASSIGN_OR_RETURN(CombinationNode element, Element(depth));
      product.children.push_back(std::move(element));
      SkipSpaces();
      if (pos_ < text_.size() && text_[pos_] == '*') {
        ++pos_;
        continue;
      }
      break;
    }
    if (product.children.size() == 1) return std::move(product.children[0]);
    return product;
  }

  StatusOr<CombinationNode> Element(int depth) {
    SkipSpaces();
    if (pos_ >= text_.size()) return Error("expected a task parameter or '(' at the end");
    if (text_[pos_] == '(') {
      ++pos_;
      CombinationNode zip;
      zip.kind = CombinationNode::Kind::kZip;
      while (true) {
        TSR_ASSIGN_OR_RETURN(CombinationNode item, Expr(depth + 1));
        zip.children.push_back(std::move(item));
        SkipSpaces();
        if (pos_ < text_.size() && text_[pos_] == ',') {
          ++pos_;
          continue;
        }
        if (pos_ < text_.size() && text_[pos_] == ')') {
          ++pos_;
          break;
        }
        return Error("expected ',' or ')' at character " + std::to_string(pos_));
      }
      if (zip.children.size() == 1) return std::move(zip.children[0]);
      return zip;
    }
    size_t start = pos_;
    while (pos_ < text_.size() &&
           (IsLatinAlpha(text_[pos_]) || IsDigit(text_[pos_]) || text_[pos_] == '_')) {
      ++pos_;
    }
    std::string name(text_.substr(start, pos_ - start));
    if (name.empty()) {
      return Error("expected a task parameter or '(' at character " + std::to_string(start));
    }
    auto it = std::find(names_.begin(), names_.end(), name);
    if (it == names_.end()) return Error("no task parameter named '" + name + "'");
    CombinationNode node;
    node.param = static_cast<size_t>(it - names_.begin());
    return node;
  }

  void SkipSpaces() {
    while (pos_ < text_.size() && text_[pos_] == ' ') ++pos_;
  }
  Status Error(const std::string& what) const {
    return Status::InvalidArgument(field_ + ": " + what);
  }

  std::string_view text_;
  const std::vector<std::string>& names_;
  const std::string& field_;
  size_t pos_ = 0;
};

std::string NodeText(const CombinationNode& node, const ParameterSpace& space) {
  if (node.kind == CombinationNode::Kind::kParam) return space.params[node.param].name;
  std::string text = node.kind == CombinationNode::Kind::kZip ? "(" : "";
  for (size_t i = 0; i < node.children.size(); ++i) {
    text += (i ? (node.kind == CombinationNode::Kind::kZip ? ", " : " * ") : "") +
            NodeText(node.children[i], space);
  }
  return node.kind == CombinationNode::Kind::kZip ? text + ")" : text;
}

Status CountNode(CombinationNode* node, const ParameterSpace& space, std::vector<int>* uses,
                 int64_t max_tasks, const std::string& field) {
  switch (node->kind) {
    case CombinationNode::Kind::kParam:
      if (node->param >= space.params.size()) {
        return Status::InvalidArgument(field + ": no task parameter " +
                                       std::to_string(node->param));
      }
      ++(*uses)[node->param];
      node->count = space.params[node->param].count();
      return Status::Ok();
    case CombinationNode::Kind::kProduct:
    case CombinationNode::Kind::kZip:
      if (node->children.empty()) return Status::InvalidArgument(field + ": empty combination");
      break;
  }
  node->count = node->kind == CombinationNode::Kind::kProduct ? 1 : -1;
  for (CombinationNode& child : node->children) {
    TSR_RETURN_IF_ERROR(CountNode(&child, space, uses, max_tasks, field));
    if (node->kind == CombinationNode::Kind::kZip) {
      if (node->count >= 0 && child.count != node->count) {
        return Status::InvalidArgument(
            field + ": the members of " + NodeText(*node, space) +
            " must have as many values each (" + NodeText(node->children[0], space) + " has " +
            std::to_string(node->children[0].count) + ", " + NodeText(child, space) + " has " +
            std::to_string(child.count) + ")");
      }
      node->count = child.count;
    } else if (child.count != 0 && node->count > max_tasks / child.count) {
      return Status::ResourceExhausted(field + ": " + NodeText(*node, space) + " makes more than " +
                                       std::to_string(max_tasks) +
                                       " tasks (the most a Tessera step runs)");
    } else {
      node->count *= child.count;
    }
  }
  return Status::Ok();
}

void FillValues(const CombinationNode& node, const ParameterSpace& space, int64_t index,
                std::vector<std::string>* out) {
  switch (node.kind) {
    case CombinationNode::Kind::kParam:
      (*out)[node.param] = space.params[node.param].ValueAt(index);
      return;
    case CombinationNode::Kind::kZip:
      for (const CombinationNode& child : node.children) FillValues(child, space, index, out);
      return;
    case CombinationNode::Kind::kProduct:
      // The last factor varies fastest (A * B: A=1,B=10; A=1,B=11; ...).
      for (size_t i = node.children.size(); i-- > 0;) {
        const CombinationNode& child = node.children[i];
        FillValues(child, space, index % child.count, out);
        index /= child.count;
      }
      return;
  }
}

}  // namespace

StatusOr<CombinationNode> ParseCombination(std::string_view text,
                                           const std::vector<std::string>& names,
                                           const std::string& field) {
  return CombinationParser(text, names, field).Parse();
}

Status CheckSpace(ParameterSpace* space, int64_t max_tasks, const std::string& field) {
  if (space->params.empty()) {
    space->count = 1;
    return Status::Ok();
  }
  std::vector<int> uses(space->params.size(), 0);
  TSR_RETURN_IF_ERROR(CountNode(&space->root, *space, &uses, max_tasks, field));
  for (size_t i = 0; i < uses.size(); ++i) {
    if (uses[i] != 1) {
      return Status::InvalidArgument(
          field + ": task parameter " + space->params[i].name +
          (uses[i] ? " appears more than once" : " is missing (each must appear exactly once)"));
    }
  }
  if (space->root.count > max_tasks) {
    return Status::ResourceExhausted(field + ": " + std::to_string(space->root.count) +
                                     " tasks, more than " + std::to_string(max_tasks) +
                                     " (the most a Tessera step runs)");
  }
  space->count = space->root.count;
  return Status::Ok();
}

std::vector<std::string> ValuesAt(const ParameterSpace& space, int64_t index) {
  std::vector<std::string> values(space.params.size());
  if (!space.params.empty()) FillValues(space.root, space, index, &values);
  return values;
}

namespace {

nlohmann::json NodeToJson(const CombinationNode& node) {
  if (node.kind == CombinationNode::Kind::kParam) return {{"param", node.param}};
  nlohmann::json children = nlohmann::json::array();
  for (const CombinationNode& child : node.children) children.push_back(NodeToJson(child));
  return {{node.kind == CombinationNode::Kind::kZip ? "zip" : "product", children}};
}

StatusOr<CombinationNode> NodeFromJson(const nlohmann::json& json, int depth) {
  const Status bad = Status::InvalidArgument(
      "parameter_space.combination: expected {\"param\": i}, {\"product\": [...]} or "
      "{\"zip\": [...]}");
  if (depth > 64 || !json.is_object() || json.size() != 1) return bad;
  CombinationNode node;
  if (json.contains("param")) {
    if (!json["param"].is_number_unsigned()) return bad;
    node.param = json["param"].get<size_t>();
    return node;
  }
  const bool zip = json.contains("zip");
  const nlohmann::json& children = zip ? json["zip"] : json.value("product", nlohmann::json());
  if (!children.is_array()) return bad;
  node.kind = zip ? CombinationNode::Kind::kZip : CombinationNode::Kind::kProduct;
  for (const nlohmann::json& child : children) {
    TSR_ASSIGN_OR_RETURN(CombinationNode c, NodeFromJson(child, depth + 1));
    node.children.push_back(std::move(c));
  }
  return node;
}

}  // namespace

nlohmann::json SpaceToJson(const ParameterSpace& space) {
  nlohmann::json params = nlohmann::json::array();
  for (const TaskParameter& p : space.params) {
    nlohmann::json j = {{"name", p.name}, {"type", p.type}};
    if (p.type == "INT") {
      nlohmann::json runs = nlohmann::json::array();
      for (const IntRun& r : p.runs) runs.push_back({r.first, r.step, r.count});
      j["ranges"] = runs;
    } else {
      j["values"] = p.values;
    }
    params.push_back(std::move(j));
  }
  return {{"parameters", params},
          {"combination", space.params.empty() ? nlohmann::json() : NodeToJson(space.root)}};
}

StatusOr<ParameterSpace> SpaceFromJson(const nlohmann::json& json, int64_t max_tasks) {
  const Status bad = Status::InvalidArgument(
      "parameter_space: expected {\"parameters\": [...], \"combination\": ...}");
  if (!json.is_object() || json.size() != 2 || !json.contains("parameters") ||
      !json["parameters"].is_array() || !json.contains("combination")) {
    return bad;
  }
  ParameterSpace space;
  for (const nlohmann::json& j : json["parameters"]) {
    const std::string field =
        "parameter_space.parameters[" + std::to_string(space.params.size()) + "]";
    TaskParameter p;
    if (!j.is_object() || j.size() != 3 || !j.value("name", nlohmann::json()).is_string() ||
        !j.value("type", nlohmann::json()).is_string()) {
      return Status::InvalidArgument(field + ": expected {name, type, ranges|values}");
    }
    p.name = j["name"].get<std::string>();
    p.type = j["type"].get<std::string>();
    if (p.type == "INT") {
      const nlohmann::json& runs = j.value("ranges", nlohmann::json());
      if (!runs.is_array()) return Status::InvalidArgument(field + ": expected ranges");
      for (const nlohmann::json& r : runs) {
        if (!r.is_array() || r.size() != 3 || !r[0].is_number_integer() ||
            !r[1].is_number_integer() || !r[2].is_number_integer() || r[1].get<int64_t>() < 1 ||
            r[2].get<int64_t>() < 1 || r[2].get<int64_t>() > max_tasks) {
          return Status::InvalidArgument(field + ": expected ranges of [first, step, count]");
        }
        p.runs.push_back({r[0].get<int64_t>(), r[1].get<int64_t>(), r[2].get<int64_t>()});
        if (p.count() > max_tasks) return Status::InvalidArgument(field + ": too many values");
      }
    } else if (p.type == "FLOAT" || p.type == "STRING" || p.type == "PATH") {
      const nlohmann::json& values = j.value("values", nlohmann::json());
      if (!values.is_array()) return Status::InvalidArgument(field + ": expected values");
      for (const nlohmann::json& v : values) {
        if (!v.is_string()) return Status::InvalidArgument(field + ": expected text values");
        p.values.push_back(v.get<std::string>());
      }
    } else {
      return Status::InvalidArgument(field + ": unknown type '" + p.type + "'");
    }
    if (p.count() == 0) return Status::InvalidArgument(field + ": no values");
    space.params.push_back(std::move(p));
  }
  if (!space.params.empty()) {
    TSR_ASSIGN_OR_RETURN(space.root, NodeFromJson(json["combination"], 0));
  } else if (!json["combination"].is_null()) {
    return bad;
  }
  TSR_RETURN_IF_ERROR(CheckSpace(&space, max_tasks, "parameter_space.combination"));
  return space;
}

}  // namespace tessera::openjd::internal
