// POSIX path joins and OpenJD path mapping rules (shared/openjd/openjd.h, How-Jobs-Are-Run "Path
// Mapping"): a PATH value written on the submitter's machine, in POSIX or Windows form, becomes
// the worker's path of the same file.

#include <algorithm>
#include <functional>

#include "shared/base/utf8.h"
#include "shared/base/yaml_util.h"
#include "shared/openjd/openjd.h"
#include "shared/openjd/openjd_internal.h"

namespace tessera::openjd {

namespace internal {

std::string NormalizePosix(std::string_view path) {
  if (path.empty()) return ".";
  const bool absolute = path[0] == '/';
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string_view::npos) slash = path.size();
    const std::string_view part = path.substr(start, slash - start);
    if (part.empty() || part == ".") {
      // nothing
    } else if (part == "..") {
      if (!parts.empty() && parts.back() != "..") {
        parts.pop_back();
      } else if (!absolute) {
        parts.push_back(part);  // a relative path may climb; "/.." is "/"
      }
    } else {
      parts.push_back(part);
    }
    start = slash + 1;
  }
  std::string out = absolute ? "/" : "";
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += '/';
    out += parts[i];
  }
  return out.empty() ? "." : out;
}

std::string JoinPosix(std::string_view base, std::string_view path) {
  if (!path.empty() && path[0] == '/') return NormalizePosix(path);
  return NormalizePosix(std::string(base) + "/" + std::string(path));
}

bool IsWithin(std::string_view dir, std::string_view path) {
  if (dir == "/") return !path.empty() && path[0] == '/';
  return path == dir ||
         (path.size() > dir.size() && path.substr(0, dir.size()) == dir && path[dir.size()] == '/');
}

}  // namespace internal

namespace {
StatusOr<std::vector<PathMappingRule>> RulesFromList(const nlohmann::json& list,
                                                     const std::string& field, bool session);
}  // namespace

namespace internal {

nlohmann::json RulesToSession(const std::vector<PathMappingRule>& rules) {
  nlohmann::json list = PathMappingRulesToJson(rules)["path_mapping_rules"];
  for (size_t i = 0; i < rules.size(); ++i) list[i]["in_session"] = rules[i].in_session;
  return list;
}

StatusOr<std::vector<PathMappingRule>> RulesFromSession(const nlohmann::json& json) {
  return RulesFromList(json, "openjd session: path_mapping", /*session=*/true);
}

Status AttachFolders(const JobInputs& inputs, std::vector<PathMappingRule>* rules,
                     nlohmann::json* outputs) {
  if (inputs.input_roots.size() + inputs.output_dirs.size() > kMaxPathMappingRules) {
    return Status::InvalidArgument("attachments: at most " + std::to_string(kMaxPathMappingRules) +
                                   " folders");
  }
  std::vector<std::string> roots;
  auto attach = [&](const std::string& folder) {
    rules->push_back(
        {"POSIX", folder, std::string(kAttachedFolder) + "/" + std::to_string(roots.size()), true});
    roots.push_back(folder);
  };
  for (size_t i = 0; i < inputs.input_roots.size(); ++i) {
    const std::string& root = inputs.input_roots[i];
    if (root.empty() || root[0] != '/') {
      return Status::InvalidArgument(Item("attachments.input_roots", i) + ": '" + root +
                                     "' is not absolute");
    }
    attach(NormalizePosix(root));
  }
  *outputs = nlohmann::json::array();
  std::set<std::string> names;
  for (size_t i = 0; i < inputs.output_dirs.size(); ++i) {
    const std::string& given = inputs.output_dirs[i];
    if (given.empty() || given[0] != '/') {
      return Status::InvalidArgument(Item("attachments.output_dirs", i) + ": '" + given +
                                     "' is not absolute");
    }
    const std::string dir = NormalizePosix(given);
    // Under the innermost attached folder holding it, else a folder of its own.
    int root = -1;
    for (size_t r = 0; r < roots.size(); ++r) {
      if (IsWithin(roots[r], dir) && (root < 0 || roots[r].size() > roots[root].size())) {
        root = static_cast<int>(r);
      }
    }
    if (root < 0) {
      root = static_cast<int>(roots.size());
      attach(dir);
    }
    const std::string& base = roots[root];
    const std::string inside = dir.size() > base.size() ? dir.substr(base.size() + 1) : "";
    std::string session = std::string(kAttachedFolder) + "/" + std::to_string(root);
    if (!inside.empty()) session += "/" + inside;
    // The name its files come back under: the folder's own name, made unique.
    const std::string leaf = dir == "/" ? "output" : dir.substr(dir.rfind('/') + 1);
    std::string name = TesseraName(leaf);
    for (int n = 2; names.count(name); ++n) name = TesseraName(leaf) + "-" + std::to_string(n);
    names.insert(name);
    outputs->push_back({{"dir", session}, {"name", name}});
  }
  return Status::Ok();
}

}  // namespace internal

