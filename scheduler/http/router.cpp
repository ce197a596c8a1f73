#include "scheduler/http/router.h"

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "shared/base/utf8.h"

namespace tessera::http {

namespace {

std::vector<std::string_view> SplitPath(std::string_view path) {
  std::vector<std::string_view> parts;
  // The leading '/' is implied; "/a//b" has an empty segment, which no route matches.
  size_t start = path.empty() || path[0] != '/' ? 0 : 1;
  while (true) {
    const size_t slash = path.find('/', start);
    parts.push_back(path.substr(start, slash == std::string_view::npos ? slash : slash - start));
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return parts;
}

// A pattern's segments: like SplitPath, but a '/' inside a group ("([^/]+)") does not split.
std::vector<std::string_view> SplitPattern(std::string_view pattern) {
  std::vector<std::string_view> parts;
  size_t start = pattern.empty() || pattern[0] != '/' ? 0 : 1;
  int depth = 0;
  for (size_t i = start; i <= pattern.size(); ++i) {
    const char c = i < pattern.size() ? pattern[i] : '/';
    if (c == '(' || c == '[') ++depth;
    if (c == ')' || c == ']') --depth;
    if (c == '/' && depth == 0) {
      parts.push_back(pattern.substr(start, i - start));
      start = i + 1;
    }
  }
  return parts;
}

bool IsHash(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

bool IsInteger(std::string_view s) {
  if (!s.empty() && s[0] == '-') s.remove_prefix(1);
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

}  // namespace

std::string Request::Param(const std::string& name) const {
  auto it = params.find(name);
  return it == params.end() ? std::string() : it->second;
}

namespace {
const std::pair<std::string, std::string>* FindHeader(
    const std::vector<std::pair<std::string, std::string>>& headers, const std::string& name) {
  for (const auto& field : headers) {
    const std::string& key = field.first;
    if (key.size() == name.size() &&
        std::equal(key.begin(), key.end(), name.begin(), [](char a, char b) {
          return std::tolower(static_cast<unsigned char>(a)) ==
                 std::tolower(static_cast<unsigned char>(b));
        })) {
      return &field;
    }
  }
  return nullptr;
}
}  // namespace

std::string Request::Header(const std::string& name) const {
  const auto* field = FindHeader(headers, name);
  return field ? field->second : std::string();
}

bool Request::HasHeader(const std::string& name) const {
  return FindHeader(headers, name) != nullptr;
}

void Response::SetHeader(const std::string& name, const std::string& value) {
  for (auto& [key, existing] : headers) {
    if (key == name) {
      existing = value;
      return;
    }
  }
  headers.emplace_back(name, value);
}

void SetError(Response& res, int status, std::string_view code, std::string_view message) {
  res.status = status;
  res.stream.reset();
  res.file_path.clear();
  res.SetContent(
      nlohmann::json{{"error", utf8::Sanitize(message)}, {"code", std::string(code)}}.dump(),
      "application/json");
}

void Router::Add(const std::string& method, const std::string& pattern, Handler handler) {
  Route route{method, {}, std::move(handler)};
  for (std::string_view part : SplitPattern(pattern)) {
    Segment seg;
    if (part == "([^/]+)") {
      seg.kind = Kind::kAnySegment;
    } else if (part == "([0-9a-f]{64})") {
      seg.kind = Kind::kHash;
    } else if (part == "(-?[0-9]+)") {
      seg.kind = Kind::kInteger;
    } else if (part == "(.+)") {
      seg.kind = Kind::kRest;
    } else {
      for (size_t i = 0; i < part.size(); ++i) {
        const char c = part[i];
        if (c == '\\' && i + 1 < part.size()) {
          seg.text.push_back(part[++i]);
        } else if (std::string_view("()[]{}+*?|^$").find(c) != std::string_view::npos) {
          throw std::logic_error("route pattern '" + pattern + "': unsupported segment '" +
                                 std::string(part) + "'");
        } else {
          seg.text.push_back(c);
        }
      }
    }
    if (!route.segments.empty() && route.segments.back().kind == Kind::kRest) {
      throw std::logic_error("route pattern '" + pattern + "': (.+) must be its last segment");
    }
    route.segments.push_back(std::move(seg));
  }
  routes_.push_back(std::move(route));
}

bool Router::Match(const Route& route, const std::vector<std::string_view>& parts,
                   std::vector<std::string>* groups) {
  const bool rest = !route.segments.empty() && route.segments.back().kind == Kind::kRest;
  if (rest ? parts.size() < route.segments.size() : parts.size() != route.segments.size()) {
    return false;
  }
  groups->clear();
  for (size_t i = 0; i < route.segments.size(); ++i) {
    const Segment& seg = route.segments[i];
    const std::string_view part = parts[i];
    switch (seg.kind) {
      case Kind::kRest: {
        // The rest of the path, its segments joined again (each non-empty).
        std::string joined;
        for (size_t k = i; k < parts.size(); ++k) {
          if (parts[k].empty()) return false;
          joined += (k > i ? "/" : "") + std::string(parts[k]);
        }
        groups->push_back(std::move(joined));
        return true;
      }
      case Kind::kLiteral:
        if (part != seg.text) return false;
        continue;
      case Kind::kAnySegment:
        if (part.empty()) return false;
        break;
      case Kind::kHash:
        if (!IsHash(part)) return false;
        break;
      case Kind::kInteger:
        if (!IsInteger(part)) return false;
        break;
    }
    groups->emplace_back(part);
  }
  return true;
}

void Router::Dispatch(Request& req, Response& res) const {
  const std::string method = req.method == "HEAD" ? "GET" : req.method;
  const std::vector<std::string_view> parts = SplitPath(req.path);
  std::vector<std::string> groups;
  std::string allowed;
  for (const Route& route : routes_) {
    if (!Match(route, parts, &groups)) continue;
    if (route.method != method) {
      if (allowed.find(route.method) == std::string::npos) {
        allowed += (allowed.empty() ? "" : ", ") + route.method;
      }
      continue;
    }
    req.matches.clear();
    req.matches.push_back(req.path);
    for (std::string& g : groups) req.matches.push_back(std::move(g));
    try {
      route.handler(req, res);
    } catch (const std::exception& e) {
      spdlog::error("API handler for {} {} failed: {}", req.method, utf8::Sanitize(req.path),
                    utf8::Sanitize(e.what()));
      SetError(res, 500, "internal", std::string("internal error: ") + e.what());
    } catch (...) {
      spdlog::error("API handler for {} {} failed with an unknown exception", req.method,
                    utf8::Sanitize(req.path));
      SetError(res, 500, "internal", "internal error");
    }
    return;
  }
  if (!allowed.empty()) {
    SetError(
        res, 405, "invalid_argument",
        "method " + req.method + " is not allowed on " + req.path + " (allowed: " + allowed + ")");
    res.SetHeader("Allow", allowed);
    return;
  }
  SetError(res, 404, "not_found", "no such endpoint: " + req.method + " " + req.path);
}

}  // namespace tessera::http
