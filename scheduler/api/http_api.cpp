#include "scheduler/api/http_api.h"

#include <httplib.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "scheduler/api/dashboard.h"
#include "scheduler/api/views.h"
#include "shared/job_spec.h"
#include "shared/plugin_catalog.h"
#include "shared/scene_spec.h"

namespace tessera::api {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A join token created without a ttl_s lives a day: long enough to boot a batch of machines,
// short enough that a leaked one soon admits nobody.
constexpr int64_t kDefaultJoinTokenTtlS = 24 * 3600;

int HttpCode(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return 200;
    case StatusCode::kInvalidArgument:
      return 400;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kAlreadyExists:
    case StatusCode::kFailedPrecondition:
      return 409;
    case StatusCode::kResourceExhausted:
      return 413;
    case StatusCode::kPermissionDenied:
      return 403;
    case StatusCode::kUnavailable:
      return 503;
    case StatusCode::kCancelled:
    case StatusCode::kInternal:
      return 500;
  }
  return 500;
}

void Reply(httplib::Response& res, int code, const json& body) {
  res.status = code;
  res.set_content(body.dump(), "application/json");
}

void ReplyError(httplib::Response& res, const Status& status) {
  Reply(res, HttpCode(status.code()),
        {{"error", status.message()}, {"code", StatusCodeName(status.code())}});
}

StatusOr<int64_t> ParseId(const std::string& text) {
  try {
    size_t used = 0;
    long long id = std::stoll(text, &used);
    if (used == text.size() && id > 0) return static_cast<int64_t>(id);
  } catch (const std::exception&) {
  }
  return Status::InvalidArgument("id: '" + text + "' is not a positive integer");
}

// Parses and validates a submission body into a job spec carrying its scene text.
StatusOr<spec::JobSpec> ParseSubmission(const std::string& body, std::string* job_yaml) {
  json req = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (req.is_discarded() || !req.is_object()) {
    return Status::InvalidArgument(
        "body: expected a JSON object {\"job_yaml\": ..., "
        "\"scene_yaml\": ..., \"user\": ...}");
  }
  for (const auto& [key, value] : req.items()) {
    if (key != "job_yaml" && key != "scene_yaml" && key != "user") {
      return Status::InvalidArgument("body." + key +
                                     ": unknown field (job_yaml, scene_yaml, user)");
    }
    if (!value.is_string()) return Status::InvalidArgument("body." + key + ": expected a string");
  }
  if (!req.contains("job_yaml")) return Status::InvalidArgument("body.job_yaml: required");
  *job_yaml = req["job_yaml"].get<std::string>();
  TSR_ASSIGN_OR_RETURN(spec::JobSpec job, spec::ParseJobYaml(*job_yaml));
  // The job file's own `user:` wins over the submitting client's account name.
  if (job.user.empty() && req.contains("user")) job.user = req["user"].get<std::string>();
  if (req.contains("scene_yaml")) {
    job.scene_yaml = req["scene_yaml"].get<std::string>();
  } else if (job.scene_yaml.empty() && job.produces_frames() && !job.scene_path.empty()) {
    return Status::InvalidArgument("scene: the scheduler cannot read the path '" + job.scene_path +
                                   "'; send the scene's text as scene_yaml (tessera submit does)");
  }
  TSR_RETURN_IF_ERROR(spec::ValidateJob(job));
  if (job.renderer == spec::kRendererPathTracer) {
    StatusOr<spec::SceneSpec> scene = spec::ParseSceneYaml(job.scene_yaml);
    if (!scene.ok()) return scene.status().WithContext("scene");
    TSR_RETURN_IF_ERROR(spec::SplitFrames(&job, scene->width, scene->height, scene->samples));
  } else {
    TSR_RETURN_IF_ERROR(spec::SplitPluginFrames(&job));
  }
  return job;
}

}  // namespace

HttpApi::HttpApi(store::Store& store, broker::Broker& broker, ApiOptions options)
    : store_(store), broker_(broker), options_(std::move(options)) {}

HttpApi::~HttpApi() { Stop(); }

