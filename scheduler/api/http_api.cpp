#include "scheduler/api/http_api.h"

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include "scheduler/api/dashboard.h"
#include "scheduler/api/reply.h"
#include "scheduler/blobs/blob_store.h"
#include "scheduler/broker/broker.h"
#include "shared/base/disk_space.h"
#include "shared/jobs/job_file.h"

namespace tessera::api {

using nlohmann::json;
using security::Caller;
using security::Role;

HttpApi::HttpApi(store::Store& store, broker::Broker& broker, security::ApiAuth& auth,
                 ApiOptions options)
    : store_(store), broker_(broker), auth_(auth), options_(std::move(options)) {}

HttpApi::~HttpApi() { Stop(); }

StatusOr<int> HttpApi::Start() {
  // Unauthenticated: liveness for load balancers, and the dashboard page (it asks for a token
  // and sends it with every API call).
  // Read-only (the data folder is full) is still 200: reads are served, and taking the only
  // scheduler out of a load balancer would lose them too; the body says "degraded".
  router_.Add("GET", "/healthz", [this](Req, Res res) {
    if (std::optional<std::string> why = broker_.ReadOnlyReason()) {
      return Reply(res, 200, {{"status", "degraded"}, {"reason", *why}});
    }
    Reply(res, 200, {{"status", "ok"}});
  });
  ServeDashboard(router_);

  Handle("GET", "/api/v1/whoami", Role::kViewer, [this](Req, Res res, const Caller& c) {
    Reply(res, 200,
          {{"user", c.user},
           {"role", security::RoleName(c.role)},
           {"token_id", c.token_id},
           {"auth", auth_.enabled() ? "token" : "none"}});
  });
  JobRoutes();
  OutputRoutes();
  TaskRoutes();
  BlobRoutes();
  WorkerRoutes();
  TokenRoutes();
  FarmRoutes();
  EventRoutes();

  http::ServerOptions server = options_.server;
  server.host = options_.host;
  server.port = options_.port;
  server.handler_threads = options_.threads;
  server.tls_cert_file = options_.tls_cert_file;
  server.tls_key_file = options_.tls_key_file;
  server.tls_min_version = options_.tls_min_version;
  // A submission carries its job and scene text; a blob upload, one piece.
  server.max_body_bytes =
      std::max<size_t>(2 * spec::kMaxSceneBytes, blobs::kMaxUploadPieceBytes) + (1 << 20);
  server_ = std::make_unique<http::Server>(std::move(server), std::move(router_));
  StatusOr<int> port = server_->Start();
  if (!port.ok()) return port.status();
  history_ = std::make_unique<FarmHistory>(store_, broker_,
                                           std::chrono::seconds(options_.history_interval_s));
  history_->Start();
  if (options_.events) event_pump_ = std::thread([this] { PumpEvents(); });
  return port;
}

void HttpApi::Stop() {
  // Closing the bus ends the event pump and, at their next pull, the streams.
  if (options_.events) options_.events->Close();
  if (event_pump_.joinable()) event_pump_.join();
  if (server_) server_->Stop();
  if (history_) history_->Stop();
}

http::ServerCounters HttpApi::counters() const {
  return server_ ? server_->counters() : http::ServerCounters{};
}

void HttpApi::Handle(const char* method, const std::string& pattern, security::Role needed,
                     Handler handler) {
  routes_.push_back({method, pattern, needed});
  const bool writes = std::string(method) != "GET";
  router_.Add(
      method, pattern, [this, needed, writes, handler = std::move(handler)](Req req, Res res) {
        StatusOr<security::Caller> caller = auth_.Authenticate(req.Header("Authorization"));
        if (!caller.ok()) {
          res.SetHeader("WWW-Authenticate", "Bearer realm=\"tessera\"");
          return ReplyError(res, caller.status());
        }
        if (!caller->may(needed)) {
          return ReplyError(res, Status::PermissionDenied(
                                     std::string("this needs the ") + security::RoleName(needed) +
                                     " role; the token of '" + caller->user + "' has the " +
                                     security::RoleName(caller->role) + " role"));
        }
        if (writes) {
          // Read-only: the store takes no writes until its data folder has room again.
          if (std::optional<std::string> why = broker_.ReadOnlyReason()) {
            return ReplyError(res, Status::StorageFull(*why));
          }
        }
        handler(req, res, *caller);
      });
}

Status HttpApi::CheckDataFloor() const {
  if (options_.data_dir.empty() || options_.min_free_bytes == 0) return Status::Ok();
  return disk_space::CheckFloor(options_.data_dir, options_.min_free_bytes, "storage.min_free_mb");
}

Status HttpApi::MayOperateOn(const security::Caller& caller, int64_t job_id) const {
  if (caller.may(security::Role::kOperator)) return Status::Ok();
  auto job = store_.GetJob(job_id);
  if (!job.ok()) return job.status();
  if (!caller.owns(job->user)) {
    return Status::PermissionDenied("job " + std::to_string(job_id) + " belongs to '" + job->user +
                                    "'; a submitter may only change its own jobs");
  }
  return Status::Ok();
}

}  // namespace tessera::api
