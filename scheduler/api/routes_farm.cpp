#include <filesystem>
#include <nlohmann/json.hpp>

#include "scheduler/api/http_api.h"
#include "scheduler/api/prometheus_metrics.h"
#include "scheduler/api/reply.h"
#include "scheduler/api/views.h"

namespace tessera::api {

namespace fs = std::filesystem;
using nlohmann::json;
using security::Caller;
using security::Role;

void HttpApi::FarmRoutes() {
  Handle("GET", "/api/v1/history", Role::kViewer,
         [this](Req, Res res, const Caller&) { Reply(res, 200, history_->View()); });

  Handle("GET", "/api/v1/summary", Role::kViewer, [this](Req, Res res, const Caller&) {
    auto sum = store_.Summary();
    if (!sum.ok()) return ReplyError(res, sum.status());
    json view = SummaryView(*sum);
    // Tasks finished per minute over the last history interval.
    const json latest = history_->Latest();
    view["throughput_per_min"] = latest.is_object() ? latest["throughput_per_min"] : json(0.0);
    view["alerts"] = AlertsView(options_.alerts);
    Reply(res, 200, view);
  });

  Handle("GET", "/api/v1/autoscaler", Role::kViewer, [this](Req, Res res, const Caller&) {
    Reply(res, 200,
          options_.autoscaler ? options_.autoscaler->Describe()
                              : json{{"enabled", false}, {"groups", json::array()}});
  });
  Handle("GET", "/api/v1/costs", Role::kViewer, [this](Req req, Res res, const Caller&) {
    int64_t days = 30;
    if (req.HasParam("days")) {
      auto parsed = ParseInt(req.Param("days"), "days", 1, 366);
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
    res.SetContent(RenderMetrics(store_, broker_, counters(), options_.alerts, options_.webhooks),
                   "text/plain; version=0.0.4; charset=utf-8");
  });
}

}  // namespace tessera::api
