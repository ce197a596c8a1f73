#pragma once
// JSON views of store records, as served by the HTTP API (the shapes are documented in the
// README's API section; the CLI and dashboard read exactly these).

#include <nlohmann/json.hpp>

#include "scheduler/store/store.h"

namespace tessera::api {

std::string IsoTime(int64_t unix_ms);
nlohmann::json JobView(const store::JobRecord& job);
nlohmann::json TaskView(const store::TaskRecord& task);
nlohmann::json WorkerView(const store::WorkerRecord& worker);
nlohmann::json SummaryView(const store::FarmSummary& summary);

}  // namespace tessera::api
