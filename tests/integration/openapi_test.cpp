// docs/openapi.yaml against the real server: every route the scheduler registers is in the
// document with its role, and nothing else is; and what a real farm answers — every operation,
// with the success and the error statuses a client meets — conforms to the document's schemas.

#include "tests/support/openapi.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "scheduler/api/dashboard.h"
#include "scheduler/api/http_api.h"
#include "scheduler/broker/broker.h"
#include "scheduler/security/api_auth.h"
#include "scheduler/store/store.h"
#include "shared/base/sha256.h"
#include "shared/jobs/job_file.h"
#include "tests/support/farm.h"

namespace tessera::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;

const std::set<std::string> kMethods = {"get", "post", "delete", "put", "patch"};

OpenApi LoadDocument() {
  StatusOr<OpenApi> api = OpenApi::Load(std::string(TSR_SOURCE_DIR) + "/docs/openapi.yaml");
  if (!api.ok()) throw std::runtime_error(api.status().ToString());
  return std::move(api).value();
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string Lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& line : lines) out += "\n  " + line;
  return out;
}

// ---- the validator itself --------------------------------------------------------------------

TEST(OpenApiTest, ValidatorCatchesDrift) {
  const OpenApi api = LoadDocument();
  const json schema = {{"$ref", "#/components/schemas/TaskCounts"}};
  const json good = {{"total", 4}, {"queued", 0}, {"running", 1},
                     {"done", 3},  {"failed", 0}, {"canceled", 0}};
  EXPECT_TRUE(api.Validate(good, schema).empty()) << Lines(api.Validate(good, schema));

  auto problems = [&](json body) { return Lines(api.Validate(body, schema)); };
  json missing = good;
  missing.erase("done");
  EXPECT_NE(problems(missing).find("$: the required property 'done' is missing"), std::string::npos)
      << problems(missing);
  json text = good;
  text["total"] = "4";
  EXPECT_NE(problems(text).find("$.total: expected integer, got string"), std::string::npos)
      << problems(text);
  json fraction = good;
  fraction["total"] = 4.5;  // integer is not number
  EXPECT_NE(problems(fraction).find("$.total: expected integer, got number"), std::string::npos)
      << problems(fraction);
  json extra = good;
  extra["paused"] = 0;
  EXPECT_NE(problems(extra).find("$: unexpected property 'paused'"), std::string::npos)
      << problems(extra);
  json null = good;
  null["queued"] = nullptr;
  EXPECT_NE(problems(null).find("$.queued: null, but it is not nullable"), std::string::npos)
      << problems(null);

  // Nested through $ref and arrays, with the JSON path of the mismatch.
  const json error_list = {{"jobs", json::array({json::object()})}};
  const std::string nested =
      Lines(api.Validate(error_list, {{"$ref", "#/components/schemas/JobList"}}));
  EXPECT_NE(nested.find("$.jobs[0]: the required property 'id' is missing"), std::string::npos)
      << nested;
  const std::string bad_enum = Lines(
      api.Validate({{"error", "x"}, {"code", "oops"}}, {{"$ref", "#/components/schemas/Error"}}));
  EXPECT_NE(bad_enum.find("$.code: \"oops\" is not one of"), std::string::npos) << bad_enum;
  const std::string bad_time =
      Lines(api.Validate("yesterday", {{"$ref", "#/components/schemas/Timestamp"}}));
  EXPECT_NE(bad_time.find("is not a date-time"), std::string::npos) << bad_time;
  // A keyword the validator would silently skip is a mismatch itself.
  EXPECT_FALSE(api.Validate(1, {{"type", "integer"}, {"multipleOf", 2}}).empty());

  // Statuses and media types the operation does not document.
  EXPECT_FALSE(api.CheckResponse("/api/v1/whoami", "get", 418, "application/json", "{}").empty());
  EXPECT_FALSE(api.CheckResponse("/api/v1/whoami", "get", 200, "text/html", "<p>").empty());
}

