#pragma once
// Request-target parsing at the boundary: percent-decoding of the path and the query. Whatever
// the bytes, the result is either decoded text that is valid UTF-8 or an error that names the
// part (path, or the query parameter) and the byte offset, so nothing downstream can throw on
// it. Pure functions; fuzzed (tests/fuzz).

#include <map>
#include <string>
#include <string_view>

#include "shared/base/status.h"

namespace tessera::http {

// "%41%2Fb" -> "A/b". `plus_is_space`: '+' means ' ' (query strings, not paths). A '%' not
// followed by two hex digits is an error; so is a decoded NUL byte.
StatusOr<std::string> PercentDecode(std::string_view text, bool plus_is_space,
                                    std::string_view field);

struct Target {
  std::string path;
  std::multimap<std::string, std::string> params;
};

// Splits a request-target ("/a/b?x=1&y=%20") into its decoded path and query parameters.
// Only origin-form targets (starting with '/') are accepted.
StatusOr<Target> ParseTarget(std::string_view target);

}  // namespace tessera::http
