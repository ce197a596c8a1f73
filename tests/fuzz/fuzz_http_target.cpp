// Fuzzes what the API does with a request before any handler runs: the request-target
// (percent-decoding, UTF-8 checks, query splitting), routing over the API's own route shapes,
// and the number parsing of path segments and query parameters. Nothing may crash, and what
// reaches a handler must be valid UTF-8.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "scheduler/api/reply.h"
#include "scheduler/http/router.h"
#include "scheduler/http/url.h"
#include "shared/base/utf8.h"

namespace {

using tessera::http::Request;
using tessera::http::Response;

void MustBeUtf8(std::string_view text) {
  if (!tessera::utf8::IsValid(text)) std::abort();
}

const tessera::http::Router& ApiShapedRouter() {
  static const tessera::http::Router router = [] {
    tessera::http::Router r;
    auto check = [](const Request& req, Response& res) {
      MustBeUtf8(req.path);
      for (size_t i = 1; i < req.matches.size(); ++i) {
        MustBeUtf8(req.matches[i]);
        (void)tessera::api::ParseId(req.matches[i]);
        (void)tessera::api::ParseInt(req.matches[i], "frame", -1000000, 10000000);
      }
      for (const auto& [name, value] : req.params) {
        MustBeUtf8(name);
        MustBeUtf8(value);
        (void)tessera::api::ParseInt(value, name, 0, INT64_MAX);
      }
      tessera::api::Reply(res, 200, {{"path", req.path}});
    };
    for (const char* pattern :
         {"/", "/healthz", "/app\\.js", "/api/v1/jobs", "/api/v1/jobs/([^/]+)",
          "/api/v1/jobs/([^/]+)/tasks", "/api/v1/jobs/([^/]+)/outputs/([^/]+)",
          "/api/v1/jobs/([^/]+)/frames/(-?[0-9]+)/thumbnail", "/api/v1/blobs/([0-9a-f]{64})",
          "/api/v1/workers/([^/]+)/drain"}) {
      r.Add("GET", pattern, check);
    }
    r.Add("POST", "/api/v1/jobs/([^/]+)/cancel", check);
    return r;
  }();
  return router;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  tessera::StatusOr<tessera::http::Target> target = tessera::http::ParseTarget(input);
  if (!target.ok()) {
    MustBeUtf8(tessera::utf8::Sanitize(target.status().message()));
    return 0;
  }
  Request req;
  req.method = size % 3 == 0 ? "POST" : (size % 3 == 1 ? "GET" : "HEAD");
  req.path = target->path;
  req.params = target->params;
  Response res;
  ApiShapedRouter().Dispatch(req, res);
  MustBeUtf8(res.body);
  (void)tessera::api::WholeNumber(std::string(input));
  return 0;
}
