#pragma once
// GET /metrics: the farm's state and the scheduler's running totals in the Prometheus text
// exposition format (version 0.0.4). Gauges are read from the store (its per-job counters, so a
// scrape never scans the task table) and the broker's dispatch queue; counters are the broker's
// and the assembler's relaxed atomics since the scheduler started (Prometheus's rate() turns
// them into dispatch rate, render time per second, ...). Every state label is always present,
// with 0, so a query never silently misses a series.
//
//   tessera_build_info{version}         gauge    1
//   process_start_time_seconds          gauge    Unix time the scheduler started
//   tessera_queue_depth                 gauge    tasks in the dispatch queue (not paused, not
//                                                waiting on a dependency)
//   tessera_tasks{state}                gauge    tasks by state: queued running done failed
//                                                canceled
//   tessera_jobs{state}                 gauge    jobs by state (same states)
//   tessera_workers{state}              gauge    workers by state: idle busy offline
//   tessera_gpus                        gauge    GPUs on workers that are not offline
//   tessera_gpu_healthy{worker,gpu,model}  gauge  1, or 0 while its telemetry reports a fault
//   tessera_gpu_utilization_percent, _memory_used_bytes, _memory_total_bytes,
//   _temperature_celsius, _power_watts, _sm_clock_hertz, _memory_clock_hertz,
//   _ecc_uncorrected_errors, _last_xid {worker,gpu,model}
//                                       gauge    each connected GPU's latest NVML reading
//   tessera_tasks_dispatched_total      counter  assignments sent (straggler backups included)
//   tessera_tasks_completed_total       counter  tasks recorded done
//   tessera_task_failures_total{class}  counter  failed attempts by class (render, crash,
//                                                scene_error, out_of_memory, license, ...)
//   tessera_render_seconds_total        counter  lease start to done of the completing copies
//   tessera_assembly_seconds_total      counter  assembler thread time (frames and parts)
//   tessera_frames_assembled_total      counter  output frames written, whole or from parts
//   tessera_worker_messages_dropped_total  counter  worker messages malformed or refused
//   tessera_handshakes_refused_total       counter  peers refused at the CURVE handshake
//   tessera_worker_names_refused_total     counter  registrations/enrolments refused their name
//   tessera_errors_caught_total            counter  exceptions caught on broker/assembler threads
//   tessera_api_connections             gauge    open HTTP connections
//   tessera_api_event_streams           gauge    open event streams
//   tessera_api_connections_refused_total  counter  refused over a connection cap
//   tessera_api_requests_timed_out_total   counter  a request phase ran past its deadline
//   tessera_api_requests_rejected_total    counter  malformed, too large, or not UTF-8
//   tessera_alerts_active               gauge    farm-level alerts active (events/farm_alerts.h)
//   tessera_alert_active{kind,key}      gauge    1 for each active alert
//   tessera_webhook_deliveries_total{receiver}        counter  events a receiver acknowledged
//   tessera_webhook_failed_attempts_total{receiver}   counter  deliveries retried (down, slow,
//                                                              not 2xx)
//   tessera_webhook_last_event_id{receiver}           gauge    its last acknowledged event
//
// A store read that fails leaves its families out (and says why in a comment line): the scrape
// still succeeds, and the missing series are what an alert sees.
//
// Threads: any (HTTP handler threads).

#include <string>

#include "scheduler/events/farm_alerts.h"
#include "scheduler/events/webhooks.h"
#include "scheduler/http/server.h"
#include "scheduler/store/store.h"

namespace tessera::broker {
class Broker;
}

namespace tessera::api {

std::string RenderMetrics(store::Store& store, broker::Broker& broker,
                          const http::ServerCounters& api, const events::FarmAlerts* alerts,
                          const events::WebhookNotifier* webhooks = nullptr);

}  // namespace tessera::api
