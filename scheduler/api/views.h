#pragma once
// JSON views of store records, as served by the HTTP API (the shapes are documented in
// docs/api.md and docs/openapi.yaml; the CLI and dashboard read exactly these).

#include <map>
#include <nlohmann/json.hpp>

#include "scheduler/events/farm_alerts.h"
#include "scheduler/store/store.h"
#include "shared/base/wall_time.h"

namespace tessera::api {

// The API's version, the N of /api/vN (in GET /api/v1/summary as api_version).
inline constexpr const char* kApiVersion = "1";

using wall_time::IsoTime;  // times in views are ISO 8601 UTC (shared/base/wall_time.h)
nlohmann::json JobView(const store::JobRecord& job);
nlohmann::json TaskView(const store::TaskRecord& task);
// `gpu_use`: the broker's entry for it (Broker::WorkerGpuUse) while it is connected, else null.
nlohmann::json WorkerView(const store::WorkerRecord& worker,
                          const nlohmann::json& gpu_use = nullptr);
nlohmann::json SummaryView(const store::FarmSummary& summary);
// The farm's active alerts, oldest first: [{"key", "kind", "message", "since"}] ([] for none).
nlohmann::json AlertsView(const events::FarmAlerts* alerts);
nlohmann::json JoinTokenView(const store::JoinTokenRecord& token);
nlohmann::json ApiTokenView(const store::ApiTokenRecord& token);
// Frames [first, first + count) of a job with the state of their parts, from its tasks, and
// output validation's flags: {"job_id", "frame_start", "frame_end", "frames": [{"frame",
// "state", "parts_total", "parts_done", "thumbnail", "flag"}]}.
nlohmann::json FramesView(const store::JobRecord& job, const std::vector<store::TaskRecord>& tasks,
                          const std::map<int, std::string>& flags, int first, int count);

}  // namespace tessera::api
