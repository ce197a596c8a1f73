#pragma once
// Strict YAML reading for specs and configs: unknown keys are errors, wrong types are errors, and
// every error names the full path of the field ("scene.camera.fov: expected a number").
//
// Every document (job, scene, plugin.yaml, a C++ plugin's declaration, config files) is parsed by
// Parse(), which refuses hostile input before any field is read:
//   - text that is not valid UTF-8 ("job: not valid UTF-8 (byte 812)");
//   - nesting deeper than Limits::max_depth levels;
//   - a document whose aliases expand it past Limits::max_expanded_bytes, or past
//     Limits::max_expansion times its own size (a "billion laughs" alias bomb: 24 KB that reads
//     as 20 MB);
//   - any one list or map longer than Limits::max_items, any one string longer than
//     Limits::max_string_bytes;
//   - a value that is not valid UTF-8 after escapes ("\ud800") or holds a NUL ("\0").
// Each error names the document, the field path and the limit. Fields with their own smaller
// maximum (a job's tags, pools...) are read with MapReader::OptionalList, which names the field.

#include <yaml-cpp/yaml.h>

#include <array>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "shared/base/status.h"

namespace tessera::yaml {

// The bounds Parse() enforces. The defaults fit every document Tessera reads (a scene of
// spec::kMaxSceneBytes with spec::kMaxObjects objects among them).
struct Limits {
  size_t max_document_bytes = 32u << 20;  // the text itself
  int max_depth = 64;                     // nested lists and maps
  size_t max_items = 100000;              // entries of any one list or map
  size_t max_string_bytes = 1u << 20;     // any one scalar (key or value)
  // After alias expansion: the scalar bytes plus one per node, at most this...
  size_t max_expanded_bytes = 64u << 20;
  // ...and at most this many times the document's own size (plus a 64 KiB allowance), so an
  // alias that is used a few times is fine and one that multiplies the document is not.
  size_t max_expansion = 4;
};

// Parses a YAML document and checks it against `limits` (see the top of this file); errors name
// `what` (and the line/column of a syntax error, the field path of a value over a limit).
StatusOr<YAML::Node> Parse(std::string_view text, const std::string& what,
                           const Limits& limits = Limits());

// How many times Parse() was called on the calling thread since the thread started (refused
// documents included). One increment per call: tests use it to show that a job file and its
// scene are each parsed once on their way through the CLI and the scheduler.
int64_t DocumentsParsedOnThisThread();

// Short human name for a node's kind ("a map", "a list", "a string"...), for error messages.
std::string KindName(const YAML::Node& node);

// Converts a scalar into T, with a message naming `path` on failure. Supported T: bool, int,
// int64_t, double, std::string, std::array<double, 3> (a 3-element list), std::vector<T>.
template <typename T>
Status Convert(const YAML::Node& node, const std::string& path, T* out);

// InvalidArgument "<path>: at most N entries, got M" when `node` is a list or map longer than
// `max_items` (anything else passes: the conversion names a wrong type).
Status CheckListSize(const YAML::Node& node, const std::string& path, size_t max_items);

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

  // A list field with its own maximum: more than `max_items` entries is refused naming the
  // field and the limit, before any entry is converted.
  template <typename T>
  MapReader& OptionalList(const char* key, std::vector<T>* out, size_t max_items) {
    YAML::Node child = Take(key);
    if (!status_.ok() || !child.IsDefined() || child.IsNull()) return *this;
    status_ = CheckListSize(child, PathOf(key), max_items);
    if (status_.ok()) status_ = Convert(child, PathOf(key), out);
    return *this;
  }

  // Returns the raw child (undefined, never yaml-cpp's throwing "invalid" node, when the key is
  // absent) and marks the key as known.
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
