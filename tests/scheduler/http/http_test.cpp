// The API's request boundary without sockets: request-target decoding (url.h) and routing
// (router.h). What reaches a handler is decoded, valid UTF-8, and matched without a regex
// engine; a handler that throws becomes a 500, never an escaped exception.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "scheduler/http/router.h"
#include "scheduler/http/url.h"
#include "shared/base/utf8.h"

namespace tessera::http {
namespace {

using nlohmann::json;

TEST(HttpUrlTest, DecodesPathAndQuery) {
  StatusOr<Target> t = ParseTarget("/api/v1/jobs/%31%32?state=done&user=ana+b&x=%C3%A9&flag");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->path, "/api/v1/jobs/12");
  EXPECT_EQ(t->params.find("state")->second, "done");
  EXPECT_EQ(t->params.find("user")->second, "ana b");
  EXPECT_EQ(t->params.find("x")->second, "\xC3\xA9");
  EXPECT_EQ(t->params.count("flag"), 1u);
}

TEST(HttpUrlTest, RefusesWhatCannotBeDecodedNamingThePart) {
  // The request that used to abort the scheduler.
  StatusOr<Target> bad_path = ParseTarget("/%FF");
  ASSERT_FALSE(bad_path.ok());
  EXPECT_EQ(bad_path.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad_path.status().message().find("path"), std::string::npos);
  EXPECT_NE(bad_path.status().message().find("byte 1"), std::string::npos);

  StatusOr<Target> bad_query = ParseTarget("/api/v1/jobs?user=%C3%28");
  ASSERT_FALSE(bad_query.ok());
  EXPECT_NE(bad_query.status().message().find("query.user"), std::string::npos);

  for (const char* target : {"/a%", "/a%4", "/a%G1", "/x?y=%zz", "/a%00b", "relative", ""}) {
    EXPECT_FALSE(ParseTarget(target).ok()) << target;
  }
  // Raw bytes that are not UTF-8 are refused as well as encoded ones.
  EXPECT_FALSE(ParseTarget("/jobs/\xC0\xAF").ok());
}

Router TestRouter(std::string* seen) {
  Router r;
  r.Add("GET", "/api/v1/jobs/([^/]+)", [seen](const Request& req, Response& res) {
    *seen = req.matches.at(1);
    res.SetContent("job", "text/plain");
  });
  r.Add("GET", "/api/v1/blobs/([0-9a-f]{64})",
        [seen](const Request& req, Response&) { *seen = req.matches.at(1); });
  r.Add("GET", "/api/v1/jobs/([^/]+)/frames/(-?[0-9]+)/thumbnail",
        [seen](const Request& req, Response&) { *seen = req.matches.at(2); });
  r.Add("POST", "/api/v1/jobs/([^/]+)/cancel", [](const Request&, Response&) {});
  r.Add("GET", "/api/v1/jobs/([^/]+)/outputs/(.+)",
        [seen](const Request& req, Response&) { *seen = req.matches.at(2); });
  r.Add("GET", "/throws",
        [](const Request&, Response&) -> void { throw std::runtime_error("broken \xFF handler"); });
  r.Add("GET", "/throws-json", [](const Request&, Response& res) {
    // nlohmann's dump() of invalid UTF-8: the exception that used to kill the daemon.
    res.SetContent(json{{"x", std::string("\xFF")}}.dump(), "application/json");
  });
  r.Add("GET", "/app\\.js", [](const Request&, Response& res) { res.SetContent("js", "x"); });
  return r;
}

Response Route(const Router& r, const std::string& method, const std::string& path) {
  Request req;
  req.method = method;
  req.path = path;
  Response res;
  r.Dispatch(req, res);
  return res;
}

TEST(HttpRouterTest, MatchesSegmentsAndGroupKinds) {
  std::string seen;
  Router r = TestRouter(&seen);
  EXPECT_EQ(Route(r, "GET", "/api/v1/jobs/42").body, "job");
  EXPECT_EQ(seen, "42");
  EXPECT_EQ(Route(r, "HEAD", "/api/v1/jobs/7").status, 200);  // HEAD is routed as GET
  const std::string hash(64, 'a');
  EXPECT_EQ(Route(r, "GET", "/api/v1/blobs/" + hash).status, 200);
  EXPECT_EQ(seen, hash);
  EXPECT_EQ(Route(r, "GET", "/api/v1/blobs/" + std::string(63, 'a')).status, 404);
  EXPECT_EQ(Route(r, "GET", "/api/v1/blobs/" + std::string(64, 'A')).status, 404);
  EXPECT_EQ(Route(r, "GET", "/api/v1/jobs/1/frames/-3/thumbnail").status, 200);
  EXPECT_EQ(seen, "-3");
  EXPECT_EQ(Route(r, "GET", "/api/v1/jobs/1/frames/x/thumbnail").status, 404);
  EXPECT_EQ(Route(r, "GET", "/app.js").body, "js");
  EXPECT_EQ(Route(r, "GET", "/appxjs").status, 404);
  EXPECT_EQ(Route(r, "GET", "/api/v1/jobs/").status, 404);   // an empty segment
  EXPECT_EQ(Route(r, "GET", "/api/v1/jobs//").status, 404);  // and an extra one
  // (.+): the rest of the path, one or more non-empty segments.
  EXPECT_EQ(Route(r, "GET", "/api/v1/jobs/1/outputs/cache/a.vdb").status, 200);
  EXPECT_EQ(seen, "cache/a.vdb");
  EXPECT_EQ(Route(r, "GET", "/api/v1/jobs/1/outputs/a.exr").status, 200);
  EXPECT_EQ(seen, "a.exr");
  EXPECT_EQ(Route(r, "GET", "/api/v1/jobs/1/outputs/").status, 404);
  EXPECT_EQ(Route(r, "GET", "/api/v1/jobs/1/outputs/cache//a.vdb").status, 404);
  EXPECT_THROW(r.Add("GET", "/x/(.+)/y", [](const Request&, Response&) {}), std::logic_error);
}

TEST(HttpRouterTest, LongHostileSegmentsAreMatchedWithoutRecursion) {
  // std::regex recurses per character; a 1 MB segment would overflow its stack.
  std::string seen;
  Router r = TestRouter(&seen);
  const std::string huge(1 << 20, 'a');
  EXPECT_EQ(Route(r, "GET", "/api/v1/jobs/" + huge).status, 200);
  EXPECT_EQ(seen.size(), huge.size());
}

TEST(HttpRouterTest, UnknownPathsAndMethodsGetJsonErrors) {
  std::string seen;
  Router r = TestRouter(&seen);
  Response missing = Route(r, "GET", "/nope");
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(json::parse(missing.body)["code"], "not_found");
  Response wrong = Route(r, "DELETE", "/api/v1/jobs/3/cancel");
  EXPECT_EQ(wrong.status, 405);
  bool allow = false;
  for (const auto& [k, v] : wrong.headers) allow |= k == "Allow" && v == "POST";
  EXPECT_TRUE(allow);
}

TEST(HttpRouterTest, AThrowingHandlerBecomesA500WithValidJson) {
  std::string seen;
  Router r = TestRouter(&seen);
  for (const char* path : {"/throws", "/throws-json"}) {
    Response res;
    Request req;
    req.method = "GET";
    req.path = path;
    EXPECT_NO_THROW(r.Dispatch(req, res)) << path;
    EXPECT_EQ(res.status, 500) << path;
    EXPECT_TRUE(utf8::IsValid(res.body)) << path;
    EXPECT_EQ(json::parse(res.body)["code"], "internal") << path;
  }
}

TEST(HttpRouterTest, UnsupportedPatternsAreRefusedWhenAdded) {
  Router r;
  EXPECT_THROW(r.Add("GET", "/a/(.*)", [](const Request&, Response&) {}), std::logic_error);
  EXPECT_THROW(r.Add("GET", "/a/b+", [](const Request&, Response&) {}), std::logic_error);
}

TEST(HttpRequestTest, HeadersAreCaseInsensitive) {
  Request req;
  req.headers = {{"authorization", "Bearer x"}, {"Last-Event-ID", "7"}};
  EXPECT_EQ(req.Header("Authorization"), "Bearer x");
  EXPECT_EQ(req.Header("last-event-id"), "7");
  EXPECT_EQ(req.Header("Missing"), "");
}

}  // namespace
}  // namespace tessera::http
