// Parameter spaces of OpenJD steps (spec 3.4): task parameters, range expressions,
// combinations, task counts and the space's JSON in a step's session
// (shared/openjd/openjd_internal.h).

#include <algorithm>

#include "shared/openjd/openjd_internal.h"

namespace tessera::openjd::internal {

int64_t TaskParameter::count() const {
  if (!known) return -1;
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
                                       " values (the specification's most for one task "
                                       "parameter; combine parameters for more tasks)");
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
  // A count of -1 is not known yet (a range from a job parameter, while checking a template):
  // what depends on it is checked once the job is made.
  bool unknown = false;
  const CombinationNode* first_known = nullptr;
  node->count = 1;
  for (CombinationNode& child : node->children) {
    TSR_RETURN_IF_ERROR(CountNode(&child, space, uses, max_tasks, field));
    if (child.count < 0) {
      unknown = true;
      continue;
    }
    if (node->kind == CombinationNode::Kind::kZip) {
      if (first_known != nullptr && child.count != first_known->count) {
        return Status::InvalidArgument(
            field + ": the members of " + NodeText(*node, space) +
            " must have as many values each (" + NodeText(*first_known, space) + " has " +
            std::to_string(first_known->count) + ", " + NodeText(child, space) + " has " +
            std::to_string(child.count) + ")");
      }
      if (first_known == nullptr) first_known = &child;
      node->count = child.count;
    } else if (child.count != 0 && node->count > max_tasks / child.count) {
      return Status::ResourceExhausted(field + ": " + NodeText(*node, space) + " makes more than " +
                                       std::to_string(max_tasks) +
                                       " tasks (the most a Tessera step runs)");
    } else {
      node->count *= child.count;
    }
  }
  if (unknown && (node->kind == CombinationNode::Kind::kProduct || first_known == nullptr)) {
    node->count = -1;
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
  if (space->root.count < 0) {
    space->count = -1;
    return Status::Ok();
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