StatusOr<std::string> HttpApi::OutputDirFor(const std::string& relative, const std::string& name,
                                            int64_t job_id) const {
  fs::path root = fs::weakly_canonical(options_.output_root);
  fs::path dir = root / (relative.empty() ? name + "-" + std::to_string(job_id) : relative);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    return Status::Internal("output.directory: cannot create " + dir.string() + ": " +
                            ec.message());
  }
  // A symlink inside the root must not lead outside it.
  fs::path real = fs::canonical(dir, ec);
  auto [root_end, unused] = std::mismatch(root.begin(), root.end(), real.begin(), real.end());
  if (ec || root_end != root.end()) {
    return Status::InvalidArgument("output.directory: '" + relative +
                                   "' resolves outside the output root " + root.string());
  }
  return real.string();
}

StatusOr<int> HttpApi::Start() {
  server_ = std::make_unique<httplib::Server>();
  server_->new_task_queue = [n = options_.threads] { return new httplib::ThreadPool(n); };
  server_->set_payload_max_length(2 * spec::kMaxSceneBytes + (1 << 20));
  Routes();
  int port = options_.port;
  if (port == 0) {
    port = server_->bind_to_any_port(options_.host);
    if (port < 0) return Status::Unavailable("cannot bind the API on " + options_.host);
  } else if (!server_->bind_to_port(options_.host, port)) {
    return Status::Unavailable("cannot bind the API on " + options_.host + ":" +
                               std::to_string(port) + " (is the port in use?)");
  }
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  return port;
}

void HttpApi::Stop() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

