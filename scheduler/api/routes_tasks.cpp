#include <filesystem>
#include <nlohmann/json.hpp>

#include "scheduler/api/http_api.h"
#include "scheduler/api/reply.h"
#include "scheduler/api/views.h"

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

  Handle("GET", R"(/api/v1/tasks/([^/]+)/why)", Role::kViewer,
         WithId([this](Req, Res res, const Caller&, int64_t id) {
           StatusOr<json> why = broker_.Why(id);
           if (!why.ok()) return ReplyError(res, why.status());
           Reply(res, 200, *why);
         }));
}

}  // namespace tessera::api
