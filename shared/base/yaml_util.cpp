#include "shared/base/yaml_util.h"

#include <yaml-cpp/depthguard.h>

#include <cmath>
#include <limits>
#include <variant>

#include "shared/base/utf8.h"

namespace tessera::yaml {

namespace {

// Visits every node as if aliases were expanded (an alias is visited once per use), so the
// bounds hold for what a reader of the document will see. It stops at the first bound crossed:
// the work is never more than the budget, whatever the aliases multiply to.
class Walker {
 public:
  Walker(const Limits& limits, const std::string& what, size_t document_bytes)
      : limits_(limits), what_(what) {
    const size_t ratio_budget = document_bytes * limits.max_expansion + (64u << 10);
    budget_ = std::min(limits.max_expanded_bytes, ratio_budget);
  }

  Status Walk(const YAML::Node& node, int depth) {
    if (depth > limits_.max_depth) {
      return Fail("nested more than " + std::to_string(limits_.max_depth) +
                  " levels deep (the limit)");
    }
    used_ += 1;
    switch (node.Type()) {
      case YAML::NodeType::Scalar:
        TSR_RETURN_IF_ERROR(Scalar(node.Scalar()));
        break;
      case YAML::NodeType::Sequence: {
        TSR_RETURN_IF_ERROR(CheckBudget());
        TSR_RETURN_IF_ERROR(CheckItems(node.size()));
        size_t i = 0;
        for (const YAML::Node& child : node) {
          path_.emplace_back(i++);
          TSR_RETURN_IF_ERROR(Walk(child, depth + 1));
          path_.pop_back();
        }
        break;
      }
      case YAML::NodeType::Map: {
        TSR_RETURN_IF_ERROR(CheckBudget());
        TSR_RETURN_IF_ERROR(CheckItems(node.size()));
        for (const auto& kv : node) {
          if (kv.first.IsScalar()) {
            path_.emplace_back(&kv.first.Scalar());
            TSR_RETURN_IF_ERROR(Scalar(kv.first.Scalar()));
          } else {
            path_.emplace_back(std::string("?"));
            TSR_RETURN_IF_ERROR(Walk(kv.first, depth + 1));
          }
          TSR_RETURN_IF_ERROR(Walk(kv.second, depth + 1));
          path_.pop_back();
        }
        break;
      }
      default:
        break;
    }
    return CheckBudget();
  }

 private:
  Status Scalar(const std::string& value) {
    used_ += value.size();
    if (value.size() > limits_.max_string_bytes) {
      return Fail("a string of " + std::to_string(value.size()) +
                  " bytes, more than the limit of " + std::to_string(limits_.max_string_bytes));
    }
    // The document was valid UTF-8, but escapes ("\ud800", "\0") can still make a value that
    // is not.
    if (std::optional<size_t> bad = utf8::FirstInvalid(value)) {
      return Fail("not valid UTF-8 after escapes (byte " + std::to_string(*bad) + " of the value)");
    }
    if (value.find('\0') != std::string::npos) return Fail("contains a NUL character");
    return CheckBudget();
  }

  Status CheckItems(size_t items) {
    if (items <= limits_.max_items) return Status::Ok();
    return Fail(std::to_string(items) + " entries, more than the limit of " +
                std::to_string(limits_.max_items));
  }

  Status CheckBudget() {
    if (used_ <= budget_) return Status::Ok();
    return Status::InvalidArgument(
        what_ + ": aliases expand the document to more than " + std::to_string(budget_) +
        " bytes (the limit: " + std::to_string(limits_.max_expansion) +
        " times its own size plus 64 KiB, at most " + std::to_string(limits_.max_expanded_bytes) +
        "); refused as an alias bomb");
  }

  Status Fail(const std::string& problem) const {
    std::string path;
    for (const auto& part : path_) {
      if (const size_t* index = std::get_if<size_t>(&part)) {
        path += "[" + std::to_string(*index) + "]";
      } else {
        const std::string& key = std::holds_alternative<const std::string*>(part)
                                     ? *std::get<const std::string*>(part)
                                     : std::get<std::string>(part);
        // A key that is itself bad is shown by its printable start only.
        path += (path.empty() ? "" : ".") + utf8::Sanitize(key.substr(0, 64));
      }
    }
    return Status::InvalidArgument(what_ + ": " + (path.empty() ? "document" : path) + ": " +
                                   problem);
  }

  const Limits& limits_;
  const std::string& what_;
  size_t budget_ = 0;
  size_t used_ = 0;
  std::vector<std::variant<size_t, const std::string*, std::string>> path_;
};

}  // namespace

namespace {
thread_local int64_t documents_parsed = 0;
}  // namespace

int64_t DocumentsParsedOnThisThread() { return documents_parsed; }

StatusOr<YAML::Node> Parse(std::string_view text, const std::string& what, const Limits& limits) {
  ++documents_parsed;
  if (text.size() > limits.max_document_bytes) {
    return Status::InvalidArgument(what + ": " + std::to_string(text.size()) +
                                   " bytes, more than the limit of " +
                                   std::to_string(limits.max_document_bytes));
  }
  TSR_RETURN_IF_ERROR(utf8::Check(text, what));
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::DeepRecursion& e) {
    return Status::InvalidArgument(what + ": nested more than " + std::to_string(limits.max_depth) +
                                   " levels deep (the limit), at line " +
                                   std::to_string(e.mark.line + 1));
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(what + ": YAML syntax error at line " +
                                   std::to_string(e.mark.line + 1) + ", column " +
                                   std::to_string(e.mark.column + 1) + ": " + e.msg);
  }
  Walker walker(limits, what, text.size());
  TSR_RETURN_IF_ERROR(walker.Walk(root, 0));
  return root;
}

