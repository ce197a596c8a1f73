#pragma once
// tessera-scheduler configuration. Every key, with its default, is documented in
// deploy/examples/scheduler.yaml. Precedence: flags > TESSERA_<SECTION>_<KEY> > file > defaults.

#include <cstdint>
#include <map>
#include <string>

#include "scheduler/api/openjd_farm.h"
#include "scheduler/autoscaler/autoscaler_config.h"
#include "scheduler/events/webhooks.h"
#include "scheduler/policy/policy.h"
#include "shared/base/status.h"

namespace tessera::scheduler {

struct SchedulerConfig {
  // storage:
  std::string data_dir = "./tessera-data";
  std::string output_root;  // empty: <data_dir>/outputs
  // Shared storage the scheduler and the workers mount (absolute, as the scheduler sees it):
  // a job's output.shared_dir must lie inside one. Empty: no job may write to shared storage.
  std::vector<std::string> shared_roots;
  std::string synchronous = "normal";  // SQLite synchronous: normal (crash-safe) or full
  // Room the data folder keeps: below it new jobs and blob uploads are refused (507) before
  // SQLite runs out of room. 0: no floor.
  int64_t min_free_mb = 256;
  // store: where the farm's records live (store/sql/store_url.h): empty, the default, is SQLite
  // in <data_dir>/tessera.db; or sqlite:/path, or a PostgreSQL URL / libpq connection string.
  // Its password, if any, from password_file (never logged: shown redacted).
  std::string store_url;
  std::string store_password_file;
  // api:
  std::string api_listen = "127.0.0.1:8470";
  int api_threads = 16;  // handler threads (event streams hold none)
  // token: every request needs a bearer token (security/api_auth.h); none: no tokens, every
  // caller is admin -- refused unless `listen` is a loopback address.
  std::string api_auth = "token";
  std::string admin_token_file;  // written at first start; empty: <data_dir>/admin.token
  // TLS (1.2 or later) when both are set: PEM certificate (chain) and private key.
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_min_version = "1.2";  // or "1.3"
  // Abuse limits of the HTTP server (scheduler/http/server.h has the defaults' reasons).
  int api_max_connections = 10000;
  int api_max_connections_per_client = 256;
  int api_max_event_streams = 1000;
  int api_max_header_bytes = 16 * 1024;
  int api_max_header_count = 100;
  int api_header_timeout_s = 10;
  int api_body_timeout_s = 60;
  int api_write_timeout_s = 60;
  int history_interval_s = 10;  // how often the dashboard's farm charts get a point
  // broker:
  std::string broker_listen = "tcp://127.0.0.1:8471";
  int heartbeat_ms = 1000;
  int liveness = 5;
  double backup_factor = 1.5;  // straggler backups; 0 = off
  double backup_min_seconds = 60;
  // curve: workers connect with CURVE keys (enrolled with join tokens); insecure: plain TCP,
  // any peer admitted -- refused unless `listen` is a loopback or ipc:// address.
  std::string security = "curve";
  std::string key_file;  // the scheduler's CURVE key pair; empty: <data_dir>/scheduler.key
  // assembler:
  int assembler_threads = 2;
  // limits: named counted limits, e.g. {blender: 20} (at most 20 tasks using it at once)
  std::map<std::string, int> limits;
  // projects: fair-share weight and running-task cap per project, e.g.
  // {show-a: {weight: 2, max_running: 100}}; unlisted projects get weight 1 and no cap
  std::map<std::string, policy::ProjectShare> projects;
  // autoscaler: node groups and the policy's settings (no groups: no autoscaler)
  autoscaler::AutoscalerConfig autoscaler;
  // cost: prices per hour by cloud instance type, for workers no node group prices (the
  // autoscaler's nodes cost their group's price), and for every other worker
  std::map<std::string, double> instance_prices;
  double default_price_per_hour = 0;
  // notifications: webhook receivers of the farm's events (events/webhooks.h)
  std::vector<events::WebhookReceiver> notifications;
  // openjd: environment templates and path mapping rules of every OpenJD job (api/openjd_farm.h)
  api::OpenJdFarm openjd;
  // log:
  std::string log_level = "info";
};

StatusOr<SchedulerConfig> LoadSchedulerConfig(const std::string& path, char** environ_vars);
Status ValidateSchedulerConfig(const SchedulerConfig& config);

}  // namespace tessera::scheduler
