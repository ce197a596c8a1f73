#include "scheduler/autoscaler/autoscaler_config.h"

#include <set>

#include "shared/base/yaml_util.h"

namespace tessera::autoscaler {
namespace {

// Reads a whole number of seconds into `out`.
void ReadSeconds(yaml::MapReader& r, const char* key, Seconds* out) {
  int64_t seconds = out->count();
  r.Optional(key, &seconds);
  *out = Seconds(seconds);
}

Status ReadProvider(const YAML::Node& node, const std::string& path, ProviderConfig* p) {
  if (!node.IsDefined() || node.IsNull()) {
    return Status::InvalidArgument(path + ": required field is missing");
  }
  yaml::MapReader r(node, path);
  r.Required("kind", &p->kind)
      .Optional("worker_binary", &p->worker_binary)
      .Optional("worker_args", &p->worker_args)
      .Optional("log_dir", &p->log_dir)
      .Optional("create", &p->create)
      .Optional("terminate", &p->terminate)
      .Optional("timeout_s", &p->timeout_s)
      .Optional("deployment", &p->deployment)
      .Optional("namespace", &p->k8s_namespace)
      .Optional("context", &p->kube_context)
      .Optional("kubectl", &p->kubectl);
  TSR_RETURN_IF_ERROR(r.Finish());
  if (p->kind != "local" && p->kind != "command" && p->kind != "kubernetes") {
    return Status::InvalidArgument(path + ".kind: expected local, command or kubernetes, got '" +
                                   p->kind + "'");
  }
  if (p->kind == "command" && (p->create.empty() || p->terminate.empty())) {
    return Status::InvalidArgument(path + ": a command provider needs create and terminate");
  }
  if (p->kind == "kubernetes" && p->deployment.empty()) {
    return Status::InvalidArgument(path + ".deployment: required for a kubernetes provider");
  }
  return Status::Ok();
}

// Placeholders are checked when the config is read, not at 3 a.m. when the first node is
// wanted: every one must be a value the autoscaler or the group's vars supply.
Status CheckTemplates(const GroupConfig& g, const std::string& path) {
  std::map<std::string, std::string> vars = g.vars;
  for (const char* known : {"name", "group", "instance_type", "scheduler", "public_key",
                            "join_token", "user_data", "user_data_base64"}) {
    vars.emplace(known, "");
  }
  for (const auto& [field, argv] : {std::pair{"create", &g.provider.create},
                                    std::pair{"worker_args", &g.provider.worker_args}}) {
    for (size_t i = 0; i < argv->size(); ++i) {
      StatusOr<std::string> filled = Substitute((*argv)[i], vars);
      if (!filled.ok()) {
        return Status::InvalidArgument(path + ".provider." + field + "[" + std::to_string(i) +
                                       "]: " + filled.status().message());
      }
    }
  }
  for (size_t i = 0; i < g.provider.terminate.size(); ++i) {
    StatusOr<std::string> filled = Substitute(g.provider.terminate[i], {{"id", ""}});
    if (!filled.ok()) {
      return Status::InvalidArgument(path + ".provider.terminate[" + std::to_string(i) + "]: " +
                                     filled.status().message() + " (terminate gets only {id})");
    }
  }
  return Status::Ok();
}

Status ReadGroup(const YAML::Node& node, const std::string& path, GroupConfig* g) {
  yaml::MapReader r(node, path);
  NodeGroup& n = g->group;
  std::string market = "on-demand";
  std::vector<std::string> pools, tags;
  r.Required("name", &n.name)
      .Optional("instance_type", &n.instance_type)
      .Optional("slots", &n.slots)
      .Required("price_per_hour", &n.price_per_hour)
      .Optional("market", &market)
      .Optional("min_nodes", &n.min_nodes)
      .Required("max_nodes", &n.max_nodes)
      .Optional("pools", &pools)
      .Optional("tags", &tags)
      .Optional("cloud_init", &g->cloud_init);
  if (r.Has("boot_time_s")) {
    Seconds boot{0};
    ReadSeconds(r, "boot_time_s", &boot);
    n.boot_time = boot;
  }
  const YAML::Node gpus = r.Child("gpus");
  if (r.ok() && gpus.IsDefined() && !gpus.IsNull()) {
    yaml::MapReader gr(gpus, path + ".gpus");
    gr.Optional("count", &n.gpus.count)
        .Optional("model", &n.gpus.model)
        .Optional("memory_mib", &n.gpus.memory_mib)
        .Optional("slots_per_gpu", &n.gpus.slots_per_gpu)
        .Optional("memory_mib_per_slot", &n.gpus.memory_mib_per_slot);
    r.Fail(gr.Finish());
  }
  const YAML::Node vars = r.Child("vars");
  if (r.ok() && vars.IsDefined() && !vars.IsNull()) {
    if (!vars.IsMap()) {
      r.Fail(Status::InvalidArgument(path + ".vars: expected a map of name: value"));
    } else {
      for (const auto& kv : vars) {
        std::string value;
        r.Fail(yaml::Convert(kv.second, path + ".vars." + kv.first.Scalar(), &value));
        g->vars[kv.first.Scalar()] = value;
      }
    }
  }
  const YAML::Node provider = r.Child("provider");
  TSR_RETURN_IF_ERROR(r.Finish());
  TSR_RETURN_IF_ERROR(ReadProvider(provider, path + ".provider", &g->provider));
  n.provider = g->provider.kind;
  n.pools = {pools.begin(), pools.end()};
  n.tags = {tags.begin(), tags.end()};
  if (n.pools.empty()) n.pools = {"default"};  // what a worker without --pool serves
  if (market == "spot") {
    n.market = Market::kSpot;
  } else if (market == "on-demand") {
    n.market = Market::kOnDemand;
  } else if (market == "reserved") {
    n.market = Market::kReserved;
  } else {
    return Status::InvalidArgument(path + ".market: expected spot, on-demand or reserved, got '" +
                                   market + "'");
  }
  return CheckTemplates(*g, path);
}

}  // namespace

StatusOr<AutoscalerConfig> ParseAutoscalerConfig(const YAML::Node& node) {
  AutoscalerConfig c;
  if (!node.IsDefined() || node.IsNull()) return c;
  yaml::MapReader r(node, "autoscaler");
  Settings& s = c.settings;
  r.Optional("interval_s", &c.interval_s)
      .Optional("scheduler_address", &c.scheduler_address)
      .Optional("budget_per_hour", &s.budget_per_hour)
      .Optional("scale_in_hysteresis", &s.scale_in_hysteresis)
      .Optional("default_task_seconds", &s.default_task_seconds)
      .Optional("deadline_margin", &s.deadline_margin);
  ReadSeconds(r, "horizon_s", &s.horizon);
  ReadSeconds(r, "scale_in_grace_s", &s.scale_in_grace);
  ReadSeconds(r, "cooldown_s", &s.cooldown);
  ReadSeconds(r, "registration_timeout_s", &s.registration_timeout);
  ReadSeconds(r, "spot_backoff_s", &s.spot_backoff);
  ReadSeconds(r, "default_boot_time_s", &s.default_boot_time);
  const YAML::Node groups = r.Child("groups");
  TSR_RETURN_IF_ERROR(r.Finish());
  if (c.interval_s < 1 || c.interval_s > 3600) {
    return Status::InvalidArgument("autoscaler.interval_s: must be in [1, 3600]");
  }
  if (groups.IsDefined() && !groups.IsNull()) {
    if (!groups.IsSequence()) {
      return Status::InvalidArgument("autoscaler.groups: expected a list of node groups");
    }
    std::set<std::string> names;
    for (size_t i = 0; i < groups.size(); ++i) {
      GroupConfig g;
      const std::string path = "autoscaler.groups[" + std::to_string(i) + "]";
      TSR_RETURN_IF_ERROR(ReadGroup(groups[i], path, &g));
      if (!names.insert(g.group.name).second) {
        return Status::InvalidArgument(path + ".name: '" + g.group.name + "' is used twice");
      }
      c.groups.push_back(std::move(g));
    }
  }
  std::vector<NodeGroup> specs;
  for (const GroupConfig& g : c.groups) specs.push_back(g.group);
  if (const std::string why = WhyInvalid(specs, c.settings); !why.empty()) {
    return Status::InvalidArgument("autoscaler: " + why);
  }
  return c;
}

}  // namespace tessera::autoscaler
