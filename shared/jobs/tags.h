#pragma once
// A job's required tags (`tags:` of a job file, the policy's and the autoscaler's checks): an
// entry is a tag a worker must have ("cuda12"), or alternatives separated by '|' of which it must
// have one ("a100|h100" -- an OpenJD attribute's anyOf). Header-only: the autoscaler's decision
// policy uses it without the rest of shared/.

#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::spec {

inline constexpr char kTagAlternative = '|';
inline constexpr size_t kMaxTagAlternatives = 50;

// Whether `tags` meet the required entry.
inline bool TagMet(std::string_view required, const std::set<std::string>& tags) {
  size_t start = 0;
  while (true) {
    const size_t bar = required.find(kTagAlternative, start);
    const std::string_view one =
        required.substr(start, bar == std::string_view::npos ? bar : bar - start);
    if (tags.count(std::string(one)) != 0) return true;
    if (bar == std::string_view::npos) return false;
    start = bar + 1;
  }
}

// The names of an entry ("a100|h100" -> a100, h100; "cuda12" -> cuda12).
inline std::vector<std::string> SplitTagAlternatives(std::string_view required) {
  std::vector<std::string> names;
  size_t start = 0;
  while (true) {
    const size_t bar = required.find(kTagAlternative, start);
    names.emplace_back(required.substr(start, bar == std::string_view::npos ? bar : bar - start));
    if (bar == std::string_view::npos) return names;
    start = bar + 1;
  }
}

// "the tag 'x'" or "one of the tags a, b" (for "lacks ..." messages).
inline std::string TagWanted(std::string_view required) {
  if (required.find(kTagAlternative) == std::string_view::npos) {
    return "the tag '" + std::string(required) + "'";
  }
  std::string list;
  for (char c : required) list += c == kTagAlternative ? std::string(", ") : std::string(1, c);
  return "one of the tags " + list;
}

}  // namespace tessera::spec