namespace {

// The parts of a path in the rule's format: Windows paths split at '\' and '/', compared
// without case; a UNC path ("\\server\share") keeps its leading marker as its first part.
std::vector<std::string> PathParts(const std::string& path, bool windows) {
  std::vector<std::string> parts;
  size_t i = 0;
  if (windows && path.size() >= 2 && (path[0] == '\\' || path[0] == '/') &&
      (path[1] == '\\' || path[1] == '/')) {
    parts.push_back("//");
    i = 2;
  } else if (!windows && !path.empty() && path[0] == '/') {
    parts.push_back("/");
    i = 1;
  }
  std::string part;
  for (; i <= path.size(); ++i) {
    const bool end = i == path.size();
    const bool sep = !end && (path[i] == '/' || (windows && path[i] == '\\'));
    if (end || sep) {
      if (!part.empty()) parts.push_back(windows ? internal::Lower(part) : part);
      part.clear();
    } else {
      part += path[i];
    }
  }
  return parts;
}

// The parts of `path` as written (not lower-cased), for the remainder after a match.
std::vector<std::string> RawParts(const std::string& path, bool windows) {
  std::vector<std::string> parts;
  std::string part;
  for (size_t i = 0; i <= path.size(); ++i) {
    const bool end = i == path.size();
    if (end || path[i] == '/' || (windows && path[i] == '\\')) {
      if (!part.empty()) parts.push_back(part);
      part.clear();
    } else {
      part += path[i];
    }
  }
  return parts;
}

Status CheckRulePath(const std::string& path, const std::string& field, bool windows) {
  TSR_RETURN_IF_ERROR(utf8::Check(path, field));
  if (path.empty() || path.size() > 4096) {
    return Status::InvalidArgument(field + ": must be a path of 1..4096 bytes");
  }
  if (path.find('\0') != std::string::npos || internal::HasControlChar(path)) {
    return Status::InvalidArgument(field + ": holds a control character");
  }
  const bool absolute =
      windows ? (path.size() >= 2 && path[1] == ':') || path[0] == '\\' || path[0] == '/'
              : path[0] == '/';
  if (!absolute) return Status::InvalidArgument(field + ": '" + path + "' is not absolute");
  return Status::Ok();
}

}  // namespace

namespace {

StatusOr<std::vector<PathMappingRule>> RulesFromList(const nlohmann::json& list,
                                                     const std::string& lfield, bool session) {
  if (!list.is_array()) return Status::InvalidArgument(lfield + ": expected a list of rules");
  if (list.size() > kMaxPathMappingRules) {
    return Status::InvalidArgument(lfield + ": at most " + std::to_string(kMaxPathMappingRules) +
                                   " rules, got " + std::to_string(list.size()));
  }
  std::vector<PathMappingRule> rules;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string rfield = internal::Item(lfield, i);
    const nlohmann::json& r = list[i];
    if (!r.is_object()) return Status::InvalidArgument(rfield + ": expected a rule");
    PathMappingRule rule;
    for (const auto& item : r.items()) {
      const std::string& key = item.key();
      if (session && key == "in_session" && item.value().is_boolean()) {
        rule.in_session = item.value().get<bool>();
        continue;
      }
      if (!item.value().is_string()) {
        return Status::InvalidArgument(rfield + "." + key + ": expected a string");
      }
      const std::string value = item.value().get<std::string>();
      if (key == "source_path_format") {
        rule.source_path_format = value;
      } else if (key == "source_path") {
        rule.source_path = value;
      } else if (key == "destination_path") {
        rule.destination_path = value;
      } else {
        return Status::InvalidArgument(
            rfield + "." + key +
            ": unknown field (source_path_format, source_path, destination_path)");
      }
    }
    if (rule.source_path_format != "POSIX" && rule.source_path_format != "WINDOWS") {
      return Status::InvalidArgument(rfield + ".source_path_format: expected POSIX or WINDOWS");
    }
    TSR_RETURN_IF_ERROR(CheckRulePath(rule.source_path, rfield + ".source_path",
                                      rule.source_path_format == "WINDOWS"));
    if (rule.in_session) {
      // A folder of the session: relative, and never out of it.
      const std::string& d = rule.destination_path;
      if (d.empty() || d[0] == '/' || internal::NormalizePosix(d).rfind("..", 0) == 0 ||
          internal::HasControlChar(d)) {
        return Status::InvalidArgument(rfield + ".destination_path: not a folder of the session");
      }
    } else {
      // Destinations are on a Tessera worker: POSIX.
      TSR_RETURN_IF_ERROR(
          CheckRulePath(rule.destination_path, rfield + ".destination_path", /*windows=*/false));
    }
    rules.push_back(std::move(rule));
  }
  return rules;
}

}  // namespace

