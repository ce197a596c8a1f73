#include "scheduler/api/prometheus_metrics.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "scheduler/broker/broker.h"

namespace tessera::api {
namespace {

using Labels = std::vector<std::pair<std::string_view, std::string_view>>;

// Taken while the program loads, before main: the process start time Prometheus expects
// (restarts show as a step, and counter resets are explained by it).
const double kProcessStartSeconds =
    std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();

// The text format's value syntax: integers without a fraction, otherwise the shortest decimal
// that reads back as the same double; NaN and infinities as Prometheus spells them.
std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::trunc(v) && std::fabs(v) < 1e15) return std::to_string(static_cast<int64_t>(v));
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, ec == std::errc() ? end : buf);
}

// Label values escape backslash, double quote and newline; HELP text backslash and newline.
void AppendEscaped(std::string& out, std::string_view text, bool quotes) {
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && quotes) {
      out += "\\\"";
    } else {
      out += c;
    }
  }
}

// Writes one metric family at a time: its HELP and TYPE lines, then its samples.
class Exposition {
 public:
  void Family(std::string_view name, std::string_view type, std::string_view help) {
    out_ += "# HELP ";
    out_ += name;
    out_ += ' ';
    AppendEscaped(out_, help, /*quotes=*/false);
    out_ += "\n# TYPE ";
    out_ += name;
    out_ += ' ';
    out_ += type;
    out_ += '\n';
  }
  void Sample(std::string_view name, double value, const Labels& labels = {}) {
    out_ += name;
    if (!labels.empty()) {
      out_ += '{';
      for (size_t i = 0; i < labels.size(); ++i) {
        if (i > 0) out_ += ',';
        out_ += labels[i].first;
        out_ += "=\"";
        AppendEscaped(out_, labels[i].second, /*quotes=*/true);
        out_ += '"';
      }
      out_ += '}';
    }
    out_ += ' ';
    out_ += FormatValue(value);
    out_ += '\n';
  }
  // A plain comment: why a family is missing from this scrape.
  void Comment(std::string_view text) {
    out_ += "# ";
    AppendEscaped(out_, text, /*quotes=*/false);
    out_ += '\n';
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

// One sample per known state (0 when the store has none), then any state the store holds that
// this build does not know, so no row is ever dropped.
void StateSamples(Exposition& out, std::string_view name, const std::vector<std::string>& known,
                  const std::vector<std::pair<std::string, int64_t>>& by_state) {
  auto count = [&](const std::string& state) {
    int64_t n = 0;
    for (const auto& [s, c] : by_state) n += s == state ? c : 0;
    return n;
  };
  for (const std::string& state : known) {
    out.Sample(name, static_cast<double>(count(state)), {{"state", state}});
  }
  for (const auto& [state, n] : by_state) {
    if (std::find(known.begin(), known.end(), state) == known.end()) {
      out.Sample(name, static_cast<double>(n), {{"state", state}});
    }
  }
}

// Per GPU of each connected worker, its latest telemetry reading (DCGM exporter's figures) and
// its health, labelled {worker, gpu, model}. A figure the GPU does not report has no sample.
void GpuTelemetrySamples(Exposition& out, const nlohmann::json& workers) {
  struct Figure {
    const char* name;
    const char* help;
    const char* key;
    double scale;
  };
  static const Figure kFigures[] = {
      {"tessera_gpu_utilization_percent", "GPU busy time over the last sample period (NVML).",
       "utilization_pct", 1},
      {"tessera_gpu_memory_used_bytes", "GPU memory in use.", "memory_used_mb", 1 << 20},
      {"tessera_gpu_memory_total_bytes", "GPU memory in all.", "memory_total_mb", 1 << 20},
      {"tessera_gpu_temperature_celsius", "GPU core temperature.", "temperature_c", 1},
      {"tessera_gpu_power_watts", "GPU power draw.", "power_w", 1},
      {"tessera_gpu_sm_clock_hertz", "SM clock.", "sm_clock_mhz", 1e6},
      {"tessera_gpu_memory_clock_hertz", "Memory clock.", "memory_clock_mhz", 1e6},
      {"tessera_gpu_ecc_uncorrected_errors", "Uncorrected ECC errors since the driver loaded.",
       "ecc_uncorrected", 1},
      {"tessera_gpu_last_xid", "The latest Xid error the driver reported for the GPU.", "last_xid",
       1},
  };
  auto each_gpu = [&](auto&& fn) {
    for (const auto& [worker, entry] : workers.items()) {
      for (const nlohmann::json& gpu : entry.value("gpus", nlohmann::json::array())) {
        const std::string index = std::to_string(gpu.value("index", 0));
        const std::string model = gpu.value("name", "");
        fn(gpu, Labels{{"worker", worker}, {"gpu", index}, {"model", model}});
      }
    }
  };
  out.Family("tessera_gpu_healthy", "gauge",
             "1 while the GPU's telemetry reports no fault (a critical Xid, uncorrected ECC "
             "errors, lost); 0 while it takes no new tasks for one.");
  each_gpu([&](const nlohmann::json& gpu, const Labels& labels) {
    out.Sample("tessera_gpu_healthy", gpu.value("fault", "").empty() ? 1 : 0, labels);
  });
  for (const Figure& f : kFigures) {
    out.Family(f.name, "gauge", f.help);
    each_gpu([&](const nlohmann::json& gpu, const Labels& labels) {
      const nlohmann::json& t = gpu.contains("telemetry") ? gpu["telemetry"] : nlohmann::json();
      if (t.is_object() && t.contains(f.key) && t[f.key].is_number()) {
        out.Sample(f.name, t[f.key].get<double>() * f.scale, labels);
      }
    });
  }
}

// The build and when this process started.
void ProcessSamples(Exposition& out) {
  out.Family("tessera_build_info", "gauge", "Tessera scheduler build; the value is always 1.");
  out.Sample("tessera_build_info", 1, {{"version", TESSERA_VERSION}});
  out.Family("process_start_time_seconds", "gauge",
             "Start time of the scheduler process since the Unix epoch, in seconds.");
  out.Sample("process_start_time_seconds", kProcessStartSeconds);
}

// The farm-level alerts active now (none without an alert list).
void AlertSamples(Exposition& out, const events::FarmAlerts* alerts) {
  const std::vector<events::FarmAlert> active =
      alerts != nullptr ? alerts->List() : std::vector<events::FarmAlert>{};
  out.Family("tessera_alerts_active", "gauge",
             "Farm-level alerts active now (a full outputs or data filesystem, ...).");
  out.Sample("tessera_alerts_active", static_cast<double>(active.size()));
  out.Family("tessera_alert_active", "gauge", "1 for each farm-level alert active now.");
  for (const events::FarmAlert& alert : active) {
    out.Sample("tessera_alert_active", 1, {{"kind", alert.kind}, {"key", alert.key}});
  }
}

// Each webhook receiver's deliveries.
void WebhookSamples(Exposition& out, const events::WebhookNotifier& webhooks) {
  const auto counts = webhooks.counts();
  out.Family("tessera_webhook_deliveries_total", "counter",
             "Events a webhook receiver acknowledged (2xx).");
  for (const auto& [receiver, c] : counts) {
    out.Sample("tessera_webhook_deliveries_total", static_cast<double>(c.delivered),
               {{"receiver", receiver}});
  }
  out.Family("tessera_webhook_failed_attempts_total", "counter",
             "Deliveries that failed (receiver down, slow or not 2xx) and were retried.");
  for (const auto& [receiver, c] : counts) {
    out.Sample("tessera_webhook_failed_attempts_total", static_cast<double>(c.failed_attempts),
               {{"receiver", receiver}});
  }
  out.Family("tessera_webhook_last_event_id", "gauge",
             "The id of the last event a receiver acknowledged.");
  for (const auto& [receiver, c] : counts) {
    out.Sample("tessera_webhook_last_event_id", static_cast<double>(c.last_event_id),
               {{"receiver", receiver}});
  }
}

// Failed attempts by the class the worker reported (every class, 0 included), and the
// dispatch queue's depth.
void DispatchSamples(Exposition& out, const broker::Broker::Counters& counters) {
  out.Family("tessera_task_failures_total", "counter",
             "Failed task attempts by the class the worker reported (render, crash, scene_error, "
             "out_of_memory, license, timeout, asset, storage_full, no_slot).");
  for (const char* c :
       {protocol::kFailureRender, protocol::kFailureCrash, protocol::kFailureSceneError,
        protocol::kFailureOutOfMemory, protocol::kFailureLicense, protocol::kFailureTimeout,
        protocol::kFailureAsset, protocol::kFailureStorageFull, protocol::kFailureNoSlot}) {
    auto it = counters.failures_by_class.find(c);
    out.Sample("tessera_task_failures_total",
               it == counters.failures_by_class.end() ? 0 : static_cast<double>(it->second),
               {{"class", c}});
  }
  out.Family("tessera_queue_depth", "gauge",
             "Tasks queued and dispatchable: in the dispatch queue, not paused, not waiting on a "
             "dependency.");
  out.Sample("tessera_queue_depth", static_cast<double>(counters.queue_depth));
}

// Tasks, jobs and workers by state, from the store's counters (never a scan of the tasks).
void FarmStateSamples(Exposition& out, store::Store& store) {
  using store::JobState, store::TaskState, store::WorkerState;
  StatusOr<store::FarmSummary> summary = store.Summary();
  if (!summary.ok()) {
    spdlog::warn("/metrics: cannot read the farm summary: {}", summary.status().ToString());
    out.Comment("tessera_tasks, tessera_jobs, tessera_workers left out: " +
                summary.status().ToString());
    return;
  }
  out.Family("tessera_tasks", "gauge", "Tasks by state.");
  for (TaskState s : {TaskState::kQueued, TaskState::kRunning, TaskState::kDone, TaskState::kFailed,
                      TaskState::kCanceled}) {
    out.Sample("tessera_tasks", static_cast<double>(summary->tasks.in(s)),
               {{"state", store::TaskStateName(s)}});
  }
  out.Family("tessera_jobs", "gauge", "Jobs by state.");
  std::vector<std::string> job_states;
  for (JobState s : {JobState::kQueued, JobState::kRunning, JobState::kDone, JobState::kFailed,
                     JobState::kCanceled}) {
    job_states.emplace_back(store::JobStateName(s));
  }
  StateSamples(out, "tessera_jobs", job_states, summary->jobs_by_state);
  out.Family("tessera_workers", "gauge", "Registered workers by state.");
  std::vector<std::string> worker_states;
  for (WorkerState s : {WorkerState::kIdle, WorkerState::kBusy, WorkerState::kOffline}) {
    worker_states.emplace_back(store::WorkerStateName(s));
  }
  StateSamples(out, "tessera_workers", worker_states, summary->workers_by_state);
}

// The attempt history's outcomes, as the store recorded them (the same rows the task log
// shows); failed ones by class ("unknown" for attempts recorded before classes were kept).
void AttemptSamples(Exposition& out, store::Store& store) {
  const std::map<std::pair<std::string, std::string>, int64_t> attempts = store.AttemptCounts();
  out.Family("tessera_attempts_total", "counter",
             "Task attempts ended, by outcome (done, failed, lost, handed_back, canceled) and, "
             "for failed ones, failure class.");
  for (const char* outcome : {"done", "lost", "handed_back", "canceled"}) {
    int64_t n = 0;
    for (const auto& [key, count] : attempts) {
      if (key.first == outcome) n += count;
    }
    out.Sample("tessera_attempts_total", static_cast<double>(n), {{"outcome", outcome}});
  }
  for (const auto& [key, count] : attempts) {
    if (key.first != "failed") continue;
    out.Sample("tessera_attempts_total", static_cast<double>(count),
               {{"outcome", "failed"}, {"class", key.second.empty() ? "unknown" : key.second}});
  }
}

// The GPUs of the workers that are not offline, and each connected GPU's telemetry.
void GpuSamples(Exposition& out, store::Store& store, broker::Broker& broker) {
  StatusOr<std::vector<store::WorkerRecord>> workers = store.ListWorkers();
  if (workers.ok()) {
    size_t gpus = 0;
    for (const store::WorkerRecord& w : *workers) {
      if (w.state != store::WorkerState::kOffline) gpus += w.gpus.size();
    }
    out.Family("tessera_gpus", "gauge", "GPUs on workers that are not offline.");
    out.Sample("tessera_gpus", static_cast<double>(gpus));
  } else {
    spdlog::warn("/metrics: cannot list workers: {}", workers.status().ToString());
    out.Comment("tessera_gpus left out: " + workers.status().ToString());
  }
  if (StatusOr<nlohmann::json> gpus = broker.WorkerGpuUse(/*history=*/false); gpus.ok()) {
    GpuTelemetrySamples(out, *gpus);
  } else {
    out.Comment("tessera_gpu_* left out: " + gpus.status().ToString());
  }
}

// The broker's and the assembler's running totals since the scheduler started.
void WorkDoneSamples(Exposition& out, const broker::Broker::Counters& counters) {
  out.Family("tessera_tasks_dispatched_total", "counter",
             "Task assignments sent to workers since the scheduler started (straggler backup "
             "copies included).");
  out.Sample("tessera_tasks_dispatched_total", static_cast<double>(counters.tasks_dispatched));
  out.Family("tessera_tasks_completed_total", "counter",
             "Tasks recorded done since the scheduler started.");
  out.Sample("tessera_tasks_completed_total", static_cast<double>(counters.tasks_completed));
  out.Family("tessera_render_seconds_total", "counter",
             "Wall seconds from assignment to done of the task attempts that completed tasks, as "
             "measured by the scheduler.");
  out.Sample("tessera_render_seconds_total", counters.render_seconds);
  out.Family("tessera_assembly_seconds_total", "counter",
             "Seconds the assembler's threads spent writing frames and storing split-frame "
             "parts.");
  out.Sample("tessera_assembly_seconds_total", counters.assembler.busy_seconds);
  out.Family("tessera_frames_assembled_total", "counter",
             "Output frames the assembler wrote, whole or merged from their parts.");
  out.Sample("tessera_frames_assembled_total",
             static_cast<double>(counters.assembler.frames_assembled));
  out.Family("tessera_blob_bytes_served_total", "counter",
             "Job asset bytes sent to workers that lacked them in their cache.");
  out.Sample("tessera_blob_bytes_served_total", static_cast<double>(counters.blob_bytes_served));
  out.Family("tessera_checkpoints_total", "counter",
             "Periodic checkpoints of running tasks kept as their resume points.");
  out.Sample("tessera_checkpoints_total", static_cast<double>(counters.checkpoints_kept));
  out.Family("tessera_result_bytes_buffered", "gauge",
             "Bytes of large worker results being received in pieces.");
  out.Sample("tessera_result_bytes_buffered", static_cast<double>(counters.result_bytes_buffered));
}

// What the worker link refused or survived.
void WorkerLinkSamples(Exposition& out, const broker::Broker::Counters& counters) {
  for (auto [name, help, value] : {
           std::tuple{"tessera_worker_messages_dropped_total",
                      "Worker messages dropped at the boundary: malformed, or refused (a field "
                      "that is not valid UTF-8, a list beyond its limit).",
                      counters.messages_dropped},
           std::tuple{"tessera_handshakes_refused_total",
                      "Peers refused at the CURVE handshake: plaintext, the wrong server key, an "
                      "unknown key.",
                      counters.handshakes_refused},
           std::tuple{"tessera_worker_names_refused_total",
                      "Registrations and enrolments refused for the worker name they asked for "
                      "(held by another live connection, or enrolled with another key).",
                      counters.names_refused},
           std::tuple{"tessera_errors_caught_total",
                      "Exceptions caught at the entry points of the broker's and the "
                      "assembler's threads (what was being done was dropped or retried).",
                      counters.errors_caught},
       }) {
    out.Family(name, "counter", help);
    out.Sample(name, static_cast<double>(value));
  }
}

// The API's own health under load or abuse.
void ApiSamples(Exposition& out, const http::ServerCounters& api) {
  for (auto [name, type, help, value] : {
           std::tuple{"tessera_api_connections", "gauge", "Open HTTP API connections.",
                      api.open_connections},
           std::tuple{"tessera_api_event_streams", "gauge", "Open event streams (/api/v1/events).",
                      api.open_streams},
           std::tuple{"tessera_api_connections_refused_total", "counter",
                      "API connections refused at accept: over api.max_connections_per_client "
                      "or api.max_connections.",
                      api.refused_connections},
           std::tuple{"tessera_api_requests_timed_out_total", "counter",
                      "API requests cut off because a phase (headers, body, response) ran past "
                      "its deadline.",
                      api.timed_out},
           std::tuple{"tessera_api_requests_rejected_total", "counter",
                      "API requests refused before routing: malformed, over a size limit, or not "
                      "valid UTF-8.",
                      api.rejected_requests},
       }) {
    out.Family(name, type, help);
    out.Sample(name, static_cast<double>(value));
  }
}

}  // namespace

std::string RenderMetrics(store::Store& store, broker::Broker& broker,
                          const http::ServerCounters& api, const events::FarmAlerts* alerts,
                          const events::WebhookNotifier* webhooks) {
  Exposition out;
  ProcessSamples(out);
  AlertSamples(out, alerts);
  if (webhooks != nullptr) WebhookSamples(out, *webhooks);
  const broker::Broker::Counters counters = broker.counters();
  DispatchSamples(out, counters);
  FarmStateSamples(out, store);
  AttemptSamples(out, store);
  GpuSamples(out, store, broker);
  WorkDoneSamples(out, counters);
  WorkerLinkSamples(out, counters);
  ApiSamples(out, api);
  return out.Take();
}

}  // namespace tessera::api
