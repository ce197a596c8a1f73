#include "scheduler/scheduler_config.h"

#include <tuple>

#include "shared/base/layered_config.h"
#include "shared/base/yaml_util.h"

namespace tessera::scheduler {

namespace {

StatusOr<SchedulerConfig> ParseSchedulerConfig(const YAML::Node& root) {
  SchedulerConfig c;
  yaml::MapReader top(root, "");
  yaml::MapReader storage(top.Child("storage"), "storage");
  storage.Optional("data_dir", &c.data_dir)
      .Optional("output_root", &c.output_root)
      .Optional("shared_roots", &c.shared_roots)
      .Optional("synchronous", &c.synchronous)
      .Optional("min_free_mb", &c.min_free_mb);
  for (size_t i = 0; i < c.shared_roots.size(); ++i) {
    if (c.shared_roots[i].empty() || c.shared_roots[i][0] != '/') {
      return Status::InvalidArgument("storage.shared_roots[" + std::to_string(i) +
                                     "]: must be an absolute path, got '" + c.shared_roots[i] +
                                     "'");
    }
  }
  yaml::MapReader store(top.Child("store"), "store");
  store.Optional("url", &c.store_url).Optional("password_file", &c.store_password_file);
  yaml::MapReader api(top.Child("api"), "api");
  api.Optional("listen", &c.api_listen)
      .Optional("threads", &c.api_threads)
      .Optional("auth", &c.api_auth)
      .Optional("admin_token_file", &c.admin_token_file)
      .Optional("tls_cert_file", &c.tls_cert_file)
      .Optional("tls_key_file", &c.tls_key_file)
      .Optional("tls_min_version", &c.tls_min_version)
      .Optional("max_connections", &c.api_max_connections)
      .Optional("max_connections_per_client", &c.api_max_connections_per_client)
      .Optional("max_event_streams", &c.api_max_event_streams)
      .Optional("max_header_bytes", &c.api_max_header_bytes)
      .Optional("max_header_count", &c.api_max_header_count)
      .Optional("header_timeout_s", &c.api_header_timeout_s)
      .Optional("body_timeout_s", &c.api_body_timeout_s)
      .Optional("write_timeout_s", &c.api_write_timeout_s)
      .Optional("history_interval_s", &c.history_interval_s);
  yaml::MapReader broker(top.Child("broker"), "broker");
  broker.Optional("listen", &c.broker_listen)
      .Optional("heartbeat_ms", &c.heartbeat_ms)
      .Optional("liveness", &c.liveness)
      .Optional("backup_factor", &c.backup_factor)
      .Optional("backup_min_seconds", &c.backup_min_seconds)
      .Optional("security", &c.security)
      .Optional("key_file", &c.key_file);
  yaml::MapReader assembler(top.Child("assembler"), "assembler");
  assembler.Optional("threads", &c.assembler_threads);
  YAML::Node limits = top.Child("limits");
  if (limits.IsDefined() && !limits.IsNull()) {
    if (!limits.IsMap()) return Status::InvalidArgument("limits: expected a map of name: count");
    for (const auto& kv : limits) {
      std::string name = kv.first.Scalar();
      int count = 0;
      TSR_RETURN_IF_ERROR(yaml::Convert(kv.second, "limits." + name, &count));
      if (count < 0) return Status::InvalidArgument("limits." + name + ": must be >= 0");
      c.limits[name] = count;
    }
  }
  YAML::Node projects = top.Child("projects");
  if (projects.IsDefined() && !projects.IsNull()) {
    if (!projects.IsMap()) {
      return Status::InvalidArgument(
          "projects: expected a map of name: {weight: W, max_running: N}");
    }
    for (const auto& kv : projects) {
      const std::string name = kv.first.Scalar();
      policy::ProjectShare share;
      yaml::MapReader p(kv.second, "projects." + name);
      p.Optional("weight", &share.weight).Optional("max_running", &share.max_running);
      TSR_RETURN_IF_ERROR(p.Finish());
      if (!(share.weight > 0) || share.weight > 1e6) {
        return Status::InvalidArgument("projects." + name + ".weight: must be in (0, 1000000]");
      }
      if (share.max_running < 0) {
        return Status::InvalidArgument("projects." + name + ".max_running: must be >= 0");
      }
      c.projects[name] = share;
    }
  }
  TSR_ASSIGN_OR_RETURN(c.autoscaler, autoscaler::ParseAutoscalerConfig(top.Child("autoscaler")));
  TSR_ASSIGN_OR_RETURN(c.notifications, events::ParseNotifications(top.Child("notifications")));
  TSR_ASSIGN_OR_RETURN(c.openjd, api::ParseOpenJdFarm(top.Child("openjd")));
  yaml::MapReader cost(top.Child("cost"), "cost");
  cost.Optional("default_price_per_hour", &c.default_price_per_hour);
  const YAML::Node prices = cost.Child("instance_prices");
  if (prices.IsDefined() && !prices.IsNull()) {
    if (!prices.IsMap()) {
      return Status::InvalidArgument(
          "cost.instance_prices: expected a map of instance type: price");
    }
    for (const auto& kv : prices) {
      double price = 0;
      const std::string path = "cost.instance_prices." + kv.first.Scalar();
      TSR_RETURN_IF_ERROR(yaml::Convert(kv.second, path, &price));
      if (!(price >= 0) || price > 1e6)
        return Status::InvalidArgument(path + ": must be in [0, 1000000]");
      c.instance_prices[kv.first.Scalar()] = price;
    }
  }
  if (!(c.default_price_per_hour >= 0) || c.default_price_per_hour > 1e6) {
    return Status::InvalidArgument("cost.default_price_per_hour: must be in [0, 1000000]");
  }
  yaml::MapReader log(top.Child("log"), "log");
  log.Optional("level", &c.log_level);
  for (const yaml::MapReader* r : {&storage, &api, &broker, &assembler, &cost, &log}) {
    TSR_RETURN_IF_ERROR(r->Finish());
  }
  TSR_RETURN_IF_ERROR(top.Finish());
  return c;
}

}  // namespace

StatusOr<SchedulerConfig> LoadSchedulerConfig(const std::string& path, char** environ_vars) {
  config::EnvironmentOverrides overrides;
  TSR_ASSIGN_OR_RETURN(
      YAML::Node root,
      config::LoadLayered(path,
                          {"storage", "api", "broker", "assembler", "limits", "projects",
                           "autoscaler", "cost", "notifications", "openjd", "log"},
                          environ_vars, &overrides));
  StatusOr<SchedulerConfig> parsed = ParseSchedulerConfig(root);
  if (!parsed.ok()) return config::NameEnvironmentOverride(parsed.status(), overrides);
  return parsed;
}

Status ValidateSchedulerConfig(const SchedulerConfig& c) {
  if (c.data_dir.empty()) return Status::InvalidArgument("storage.data_dir: must not be empty");
  if (c.synchronous != "normal" && c.synchronous != "full") {
    return Status::InvalidArgument("storage.synchronous: must be normal or full, got '" +
                                   c.synchronous + "'");
  }
  if (c.min_free_mb < 0 || c.min_free_mb > (int64_t{1} << 30)) {
    return Status::InvalidArgument(
        "storage.min_free_mb: must be in [0, 1073741824] (MiB; 0 = "
        "no floor), got " +
        std::to_string(c.min_free_mb));
  }
  std::string host;
  int port = 0;
  TSR_RETURN_IF_ERROR(config::ParseHostPort(c.api_listen, "api.listen", &host, &port));
  if (c.api_threads < 1 || c.api_threads > 256) {
    return Status::InvalidArgument("api.threads: must be in [1, 256]");
  }
  if (c.history_interval_s < 1 || c.history_interval_s > 3600) {
    return Status::InvalidArgument("api.history_interval_s: must be in [1, 3600]");
  }
  if (c.tls_min_version != "1.2" && c.tls_min_version != "1.3") {
    return Status::InvalidArgument("api.tls_min_version: expected \"1.2\" or \"1.3\", got '" +
                                   c.tls_min_version + "'");
  }
  for (auto [key, value, min, max] : {
           std::tuple{"api.max_connections", c.api_max_connections, 1, 1000000},
           std::tuple{"api.max_connections_per_client", c.api_max_connections_per_client, 1,
                      1000000},
           std::tuple{"api.max_event_streams", c.api_max_event_streams, 0, 1000000},
           std::tuple{"api.max_header_bytes", c.api_max_header_bytes, 1024, 1 << 20},
           std::tuple{"api.max_header_count", c.api_max_header_count, 8, 10000},
           std::tuple{"api.header_timeout_s", c.api_header_timeout_s, 1, 3600},
           std::tuple{"api.body_timeout_s", c.api_body_timeout_s, 1, 3600},
           std::tuple{"api.write_timeout_s", c.api_write_timeout_s, 1, 3600},
       }) {
    if (value < min || value > max) {
      return Status::InvalidArgument(std::string(key) + ": must be in [" + std::to_string(min) +
                                     ", " + std::to_string(max) + "], got " +
                                     std::to_string(value));
    }
  }
  if (c.api_auth != "token" && c.api_auth != "none") {
    return Status::InvalidArgument("api.auth: expected token or none, got '" + c.api_auth + "'");
  }
  if (c.api_auth == "none" && !config::IsLoopbackHost(host)) {
    return Status::InvalidArgument(
        "api.auth: none is only allowed when api.listen is a loopback address (got " +
        c.api_listen + "); use token");
  }
  if (c.tls_cert_file.empty() != c.tls_key_file.empty()) {
    return Status::InvalidArgument(c.tls_cert_file.empty()
                                       ? "api.tls_cert_file: required with api.tls_key_file"
                                       : "api.tls_key_file: required with api.tls_cert_file");
  }
  if (c.broker_listen.rfind("tcp://", 0) != 0 && c.broker_listen.rfind("ipc://", 0) != 0) {
    return Status::InvalidArgument("broker.listen: expected tcp://HOST:PORT, got '" +
                                   c.broker_listen + "'");
  }
  if (c.security != "curve" && c.security != "insecure") {
    return Status::InvalidArgument("broker.security: expected curve or insecure, got '" +
                                   c.security + "'");
  }
  if (c.security == "insecure" && !config::IsLocalEndpoint(c.broker_listen)) {
    return Status::InvalidArgument(
        "broker.security: insecure is only allowed when broker.listen is a loopback or ipc:// "
        "address (got " +
        c.broker_listen + "); use curve and enrol workers with join tokens");
  }
  if (c.heartbeat_ms < 50 || c.heartbeat_ms > 60000) {
    return Status::InvalidArgument("broker.heartbeat_ms: must be in [50, 60000]");
  }
  if (c.liveness < 2 || c.liveness > 100) {
    return Status::InvalidArgument("broker.liveness: must be in [2, 100]");
  }
  if (c.backup_factor < 0 || c.backup_factor > 1000) {
    return Status::InvalidArgument("broker.backup_factor: must be in [0, 1000] (0 = no backups)");
  }
  if (c.backup_min_seconds < 0) {
    return Status::InvalidArgument("broker.backup_min_seconds: must be >= 0");
  }
  if (c.assembler_threads < 1 || c.assembler_threads > 64) {
    return Status::InvalidArgument("assembler.threads: must be in [1, 64]");
  }
  return Status::Ok();
}

}  // namespace tessera::scheduler
