#pragma once
// The scheduler's HTTP JSON API (v1) and the dashboard page, served by cpp-httplib on its own
// thread pool (over TLS 1.2+ when a certificate is configured). Handlers read through the
// store's read-only connections and hand anything that changes dispatch state (a new job, a
// cancellation) to the broker.
//
// Every /api/v1 endpoint (and /metrics) needs "Authorization: Bearer tsra-..." with at least
// the role shown in brackets (security/api_auth.h); a submitter may change only its own jobs.
// 401: no, unknown, revoked or expired token; 403: the token's role is not enough.
// The whole document, with every response's shape, is docs/openapi.yaml.
//
//   GET  /api/v1/whoami [viewer]                          -> {"user", "role", "token_id", "auth"}
//   POST /api/v1/jobs [submitter] {"job_yaml": "...", "scene_yaml": "..."}   -> 201 {"job": JOB}
//   GET  /api/v1/jobs[?state=S&user=U&project=P&limit=N&before=ID] [viewer]
//                                              -> {"jobs": [...], "next_before" (a full page)}
//   GET  /api/v1/jobs/{id} [viewer]                                           -> {"job": JOB}
//   GET  /api/v1/jobs/{id}/tasks[?state=S&limit=N&after=INDEX] [viewer]
//                                              -> {"tasks": [...], "next_after" (a full page)}
//   POST /api/v1/jobs/{id}/cancel | /pause | /resume | /retry [submitter]     -> {"job": JOB}
//   POST /api/v1/jobs/{id}/priority {"priority": 0..100} [submitter]          -> {"job": JOB}
//   POST /api/v1/jobs/{id}/rerender {"frames": "A-B"} [submitter]
//                                                     -> {"job": JOB, "tasks_requeued": N}
//   DELETE /api/v1/jobs/{id} [submitter] (finished jobs; output files stay)   -> {"deleted": id}
//   GET  /api/v1/tasks/{id}/why [viewer] -> {"task_id", "state", "reason", "details": [...]}
//   GET  /api/v1/workers [viewer]                                          -> {"workers": [...]}
//   GET  /api/v1/workers/{name} [viewer]                                  -> {"worker": WORKER}
//   POST /api/v1/workers/{name}/drain | /revoke | /readmit | /disable | /enable [operator]
//   GET  /api/v1/plugins [viewer] -> {"workers": [{"id", "name", "plugins": [...]}],
//                                     "plugins": [{"name", "description", "tiles", "settings"}]}
//   GET  /api/v1/summary [viewer]              -> farm counters and "throughput_per_min"
//   POST /api/v1/join-tokens {"note", "ttl_s", "uses"} [admin] -> 201 {"token", "join_token",...}
//   GET  /api/v1/join-tokens [admin]; POST /api/v1/join-tokens/{id}/revoke [admin]
//   POST /api/v1/tokens {"user", "role", "note", "ttl_s"} [admin]  -> 201 {"token", "api_token"}
//   GET  /api/v1/tokens [admin]; POST /api/v1/tokens/{id}/revoke [admin]
//   GET  /api/v1/jobs/{id}/frames[?first=F&count=N] [viewer]
//                     -> {"job_id", "frame_start", "frame_end", "frames": [{"frame", "state",
//                         "parts_total", "parts_done", "thumbnail", "flag"}]}
//   GET  /api/v1/jobs/{id}/frames/{frame}/thumbnail [viewer]     -> image/png (256 px at most)
//   GET  /api/v1/tasks/{id}/log [viewer]
//                     -> {"task_id", "state", "message",
//                         "attempts": [{"attempt", "worker", "state", "at", "log"}]}
//   GET  /api/v1/history [viewer]          -> {"interval_s", "points": [...]} (the last day)
//   GET  /api/v1/events[?since=SEQ] [viewer]  -> text/event-stream (events/event_bus.h)
//   GET  /metrics [viewer]                            -> Prometheus text exposition format
//   GET  /healthz (no token)                                              -> {"status": "ok"}
//   GET  / (no token)                                                     -> dashboard
// Errors: {"error": "<message naming the field>", "code": "<status code name>"} with a 4xx/5xx.

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "scheduler/api/history.h"
#include "scheduler/autoscaler/autoscaler.h"
#include "scheduler/broker/broker.h"
#include "scheduler/events/event_bus.h"
#include "scheduler/security/api_auth.h"
#include "scheduler/store/store.h"
#include "shared/status.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace tessera::blobs {
class BlobStore;
}

namespace tessera::api {

struct ApiOptions {
  std::string host = "127.0.0.1";
  int port = 8470;                        // 0 picks a free port
  std::string output_root;                // absolute; every job's output directory lies inside it
  std::vector<std::string> shared_roots;  // where output.shared_dir may point (config)
  int threads = 16;
  std::string tls_cert_file;  // both set: serve HTTPS (TLS 1.2 or later)
  std::string tls_key_file;
  // The live event stream (GET /api/v1/events); none: the endpoint answers 503.
  events::EventBus* events = nullptr;
  int history_interval_s = 10;  // GET /api/v1/history sampling
  // GET /api/v1/autoscaler and jobs' deadline forecasts; none: the farm has no autoscaler.
  const autoscaler::Autoscaler* autoscaler = nullptr;
  // Job assets: uploads and the check that a submitted job's blobs exist (none: 503).
  blobs::BlobStore* blobs = nullptr;
};

// One authenticated endpoint: what the OpenAPI document must describe.
struct RouteInfo {
  std::string method;
  std::string pattern;  // cpp-httplib regex, e.g. /api/v1/jobs/([^/]+)
  security::Role role;
};

class HttpApi {
 public:
  HttpApi(store::Store& store, broker::Broker& broker, security::ApiAuth& auth, ApiOptions options);
  ~HttpApi();

  // Binds and starts serving; returns the bound port.
  StatusOr<int> Start();
  void Stop();

  // The authenticated endpoints (filled by Start).
  const std::vector<RouteInfo>& routes() const { return routes_; }

 private:
  using Handler =
      std::function<void(const httplib::Request&, httplib::Response&, const security::Caller&)>;

  void Routes();
  // Registers `handler` behind the bearer-token check for `needed`.
  void Handle(const char* method, const std::string& pattern, security::Role needed,
              Handler handler);
  // OK when the caller may change job `job_id`: an operator, or the job's own submitter.
  Status MayOperateOn(const security::Caller& caller, int64_t job_id) const;
  // Resolves (and creates) a job's output directory inside the output root.
  // A shared-storage job's folder: inside one of the shared roots, links resolved.
  StatusOr<std::string> SharedDirFor(const std::string& dir) const;
  StatusOr<std::string> OutputDirFor(const std::string& relative, const std::string& name,
                                     int64_t job_id) const;

  store::Store& store_;
  broker::Broker& broker_;
  security::ApiAuth& auth_;
  ApiOptions options_;
  std::vector<RouteInfo> routes_;
  std::unique_ptr<FarmHistory> history_;
  std::atomic<int> event_streams_{0};  // open GET /api/v1/events streams
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
};

}  // namespace tessera::api
