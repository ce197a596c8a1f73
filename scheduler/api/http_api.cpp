#include "scheduler/api/http_api.h"

#include <httplib.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <tuple>

#include "scheduler/api/dashboard.h"
#include "scheduler/api/metrics.h"
#include "scheduler/api/views.h"
#include "scheduler/assembler/assembler.h"
#include "scheduler/blobs/blob_store.h"
#include "shared/file_io.h"
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
constexpr int kFramesPerPage = 5000;
constexpr int kTasksPerPage = 10000;
// A deleted job's assets stay while a job naming them may be being submitted.
constexpr std::chrono::seconds kBlobGrace{600};
// An idle event stream sends a comment this often, so proxies keep it open and a reader that
// went away is noticed.
constexpr std::chrono::seconds kEventKeepAlive{15};
constexpr int kThreadsKeptForRequests = 4;

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
    case StatusCode::kUnauthenticated:
      return 401;
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

// A whole number in [min, max] from a query parameter or path segment, named `field` in errors.
// `text` as a whole number, every character of it.
std::optional<int64_t> WholeNumber(const std::string& text) {
  try {
    size_t used = 0;
    long long v = std::stoll(text, &used);
    if (used == text.size()) return static_cast<int64_t>(v);
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

StatusOr<int64_t> ParseInt(const std::string& text, const std::string& field, int64_t min,
                           int64_t max) {
  if (std::optional<int64_t> v = WholeNumber(text); v && *v >= min && *v <= max) return *v;
  return Status::InvalidArgument(field + ": expected a whole number in [" + std::to_string(min) +
                                 ", " + std::to_string(max) + "], got '" + text + "'");
}

// The state (of a job or a task) called `name`, if there is one.
template <typename State>
std::optional<State> StateNamed(const std::string& name, const char* (*name_of)(State)) {
  for (State s :
       {State::kQueued, State::kRunning, State::kDone, State::kFailed, State::kCanceled}) {
    if (name == name_of(s)) return s;
  }
  return std::nullopt;
}

// The frames a paged request asks for: ?first=F (default: the job's first) and ?count=N (at
// most kFramesPerPage), clipped to the job's range; [first, last].
StatusOr<std::pair<int, int>> FramePage(const httplib::Request& req, const store::JobRecord& job) {
  int first = job.frame_start;
  int count = kFramesPerPage;
  for (auto [name, value, min, max] :
       {std::tuple{"first", &first, spec::kMinFrame, spec::kMaxFrame},
        std::tuple{"count", &count, 1, kFramesPerPage}}) {
    if (!req.has_param(name)) continue;
    TSR_ASSIGN_OR_RETURN(int64_t v, ParseInt(req.get_param_value(name), name, min, max));
    *value = static_cast<int>(v);
  }
  first = std::max(first, job.frame_start);
  const int last =
      static_cast<int>(std::min<int64_t>(job.frame_end, static_cast<int64_t>(first) + count - 1));
  return std::pair{first, last};
}

StatusOr<int64_t> ParseId(const std::string& text) {
  if (std::optional<int64_t> id = WholeNumber(text); id && *id > 0) return *id;
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
    if (key != "job_yaml" && key != "scene_yaml" && key != "user" && key != "assets") {
      return Status::InvalidArgument("body." + key +
                                     ": unknown field (job_yaml, scene_yaml, user, assets)");
    }
    if (key != "assets" && !value.is_string()) {
      return Status::InvalidArgument("body." + key + ": expected a string");
    }
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
  if (req.contains("assets")) TSR_RETURN_IF_ERROR(spec::SetAssets(req["assets"], &job));
  // Every file the job needs must travel with it.
  for (size_t i = 0; i < job.asset_files.size(); ++i) {
    if (!job.assets.count(job.asset_files[i])) {
      return Status::InvalidArgument("assets[" + std::to_string(i) + "]: '" + job.asset_files[i] +
                                     "' was not uploaded (tessera submit uploads the files a "
                                     "job lists)");
    }
  }
  if (auto plugin = plugin::FindPlugin(job.renderer);
      plugin && plugin::IsBinaryScene(*plugin, job.scene_path)) {
    TSR_ASSIGN_OR_RETURN(std::string name, plugin::CheckSceneName(*plugin, job.scene_path));
    if (!job.assets.count(name)) {
      return Status::InvalidArgument("scene: '" + job.scene_path +
                                     "' is a binary scene; it travels as the asset '" + name +
                                     "', which was not uploaded (tessera submit does)");
    }
  }
  if (job.renderer == spec::kRendererPathTracer) {
    StatusOr<spec::SceneSpec> scene = spec::ParseSceneYaml(job.scene_yaml);
    if (!scene.ok()) return scene.status().WithContext("scene");
    for (const std::string& file : spec::RelativeAssetFiles(*scene)) {
      if (!job.assets.count(file)) {
        return Status::InvalidArgument(
            "scene: the file '" + file +
            "' it names is not among the job's assets (tessera submit uploads the files a scene "
            "names; or give an absolute path on shared storage)");
      }
    }
    TSR_RETURN_IF_ERROR(spec::SplitFrames(&job, scene->width, scene->height, scene->samples));
  } else {
    TSR_RETURN_IF_ERROR(spec::SplitPluginFrames(&job));
  }
  return job;
}

}  // namespace

HttpApi::HttpApi(store::Store& store, broker::Broker& broker, security::ApiAuth& auth,
                 ApiOptions options)
    : store_(store), broker_(broker), auth_(auth), options_(std::move(options)) {}

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

StatusOr<std::string> HttpApi::SharedDirFor(const std::string& dir) const {
  std::error_code ec;
  fs::create_directories(dir, ec);
  fs::path real = fs::canonical(dir, ec);
  if (ec) {
    return Status::InvalidArgument("output.shared_dir: cannot create '" + dir +
                                   "' on the scheduler: " + ec.message());
  }
  for (const std::string& root_text : options_.shared_roots) {
    fs::path root = fs::weakly_canonical(root_text, ec);
    auto [root_end, unused] = std::mismatch(root.begin(), root.end(), real.begin(), real.end());
    if (root_end == root.end()) return real.string();
  }
  return Status::InvalidArgument(
      "output.shared_dir: '" + dir + "' is not inside any of this farm's storage.shared_roots" +
      (options_.shared_roots.empty() ? std::string(" (none are configured)") : std::string()));
}

StatusOr<int> HttpApi::Start() {
  if (!options_.tls_cert_file.empty()) {
    auto tls = std::make_unique<httplib::SSLServer>(options_.tls_cert_file.c_str(),
                                                    options_.tls_key_file.c_str());
    if (!tls->is_valid()) {
      return Status::InvalidArgument(
          "api.tls_cert_file / api.tls_key_file: cannot load the "
          "certificate " +
          options_.tls_cert_file + " with the key " + options_.tls_key_file +
          " (PEM, matching pair?)");
    }
    SSL_CTX_set_min_proto_version(tls->ssl_context(), TLS1_2_VERSION);
    server_ = std::move(tls);
  } else {
    server_ = std::make_unique<httplib::Server>();
  }
  server_->new_task_queue = [n = options_.threads] { return new httplib::ThreadPool(n); };
  // An idle keep-alive connection holds a thread until this runs out, and so does shutdown.
  server_->set_keep_alive_timeout(2);
  server_->set_payload_max_length(
      std::max<size_t>(2 * spec::kMaxSceneBytes, blobs::kMaxUploadPieceBytes) + (1 << 20));
  Routes();
  int port = options_.port;
  if (port == 0) {
    port = server_->bind_to_any_port(options_.host);
    if (port < 0) return Status::Unavailable("cannot bind the API on " + options_.host);
  } else if (!server_->bind_to_port(options_.host, port)) {
    return Status::Unavailable("cannot bind the API on " + options_.host + ":" +
                               std::to_string(port) + " (is the port in use?)");
  }
  history_ = std::make_unique<FarmHistory>(store_, broker_,
                                           std::chrono::seconds(options_.history_interval_s));
  history_->Start();
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  // cpp-httplib ignores stop() until its accept loop runs: wait for it, so Stop() right after
  // Start() cannot hang.
  for (int i = 0; i < 5000 && !server_->is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return port;
}

void HttpApi::Stop() {
  // Event streams wait on the bus: wake them so the server's threads can finish.
  if (options_.events) options_.events->Close();
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
  if (history_) history_->Stop();
}

void HttpApi::Handle(const char* method, const std::string& pattern, security::Role needed,
                     Handler handler) {
  routes_.push_back({method, pattern, needed});
  auto guarded = [this, needed, handler = std::move(handler)](const httplib::Request& req,
                                                              httplib::Response& res) {
    StatusOr<security::Caller> caller = auth_.Authenticate(req.get_header_value("Authorization"));
    if (!caller.ok()) {
      res.set_header("WWW-Authenticate", "Bearer realm=\"tessera\"");
      return ReplyError(res, caller.status());
    }
    if (!caller->may(needed)) {
      return ReplyError(res, Status::PermissionDenied(
                                 std::string("this needs the ") + security::RoleName(needed) +
                                 " role; the token of '" + caller->user + "' has the " +
                                 security::RoleName(caller->role) + " role"));
    }
    handler(req, res, *caller);
  };
  httplib::Server& s = *server_;
  const std::string m = method;
  if (m == "GET") {
    s.Get(pattern, guarded);
  } else if (m == "POST") {
    s.Post(pattern, guarded);
  } else if (m == "PUT") {
    s.Put(pattern, guarded);
  } else {
    s.Delete(pattern, guarded);
  }
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

void HttpApi::Routes() {
  using security::Caller;
  using security::Role;
  using Req = const httplib::Request&;
  using Res = httplib::Response&;
  httplib::Server& s = *server_;

  s.set_exception_handler([](Req, Res res, std::exception_ptr ep) {
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

  // Unauthenticated: liveness for load balancers, and the dashboard page (it asks for a token
  // and sends it with every API call).
  s.Get("/healthz", [](Req, Res res) { Reply(res, 200, {{"status", "ok"}}); });
  ServeDashboard(s);

  Handle("GET", "/api/v1/whoami", Role::kViewer, [this](Req, Res res, const Caller& c) {
    Reply(res, 200,
          {{"user", c.user},
           {"role", security::RoleName(c.role)},
           {"token_id", c.token_id},
           {"auth", auth_.enabled() ? "token" : "none"}});
  });

  // ---- jobs -------------------------------------------------------------------------------
  Handle("POST", "/api/v1/jobs", Role::kSubmitter, [this](Req req, Res res, const Caller& c) {
    std::string job_yaml;
    StatusOr<spec::JobSpec> job = ParseSubmission(req.body, &job_yaml);
    if (job.ok()) {
      for (const auto& [path, hash] : job->assets) {
        if (options_.blobs != nullptr) options_.blobs->Touch(hash);
        if (options_.blobs == nullptr || !options_.blobs->Size(hash).ok()) {
          job = Status::InvalidArgument("assets[" + path + "]: blob " + hash +
                                        " is not stored; upload it first (PUT /api/v1/blobs/" +
                                        hash + ")");
          break;
        }
      }
    }
    if (!job.ok()) {
      spdlog::info("rejected submission: {}", job.status().message());
      return ReplyError(res, job.status());
    }
    // A submitter submits as itself; operators may submit on behalf of anyone.
    if (auth_.enabled()) {
      if (!c.may(Role::kOperator) && !job->user.empty() && job->user != c.user) {
        return ReplyError(res, Status::PermissionDenied("user: this token submits as '" + c.user +
                                                        "', not '" + job->user + "'"));
      }
      if (!c.may(Role::kOperator) || job->user.empty()) job->user = c.user;
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
    if (!job->output.shared_dir.empty()) {
      StatusOr<std::string> shared = SharedDirFor(job->output.shared_dir);
      if (!shared.ok()) return ReplyError(res, shared.status());
      job->output.shared_dir = *shared;
    }
    StatusOr<store::JobRecord> rec = store_.CreateJob(*job, job_yaml, [&](int64_t id) {
      if (!job->output.shared_dir.empty()) return StatusOr<std::string>(job->output.shared_dir);
      return OutputDirFor(job->output.directory, job->name, id);
    });
    if (!rec.ok()) return ReplyError(res, rec.status());
    broker_.JobSubmitted(rec->id);
    spdlog::info("job {} '{}' submitted by {}: frames {}-{}, {} tasks, output {}", rec->id,
                 rec->name, rec->user, rec->frame_start, rec->frame_end, rec->tasks.total,
                 rec->output_dir);
    Reply(res, 201, {{"job", JobView(*rec)}});
  });

  // ---- blobs: content-addressed job assets, uploaded in resumable pieces ---------------------
  Handle("GET", "/api/v1/blobs/([0-9a-f]{64})", Role::kSubmitter,
         [this](Req req, Res res, const Caller&) {
           if (options_.blobs == nullptr) {
             return ReplyError(res, Status::Unavailable("this scheduler keeps no blobs"));
           }
           const std::string hash = req.matches[1];
           if (StatusOr<int64_t> size = options_.blobs->Size(hash); size.ok()) {
             return Reply(res, 200, {{"hash", hash}, {"complete", true}, {"size", *size}});
           }
           Reply(
               res, 200,
               {{"hash", hash}, {"complete", false}, {"received", options_.blobs->Received(hash)}});
         });
  Handle(
      "PUT", "/api/v1/blobs/([0-9a-f]{64})", Role::kSubmitter,
      [this](Req req, Res res, const Caller&) {
        if (options_.blobs == nullptr) {
          return ReplyError(res, Status::Unavailable("this scheduler keeps no blobs"));
        }
        const std::string hash = req.matches[1];
        std::optional<int64_t> offset = WholeNumber(req.get_param_value("offset"));
        std::optional<int64_t> total = WholeNumber(req.get_param_value("total"));
        if (!offset) {
          return ReplyError(res, Status::InvalidArgument("offset: required, a whole number"));
        }
        if (!total) {
          return ReplyError(res, Status::InvalidArgument("total: required, a whole number"));
        }
        StatusOr<blobs::BlobStore::Progress> progress =
            options_.blobs->Write(hash, *offset, *total, req.body);
        if (!progress.ok()) return ReplyError(res, progress.status());
        Reply(res, progress->complete ? 201 : 200,
              {{"hash", hash}, {"complete", progress->complete}, {"received", progress->received}});
      });

  // Lists page by keyset: a full page says where the next one starts (next_before / next_after).
  Handle("GET", "/api/v1/jobs", Role::kViewer, [this](Req req, Res res, const Caller&) {
    store::Store::JobFilter filter;
    if (req.has_param("state")) {
      std::string want = req.get_param_value("state");
      // The states a job view shows: a paused job that is not finished reads "paused".
      filter.state = StateNamed(want, store::JobStateName);
      if (want == "paused") filter.paused = true;
      if (want == "queued" || want == "running") filter.paused = false;
      if (!filter.state && want != "paused") {
        return ReplyError(res,
                          Status::InvalidArgument(
                              "state: '" + want +
                              "' is not one of queued, running, paused, done, failed, canceled"));
      }
    }
    if (req.has_param("limit")) {
      StatusOr<int64_t> limit = ParseInt(req.get_param_value("limit"), "limit", 1, 10000);
      if (!limit.ok()) return ReplyError(res, limit.status());
      filter.limit = static_cast<int>(*limit);
    }
    if (req.has_param("before")) {
      StatusOr<int64_t> before =
          ParseInt(req.get_param_value("before"), "before", 1, std::numeric_limits<int64_t>::max());
      if (!before.ok()) return ReplyError(res, before.status());
      filter.before = *before;
    }
    filter.user = req.get_param_value("user");
    filter.project = req.get_param_value("project");
    auto jobs = store_.ListJobs(filter);
    if (!jobs.ok()) return ReplyError(res, jobs.status());
    json out = json::array();
    for (const auto& j : *jobs) out.push_back(JobView(j));
    json reply = {{"jobs", out}};
    if (static_cast<int>(jobs->size()) == filter.limit) reply["next_before"] = jobs->back().id;
    Reply(res, 200, reply);
  });

  // Handlers for /api/v1/{jobs,tasks,tokens}/{id}...: the id parsed, the caller checked.
  using IdHandler = std::function<void(Req, Res, const Caller&, int64_t)>;
  auto with_id = [](IdHandler handler) -> Handler {
    return [handler = std::move(handler)](Req req, Res res, const Caller& c) {
      auto id = ParseId(req.matches[1]);
      if (!id.ok()) return ReplyError(res, id.status());
      handler(req, res, c, *id);
    };
  };
  // A job operation: the caller must own the job (or be an operator); answers with the job as
  // it now stands, plus `extra`.
  using JobOperation = std::function<StatusOr<json>(Req, int64_t)>;
  auto job_operation = [this, with_id](JobOperation operation) -> Handler {
    return with_id(
        [this, operation = std::move(operation)](Req req, Res res, const Caller& c, int64_t id) {
          if (Status st = MayOperateOn(c, id); !st.ok()) return ReplyError(res, st);
          StatusOr<json> extra = operation(req, id);
          if (!extra.ok()) return ReplyError(res, extra.status());
          auto job = store_.GetJob(id);
          if (!job.ok()) return ReplyError(res, job.status());
          (*extra)["job"] = JobView(*job);
          Reply(res, 200, *extra);
        });
  };
  auto done = [](const Status& st) -> StatusOr<json> {
    if (!st.ok()) return st;
    return json::object();
  };
  auto requeued = [](const StatusOr<int>& moved) -> StatusOr<json> {
    if (!moved.ok()) return moved.status();
    return json{{"tasks_requeued", *moved}};
  };

  Handle("GET", R"(/api/v1/jobs/([^/]+))", Role::kViewer,
         with_id([this](Req, Res res, const Caller&, int64_t id) {
           auto job = store_.GetJob(id);
           if (!job.ok()) return ReplyError(res, job.status());
           json view = JobView(*job);
           // The autoscaler's forecast for a job with a deadline.
           std::optional<json> forecast =
               options_.autoscaler ? options_.autoscaler->ForecastFor(id) : std::nullopt;
           view["forecast_finish"] = forecast ? (*forecast)["finish"] : json(nullptr);
           Reply(res, 200, {{"job", std::move(view)}});
         }));
  Handle(
      "GET", R"(/api/v1/jobs/([^/]+)/tasks)", Role::kViewer,
      with_id([this](Req req, Res res, const Caller&, int64_t id) {
        auto job = store_.GetJob(id);
        if (!job.ok()) return ReplyError(res, job.status());
        store::Store::TaskFilter filter;
        filter.limit = kTasksPerPage;
        if (req.has_param("state")) {
          const std::string want = req.get_param_value("state");
          filter.state = StateNamed(want, store::TaskStateName);
          if (!filter.state) {
            return ReplyError(res, Status::InvalidArgument(
                                       "state: '" + want +
                                       "' is not one of queued, running, done, failed, canceled"));
          }
        }
        for (auto [name, value, max] :
             {std::tuple{"limit", &filter.limit, kTasksPerPage},
              std::tuple{"after", &filter.after_index, std::numeric_limits<int>::max()}}) {
          if (!req.has_param(name)) continue;
          StatusOr<int64_t> v =
              ParseInt(req.get_param_value(name), name, std::string(name) == "limit" ? 1 : 0, max);
          if (!v.ok()) return ReplyError(res, v.status());
          *value = static_cast<int>(*v);
        }
        // The job's counters say when no task is in that state: then there is nothing to look
        // for (a walk over a million tasks to find no failed one would be the slow case).
        const int64_t in_state = filter.state ? job->tasks.in(*filter.state) : job->tasks.total;
        StatusOr<std::vector<store::TaskRecord>> tasks = std::vector<store::TaskRecord>{};
        if (in_state > 0) tasks = store_.ListTasks(id, filter);
        if (!tasks.ok()) return ReplyError(res, tasks.status());
        json out = json::array();
        for (const auto& t : *tasks) out.push_back(TaskView(t));
        json reply = {{"tasks", out}};
        if (static_cast<int>(tasks->size()) == filter.limit) {
          reply["next_after"] = tasks->back().index;
        }
        Reply(res, 200, reply);
      }));
  Handle("POST", R"(/api/v1/jobs/([^/]+)/cancel)", Role::kSubmitter,
         job_operation([this, done](Req, int64_t id) { return done(broker_.CancelJob(id)); }));
  Handle("POST", R"(/api/v1/jobs/([^/]+)/pause)", Role::kSubmitter,
         job_operation(
             [this, done](Req, int64_t id) { return done(broker_.SetJobPaused(id, true)); }));
  Handle("POST", R"(/api/v1/jobs/([^/]+)/resume)", Role::kSubmitter,
         job_operation(
             [this, done](Req, int64_t id) { return done(broker_.SetJobPaused(id, false)); }));
  Handle("POST", R"(/api/v1/jobs/([^/]+)/priority)", Role::kSubmitter,
         job_operation([this, done](Req req, int64_t id) -> StatusOr<json> {
           json body = json::parse(req.body, nullptr, false);
           if (!body.is_object() || !body.contains("priority") ||
               !body["priority"].is_number_integer()) {
             return Status::InvalidArgument("priority: expected a body {\"priority\": 0..100}");
           }
           return done(broker_.SetJobPriority(id, body["priority"].get<int>()));
         }));
  Handle("POST", R"(/api/v1/jobs/([^/]+)/retry)", Role::kSubmitter,
         job_operation([this, requeued](Req, int64_t id) {
           return requeued(broker_.RequeueFinished(id, std::nullopt));
         }));
  Handle("POST", R"(/api/v1/jobs/([^/]+)/rerender)", Role::kSubmitter,
         job_operation([this, requeued](Req req, int64_t id) -> StatusOr<json> {
           json body = json::parse(req.body, nullptr, false);
           if (!body.is_object() || !body.contains("frames") || !body["frames"].is_string()) {
             return Status::InvalidArgument("frames: expected a body {\"frames\": \"A-B\"}");
           }
           int first = 0, last = 0;
           TSR_RETURN_IF_ERROR(spec::ParseFrameRange(body["frames"], &first, &last));
           return requeued(broker_.RequeueFinished(id, std::make_pair(first, last)));
         }));
  Handle("DELETE", R"(/api/v1/jobs/([^/]+))", Role::kSubmitter,
         with_id([this](Req, Res res, const Caller& c, int64_t id) {
           if (Status st = MayOperateOn(c, id); !st.ok()) return ReplyError(res, st);
           StatusOr<store::JobRecord> job = store_.GetJob(id);
           if (Status st = store_.DeleteJob(id); !st.ok()) return ReplyError(res, st);
           spdlog::info("job {} deleted by {}", id, c.user);
           // Its assets go too, unless another job uses them (or one was just submitted with
           // them: the grace period).
           for (const auto& [path, hash] : job.ok() ? job->assets : decltype(job->assets){}) {
             StatusOr<bool> used = store_.BlobInUse(hash);
             if (options_.blobs && used.ok() && !*used &&
                 options_.blobs->RemoveIfIdle(hash, kBlobGrace)) {
               spdlog::info("blob {} ({}) removed with job {}", hash, path, id);
             }
           }
           Reply(res, 200, {{"deleted", id}});
         }));

  Handle("GET", R"(/api/v1/jobs/([^/]+)/frames)", Role::kViewer,
         with_id([this](Req req, Res res, const Caller&, int64_t id) {
           auto job = store_.GetJob(id);
           if (!job.ok()) return ReplyError(res, job.status());
           StatusOr<std::pair<int, int>> page = FramePage(req, *job);
           if (!page.ok()) return ReplyError(res, page.status());
           const auto [first, last] = *page;
           // Only the tasks of these frames: task i holds frame chunk i / parts_per_frame (the
           // store numbers tasks chunk by chunk, part by part), so the page is an index range
           // and a job of a million tasks costs no more than a small one.
           store::Store::TaskFilter filter;
           const int64_t parts = std::max(1, job->parts_per_frame);
           const int64_t chunk = std::max(1, job->chunk_size);
           const int64_t first_chunk = (first - job->frame_start) / chunk;
           const int64_t last_chunk = (last - job->frame_start) / chunk;
           filter.after_index = static_cast<int>(first_chunk * parts - 1);
           filter.limit = static_cast<int>((last_chunk - first_chunk + 1) * parts);
           auto tasks = store_.ListTasks(id, filter);
           if (!tasks.ok()) return ReplyError(res, tasks.status());
           auto flags = store_.FrameFlags(id, first, last);
           if (!flags.ok()) return ReplyError(res, flags.status());
           Reply(res, 200, FramesView(*job, *tasks, *flags, first, last - first + 1));
         }));
  // A job's frame files, for `tessera outputs` and `tessera fetch` (farms without shared
  // storage get their images back through the API).
  Handle("GET", R"(/api/v1/jobs/([^/]+)/outputs)", Role::kViewer,
         with_id([this](Req req, Res res, const Caller&, int64_t id) {
           auto job = store_.GetJob(id);
           if (!job.ok()) return ReplyError(res, job.status());
           StatusOr<std::pair<int, int>> page = FramePage(req, *job);
           if (!page.ok()) return ReplyError(res, page.status());
           const auto [first, last] = *page;
           auto flags = store_.FrameFlags(id, first, last);
           if (!flags.ok()) return ReplyError(res, flags.status());
           json files = json::array();
           for (int frame = first; frame <= last; ++frame) {
             for (const std::string& format : job->output_formats) {
               const std::string name = spec::OutputFileName(job->output_pattern, frame, format);
               std::error_code ec;
               const auto status = fs::symlink_status(fs::path(job->output_dir) / name, ec);
               if (ec || !fs::is_regular_file(status)) continue;
               files.push_back({{"frame", frame},
                                {"name", name},
                                {"format", format},
                                {"size", fs::file_size(fs::path(job->output_dir) / name, ec)}});
               if (flags->count(frame)) files.back()["flag"] = flags->at(frame);
             }
           }
           json reply = {{"job_id", id}, {"files", std::move(files)}};
           if (last < job->frame_end) reply["next_first"] = last + 1;
           Reply(res, 200, reply);
         }));
  Handle("GET", R"(/api/v1/jobs/([^/]+)/outputs/([^/]+))", Role::kViewer,
         with_id([this](Req req, Res res, const Caller&, int64_t id) {
           auto job = store_.GetJob(id);
           if (!job.ok()) return ReplyError(res, job.status());
           const std::string name = req.matches[2];
           // Only a frame file the job wrote, by its plain name: never a hidden file, a folder
           // or a link, so nothing outside the job's output directory can be read.
           std::error_code ec;
           const fs::path path = fs::path(job->output_dir) / name;
           const auto status = fs::symlink_status(path, ec);
           if (name.empty() || name[0] == '.' || ec || !fs::is_regular_file(status)) {
             return ReplyError(res, Status::NotFound("job " + std::to_string(id) +
                                                     " has no output file '" + name + "'"));
           }
           const uintmax_t size = fs::file_size(path, ec);
           auto in = std::make_shared<std::ifstream>(path, std::ios::binary);
           if (ec || !*in) {
             return ReplyError(res, Status::Internal("cannot read " + path.string()));
           }
           const std::string ext = path.extension().string();
           const char* type = ext == ".exr"   ? "image/x-exr"
                              : ext == ".png" ? "image/png"
                              : ext == ".jpg" ? "image/jpeg"
                                              : "image/tiff";  // the formats a job can name
           // Streamed in pieces: a 4K float EXR never sits in memory whole.
           res.set_content_provider(
               static_cast<size_t>(size), type,
               [in](size_t offset, size_t length, httplib::DataSink& sink) {
                 char buf[64 * 1024];
                 in->seekg(static_cast<std::streamoff>(offset));
                 const auto n = static_cast<std::streamsize>(std::min(length, sizeof(buf)));
                 in->read(buf, n);
                 if (in->gcount() <= 0) return false;
                 sink.write(buf, static_cast<size_t>(in->gcount()));
                 return true;
               });
         }));
  Handle("GET", R"(/api/v1/jobs/([^/]+)/frames/(-?[0-9]+)/thumbnail)", Role::kViewer,
         with_id([this](Req req, Res res, const Caller&, int64_t id) {
           auto job = store_.GetJob(id);
           if (!job.ok()) return ReplyError(res, job.status());
           StatusOr<int64_t> frame =
               ParseInt(req.matches[2], "frame", job->frame_start, job->frame_end);
           if (!frame.ok()) return ReplyError(res, frame.status());
           StatusOr<std::string> png = file_io::ReadAll(
               assembler::ThumbnailPath(job->output_dir, static_cast<int>(*frame)));
           if (!png.ok()) {
             return ReplyError(
                 res, Status::NotFound("frame " + std::to_string(*frame) + " of job " +
                                       std::to_string(id) + " has no thumbnail (not written yet)"));
           }
           res.set_header("Cache-Control", "private, max-age=5");
           res.set_content(std::move(*png), "image/png");
         }));

  Handle("GET", R"(/api/v1/tasks/([^/]+)/log)", Role::kViewer,
         with_id([this](Req, Res res, const Caller&, int64_t id) {
           auto task = store_.GetTask(id);
           if (!task.ok()) return ReplyError(res, task.status());
           auto logs = store_.TaskLogs(id);
           if (!logs.ok()) return ReplyError(res, logs.status());
           json attempts = json::array();
           for (const store::TaskLogRecord& l : *logs) {
             attempts.push_back({{"attempt", l.attempt},
                                 {"worker", l.worker_name ? json(*l.worker_name) : json(nullptr)},
                                 {"state", l.outcome},
                                 {"at", IsoTime(l.at_ms)},
                                 {"log", l.log}});
           }
           Reply(res, 200,
                 {{"task_id", id},
                  {"state", store::TaskStateName(task->state)},
                  {"message", task->message},
                  {"attempts", std::move(attempts)}});
         }));

  Handle("GET", "/api/v1/history", Role::kViewer,
         [this](Req, Res res, const Caller&) { Reply(res, 200, history_->View()); });

  // Server-sent events: one thread of the pool per open stream, so their number is capped below
  // the pool's size and the API always has threads left for requests.
  Handle("GET", "/api/v1/events", Role::kViewer, [this](Req req, Res res, const Caller&) {
    events::EventBus* bus = options_.events;
    if (!bus) return ReplyError(res, Status::Unavailable("this scheduler has no event stream"));
    int64_t cursor = bus->last_seq();
    // A reconnecting EventSource sends Last-Event-ID; a script may ask with ?since=SEQ.
    std::string since = req.get_header_value("Last-Event-ID");
    if (req.has_param("since")) since = req.get_param_value("since");
    if (!since.empty()) {
      StatusOr<int64_t> seq = ParseInt(since, "since", 0, std::numeric_limits<int64_t>::max());
      if (!seq.ok()) return ReplyError(res, seq.status());
      cursor = *seq;
    }
    const int max_streams = std::max(1, options_.threads - kThreadsKeptForRequests);
    if (event_streams_.fetch_add(1) >= max_streams) {
      --event_streams_;
      res.set_header("Retry-After", "10");
      return ReplyError(
          res, Status::Unavailable("too many open event streams (" + std::to_string(max_streams) +
                                   "; api.threads sets it); poll the API instead"));
    }
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");  // tell reverse proxies not to buffer the stream
    res.set_chunked_content_provider(
        "text/event-stream",
        [bus, cursor](size_t, httplib::DataSink& sink) mutable {
          events::FarmEvents batch = bus->Since(cursor, kEventKeepAlive);
          if (batch.closed) {
            sink.done();
            return true;
          }
          std::string out;
          if (batch.missed) out += "event: missed\ndata: {}\n\n";
          for (const events::FarmEvent& e : batch.events) {
            out += "id: " + std::to_string(e.seq) + "\nevent: " + e.kind +
                   "\ndata: " + e.data.dump() + "\n\n";
            cursor = e.seq;
          }
          if (out.empty()) out = ": keep-alive\n\n";
          return sink.write(out.data(), out.size());
        },
        [this](bool) { --event_streams_; });
  });

  Handle("GET", R"(/api/v1/tasks/([^/]+)/why)", Role::kViewer,
         with_id([this](Req, Res res, const Caller&, int64_t id) {
           StatusOr<json> why = broker_.Why(id);
           if (!why.ok()) return ReplyError(res, why.status());
           Reply(res, 200, *why);
         }));

  // ---- workers and plugins ----------------------------------------------------------------
  Handle("GET", "/api/v1/workers", Role::kViewer, [this](Req, Res res, const Caller&) {
    auto workers = store_.ListWorkers();
    if (!workers.ok()) return ReplyError(res, workers.status());
    json out = json::array();
    for (const auto& w : *workers) out.push_back(WorkerView(w));
    Reply(res, 200, {{"workers", out}});
  });

  Handle("GET", "/api/v1/plugins", Role::kViewer, [this](Req, Res res, const Caller&) {
    StatusOr<json> workers = broker_.WorkerPlugins();
    if (!workers.ok()) return ReplyError(res, workers.status());
    json known = json::array();
    std::vector<plugin::PluginSpec> specs = plugin::BuiltinPlugins();
    for (plugin::PluginSpec& p : plugin::RegisteredNativePlugins()) specs.push_back(std::move(p));
    for (const plugin::PluginSpec& p : specs) {
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
                       {"kind", p.native ? "native" : "program"},
                       {"tiles", p.tiles},
                       {"sample_parts", p.sample_parts},
                       {"settings", settings}});
      if (p.native) known.back()["declaration"] = p.declaration;
    }
    (*workers)["plugins"] = known;
    Reply(res, 200, *workers);
  });

  auto worker_action = [this](const char* action,
                              std::function<Status(const std::string&)> operation) -> Handler {
    return [action, operation = std::move(operation)](Req req, Res res, const Caller& c) {
      const std::string name = req.matches[1];
      if (Status st = operation(name); !st.ok()) return ReplyError(res, st);
      spdlog::info("worker {}: {} by {}", name, action, c.user);
      Reply(res, 200, {{"worker", name}, {"action", action}});
    };
  };
  Handle("POST", R"(/api/v1/workers/([^/]+)/drain)", Role::kOperator,
         worker_action("drain", [this](const std::string& n) { return broker_.DrainWorker(n); }));
  Handle("POST", R"(/api/v1/workers/([^/]+)/revoke)", Role::kOperator,
         worker_action("revoke", [this](const std::string& n) { return broker_.RevokeWorker(n); }));
  Handle("POST", R"(/api/v1/workers/([^/]+)/disable)", Role::kOperator,
         worker_action("disable", [this](const std::string& n) {
           return broker_.SetWorkerDisabled(n, true);
         }));
  Handle("POST", R"(/api/v1/workers/([^/]+)/enable)", Role::kOperator,
         worker_action("enable", [this](const std::string& n) {
           return broker_.SetWorkerDisabled(n, false);
         }));
  Handle("GET", R"(/api/v1/workers/([^/]+))", Role::kViewer,
         [this](Req req, Res res, const Caller&) {
           const std::string name = req.matches[1];
           auto workers = store_.ListWorkers();
           if (!workers.ok()) return ReplyError(res, workers.status());
           for (const store::WorkerRecord& w : *workers) {
             if (w.name == name) return Reply(res, 200, {{"worker", WorkerView(w)}});
           }
           ReplyError(res, Status::NotFound("no worker named " + name + " has ever registered"));
         });
  Handle(
      "POST", R"(/api/v1/workers/([^/]+)/readmit)", Role::kOperator,
      worker_action("readmit", [this](const std::string& n) { return broker_.ReadmitWorker(n); }));

  // ---- worker join tokens (admin) ---------------------------------------------------------
  auto security_view = [this] {
    return json{{"security", broker_.secure() ? "curve" : "insecure"},
                {"scheduler_public_key", broker_.public_key_hex()}};
  };
  Handle(
      "POST", "/api/v1/join-tokens", Role::kAdmin,
      [this, security_view](Req req, Res res, const Caller& c) {
        json body = req.body.empty() ? json::object() : json::parse(req.body, nullptr, false);
        if (!body.is_object()) {
          return ReplyError(res, Status::InvalidArgument(
                                     "body: expected {\"note\": TEXT, \"ttl_s\": N, \"uses\": N}"));
        }
        for (const auto& [key, value] : body.items()) {
          if (key != "note" && key != "ttl_s" && key != "uses") {
            return ReplyError(res, Status::InvalidArgument("body." + key +
                                                           ": unknown field (note, ttl_s, uses)"));
          }
        }
        const json note = body.value("note", json(""));
        const json ttl = body.value("ttl_s", json(kDefaultJoinTokenTtlS));
        const json uses = body.value("uses", json(0));
        if (!note.is_string()) {
          return ReplyError(res, Status::InvalidArgument("note: expected text"));
        }
        if (!ttl.is_number_integer()) {
          return ReplyError(res,
                            Status::InvalidArgument("ttl_s: expected whole seconds (0: never)"));
        }
        if (!uses.is_number_integer() || uses.get<int64_t>() > 1000000) {
          return ReplyError(res,
                            Status::InvalidArgument("uses: expected 0 (unlimited) .. 1000000"));
        }
        StatusOr<broker::NewJoinToken> created = broker_.CreateJoinToken(
            note.get<std::string>(), ttl.get<int64_t>(), static_cast<int>(uses.get<int64_t>()));
        if (!created.ok()) return ReplyError(res, created.status());
        spdlog::info("join token {} created by {}", created->record.id, c.user);
        json out = security_view();
        out["token"] = created->token;
        out["join_token"] = JoinTokenView(created->record);
        Reply(res, 201, out);
      });
  Handle("GET", "/api/v1/join-tokens", Role::kAdmin,
         [this, security_view](Req, Res res, const Caller&) {
           auto tokens = store_.ListJoinTokens();
           if (!tokens.ok()) return ReplyError(res, tokens.status());
           json out = security_view();
           out["tokens"] = json::array();
           for (const auto& t : *tokens) out["tokens"].push_back(JoinTokenView(t));
           Reply(res, 200, out);
         });
  Handle("POST", R"(/api/v1/join-tokens/([^/]+)/revoke)", Role::kAdmin,
         with_id([this](Req, Res res, const Caller&, int64_t id) {
           auto revoked = broker_.RevokeJoinToken(id);
           if (!revoked.ok()) return ReplyError(res, revoked.status());
           Reply(res, 200, {{"join_token", JoinTokenView(*revoked)}});
         }));

  // ---- API tokens (admin) -----------------------------------------------------------------
  Handle("POST", "/api/v1/tokens", Role::kAdmin, [this](Req req, Res res, const Caller& c) {
    json body = json::parse(req.body, nullptr, false);
    if (!body.is_object()) {
      return ReplyError(res, Status::InvalidArgument(
                                 "body: expected {\"user\": NAME, \"role\": ROLE, \"note\": TEXT, "
                                 "\"ttl_s\": N}"));
    }
    for (const auto& [key, value] : body.items()) {
      if (key != "user" && key != "role" && key != "note" && key != "ttl_s") {
        return ReplyError(res, Status::InvalidArgument(
                                   "body." + key + ": unknown field (user, role, note, ttl_s)"));
      }
    }
    const json user = body.value("user", json(nullptr));
    const json role = body.value("role", json(nullptr));
    const json note = body.value("note", json(""));
    const json ttl = body.value("ttl_s", json(0));
    if (!user.is_string()) return ReplyError(res, Status::InvalidArgument("user: required text"));
    std::optional<security::Role> parsed =
        role.is_string() ? security::ParseRole(role.get<std::string>()) : std::nullopt;
    if (!parsed) {
      return ReplyError(
          res, Status::InvalidArgument("role: expected viewer, submitter, operator or admin"));
    }
    if (!note.is_string()) return ReplyError(res, Status::InvalidArgument("note: expected text"));
    if (!ttl.is_number_integer()) {
      return ReplyError(res, Status::InvalidArgument("ttl_s: expected whole seconds (0: never)"));
    }
    StatusOr<security::NewApiToken> created =
        auth_.Create(user.get<std::string>(), *parsed, note.get<std::string>(), ttl.get<int64_t>());
    if (!created.ok()) return ReplyError(res, created.status());
    spdlog::info("API token {} ({} {}) created by {}", created->record.id, created->record.role,
                 created->record.user, c.user);
    Reply(res, 201, {{"token", created->token}, {"api_token", ApiTokenView(created->record)}});
  });
  Handle("GET", "/api/v1/tokens", Role::kAdmin, [this](Req, Res res, const Caller&) {
    auto tokens = auth_.List();
    if (!tokens.ok()) return ReplyError(res, tokens.status());
    json out = json::array();
    for (const auto& t : *tokens) out.push_back(ApiTokenView(t));
    Reply(res, 200, {{"auth", auth_.enabled() ? "token" : "none"}, {"tokens", out}});
  });
  Handle("POST", R"(/api/v1/tokens/([^/]+)/revoke)", Role::kAdmin,
         with_id([this](Req, Res res, const Caller& c, int64_t id) {
           auto revoked = auth_.Revoke(id);
           if (!revoked.ok()) return ReplyError(res, revoked.status());
           spdlog::info("API token {} revoked by {}", id, c.user);
           Reply(res, 200, {{"api_token", ApiTokenView(*revoked)}});
         }));

  Handle("GET", "/api/v1/summary", Role::kViewer, [this](Req, Res res, const Caller&) {
    auto sum = store_.Summary();
    if (!sum.ok()) return ReplyError(res, sum.status());
    json view = SummaryView(*sum);
    // Tasks finished per minute over the last history interval.
    const json latest = history_->Latest();
    view["throughput_per_min"] = latest.is_object() ? latest["throughput_per_min"] : json(0.0);
    Reply(res, 200, view);
  });

  Handle("GET", "/api/v1/autoscaler", Role::kViewer, [this](Req, Res res, const Caller&) {
    Reply(res, 200,
          options_.autoscaler ? options_.autoscaler->Describe()
                              : json{{"enabled", false}, {"groups", json::array()}});
  });
  Handle("GET", "/api/v1/costs", Role::kViewer, [this](Req req, Res res, const Caller&) {
    int64_t days = 30;
    if (req.has_param("days")) {
      auto parsed = ParseInt(req.get_param_value("days"), "days", 1, 366);
      if (!parsed.ok()) return ReplyError(res, parsed.status());
      days = *parsed;
    }
    auto rows = store_.CostDays(static_cast<int>(days));
    if (!rows.ok()) return ReplyError(res, rows.status());
    json out = json::array();
    double total = 0;
    for (const store::CostDay& d : *rows) {
      out.push_back({{"day", d.day}, {"cost", d.cost}, {"gpu_seconds", d.gpu_seconds}});
      total += d.cost;
    }
    Reply(res, 200, {{"days", std::move(out)}, {"total", total}});
  });

  // Prometheus scrapes with a viewer token (authorization: credentials_file in its config).
  Handle("GET", "/metrics", Role::kViewer, [this](Req, Res res, const Caller&) {
    res.set_content(RenderMetrics(store_, broker_), "text/plain; version=0.0.4; charset=utf-8");
  });

  s.set_error_handler([](Req req, Res res) {
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
