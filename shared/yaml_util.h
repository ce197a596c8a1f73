#pragma once
// Strict YAML reading for specs and configs: unknown keys are errors, wrong types are errors, and
// every error names the full path of the field ("scene.camera.fov: expected a number").

#include <yaml-cpp/yaml.h>

#include <array>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "shared/status.h"

namespace tessera::yaml {

// Parses a YAML document; a syntax error names `what` and the line/column.
StatusOr<YAML::Node> Parse(std::string_view text, const std::string& what);

// Short human name for a node's kind ("a map", "a list", "a string"...), for error messages.
std::string KindName(const YAML::Node& node);

// Converts a scalar into T, with a message naming `path` on failure. Supported T: bool, int,
// int64_t, double, std::string, std::array<double, 3> (a 3-element list), std::vector<T>.
template <typename T>
Status Convert(const YAML::Node& node, const std::string& path, T* out);

// Reads one YAML map. Keys are looked up by name; at Finish() any key never looked up is reported
// as unknown. The first error wins and sticks, so callers can read all fields, then check once.
class MapReader {
 public:
  MapReader(const YAML::Node& node, std::string path);

  template <typename T>
  MapReader& Required(const char* key, T* out) {
    YAML::Node child = Take(key);
    if (!status_.ok()) return *this;
    if (!child.IsDefined() || child.IsNull()) {
      status_ = Status::InvalidArgument(PathOf(key) + ": required field is missing");
    } else {
      status_ = Convert(child, PathOf(key), out);
    }
    return *this;
  }

  // Leaves *out untouched (its default) when the key is absent or null.
  template <typename T>
  MapReader& Optional(const char* key, T* out) {
    YAML::Node child = Take(key);
    if (!status_.ok() || !child.IsDefined() || child.IsNull()) return *this;
    status_ = Convert(child, PathOf(key), out);
    return *this;
  }

  // Returns the raw child (possibly undefined) and marks the key as known.
  YAML::Node Child(const char* key) { return Take(key); }
  bool Has(const char* key) const;

  std::string PathOf(std::string_view key) const;
  const std::string& path() const { return path_; }

  // Records an error found by the caller (first error wins).
  void Fail(Status status) {
    if (status_.ok()) status_ = std::move(status);
  }
  bool ok() const { return status_.ok(); }

  // Reports the first error, or the first unknown key.
  Status Finish() const;

 private:
  YAML::Node Take(const char* key);

  YAML::Node node_;
  std::string path_;
  std::set<std::string> known_;
  Status status_;
};

// ---- template definitions -------------------------------------------------------------------

namespace internal {
Status ConvertScalar(const YAML::Node& node, const std::string& path, bool* out);
Status ConvertScalar(const YAML::Node& node, const std::string& path, int* out);
Status ConvertScalar(const YAML::Node& node, const std::string& path, int64_t* out);
Status ConvertScalar(const YAML::Node& node, const std::string& path, double* out);
Status ConvertScalar(const YAML::Node& node, const std::string& path, std::string* out);
Status ConvertScalar(const YAML::Node& node, const std::string& path, std::array<double, 3>* out);

template <typename T>
struct IsVector : std::false_type {};
template <typename T>
struct IsVector<std::vector<T>> : std::true_type {};
}  // namespace internal

template <typename T>
Status Convert(const YAML::Node& node, const std::string& path, T* out) {
  if constexpr (internal::IsVector<T>::value) {
    if (!node.IsSequence()) {
      return Status::InvalidArgument(path + ": expected a list, got " + KindName(node));
    }
    T result;
    for (size_t i = 0; i < node.size(); ++i) {
      typename T::value_type item{};
      TSR_RETURN_IF_ERROR(Convert(node[i], path + "[" + std::to_string(i) + "]", &item));
      result.push_back(std::move(item));
    }
    *out = std::move(result);
    return Status::Ok();
  } else {
    return internal::ConvertScalar(node, path, out);
  }
}

}  // namespace tessera::yaml
