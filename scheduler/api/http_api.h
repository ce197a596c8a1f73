#pragma once
// The scheduler's HTTP JSON API (v1) and the dashboard page, served by the asynchronous server
// in scheduler/http (over TLS 1.2+ when a certificate is configured; limits and deadlines in
// http/server.h). Handlers run on the server's handler pool, read through the store's read-only
// connections and hand anything that changes dispatch state (a new job, a cancellation) to the
// broker. Routes live one file per resource: routes_jobs.cpp, routes_outputs.cpp,
// routes_tasks.cpp, routes_blobs.cpp, routes_workers.cpp, routes_tokens.cpp, routes_farm.cpp
// (summary, history, autoscaler, costs, metrics), routes_events.cpp (the event stream).
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
//   GET  /healthz (no token)        -> 200 {"status": "ok"}, or 200 {"status": "degraded",
//                                      "reason"} while the scheduler is read-only (data full)
// While the scheduler is read-only (its data folder is full), every request but a GET answers
// 507 {"code": "storage_full"} with the reason; GETs answer as usual.
//   GET  / (no token)                                                     -> dashboard
// Errors: {"error": "<message naming the field>", "code": "<status code name>"} with a 4xx/5xx.

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "scheduler/api/history.h"
#include "scheduler/api/openjd_farm.h"
#include "scheduler/autoscaler/autoscaler.h"
#include "scheduler/events/event_bus.h"
#include "scheduler/events/farm_alerts.h"
#include "scheduler/events/webhooks.h"
#include "scheduler/http/router.h"
#include "scheduler/http/server.h"
#include "scheduler/security/api_auth.h"
#include "scheduler/store/store.h"
#include "shared/base/status.h"

namespace tessera::blobs {
class BlobStore;
}
namespace tessera::broker {
class Broker;
}

namespace tessera::api {

struct ApiOptions {
  std::string host = "127.0.0.1";
  int port = 8470;                        // 0 picks a free port
  std::string output_root;                // absolute; every job's output directory lies inside it
  std::vector<std::string> shared_roots;  // where output.shared_dir may point (config)
  int threads = 16;                       // handler threads (event streams hold none)
  std::string tls_cert_file;              // both set: serve HTTPS (TLS 1.2 or later)
  std::string tls_key_file;
  std::string tls_min_version = "1.2";  // or "1.3"
  // Connection caps, size limits and per-phase deadlines (http/server.h; the scheduler's
  // api: section sets them). host, port, threads and the TLS files above win over the copies
  // in here.
  http::ServerOptions server;
  // The live event stream (GET /api/v1/events); none: the endpoint answers 503.
  events::EventBus* events = nullptr;
  // The farm's active alerts: in the summary ("alerts") and on /metrics (none: no alerts).
  const events::FarmAlerts* alerts = nullptr;
  int history_interval_s = 10;  // GET /api/v1/history sampling
  // GET /api/v1/autoscaler and jobs' deadline forecasts; none: the farm has no autoscaler.
  const autoscaler::Autoscaler* autoscaler = nullptr;
  // Job assets: uploads and the check that a submitted job's blobs exist (none: 503).
  blobs::BlobStore* blobs = nullptr;
  // The data folder (database, blobs) and the room it must keep (storage.min_free_mb): below
  // it, job submissions and blob uploads are refused with 507 before the disk is truly full.
  // Empty or 0: no floor.
  std::string data_dir;
  uint64_t min_free_bytes = 0;
  // Webhook deliveries on /metrics (none: the farm has no receivers).
  const events::WebhookNotifier* webhooks = nullptr;
  // The farm's OpenJD environment templates and path mapping rules (scheduler config openjd:),
  // added to every OpenJD job; GET /api/v1/openjd/environments lists them (none: no such parts).
  const OpenJdFarm* openjd = nullptr;
};

// One authenticated endpoint: what the OpenAPI document must describe.
struct RouteInfo {
  std::string method;
  std::string pattern;  // e.g. /api/v1/jobs/([^/]+) (http/router.h says which groups exist)
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
  // The server's connection and refusal counters (for /metrics).
  http::ServerCounters counters() const;

 private:
  using Req = const http::Request&;
  using Res = http::Response&;
  using Handler = std::function<void(Req, Res, const security::Caller&)>;

  // Registers `handler` behind the bearer-token check for `needed`.
  void Handle(const char* method, const std::string& pattern, security::Role needed,
              Handler handler);
  // OK when the caller may change job `job_id`: an operator, or the job's own submitter.
  Status MayOperateOn(const security::Caller& caller, int64_t job_id) const;
  // StorageFull when the data folder has less room than storage.min_free_mb (new work and
  // uploads are refused before SQLite runs out of room); OK otherwise.
  Status CheckDataFloor() const;

  // Each registers one resource's routes (routes_<resource>.cpp).
  void JobRoutes();
  void OutputRoutes();
  void TaskRoutes();
  void BlobRoutes();
  void WorkerRoutes();
  void TokenRoutes();
  void FarmRoutes();
  void EventRoutes();
  // The jobs routes' longer handlers (routes_jobs.cpp).
  void PostJob(Req req, Res res, const security::Caller& caller);
  void ListJobs(Req req, Res res, const security::Caller& caller);
  void GetJob(Res res, const security::Caller& caller, int64_t id);
  void ListJobTasks(Req req, Res res, int64_t id);
  void DeleteJob(Res res, const security::Caller& caller, int64_t id);
  // Wakes the open event streams whenever the bus has news (one thread for all of them).
  void PumpEvents();

  store::Store& store_;
  broker::Broker& broker_;
  security::ApiAuth& auth_;
  ApiOptions options_;
  std::vector<RouteInfo> routes_;
  http::Router router_;  // filled by Start, then handed to the server
  std::unique_ptr<FarmHistory> history_;
  std::unique_ptr<http::Server> server_;
  std::thread event_pump_;
};

}  // namespace tessera::api
