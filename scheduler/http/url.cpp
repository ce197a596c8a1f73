#include "scheduler/http/url.h"

#include "shared/base/utf8.h"

namespace tessera::http {

namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

StatusOr<std::string> PercentDecode(std::string_view text, bool plus_is_space,
                                    std::string_view field) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '%') {
      const int hi = i + 1 < text.size() ? HexValue(text[i + 1]) : -1;
      const int lo = i + 2 < text.size() ? HexValue(text[i + 2]) : -1;
      if (hi < 0 || lo < 0) {
        return Status::InvalidArgument(std::string(field) + ": '%' at byte " + std::to_string(i) +
                                       " is not followed by two hex digits");
      }
      const char decoded = static_cast<char>(hi * 16 + lo);
      if (decoded == '\0') {
        return Status::InvalidArgument(std::string(field) + ": %00 (a NUL byte) at byte " +
                                       std::to_string(i) + " is not allowed");
      }
      out.push_back(decoded);
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out.push_back(' ');
    } else {
      out.push_back(c);
    }
  }
  if (Status st = utf8::Check(out, std::string(field) + " (decoded)"); !st.ok()) return st;
  return out;
}

StatusOr<Target> ParseTarget(std::string_view target) {
  if (target.empty() || target[0] != '/') {
    return Status::InvalidArgument("path: the request target must start with '/'");
  }
  Target out;
  const size_t question = target.find('?');
  const std::string_view raw_path = target.substr(0, question);
  TSR_ASSIGN_OR_RETURN(out.path, PercentDecode(raw_path, /*plus_is_space=*/false, "path"));
  if (question == std::string_view::npos) return out;
  std::string_view query = target.substr(question + 1);
  // A fragment is never sent by clients; drop one if a broken client does.
  query = query.substr(0, query.find('#'));
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (pair.empty()) continue;
    const size_t eq = pair.find('=');
    TSR_ASSIGN_OR_RETURN(std::string name,
                         PercentDecode(pair.substr(0, eq), /*plus_is_space=*/true, "query"));
    std::string value;
    if (eq != std::string_view::npos) {
      TSR_ASSIGN_OR_RETURN(value, PercentDecode(pair.substr(eq + 1), true, "query." + name));
    }
    out.params.emplace(std::move(name), std::move(value));
  }
  return out;
}

}  // namespace tessera::http
