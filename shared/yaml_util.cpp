#include "shared/yaml_util.h"

#include <cmath>
#include <limits>

namespace tessera::yaml {

StatusOr<YAML::Node> Parse(std::string_view text, const std::string& what) {
  try {
    return YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(what + ": YAML syntax error at line " +
                                   std::to_string(e.mark.line + 1) + ", column " +
                                   std::to_string(e.mark.column + 1) + ": " + e.msg);
  }
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
  if (!node_.IsMap()) return YAML::Node();
  const YAML::Node& n = node_;
  return n[key];
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