TEST(OpenApiTest, DocumentIsSelfConsistent) {
  const OpenApi api = LoadDocument();
  EXPECT_EQ(api.doc().value("openapi", ""), "3.0.3");
  EXPECT_EQ(api.doc()["info"]["version"], "1");  // quoted YAML stays text
  EXPECT_TRUE(api.SelfCheck().empty()) << Lines(api.SelfCheck());
  // Bearer tokens everywhere unless an operation says otherwise.
  const json& scheme = api.doc()["components"]["securitySchemes"]["bearer"];
  EXPECT_EQ(scheme.value("type", ""), "http");
  EXPECT_EQ(scheme.value("scheme", ""), "bearer");
  EXPECT_EQ(api.doc()["security"], json::parse(R"([{"bearer": []}])"));
}

// ---- (a) the routes the server registers -----------------------------------------------------

TEST(OpenApiTest, EveryRouteIsDocumentedWithItsRoleAndNothingElse) {
  const OpenApi api = LoadDocument();
  const std::string dir = MakeTempDir("tessera-openapi-routes");
  auto store = store::Store::Open(dir);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  broker::BrokerOptions broker_options;
  broker_options.bind_endpoint = "tcp://127.0.0.1:0";
  broker::Broker broker(**store, broker_options, Clock::Real());
  ASSERT_TRUE(broker.Start().ok());
  security::ApiAuth auth(**store, /*enabled=*/true);
  api::ApiOptions options;
  options.port = 0;
  options.output_root = dir;
  api::HttpApi http(**store, broker, auth, options);
  StatusOr<int> port = http.Start();
  ASSERT_TRUE(port.ok()) << port.status().ToString();
  // cpp-httplib's stop() does nothing until the listen loop has begun, so a Stop() right after
  // Start() would leave that loop (and the join in Stop) running forever: wait until it serves.
  httplib::Client probe("127.0.0.1", *port);
  ASSERT_TRUE(WaitFor([&] { return static_cast<bool>(probe.Get("/healthz")); }, 10s));

  // (METHOD, route pattern) -> role, on both sides.
  std::map<std::pair<std::string, std::string>, std::string> served, documented;
  for (const api::RouteInfo& route : http.routes()) {
    served[{route.method, route.pattern}] = security::RoleName(route.role);
  }
  std::set<std::string> open_paths;  // operations documented without a token
  for (const auto& [path, item] : api.doc()["paths"].items()) {
    for (const auto& [method, op] : item.items()) {
      if (!kMethods.count(method)) continue;
      const std::string label = method + " " + path;
      if (op.contains("security")) {
        EXPECT_EQ(op["security"], json::array()) << label;
        EXPECT_EQ(method, "get") << label;
        EXPECT_FALSE(op.contains("x-tessera-role")) << label << ": needs no token, so no role";
        open_paths.insert(path);
        continue;
      }
      std::string method_upper = method;
      for (char& c : method_upper) c = static_cast<char>(std::toupper(c));
      const std::string role = op.value("x-tessera-role", "");
      documented[{method_upper, api.RoutePattern(path)}] = role;
      EXPECT_NE(op.value("description", "").find("Role: " + role), std::string::npos)
          << label << ": the description must name the role " << role;
      EXPECT_TRUE(op["responses"].contains("401")) << label;
    }
  }
  for (const auto& [route, role] : served) {
    auto it = documented.find(route);
    if (it == documented.end()) {
      ADD_FAILURE() << "the server serves " << route.first << " " << route.second << " [" << role
                    << "], the document does not describe it";
    } else {
      EXPECT_EQ(it->second, role) << route.first << " " << route.second << ": x-tessera-role";
    }
  }
  for (const auto& [route, role] : documented) {
    EXPECT_TRUE(served.count(route)) << "the document describes " << route.first << " "
                                     << route.second << ", the server has no such route";
  }
  // Without a token: /healthz and the dashboard's files.
  std::set<std::string> open_served = {"/healthz"};
  for (const api::DashboardAsset& asset : api::DashboardAssets()) {
    open_served.insert(std::string(asset.path));
  }
  EXPECT_EQ(open_paths, open_served);
  EXPECT_EQ(served.size(), http.routes().size()) << "a route is registered twice";

  http.Stop();
  broker.Stop();
  std::error_code ec;
  fs::remove_all(dir, ec);
}