StatusOr<std::vector<PathMappingRule>> PathMappingRulesFromJson(const nlohmann::json& json,
                                                                const std::string& field) {
  if (!json.is_object()) return RulesFromList(json, field, /*session=*/false);
  for (const auto& item : json.items()) {
    if (item.key() != "version" && item.key() != "path_mapping_rules") {
      return Status::InvalidArgument(field + "." + item.key() +
                                     ": unknown field (version, path_mapping_rules)");
    }
  }
  if (json.value("version", nlohmann::json()) != "pathmapping-1.0") {
    return Status::InvalidArgument(field + ".version: expected \"pathmapping-1.0\"");
  }
  return RulesFromList(json.value("path_mapping_rules", nlohmann::json()),
                       field + ".path_mapping_rules", /*session=*/false);
}

StatusOr<std::vector<PathMappingRule>> ParsePathMappingRules(std::string_view text,
                                                             const std::string& field) {
  // YAML is a superset of the JSON form: read as YAML, checked as JSON.
  yaml::Limits limits;
  limits.max_document_bytes = 1 << 20;
  TSR_ASSIGN_OR_RETURN(YAML::Node root, yaml::Parse(text, field, limits));
  std::function<nlohmann::json(const YAML::Node&)> to_json = [&](const YAML::Node& n) {
    if (n.IsMap()) {
      nlohmann::json o = nlohmann::json::object();
      for (const auto& kv : n) o[kv.first.Scalar()] = to_json(kv.second);
      return o;
    }
    if (n.IsSequence()) {
      nlohmann::json a = nlohmann::json::array();
      for (const auto& item : n) a.push_back(to_json(item));
      return a;
    }
    if (n.IsScalar()) return nlohmann::json(n.Scalar());
    return nlohmann::json();
  };
  try {
    return PathMappingRulesFromJson(to_json(root), field);
  } catch (const std::exception& e) {
    return Status::InvalidArgument(field + ": " + e.what());
  }
}

nlohmann::json PathMappingRulesToJson(const std::vector<PathMappingRule>& rules) {
  nlohmann::json list = nlohmann::json::array();
  for (const PathMappingRule& r : rules) {
    list.push_back({{"source_path_format", r.source_path_format},
                    {"source_path", r.source_path},
                    {"destination_path", r.destination_path}});
  }
  return {{"version", "pathmapping-1.0"}, {"path_mapping_rules", list}};
}

void SortRules(std::vector<PathMappingRule>* rules) {
  std::stable_sort(
      rules->begin(), rules->end(), [](const PathMappingRule& a, const PathMappingRule& b) {
        const bool wa = a.source_path_format == "WINDOWS";
        const bool wb = b.source_path_format == "WINDOWS";
        return PathParts(a.source_path, wa).size() > PathParts(b.source_path, wb).size();
      });
}

std::string MapPath(const std::vector<PathMappingRule>& rules, const std::string& path) {
  for (const PathMappingRule& rule : rules) {
    const bool windows = rule.source_path_format == "WINDOWS";
    const std::vector<std::string> source = PathParts(rule.source_path, windows);
    const std::vector<std::string> parts = PathParts(path, windows);
    if (source.empty() || parts.size() < source.size() ||
        !std::equal(source.begin(), source.end(), parts.begin())) {
      continue;
    }
    // The rest of the path as written, after the source's parts.
    const std::vector<std::string> raw = RawParts(path, windows);
    const size_t skip = source.size() - (source[0] == "/" || source[0] == "//" ? 1 : 0);
    std::string out = rule.destination_path;
    while (out.size() > 1 && out.back() == '/') out.pop_back();
    for (size_t i = skip; i < raw.size(); ++i) out += (out == "/" ? "" : "/") + raw[i];
    return out;
  }
  return path;
}

}  // namespace tessera::openjd
