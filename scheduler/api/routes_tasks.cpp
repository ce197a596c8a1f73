#include <filesystem>
#include <nlohmann/json.hpp>

#include "scheduler/api/http_api.h"
#include "scheduler/api/reply.h"
#include "scheduler/api/views.h"
#include "scheduler/broker/broker.h"

namespace tessera::api {

namespace fs = std::filesystem;
using nlohmann::json;
using security::Caller;
using security::Role;

void HttpApi::TaskRoutes() {
  Handle("GET", R"(/api/v1/tasks/([^/]+)/log)", Role::kViewer,
         WithId([this](Req, Res res, const Caller&, int64_t id) {
           auto task = store_.GetTask(id);
           if (!task.ok()) return ReplyError(res, task.status());
           auto logs = store_.TaskLogs(id);
           if (!logs.ok()) return ReplyError(res, logs.status());
           json attempts = json::array();
           auto time = [](const std::optional<int64_t>& ms) {
             return ms ? json(IsoTime(*ms)) : json(nullptr);
           };
           for (const store::TaskLogRecord& l : *logs) {
             // `state` is the outcome under its older name, for clients that read it.
             attempts.push_back({{"attempt", l.attempt},
                                 {"worker", l.worker_name ? json(*l.worker_name) : json(nullptr)},
                                 {"outcome", l.outcome},
                                 {"state", l.outcome},
                                 {"failure_class",
                                  l.failure_class.empty() ? json(nullptr) : json(l.failure_class)},
                                 {"message", l.message},
                                 {"charged", l.charged ? json(*l.charged) : json(nullptr)},
                                 {"gpus", l.gpus},
                                 {"started_at", time(l.started_at_ms)},
                                 {"ended_at", time(l.ended_at_ms)},
                                 {"at", IsoTime(l.at_ms)},
                                 {"log", l.log}});
           }
           Reply(res, 200,
                 {{"task_id", id},
                  {"state", store::TaskStateName(task->state)},
                  {"message", task->message},
                  {"failures", task->failures},
                  {"failures_total", task->failures_total},
                  {"attempts", std::move(attempts)}});
         }));

  Handle("GET", R"(/api/v1/tasks/([^/]+)/why)", Role::kViewer,
         WithId([this](Req, Res res, const Caller&, int64_t id) {
           StatusOr<json> why = broker_.Why(id);
           if (!why.ok()) return ReplyError(res, why.status());
           Reply(res, 200, *why);
         }));
}

}  // namespace tessera::api