void HttpApi::Routes() {
  httplib::Server& s = *server_;

  s.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown error";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        spdlog::error("API handler error: {}", what);
        ReplyError(res, Status::Internal(what));
      });

  s.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    Reply(res, 200, {{"status", "ok"}});
  });

  s.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(kDashboardHtml, "text/html; charset=utf-8");
  });

  s.Post("/api/v1/jobs", [this](const httplib::Request& req, httplib::Response& res) {
    std::string job_yaml;
    StatusOr<spec::JobSpec> job = ParseSubmission(req.body, &job_yaml);
    if (!job.ok()) {
      spdlog::info("rejected submission: {}", job.status().message());
      return ReplyError(res, job.status());
    }
    for (size_t i = 0; i < job->limits.size(); ++i) {
      if (!broker_.limits().count(job->limits[i])) {
        return ReplyError(
            res, Status::InvalidArgument("limits[" + std::to_string(i) + "]: no limit named '" +
                                         job->limits[i] + "' is configured on this farm"));
      }
    }
    for (size_t i = 0; i < job->depends_on.size(); ++i) {
      if (!store_.GetJob(job->depends_on[i]).ok()) {
        return ReplyError(
            res, Status::InvalidArgument("depends_on[" + std::to_string(i) + "]: job " +
                                         std::to_string(job->depends_on[i]) + " does not exist"));
      }
    }
    StatusOr<store::JobRecord> rec = store_.CreateJob(*job, job_yaml, [&](int64_t id) {
      return OutputDirFor(job->output.directory, job->name, id);
    });
    if (!rec.ok()) return ReplyError(res, rec.status());
    broker_.JobSubmitted(rec->id);
    spdlog::info("job {} '{}' submitted: frames {}-{}, {} tasks, output {}", rec->id, rec->name,
                 rec->frame_start, rec->frame_end, rec->tasks.total, rec->output_dir);
    Reply(res, 201, {{"job", JobView(*rec)}});
  });

  s.Get("/api/v1/jobs", [this](const httplib::Request& req, httplib::Response& res) {
    std::optional<store::JobState> state;
    if (req.has_param("state")) {
      std::string want = req.get_param_value("state");
      for (auto st : {store::JobState::kQueued, store::JobState::kRunning, store::JobState::kDone,
                      store::JobState::kFailed, store::JobState::kCanceled}) {
        if (want == store::JobStateName(st)) state = st;
      }
      if (!state) {
        return ReplyError(res, Status::InvalidArgument(
                                   "state: '" + want +
                                   "' is not one of queued, running, done, failed, canceled"));
      }
    }
    int limit = 100;
    if (req.has_param("limit")) {
      try {
        limit = std::stoi(req.get_param_value("limit"));
      } catch (const std::exception&) {
        limit = -1;
      }
      if (limit < 1 || limit > 10000) {
        return ReplyError(res, Status::InvalidArgument("limit: must be in [1, 10000]"));
      }
    }
    auto jobs = store_.ListJobs(state, limit);
    if (!jobs.ok()) return ReplyError(res, jobs.status());
    json out = json::array();
    for (const auto& j : *jobs) out.push_back(JobView(j));
    Reply(res, 200, {{"jobs", out}});
  });

  s.Get(R"(/api/v1/jobs/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
    auto id = ParseId(req.matches[1]);
    if (!id.ok()) return ReplyError(res, id.status());
    auto job = store_.GetJob(*id);
    if (!job.ok()) return ReplyError(res, job.status());
    Reply(res, 200, {{"job", JobView(*job)}});
  });

  s.Get(R"(/api/v1/jobs/([^/]+)/tasks)",
        [this](const httplib::Request& req, httplib::Response& res) {
          auto id = ParseId(req.matches[1]);
          if (!id.ok()) return ReplyError(res, id.status());
          auto job = store_.GetJob(*id);
          if (!job.ok()) return ReplyError(res, job.status());
          auto tasks = store_.ListTasks(*id);
          if (!tasks.ok()) return ReplyError(res, tasks.status());
          json out = json::array();
          for (const auto& t : *tasks) out.push_back(TaskView(t));
          Reply(res, 200, {{"tasks", out}});
        });

  s.Post(R"(/api/v1/jobs/([^/]+)/cancel)",
         [this](const httplib::Request& req, httplib::Response& res) {
           auto id = ParseId(req.matches[1]);
           if (!id.ok()) return ReplyError(res, id.status());
           if (Status st = broker_.CancelJob(*id); !st.ok()) return ReplyError(res, st);
           auto job = store_.GetJob(*id);
           if (!job.ok()) return ReplyError(res, job.status());
           Reply(res, 200, {{"job", JobView(*job)}});
         });

  // Job operations. Each answers with the job as it now stands.
  auto job_reply = [this](httplib::Response& res, int64_t id, const Status& st,
                          json extra = json::object()) {
    if (!st.ok()) return ReplyError(res, st);
    auto job = store_.GetJob(id);
    if (!job.ok()) return ReplyError(res, job.status());
    extra["job"] = JobView(*job);
    Reply(res, 200, extra);
  };
  auto with_job = [](auto handler) {
    return [handler](const httplib::Request& req, httplib::Response& res) {
      auto id = ParseId(req.matches[1]);
      if (!id.ok()) return ReplyError(res, id.status());
      handler(req, res, *id);
    };
  };
  s.Post(R"(/api/v1/jobs/([^/]+)/pause)",
         with_job([this, job_reply](const httplib::Request&, httplib::Response& res, int64_t id) {
           job_reply(res, id, broker_.SetJobPaused(id, true));
         }));
  s.Post(R"(/api/v1/jobs/([^/]+)/resume)",
         with_job([this, job_reply](const httplib::Request&, httplib::Response& res, int64_t id) {
           job_reply(res, id, broker_.SetJobPaused(id, false));
         }));
  s.Post(
      R"(/api/v1/jobs/([^/]+)/priority)",
      with_job([this, job_reply](const httplib::Request& req, httplib::Response& res, int64_t id) {
        json body = json::parse(req.body, nullptr, false);
        if (!body.is_object() || !body.contains("priority") ||
            !body["priority"].is_number_integer()) {
          return ReplyError(
              res, Status::InvalidArgument("priority: expected a body {\"priority\": 0..100}"));
        }
        job_reply(res, id, broker_.SetJobPriority(id, body["priority"].get<int>()));
      }));
  s.Post(R"(/api/v1/jobs/([^/]+)/retry)",
         with_job([this, job_reply](const httplib::Request&, httplib::Response& res, int64_t id) {
           StatusOr<int> moved = broker_.RequeueFinished(id, std::nullopt);
           job_reply(res, id, moved.status(), {{"tasks_requeued", moved.ok() ? *moved : 0}});
         }));
  s.Post(
      R"(/api/v1/jobs/([^/]+)/rerender)",
      with_job([this, job_reply](const httplib::Request& req, httplib::Response& res, int64_t id) {
        json body = json::parse(req.body, nullptr, false);
        if (!body.is_object() || !body.contains("frames") || !body["frames"].is_string()) {
          return ReplyError(
              res, Status::InvalidArgument("frames: expected a body {\"frames\": \"A-B\"}"));
        }
        int first = 0, last = 0;
        if (Status st = spec::ParseFrameRange(body["frames"], &first, &last); !st.ok()) {
          return ReplyError(res, st);
        }
        StatusOr<int> moved = broker_.RequeueFinished(id, std::make_pair(first, last));
        job_reply(res, id, moved.status(), {{"tasks_requeued", moved.ok() ? *moved : 0}});
      }));
  s.Delete(R"(/api/v1/jobs/([^/]+))",
           with_job([this](const httplib::Request&, httplib::Response& res, int64_t id) {
             if (Status st = store_.DeleteJob(id); !st.ok()) return ReplyError(res, st);
             spdlog::info("job {} deleted", id);
             Reply(res, 200, {{"deleted", id}});
           }));

  s.Get(R"(/api/v1/tasks/([^/]+)/why)",
        with_job([this](const httplib::Request&, httplib::Response& res, int64_t id) {
          StatusOr<json> why = broker_.Why(id);
          if (!why.ok()) return ReplyError(res, why.status());
          Reply(res, 200, *why);
        }));

  s.Get("/api/v1/workers", [this](const httplib::Request&, httplib::Response& res) {
    auto workers = store_.ListWorkers();
    if (!workers.ok()) return ReplyError(res, workers.status());
    json out = json::array();
    for (const auto& w : *workers) out.push_back(WorkerView(w));
    Reply(res, 200, {{"workers", out}});
  });

  s.Get("/api/v1/plugins", [this](const httplib::Request&, httplib::Response& res) {
    StatusOr<json> workers = broker_.WorkerPlugins();
    if (!workers.ok()) return ReplyError(res, workers.status());
    json known = json::array();
    for (const plugin::PluginSpec& p : plugin::BuiltinPlugins()) {
      json settings = json::array();
      for (const plugin::SettingSpec& st : p.settings) {
        json one = {{"name", st.name},
                    {"type", plugin::SettingTypeName(st.type)},
                    {"description", st.description}};
        if (st.default_) one["default"] = *st.default_;
        if (!st.values.empty()) one["values"] = st.values;
        if (st.min) one["min"] = *st.min;
        if (st.max) one["max"] = *st.max;
        settings.push_back(std::move(one));
      }
      known.push_back({{"name", p.name},
                       {"description", p.description},
                       {"tiles", p.tiles},
                       {"settings", settings}});
    }
    (*workers)["plugins"] = known;
    Reply(res, 200, *workers);
  });

  // ---- the worker fleet: join tokens, and operations on workers -------------------------------
  auto token_view = [](const store::JoinTokenRecord& t) {
    const int64_t now = store::NowMs();
    const char* state = t.revoked_at_ms                                ? "revoked"
                        : (t.expires_at_ms && *t.expires_at_ms <= now) ? "expired"
                        : (t.max_uses > 0 && t.uses >= t.max_uses)     ? "used up"
                                                                       : "valid";
    return json{{"id", t.id},
                {"note", t.note},
                {"created_at", IsoTime(t.created_at_ms)},
                {"expires_at", t.expires_at_ms ? json(IsoTime(*t.expires_at_ms)) : json(nullptr)},
                {"max_uses", t.max_uses},
                {"uses", t.uses},
                {"state", state}};
  };
  auto security_view = [this] {
    return json{{"security", broker_.secure() ? "curve" : "insecure"},
                {"scheduler_public_key", broker_.public_key_hex()}};
  };
  s.Post("/api/v1/tokens", [this, token_view, security_view](const httplib::Request& req,
                                                             httplib::Response& res) {
    json body = req.body.empty() ? json::object() : json::parse(req.body, nullptr, false);
    if (!body.is_object()) {
      return ReplyError(res, Status::InvalidArgument(
                                 "body: expected {\"note\": TEXT, \"ttl_s\": N, \"uses\": N}"));
    }
    const json note = body.value("note", json(""));
    const json ttl = body.value("ttl_s", json(kDefaultJoinTokenTtlS));
    const json uses = body.value("uses", json(0));
    if (!note.is_string()) return ReplyError(res, Status::InvalidArgument("note: expected text"));
    if (!ttl.is_number_integer()) {
      return ReplyError(res, Status::InvalidArgument("ttl_s: expected whole seconds (0: never)"));
    }
    if (!uses.is_number_integer() || uses.get<int64_t>() > 1000000) {
      return ReplyError(res, Status::InvalidArgument("uses: expected 0 (unlimited) .. 1000000"));
    }
    StatusOr<broker::NewJoinToken> created = broker_.CreateJoinToken(
        note.get<std::string>(), ttl.get<int64_t>(), static_cast<int>(uses.get<int64_t>()));
    if (!created.ok()) return ReplyError(res, created.status());
    json out = security_view();
    out["token"] = created->token;
    out["join_token"] = token_view(created->record);
    Reply(res, 201, out);
  });
  s.Get("/api/v1/tokens",
        [this, token_view, security_view](const httplib::Request&, httplib::Response& res) {
          auto tokens = store_.ListJoinTokens();
          if (!tokens.ok()) return ReplyError(res, tokens.status());
          json out = security_view();
          out["tokens"] = json::array();
          for (const auto& t : *tokens) out["tokens"].push_back(token_view(t));
          Reply(res, 200, out);
        });
  s.Post(R"(/api/v1/tokens/([^/]+)/revoke)",
         with_job([this, token_view](const httplib::Request&, httplib::Response& res, int64_t id) {
           auto revoked = broker_.RevokeJoinToken(id);
           if (!revoked.ok()) return ReplyError(res, revoked.status());
           Reply(res, 200, {{"join_token", token_view(*revoked)}});
         }));
  auto worker_action = [this](const char* action, auto operation) {
    return [this, action, operation](const httplib::Request& req, httplib::Response& res) {
      const std::string name = req.matches[1];
      if (Status st = operation(name); !st.ok()) return ReplyError(res, st);
      Reply(res, 200, {{"worker", name}, {"action", action}});
    };
  };
  s.Post(R"(/api/v1/workers/([^/]+)/drain)",
         worker_action("drain", [this](const std::string& n) { return broker_.DrainWorker(n); }));
  s.Post(R"(/api/v1/workers/([^/]+)/revoke)",
         worker_action("revoke", [this](const std::string& n) { return broker_.RevokeWorker(n); }));
  s.Post(
      R"(/api/v1/workers/([^/]+)/readmit)",
      worker_action("readmit", [this](const std::string& n) { return broker_.ReadmitWorker(n); }));

  s.Get("/api/v1/summary", [this](const httplib::Request&, httplib::Response& res) {
    auto sum = store_.Summary();
    if (!sum.ok()) return ReplyError(res, sum.status());
    Reply(res, 200, SummaryView(*sum));
  });

  s.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    // Errors raised by cpp-httplib itself (unknown route, oversized or malformed request) get
    // the same JSON error shape as the handlers' own.
    if (!res.body.empty()) return;
    if (res.status == 404) {
      Reply(res, 404,
            {{"error", "no such endpoint: " + req.method + " " + req.path}, {"code", "not_found"}});
    } else if (res.status == 413) {
      Reply(res, 413,
            {{"error", "request body is larger than the limit"}, {"code", "resource_exhausted"}});
    } else {
      Reply(res, res.status,
            {{"error", "malformed HTTP request (HTTP " + std::to_string(res.status) + ")"},
             {"code", "invalid_argument"}});
    }
  });
}

}  // namespace tessera::api