Status CheckListSize(const YAML::Node& node, const std::string& path, size_t max_items) {
  if (!(node.IsSequence() || node.IsMap()) || node.size() <= max_items) return Status::Ok();
  return Status::InvalidArgument(path + ": at most " + std::to_string(max_items) +
                                 " entries, got " + std::to_string(node.size()));
}

std::string KindName(const YAML::Node& node) {
  if (!node.IsDefined()) return "nothing";
  switch (node.Type()) {
    case YAML::NodeType::Null:
      return "null";
    case YAML::NodeType::Scalar:
      return "'" + node.Scalar() + "'";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a map";
    default:
      return "an undefined value";
  }
}

namespace internal {
namespace {
Status Expected(const std::string& path, const char* what, const YAML::Node& node) {
  return Status::InvalidArgument(path + ": expected " + what + ", got " + KindName(node));
}
}  // namespace

Status ConvertScalar(const YAML::Node& node, const std::string& path, bool* out) {
  if (!node.IsScalar()) return Expected(path, "true or false", node);
  const std::string& s = node.Scalar();
  if (s == "true" || s == "True" || s == "yes" || s == "on") {
    *out = true;
  } else if (s == "false" || s == "False" || s == "no" || s == "off") {
    *out = false;
  } else {
    return Expected(path, "true or false", node);
  }
  return Status::Ok();
}

Status ConvertScalar(const YAML::Node& node, const std::string& path, int64_t* out) {
  if (!node.IsScalar()) return Expected(path, "an integer", node);
  const std::string& s = node.Scalar();
  try {
    size_t used = 0;
    long long v = std::stoll(s, &used, 10);
    if (used != s.size()) return Expected(path, "an integer", node);
    *out = v;
  } catch (const std::out_of_range&) {
    return Status::InvalidArgument(path + ": integer " + s + " is out of range");
  } catch (const std::exception&) {
    return Expected(path, "an integer", node);
  }
  return Status::Ok();
}

Status ConvertScalar(const YAML::Node& node, const std::string& path, int* out) {
  int64_t v = 0;
  TSR_RETURN_IF_ERROR(ConvertScalar(node, path, &v));
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) {
    return Status::InvalidArgument(path + ": integer " + node.Scalar() + " is out of range");
  }
  *out = static_cast<int>(v);
  return Status::Ok();
}

Status ConvertScalar(const YAML::Node& node, const std::string& path, double* out) {
  if (!node.IsScalar()) return Expected(path, "a number", node);
  const std::string& s = node.Scalar();
  try {
    size_t used = 0;
    double v = std::stod(s, &used);
    if (used != s.size() || !std::isfinite(v)) return Expected(path, "a finite number", node);
    *out = v;
  } catch (const std::exception&) {
    return Expected(path, "a number", node);
  }
  return Status::Ok();
}

Status ConvertScalar(const YAML::Node& node, const std::string& path, std::string* out) {
  if (!node.IsScalar()) return Expected(path, "a string", node);
  *out = node.Scalar();
  return Status::Ok();
}

Status ConvertScalar(const YAML::Node& node, const std::string& path, std::array<double, 3>* out) {
  if (!node.IsSequence() || node.size() != 3) return Expected(path, "a list of 3 numbers", node);
  for (size_t i = 0; i < 3; ++i) {
    TSR_RETURN_IF_ERROR(ConvertScalar(node[i], path + "[" + std::to_string(i) + "]", &(*out)[i]));
  }
  return Status::Ok();
}
}  // namespace internal

// yaml-cpp nodes have reference semantics (assigning to a missing "zombie" node throws), so an
// absent or null section is replaced at construction, never by assignment.
MapReader::MapReader(const YAML::Node& node, std::string path)
    : node_(node.IsDefined() && !node.IsNull() ? node : YAML::Node(YAML::NodeType::Map)),
      path_(std::move(path)) {
  if (!node_.IsMap()) {
    status_ = Status::InvalidArgument((path_.empty() ? std::string("document") : path_) +
                                      ": expected a map, got " + KindName(node));
  }
}

std::string MapReader::PathOf(std::string_view key) const {
  return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
}

bool MapReader::Has(const char* key) const {
  return node_.IsMap() && node_[key].IsDefined() && !node_[key].IsNull();
}

YAML::Node MapReader::Take(const char* key) {
  known_.insert(key);
  // A missing key is a valid, undefined node. yaml-cpp's own answer for it is an "invalid"
  // node on which every type query (IsNull, IsSequence, size) throws InvalidNode -- the
  // exception a caller testing an optional field for its kind would leak.
  if (!node_.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
  const YAML::Node& n = node_;
  YAML::Node child = n[key];
  return child.IsDefined() ? child : YAML::Node(YAML::NodeType::Undefined);
}

Status MapReader::Finish() const {
  if (!status_.ok()) return status_;
  std::set<std::string> seen;
  for (const auto& kv : node_) {
    std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "?";
    // yaml-cpp keeps duplicate keys; silently picking one of them would hide a user's mistake.
    if (!seen.insert(key).second) {
      return Status::InvalidArgument(PathOf(key) + ": field is given more than once");
    }
    if (!known_.count(key)) {
      std::string known_list;
      for (const auto& k : known_) known_list += (known_list.empty() ? "" : ", ") + k;
      return Status::InvalidArgument(PathOf(key) + ": unknown field (known fields: " + known_list +
                                     ")");
    }
  }
  return Status::Ok();
}

}  // namespace tessera::yaml
