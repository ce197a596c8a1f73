#include <spdlog/spdlog.h>

#include <filesystem>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "scheduler/api/http_api.h"
#include "scheduler/api/idempotent_posts.h"
#include "scheduler/api/reply.h"
#include "scheduler/api/submission.h"
#include "scheduler/api/views.h"
#include "scheduler/blobs/blob_store.h"
#include "scheduler/broker/broker.h"
#include "shared/jobs/job_file.h"

namespace tessera::api {

namespace fs = std::filesystem;
using nlohmann::json;
using security::Caller;
using security::Role;

namespace {

constexpr int kTasksPerPage = 10000;
// A deleted job's assets stay while a job naming them may be being submitted.
constexpr std::chrono::seconds kBlobGrace{600};

// A job as `caller` may see it: where its files lie on the scheduler's disks is shown to its
// owner and to operators; other viewers see the folder relative to the output root (or only
// its name, for shared storage).
json JobViewFor(const store::JobRecord& job, const Caller& caller, const std::string& root) {
  json view = JobView(job);
  if (caller.owns(job.user)) return view;
  const fs::path dir(job.output_dir);
  std::error_code ec;
  const fs::path relative = fs::weakly_canonical(dir, ec).lexically_relative(
      fs::weakly_canonical(root.empty() ? fs::path("/") : fs::path(root), ec));
  const bool inside = !relative.empty() && *relative.begin() != "..";
  view["output_dir"] = inside ? relative.string() : dir.filename().string();
  return view;
}

// ?dry_run=true: every check a submission passes, and what it would create; nothing stored.
StatusOr<bool> DryRunRequested(const http::Request& req) {
  if (!req.HasParam("dry_run")) return false;
  const std::string dry = req.Param("dry_run");
  if (dry != "true" && dry != "false") {
    return Status::InvalidArgument("dry_run: expected true or false, got '" + dry.substr(0, 16) +
                                   "'");
  }
  return dry == "true";
}

// A retried submission (Idempotency-Key) gets the job its first try created: true when `res`
// was answered so (or with why it cannot be), false when `key` created nothing yet.
bool ReplayedSubmission(store::Store& store, const std::optional<store::IdempotentRequest>& key,
                        http::Response& res) {
  if (!key) return false;
  StatusOr<std::optional<store::IdempotentRequest>> earlier = EarlierRequest(store, *key);
  if (!earlier.ok()) {
    IsKeyMismatch(earlier.status()) ? ReplyKeyMismatch(res, earlier.status())
                                    : ReplyError(res, earlier.status());
    return true;
  }
  if (!*earlier) return false;
  StatusOr<store::JobRecord> first = store.GetJob((*earlier)->resource_id);
  if (!first.ok()) {
    ReplyError(res, Status::FailedPrecondition("Idempotency-Key '" + key->key + "' created job " +
                                               std::to_string((*earlier)->resource_id) +
                                               ", which was deleted since"));
    return true;
  }
  res.SetHeader("Idempotent-Replayed", "true");
  Reply(res, 201, {{"job", JobView(*first)}});
  return true;
}

// GET /api/v1/jobs's query: ?state, ?limit, ?before (keyset paging), ?user, ?project, ?steps.
StatusOr<store::Store::JobFilter> JobFilterOf(const http::Request& req) {
  store::Store::JobFilter filter;
  if (req.HasParam("state")) {
    std::string want = req.Param("state");
    // The states a job view shows: a paused job that is not finished reads "paused".
    filter.state = StateNamed(want, store::JobStateName);
    if (want == "paused") filter.paused = true;
    if (want == "queued" || want == "running") filter.paused = false;
    if (!filter.state && want != "paused") {
      return Status::InvalidArgument(
          "state: '" + want + "' is not one of queued, running, paused, done, failed, canceled");
    }
  }
  if (req.HasParam("limit")) {
    TSR_ASSIGN_OR_RETURN(const int64_t limit, ParseInt(req.Param("limit"), "limit", 1, 10000));
    filter.limit = static_cast<int>(limit);
  }
  if (req.HasParam("before")) {
    TSR_ASSIGN_OR_RETURN(filter.before, ParseInt(req.Param("before"), "before", 1,
                                                 std::numeric_limits<int64_t>::max()));
  }
  filter.user = req.Param("user");
  filter.project = req.Param("project");
  // A job with steps is listed once; its steps with ?steps=true (or under the job).
  filter.steps = req.Param("steps") == "true";
  return filter;
}

// GET /api/v1/jobs/{id}/tasks's query: ?state, ?limit, ?after (keyset paging by task index).
StatusOr<store::Store::TaskFilter> TaskFilterOf(const http::Request& req) {
  store::Store::TaskFilter filter;
  filter.limit = kTasksPerPage;
  if (req.HasParam("state")) {
    const std::string want = req.Param("state");
    filter.state = StateNamed(want, store::TaskStateName);
    if (!filter.state) {
      return Status::InvalidArgument("state: '" + want +
                                     "' is not one of queued, running, done, failed, canceled");
    }
  }
  for (auto [name, value, max] :
       {std::tuple{"limit", &filter.limit, kTasksPerPage},
        std::tuple{"after", &filter.after_index, std::numeric_limits<int>::max()}}) {
    if (!req.HasParam(name)) continue;
    TSR_ASSIGN_OR_RETURN(const int64_t v, ParseInt(req.Param(name), name,
                                                   std::string(name) == "limit" ? 1 : 0, max));
    *value = static_cast<int>(v);
  }
  return filter;
}

// The blobs a job and its steps (an encode step's input frames) name: hash -> a path naming it.
std::map<std::string, std::string> BlobsOfJob(store::Store& store, int64_t id) {
  std::map<std::string, std::string> blobs;
  StatusOr<store::JobRecord> job = store.GetJob(id);
  if (!job.ok()) return blobs;
  std::vector<store::JobRecord> jobs = {*job};
  StatusOr<std::vector<store::JobRecord>> steps =
      job->has_steps() ? store.PipelineSteps(id) : std::vector<store::JobRecord>{};
  if (steps.ok()) jobs.insert(jobs.end(), steps->begin(), steps->end());
  for (const store::JobRecord& j : jobs) {
    for (const auto& [path, hash] : j.assets) blobs.emplace(hash, path);
  }
  return blobs;
}

// A job operation's body {"priority": 0..100}.
StatusOr<int> PriorityOf(const std::string& body_text) {
  json body = json::parse(body_text, nullptr, false);
  if (!body.is_object() || !body.contains("priority") || !body["priority"].is_number_integer()) {
    return Status::InvalidArgument("priority: expected a body {\"priority\": 0..100}");
  }
  return body["priority"].get<int>();
}

// A job operation's body {"frames": "A-B"}: the frames first to last.
StatusOr<std::pair<int, int>> FramesOf(const std::string& body_text) {
  json body = json::parse(body_text, nullptr, false);
  if (!body.is_object() || !body.contains("frames") || !body["frames"].is_string()) {
    return Status::InvalidArgument("frames: expected a body {\"frames\": \"A-B\"}");
  }
  int first = 0, last = 0;
  TSR_RETURN_IF_ERROR(spec::ParseFrameRange(body["frames"], &first, &last));
  return std::make_pair(first, last);
}

// What a job operation adds to the job it answers with.
StatusOr<json> NothingToAdd(const Status& st) {
  if (!st.ok()) return st;
  return json::object();
}
StatusOr<json> Requeued(const StatusOr<int>& moved) {
  if (!moved.ok()) return moved.status();
  return json{{"tasks_requeued", *moved}};
}

}  // namespace

void HttpApi::JobRoutes() {
  Handle("POST", "/api/v1/jobs", Role::kSubmitter,
         [this](Req req, Res res, const Caller& c) { PostJob(req, res, c); });
  // Lists page by keyset: a full page says where the next one starts (next_before / next_after).
  Handle("GET", "/api/v1/jobs", Role::kViewer,
         [this](Req req, Res res, const Caller& c) { ListJobs(req, res, c); });
  Handle("GET", R"(/api/v1/jobs/([^/]+))", Role::kViewer,
         WithId([this](Req, Res res, const Caller& c, int64_t id) { GetJob(res, c, id); }));
  Handle(
      "GET", R"(/api/v1/jobs/([^/]+)/tasks)", Role::kViewer,
      WithId([this](Req req, Res res, const Caller&, int64_t id) { ListJobTasks(req, res, id); }));

  // A job operation: the caller must own the job (or be an operator); answers with the job as
  // it now stands, plus what the operation adds.
  using JobOperation = std::function<StatusOr<json>(Req, int64_t)>;
  auto job_operation = [this](JobOperation operation) -> Handler {
    return WithId(
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
  Handle("POST", R"(/api/v1/jobs/([^/]+)/cancel)", Role::kSubmitter,
         job_operation([this](Req, int64_t id) { return NothingToAdd(broker_.CancelJob(id)); }));
  Handle("POST", R"(/api/v1/jobs/([^/]+)/pause)", Role::kSubmitter,
         job_operation(
             [this](Req, int64_t id) { return NothingToAdd(broker_.SetJobPaused(id, true)); }));
  Handle("POST", R"(/api/v1/jobs/([^/]+)/resume)", Role::kSubmitter,
         job_operation(
             [this](Req, int64_t id) { return NothingToAdd(broker_.SetJobPaused(id, false)); }));
  Handle("POST", R"(/api/v1/jobs/([^/]+)/priority)", Role::kSubmitter,
         job_operation([this](Req req, int64_t id) -> StatusOr<json> {
           TSR_ASSIGN_OR_RETURN(const int priority, PriorityOf(req.body));
           return NothingToAdd(broker_.SetJobPriority(id, priority));
         }));
  Handle("POST", R"(/api/v1/jobs/([^/]+)/retry)", Role::kSubmitter,
         job_operation([this](Req, int64_t id) {
           return Requeued(broker_.RequeueFinished(id, std::nullopt));
         }));
  Handle("POST", R"(/api/v1/jobs/([^/]+)/rerender)", Role::kSubmitter,
         job_operation([this](Req req, int64_t id) -> StatusOr<json> {
           TSR_ASSIGN_OR_RETURN(const auto frames, FramesOf(req.body));
           return Requeued(broker_.RequeueFinished(id, frames));
         }));
  Handle("DELETE", R"(/api/v1/jobs/([^/]+))", Role::kSubmitter,
         WithId([this](Req, Res res, const Caller& c, int64_t id) { DeleteJob(res, c, id); }));
}

void HttpApi::PostJob(Req req, Res res, const Caller& c) {
  SubmitContext ctx{store_,
                    broker_.limits(),
                    options_.blobs,
                    options_.output_root,
                    options_.shared_roots,
                    auth_.enabled(),
                    options_.openjd};
  StatusOr<bool> dry_run = DryRunRequested(req);
  if (!dry_run.ok()) return ReplyError(res, dry_run.status());
  if (*dry_run) {
    StatusOr<CheckedJob> checked = CheckSubmission(ctx, req.body, c, /*dry_run=*/true);
    if (!checked.ok()) return ReplyError(res, checked.status());
    return Reply(res, 200, {{"dry_run", true}, {"job", DryRunView(*checked)}});
  }
  StatusOr<std::optional<store::IdempotentRequest>> key = IdempotencyKeyOf(req, c);
  if (!key.ok()) return ReplyError(res, key.status());
  if (ReplayedSubmission(store_, *key, res)) return;
  if (Status floor = CheckDataFloor(); !floor.ok()) {
    return ReplyError(res, Status::StorageFull("new jobs are refused: " + floor.message()));
  }
  broker::SubmittedJob submitted;
  StatusOr<store::JobRecord> rec =
      SubmitJob(ctx, req.body, c, *key ? &**key : nullptr, nullptr, &submitted);
  if (!rec.ok()) {
    // The same key raced in from a second connection: answer as its replay.
    if (ReplayedSubmission(store_, *key, res)) return;
    spdlog::info("rejected submission from {}: {}", c.user, rec.status().message());
    return ReplyError(res, rec.status());
  }
  // The broker holds the job from what was stored, without reading it back.
  broker_.JobSubmitted(std::move(submitted));
  spdlog::info("job {} '{}' submitted by {}: frames {}-{}, {} tasks, output {}", rec->id, rec->name,
               rec->user, rec->frame_start, rec->frame_end, rec->tasks.total, rec->output_dir);
  Reply(res, 201, {{"job", JobView(*rec)}});
}

void HttpApi::ListJobs(Req req, Res res, const Caller& c) {
  StatusOr<store::Store::JobFilter> filter = JobFilterOf(req);
  if (!filter.ok()) return ReplyError(res, filter.status());
  auto jobs = store_.ListJobs(*filter);
  if (!jobs.ok()) return ReplyError(res, jobs.status());
  json out = json::array();
  for (const auto& j : *jobs) out.push_back(JobViewFor(j, c, options_.output_root));
  json reply = {{"jobs", out}};
  if (static_cast<int>(jobs->size()) == filter->limit) reply["next_before"] = jobs->back().id;
  Reply(res, 200, reply);
}

void HttpApi::GetJob(Res res, const Caller& c, int64_t id) {
  auto job = store_.GetJob(id);
  if (!job.ok()) return ReplyError(res, job.status());
  json view = JobViewFor(*job, c, options_.output_root);
  // The autoscaler's forecast for a job with a deadline.
  std::optional<json> forecast =
      options_.autoscaler ? options_.autoscaler->ForecastFor(id) : std::nullopt;
  view["forecast_finish"] = forecast ? (*forecast)["finish"] : json(nullptr);
  if (job->has_steps()) {
    auto steps = store_.PipelineSteps(id);
    if (!steps.ok()) return ReplyError(res, steps.status());
    view["steps"] = json::array();
    for (const auto& step : *steps) view["steps"].push_back(JobView(step));
  }
  Reply(res, 200, {{"job", std::move(view)}});
}

void HttpApi::ListJobTasks(Req req, Res res, int64_t id) {
  auto job = store_.GetJob(id);
  if (!job.ok()) return ReplyError(res, job.status());
  StatusOr<store::Store::TaskFilter> filter = TaskFilterOf(req);
  if (!filter.ok()) return ReplyError(res, filter.status());
  // The job's counters say when no task is in that state: then there is nothing to look for (a
  // walk over a million tasks to find no failed one would be the slow case).
  const int64_t in_state = filter->state ? job->tasks.in(*filter->state) : job->tasks.total;
  StatusOr<std::vector<store::TaskRecord>> tasks = std::vector<store::TaskRecord>{};
  if (in_state > 0) tasks = store_.ListTasks(id, *filter);
  if (!tasks.ok()) return ReplyError(res, tasks.status());
  json out = json::array();
  for (const auto& t : *tasks) out.push_back(TaskView(t));
  json reply = {{"tasks", out}};
  if (static_cast<int>(tasks->size()) == filter->limit) reply["next_after"] = tasks->back().index;
  Reply(res, 200, reply);
}

void HttpApi::DeleteJob(Res res, const Caller& c, int64_t id) {
  if (Status st = MayOperateOn(c, id); !st.ok()) return ReplyError(res, st);
  // Its assets and its steps' go too, unless another job uses them (or one was just submitted
  // with them: the grace period).
  const std::map<std::string, std::string> blobs = BlobsOfJob(store_, id);
  if (Status st = store_.DeleteJob(id); !st.ok()) return ReplyError(res, st);
  spdlog::info("job {} deleted by {}", id, c.user);
  for (const auto& [hash, path] : blobs) {
    StatusOr<bool> used = store_.BlobInUse(hash);
    if (options_.blobs && used.ok() && !*used && options_.blobs->RemoveIfIdle(hash, kBlobGrace)) {
      spdlog::info("blob {} ({}) removed with job {}", hash, path, id);
    }
  }
  Reply(res, 200, {{"deleted", id}});
}

}  // namespace tessera::api
