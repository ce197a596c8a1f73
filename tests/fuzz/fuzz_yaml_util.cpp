// Fuzzes the YAML layer every spec and config is read through (shared/base/yaml_util.h): Parse with
// the default limits and with small ones (the first input byte picks them), then every map in
// the document read with MapReader as each supported type.

#include <yaml-cpp/yaml.h>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "shared/base/yaml_util.h"

namespace {

namespace yaml = tessera::yaml;

void ReadMaps(const YAML::Node& node, const std::string& path, int depth) {
  if (depth > 8) return;
  if (node.IsSequence()) {
    for (size_t i = 0; i < node.size() && i < 16; ++i) {
      ReadMaps(node[i], path + "[" + std::to_string(i) + "]", depth + 1);
    }
    return;
  }
  if (!node.IsMap()) return;
  yaml::MapReader reader(node, path);
  int i = 0;
  for (const auto& entry : node) {
    if (++i > 16) break;
    if (!entry.first.IsScalar()) continue;
    const std::string key = entry.first.Scalar();
    bool b = false;
    int n = 0;
    int64_t big = 0;
    double d = 0;
    std::string s;
    std::array<double, 3> v{};
    std::vector<std::string> list;
    switch (i % 7) {
      case 0:
        reader.Optional(key.c_str(), &b);
        break;
      case 1:
        reader.Optional(key.c_str(), &n);
        break;
      case 2:
        reader.Optional(key.c_str(), &big);
        break;
      case 3:
        reader.Optional(key.c_str(), &d);
        break;
      case 4:
        reader.Optional(key.c_str(), &s);
        break;
      case 5:
        reader.Optional(key.c_str(), &v);
        break;
      default:
        reader.OptionalList(key.c_str(), &list, 8);
    }
    (void)yaml::KindName(entry.second);
    ReadMaps(entry.second, reader.PathOf(key), depth + 1);
  }
  (void)reader.Finish();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  yaml::Limits limits;
  if (data[0] & 1) {
    limits.max_depth = 1 + data[0] % 8;
    limits.max_items = 1 + data[0] % 16;
    limits.max_string_bytes = 1 + data[0] % 64;
    limits.max_expanded_bytes = 256 + data[0];
    limits.max_expansion = 1 + data[0] % 3;
  }
  tessera::StatusOr<YAML::Node> doc = yaml::Parse(text, "fuzz", limits);
  if (!doc.ok()) return 0;
  ReadMaps(*doc, "fuzz", 0);
  return 0;
}