// ---- (b) what a real farm answers ------------------------------------------------------------

struct Reply {
  int status = -1;
  std::string content_type;
  std::string body;
  json Json() const { return json::parse(body, nullptr, false); }
};

// Calls the farm's API and checks every answer against the document; remembers which
// operations were exercised.
class Checker {
 public:
  Checker(const OpenApi& api, LocalFarm& farm) : api_(api), farm_(farm) {}

  // `method` `target` (path and query), expecting `want`. `token` nullopt: the farm's admin
  // token; "": none.
  Reply Expect(int want, const std::string& method, const std::string& target,
               const std::optional<json>& body = std::nullopt,
               const std::optional<std::string>& token = std::nullopt) {
    Reply reply = Call(method, target, body, token.value_or(farm_.token()));
    Check(method, target, reply, {want});
    return reply;
  }
  // As Expect, for an answer that may be any of `wanted` (e.g. 200 or 409).
  Reply ExpectOneOf(std::set<int> wanted, const std::string& method, const std::string& target,
                    const std::optional<json>& body = std::nullopt) {
    Reply reply = Call(method, target, body, farm_.token());
    Check(method, target, reply, wanted);
    return reply;
  }
  // GET of a server-sent event stream: the status and headers, then hang up.
  Reply ExpectStream(int want, const std::string& target) {
    httplib::Client cli(farm_.api_url());
    cli.set_bearer_token_auth(farm_.token().c_str());
    cli.set_read_timeout(10, 0);
    Reply reply;
    cli.Get(
        target.c_str(), httplib::Headers{},
        [&](const httplib::Response& res) {
          reply.status = res.status;
          reply.content_type = res.get_header_value("Content-Type");
          return res.status != 200;  // an error body is read; a stream is left at its headers
        },
        [&](const char* data, size_t size) {
          reply.body.append(data, size);
          return true;
        });
    Check("GET", target, reply, {want});
    return reply;
  }

  const std::set<std::pair<std::string, std::string>>& covered() const { return covered_; }

 private:
  Reply Call(const std::string& method, const std::string& target, const std::optional<json>& body,
             const std::string& token) {
    httplib::Client cli(farm_.api_url());
    cli.set_connection_timeout(2);
    cli.set_read_timeout(30);
    httplib::Headers headers;
    if (!token.empty()) headers.emplace("Authorization", "Bearer " + token);
    // A PUT sends raw bytes: the body's string as it is.
    const std::string text =
        !body ? ""
              : (method == "PUT" && body->is_string() ? body->get<std::string>() : body->dump());
    httplib::Result res =
        method == "GET"    ? cli.Get(target.c_str(), headers)
        : method == "POST" ? cli.Post(target.c_str(), headers, text, "application/json")
        : method == "PUT"  ? cli.Put(target.c_str(), headers, text, "application/octet-stream")
                           : cli.Delete(target.c_str(), headers);
    Reply reply;
    if (!res) return reply;
    reply.status = res->status;
    reply.content_type = res->get_header_value("Content-Type");
    reply.body = res->body;
    return reply;
  }

  void Check(const std::string& method, const std::string& target, const Reply& reply,
             const std::set<int>& wanted) {
    const std::string label = method + " " + target;
    EXPECT_TRUE(wanted.count(reply.status))
        << label << " answered " << reply.status << ": " << reply.body.substr(0, 300);
    const std::string path = target.substr(0, target.find('?'));
    const std::string path_template = api_.FindPath(path);
    if (path_template.empty()) {
      ADD_FAILURE() << label << ": no path of the document matches";
      return;
    }
    covered_.insert({path_template, Lower(method)});
    const std::vector<std::string> problems = api_.CheckResponse(
        path_template, Lower(method), reply.status, reply.content_type, reply.body);
    EXPECT_TRUE(problems.empty()) << label << " does not match the document:" << Lines(problems);
  }

  const OpenApi& api_;
  LocalFarm& farm_;
  std::set<std::pair<std::string, std::string>> covered_;
};

