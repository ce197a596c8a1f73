#pragma once
// The route table: (method, path pattern) -> handler. Patterns are paths whose segments are
// either literal or exactly one group, in the regular-expression spelling the OpenAPI document
// and RouteInfo use, of one of three kinds:
//   ([^/]+)          any one non-empty segment
//   ([0-9a-f]{64})   a content hash
//   (-?[0-9]+)       a whole number
//   (.+)             the rest of the path: one or more non-empty segments (last only; the
//                    handler gets them joined by '/' and checks the path itself)
// Matching is a plain walk over segments (no regex engine on hostile input: libstdc++'s
// std::regex recurses per character and a long path could exhaust the stack). A pattern with
// any other shape is a programmer error, caught when it is added.

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "scheduler/http/message.h"

namespace tessera::http {

using Handler = std::function<void(const Request&, Response&)>;

// The error body every API error has: {"error": MESSAGE, "code": CODE}, text made valid UTF-8.
void SetError(Response& res, int status, std::string_view code, std::string_view message);

class Router {
 public:
  void Add(const std::string& method, const std::string& pattern, Handler handler);

  // Routes `req` by its (decoded) path, fills req.matches and runs the handler. No route for
  // the path: 404; a route for another method: 405 with Allow. A handler that throws gets a
  // 500 answer; nothing escapes.
  void Dispatch(Request& req, Response& res) const;

 private:
  enum class Kind { kLiteral, kAnySegment, kHash, kInteger, kRest };
  struct Segment {
    Kind kind = Kind::kLiteral;
    std::string text;  // literal segments
  };
  struct Route {
    std::string method;
    std::vector<Segment> segments;
    Handler handler;
  };

  static bool Match(const Route& route, const std::vector<std::string_view>& parts,
                    std::vector<std::string>* groups);

  std::vector<Route> routes_;
};

}  // namespace tessera::http
