#include <spdlog/spdlog.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "scheduler/api/http_api.h"
#include "scheduler/api/reply.h"
#include "scheduler/api/views.h"
#include "scheduler/broker/broker.h"
#include "shared/openjd/openjd.h"
#include "shared/plugins/plugin_catalog.h"

namespace tessera::api {

namespace fs = std::filesystem;
using nlohmann::json;
using security::Caller;
using security::Role;

namespace {

// What the workers' GPUs hold, or nothing when the broker cannot say (it is stopping): the
// workers are listed either way.
json GpuUseOr(StatusOr<json> gpu_use) {
  return gpu_use.ok() && gpu_use->is_object() ? std::move(gpu_use).value() : json::object();
}

}  // namespace

void HttpApi::WorkerRoutes() {
  Handle("GET", "/api/v1/workers", Role::kViewer, [this](Req, Res res, const Caller&) {
    auto workers = store_.ListWorkers();
    if (!workers.ok()) return ReplyError(res, workers.status());
    const json gpu_use = GpuUseOr(broker_.WorkerGpuUse());
    json out = json::array();
    for (const auto& w : *workers) out.push_back(WorkerView(w, gpu_use.value(w.name, json())));
    Reply(res, 200, {{"workers", out}});
  });

  // The farm's OpenJD environment templates and path mapping rules: what every OpenJD job made
  // here enters and maps (scheduler config openjd:), so a client can check a template as the
  // farm will.
  Handle("GET", "/api/v1/openjd/environments", Role::kViewer, [this](Req, Res res, const Caller&) {
    json environments = json::array();
    std::vector<openjd::PathMappingRule> rules;
    if (options_.openjd != nullptr) {
      for (const OpenJdFarm::Environment& env : options_.openjd->environments) {
        environments.push_back({{"name", env.name}, {"pools", env.pools}, {"template", env.text}});
      }
      rules = options_.openjd->path_mapping;
    }
    Reply(
        res, 200,
        {{"environments", environments}, {"path_mapping", openjd::PathMappingRulesToJson(rules)}});
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
             if (w.name != name) continue;
             const json gpu_use = GpuUseOr(broker_.WorkerGpuUse());
             return Reply(res, 200, {{"worker", WorkerView(w, gpu_use.value(w.name, json()))}});
           }
           ReplyError(res, Status::NotFound("no worker named " + name + " has ever registered"));
         });
  Handle(
      "POST", R"(/api/v1/workers/([^/]+)/readmit)", Role::kOperator,
      worker_action("readmit", [this](const std::string& n) { return broker_.ReadmitWorker(n); }));
}

}  // namespace tessera::api