std::string JobYaml(const std::string& name, const std::string& frames,
                    const std::string& extra = "") {
  return "name: " + name + "\nscene: scene.yaml\nframes: " + frames + "\n" + extra;
}

TEST(OpenApiTest, RealResponsesConformToTheDocument) {
  const OpenApi api = LoadDocument();
  LocalFarm farm("openapi");
  // An autoscaler whose cloud never has capacity: its groups, back-offs and decisions show.
  farm.AppendSchedulerConfig(
      "autoscaler:\n  interval_s: 1\n  groups:\n    - name: spot\n      provider: {kind: "
      "command, create: ['false', '{name}'], terminate: ['false', '{id}']}\n"
      "      price_per_hour: 1.5\n      market: spot\n      max_nodes: 2\n"
      "cost:\n  default_price_per_hour: 0.5\n");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  ASSERT_FALSE(farm.token().empty());
  ASSERT_TRUE(farm.StartWorker("w1"));
  ASSERT_TRUE(farm.WaitForWorkers(1, 20s));
  Checker c(api, farm);

  // Without a token: liveness and the dashboard.
  c.Expect(200, "GET", "/healthz", std::nullopt, "");
  for (const auto& [path, item] : api.doc()["paths"].items()) {
    if (item.contains("get") && item["get"].contains("security")) {
      c.Expect(200, "GET", path, std::nullopt, "");
    }
  }

  // Jobs: a tiled job that finishes, and one that no worker can run (it stays queued).
  const json tiled = {{"job_yaml", JobYaml("openapi", "1-2", "tiles: 2x1\n")},
                      {"scene_yaml", TinySceneYaml()}};
  const int64_t job = c.Expect(201, "POST", "/api/v1/jobs", tiled).Json()["job"].value("id", 0);
  ASSERT_GT(job, 0);
  const json stuck_body = {{"job_yaml", JobYaml("stuck", "1", "tags: [no-such-tag]\n")},
                           {"scene_yaml", TinySceneYaml()}};
  const int64_t stuck =
      c.Expect(201, "POST", "/api/v1/jobs", stuck_body).Json()["job"].value("id", 0);
  ASSERT_GT(stuck, 0);
  ASSERT_EQ(farm.WaitForJob(job, 60s).value("state", ""), "done");
  c.Expect(400, "POST", "/api/v1/jobs", json{{"job_yaml", 5}});
  c.Expect(400, "POST", "/api/v1/jobs", json{{"scene_yaml", TinySceneYaml()}});
  c.Expect(413, "POST", "/api/v1/jobs",
           json{{"job_yaml", JobYaml("huge", "1")},
                {"scene_yaml", std::string(spec::kMaxSceneBytes + 1, '#')}});

  const std::string base = "/api/v1/jobs/" + std::to_string(job);
  const std::string stuck_base = "/api/v1/jobs/" + std::to_string(stuck);
  c.Expect(200, "GET", "/api/v1/whoami");
  // Blobs: an upload in two pieces, a piece at the wrong offset, a missing parameter.
  const std::string blob_hash = Sha256Hex("asset bytes");
  const std::string blob = "/api/v1/blobs/" + blob_hash;
  c.Expect(200, "GET", blob);
  c.Expect(200, "PUT", blob + "?offset=0&total=11", json("asset"));
  c.Expect(409, "PUT", blob + "?offset=0&total=11", json(" bytes"));
  c.Expect(400, "PUT", blob + "?total=11", json(" bytes"));
  c.Expect(201, "PUT", blob + "?offset=5&total=11", json(" bytes"));
  c.Expect(200, "GET", blob);
  c.Expect(200, "GET", "/api/v1/jobs");
  c.Expect(200, "GET", "/api/v1/jobs?state=done&limit=5");
  c.Expect(200, "GET", "/api/v1/jobs?state=paused");
  c.Expect(400, "GET", "/api/v1/jobs?state=sleeping");
  c.Expect(400, "GET", "/api/v1/jobs?limit=0");
  EXPECT_TRUE(c.Expect(200, "GET", "/api/v1/jobs?limit=1").Json().contains("next_before"));
  c.Expect(200, "GET", "/api/v1/jobs?user=nobody&project=default&before=999");
  c.Expect(400, "GET", "/api/v1/jobs?before=0");
  c.Expect(200, "GET", base);
  c.Expect(404, "GET", "/api/v1/jobs/999999");
  c.Expect(400, "GET", "/api/v1/jobs/abc");
  const json tasks = c.Expect(200, "GET", base + "/tasks").Json()["tasks"];
  ASSERT_FALSE(tasks.empty());
  const std::string task = std::to_string(tasks[0].value("id", 0));
  c.Expect(404, "GET", "/api/v1/jobs/999999/tasks");
  EXPECT_TRUE(c.Expect(200, "GET", base + "/tasks?limit=1").Json().contains("next_after"));
  c.Expect(200, "GET", base + "/tasks?state=done&after=0");
  c.Expect(400, "GET", base + "/tasks?state=bogus");
  c.Expect(200, "GET", base + "/frames");
  c.Expect(200, "GET", base + "/frames?first=2&count=1");
  c.Expect(400, "GET", base + "/frames?count=0");
  EXPECT_EQ(c.Expect(200, "GET", base + "/frames?first=100").Json()["frames"].size(), 0u);
  c.Expect(200, "GET", base + "/frames/1/thumbnail");
  const json outputs = c.Expect(200, "GET", base + "/outputs").Json();
  ASSERT_FALSE(outputs["files"].empty()) << outputs.dump();
  c.Expect(200, "GET", base + "/outputs?first=2&count=1");
  c.Expect(400, "GET", base + "/outputs?count=0");
  c.Expect(404, "GET", "/api/v1/jobs/999999/outputs");
  c.Expect(200, "GET", base + "/outputs/" + outputs["files"][0]["name"].get<std::string>());
  c.Expect(404, "GET", base + "/outputs/.thumbnails");
  c.Expect(404, "GET", base + "/outputs/nothing.exr");
  c.Expect(400, "GET", base + "/frames/9/thumbnail");
  c.Expect(404, "GET", stuck_base + "/frames/1/thumbnail");
  c.Expect(200, "GET", "/api/v1/tasks/" + task + "/log");
  c.Expect(404, "GET", "/api/v1/tasks/999999/log");
  c.Expect(200, "GET", "/api/v1/tasks/" + task + "/why");
  c.Expect(400, "GET", "/api/v1/tasks/0/why");
  c.Expect(200, "GET", "/api/v1/history");
  c.Expect(200, "GET", "/api/v1/costs");
  c.Expect(200, "GET", "/api/v1/costs?days=1");
  c.Expect(400, "GET", "/api/v1/costs?days=0");
  const json scaler = c.Expect(200, "GET", "/api/v1/autoscaler").Json();
  EXPECT_EQ(scaler["groups"][0]["name"], "spot") << scaler.dump();
  c.Expect(200, "GET", "/api/v1/workers");
  c.Expect(200, "GET", "/api/v1/plugins");
  c.Expect(200, "GET", "/api/v1/openjd/environments");
  c.Expect(200, "GET", "/api/v1/summary");
  c.Expect(200, "GET", "/metrics");
  c.ExpectStream(200, "/api/v1/events?since=0");
  c.ExpectStream(400, "/api/v1/events?since=yesterday");

  // Operations on the finished job: refused (409) or harmless.
  c.Expect(409, "POST", base + "/pause");
  c.Expect(409, "POST", base + "/resume");
  c.Expect(409, "POST", base + "/priority", json{{"priority", 60}});
  c.Expect(409, "POST", base + "/cancel");
  c.ExpectOneOf({200, 409}, "POST", base + "/retry");
  c.Expect(400, "POST", base + "/rerender", json{{"frames", 5}});
  c.Expect(400, "POST", base + "/priority", json{{"priority", "high"}});
  // ... and on the queued one, they take effect.
  c.Expect(200, "GET", stuck_base);
  const json stuck_tasks = c.Expect(200, "GET", stuck_base + "/tasks").Json()["tasks"];
  ASSERT_FALSE(stuck_tasks.empty());
  c.Expect(200, "GET", "/api/v1/tasks/" + std::to_string(stuck_tasks[0].value("id", 0)) + "/why");
  c.Expect(200, "GET", "/api/v1/tasks/" + std::to_string(stuck_tasks[0].value("id", 0)) + "/log");
  EXPECT_EQ(c.Expect(200, "POST", stuck_base + "/pause").Json()["job"].value("state", ""),
            "paused");
  c.Expect(200, "POST", stuck_base + "/resume");
  c.Expect(200, "POST", stuck_base + "/priority", json{{"priority", 70}});
  c.ExpectOneOf({200, 409}, "POST", stuck_base + "/rerender", json{{"frames", "1"}});
  c.Expect(409, "DELETE", stuck_base);
  c.Expect(200, "POST", stuck_base + "/cancel");
  c.Expect(409, "POST", stuck_base + "/retry");
  c.Expect(404, "POST", "/api/v1/jobs/999999/cancel");

  // Credentials: a viewer token, what it may not do, and revoking it.
  const Reply created =
      c.Expect(201, "POST", "/api/v1/tokens",
               json{{"user", "openapi-viewer"}, {"role", "viewer"}, {"ttl_s", 3600}});
  const std::string viewer = created.Json().value("token", "");
  const std::string viewer_id = std::to_string(created.Json()["api_token"].value("id", 0));
  c.Expect(400, "POST", "/api/v1/tokens", json{{"user", "x"}, {"role", "king"}});
  c.Expect(200, "GET", "/api/v1/whoami", std::nullopt, viewer);
  c.Expect(403, "POST", base + "/pause", std::nullopt, viewer);
  c.Expect(403, "GET", "/api/v1/tokens", std::nullopt, viewer);
  c.Expect(200, "GET", "/api/v1/tokens");
  c.Expect(200, "POST", "/api/v1/tokens/" + viewer_id + "/revoke");
  c.Expect(404, "POST", "/api/v1/tokens/999999/revoke");
  c.Expect(401, "GET", "/api/v1/whoami", std::nullopt, viewer);
  c.Expect(401, "GET", "/api/v1/jobs", std::nullopt, "");
  c.Expect(401, "GET", "/api/v1/summary", std::nullopt, "tsra-" + std::string(64, '0'));
  c.Expect(409, "POST", "/api/v1/join-tokens", json::object());  // an insecure farm
  c.Expect(200, "GET", "/api/v1/join-tokens");
  c.Expect(404, "POST", "/api/v1/join-tokens/999999/revoke");
  c.Expect(400, "POST", "/api/v1/join-tokens/abc/revoke");

  // Workers.
  c.Expect(404, "POST", "/api/v1/workers/nobody/drain");
  c.Expect(404, "POST", "/api/v1/workers/nobody/revoke");
  c.Expect(404, "POST", "/api/v1/workers/nobody/readmit");
  c.Expect(200, "GET", "/api/v1/workers/w1");
  c.Expect(404, "GET", "/api/v1/workers/nobody");
  c.Expect(404, "POST", "/api/v1/workers/nobody/disable");
  c.Expect(200, "POST", "/api/v1/workers/w1/disable");
  EXPECT_EQ(c.Expect(200, "GET", "/api/v1/workers/w1").Json()["worker"].value("disabled", false),
            true);
  c.Expect(200, "POST", "/api/v1/workers/w1/enable");
  c.Expect(200, "POST", "/api/v1/workers/w1/drain");

  // Deleting the finished jobs.
  c.Expect(200, "DELETE", base);
  c.Expect(200, "DELETE", stuck_base);
  c.Expect(404, "DELETE", base);

  // Every operation the document describes was exercised.
  for (const auto& [path, item] : api.doc()["paths"].items()) {
    for (const auto& [method, op] : item.items()) {
      if (kMethods.count(method)) {
        EXPECT_TRUE(c.covered().count({path, method})) << method << " " << path << " not called";
      }
    }
  }
}

}  // namespace
}  // namespace tessera::testing
