#include "worker/worker_config.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <string>
#include <system_error>

#include "shared/base/layered_config.h"
#include "shared/base/yaml_util.h"
#include "shared/wire/curve_keys.h"
#include "shared/wire/protocol.h"

namespace tessera::worker {
namespace {

Status CheckAddress(const std::string& address) {
  const std::string field = "scheduler.address";
  if (address.rfind("tcp://", 0) == 0) {
    std::string host;
    int port = 0;
    TSR_RETURN_IF_ERROR(config::ParseHostPort(address.substr(6), field, &host, &port));
    if (port == 0) return Status::InvalidArgument(field + ": port 0 cannot be connected to");
    return Status::Ok();
  }
  if (address.rfind("ipc://", 0) == 0 && address.size() > 6) return Status::Ok();
  return Status::InvalidArgument(field + ": expected tcp://HOST:PORT or ipc://PATH, got '" +
                                 address + "'");
}

Status CheckRange(const std::string& field, int value, int lo, int hi) {
  if (value < lo || value > hi) {
    return Status::InvalidArgument(field + ": " + std::to_string(value) + " is not in " +
                                   std::to_string(lo) + ".." + std::to_string(hi));
  }
  return Status::Ok();
}

Status CheckOneOf(const std::string& field, const std::string& value,
                  std::initializer_list<const char*> allowed) {
  std::string list;
  for (const char* a : allowed) {
    if (value == a) return Status::Ok();
    list += (list.empty() ? "" : ", ") + std::string(a);
  }
  return Status::InvalidArgument(field + ": '" + value + "' is not one of " + list);
}

// An absent section reads as an empty map. (yaml-cpp hands back an "invalid" node for a missing
// key, which MapReader cannot take: assigning over it throws YAML::InvalidNode.)
YAML::Node Section(yaml::MapReader& top, const char* key) {
  YAML::Node child = top.Child(key);
  if (child.IsDefined()) return child;
  return YAML::Node(YAML::NodeType::Map);
}

// A list of words; a plain string is read as a comma-separated list, which is how an
// environment override gives one (TESSERA_WORKER_COMMAND_PROGRAMS=blender-wrapper,ffmpeg).
Status ReadList(const YAML::Node& node, const std::string& field, size_t max_items,
                std::vector<std::string>* out) {
  if (!node.IsDefined() || node.IsNull()) return Status::Ok();
  if (node.IsScalar()) {
    out->clear();
    const std::string& text = node.Scalar();
    for (size_t pos = 0; pos <= text.size();) {
      size_t comma = text.find(',', pos);
      if (comma == std::string::npos) comma = text.size();
      if (comma > pos) out->push_back(text.substr(pos, comma - pos));
      pos = comma + 1;
    }
    if (out->size() > max_items) return yaml::CheckListSize(YAML::Node(*out), field, max_items);
    return Status::Ok();
  }
  TSR_RETURN_IF_ERROR(yaml::CheckListSize(node, field, max_items));
  return yaml::Convert(node, field, out);
}

// worker.slots: a number, or `cores` for one slot per CPU core.
Status ReadSlots(const YAML::Node& node, WorkerConfig* c) {
  if (!node.IsDefined() || node.IsNull()) return Status::Ok();
  if (node.IsScalar() && node.Scalar() == "cores") {
    c->slots_per_core = true;
    return Status::Ok();
  }
  Status s = yaml::Convert(node, "worker.slots", &c->slots);
  if (!s.ok()) {
    return Status::InvalidArgument(
        "worker.slots: expected a number of tasks (0..64) or 'cores', got " +
        (node.IsScalar() ? "'" + node.Scalar() + "'" : yaml::KindName(node)));
  }
  return Status::Ok();
}

// CURVE settings: keys and tokens are checked now, and a link that would leave this machine
// unencrypted is refused.
Status CheckSecurity(WorkerConfig* c) {
  if (!c->scheduler_public_key.empty()) {
    TSR_ASSIGN_OR_RETURN(c->scheduler_public_key,
                         curve::ParseKey(c->scheduler_public_key, "scheduler.public_key"));
  } else if (!config::IsLocalEndpoint(c->scheduler_address)) {
    return Status::InvalidArgument(
        "scheduler.public_key: required for a scheduler that is not on this machine (the link "
        "is CURVE-encrypted; `tessera-scheduler --print-public-key` prints it)");
  }
  if (!c->join_token.empty()) {
    if (c->scheduler_public_key.empty()) {
      return Status::InvalidArgument("scheduler.join_token: needs scheduler.public_key too");
    }
    if (Status s = curve::JoinTokenKeys(c->join_token).status(); !s.ok()) {
      return s.WithContext("scheduler.join_token");
    }
  }
  if (!c->key_file.empty() && c->key_file[0] != '/') {
    return Status::InvalidArgument("worker.key_file: must be an absolute path, got '" +
                                   c->key_file + "'");
  }
  return Status::Ok();
}

// GPU sharing: the slot count only with `shared`, where it is required.
Status CheckGpuSharing(const WorkerConfig& c) {
  TSR_RETURN_IF_ERROR(CheckOneOf("worker.gpu_sharing", c.gpu_sharing, {"whole", "shared"}));
  if (c.gpu_sharing == "whole") {
    if (c.slots_per_gpu != 0) {
      return Status::InvalidArgument(
          "worker.slots_per_gpu: only with worker.gpu_sharing: shared (whole GPUs run one task "
          "each)");
    }
    if (c.memory_mb_per_slot != 0) {
      return Status::InvalidArgument(
          "worker.memory_mb_per_slot: only with worker.gpu_sharing: shared");
    }
    return Status::Ok();
  }
  if (c.slots_per_gpu == 0) {
    return Status::InvalidArgument(
        "worker.slots_per_gpu: required with worker.gpu_sharing: "
        "shared (2.." +
        std::to_string(protocol::kMaxSlotsPerGpu) + ")");
  }
  TSR_RETURN_IF_ERROR(
      CheckRange("worker.slots_per_gpu", c.slots_per_gpu, 2, protocol::kMaxSlotsPerGpu));
  if (c.memory_mb_per_slot < 0 || c.memory_mb_per_slot > (int64_t{1} << 30)) {
    return Status::InvalidArgument("worker.memory_mb_per_slot: must be in [0, 1073741824], got " +
                                   std::to_string(c.memory_mb_per_slot));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<WorkerConfig> ParseWorkerConfig(const YAML::Node& root, const std::string& default_name) {
  WorkerConfig c;
  yaml::MapReader top(root, "");
  {
    yaml::MapReader r(Section(top, "scheduler"), "scheduler");
    r.Optional("address", &c.scheduler_address)
        .Optional("public_key", &c.scheduler_public_key)
        .Optional("join_token", &c.join_token);
    TSR_RETURN_IF_ERROR(r.Finish());
  }
  {
    yaml::MapReader r(Section(top, "worker"), "worker");
    r.Optional("name", &c.name)
        .Optional("backend", &c.backend)
        .Optional("threads", &c.threads)
        .Optional("gpu_sharing", &c.gpu_sharing)
        .Optional("slots_per_gpu", &c.slots_per_gpu)
        .Optional("memory_mb_per_slot", &c.memory_mb_per_slot)
        .Optional("pools", &c.pools)
        .Optional("tags", &c.tags)
        .Optional("data_dir", &c.data_dir)
        .Optional("key_file", &c.key_file)
        .Optional("plugin_path", &c.plugin_path)
        .Optional("native_plugins", &c.native_plugins)
        .Optional("cache_mb", &c.cache_mb)
        .Optional("simulate_gpus", &c.simulate_gpus)
        .Optional("run_as", &c.run_as);
    r.Fail(ReadSlots(r.Child("slots"), &c));
    r.Fail(ReadList(r.Child("command_programs"), "worker.command_programs", kMaxCommandPrograms,
                    &c.command_programs));
    r.Fail(ReadList(r.Child("input_roots"), "worker.input_roots", kMaxInputRoots, &c.input_roots));
    YAML::Node map = r.Child("path_map");
    if (r.ok() && map.IsDefined() && !map.IsNull()) {
      if (!map.IsMap()) {
        r.Fail(
            Status::InvalidArgument("worker.path_map: expected a map of scheduler path -> "
                                    "this machine's path, got " +
                                    yaml::KindName(map)));
      } else {
        for (const auto& entry : map) {
          const std::string from = entry.first.as<std::string>("");
          const std::string to = entry.second.IsScalar() ? entry.second.as<std::string>("") : "";
          if (from.empty() || from[0] != '/' || to.empty() || to[0] != '/') {
            r.Fail(Status::InvalidArgument("worker.path_map[" + from +
                                           "]: both paths must be absolute"));
          }
          c.path_map[from] = to;
        }
      }
    }
    TSR_RETURN_IF_ERROR(r.Finish());
  }
  {
    yaml::MapReader r(Section(top, "heartbeat"), "heartbeat");
    r.Optional("interval_ms", &c.heartbeat_interval_ms).Optional("liveness", &c.heartbeat_liveness);
    TSR_RETURN_IF_ERROR(r.Finish());
  }
  {
    yaml::MapReader r(Section(top, "gpu_telemetry"), "gpu_telemetry");
    r.Optional("interval_ms", &c.gpu_telemetry_interval_ms)
        .Optional("nvml_library", &c.nvml_library);
    TSR_RETURN_IF_ERROR(r.Finish());
  }
  {
    yaml::MapReader r(Section(top, "log"), "log");
    r.Optional("level", &c.log_level);
    TSR_RETURN_IF_ERROR(r.Finish());
  }
  {
    yaml::MapReader r(Section(top, "cloud"), "cloud");
    r.Optional("provider", &c.cloud.provider)
        .Optional("metadata_url", &c.cloud.metadata_url)
        .Optional("spot_notice_url", &c.cloud.spot_notice_url)
        .Optional("poll_interval_ms", &c.cloud.poll_interval_ms);
    TSR_RETURN_IF_ERROR(r.Finish());
  }
  TSR_RETURN_IF_ERROR(top.Finish());
  if (c.pools.empty()) return Status::InvalidArgument("worker.pools: must name at least one pool");
  for (const auto* list : {&c.pools, &c.tags}) {
    for (size_t i = 0; i < list->size(); ++i) {
      const std::string& v = (*list)[i];
      if (v.empty() || v.size() > 64) {
        return Status::InvalidArgument(
            std::string(list == &c.pools ? "worker.pools" : "worker.tags") + "[" +
            std::to_string(i) + "]: must be 1..64 characters");
      }
    }
  }

  for (size_t i = 0; i < c.native_plugins.size(); ++i) {
    if (c.native_plugins[i].empty() || c.native_plugins[i][0] != '/') {
      return Status::InvalidArgument("worker.native_plugins[" + std::to_string(i) +
                                     "]: must be the absolute path of a shared library");
    }
  }
  for (size_t i = 0; i < c.command_programs.size(); ++i) {
    const std::string& p = c.command_programs[i];
    const bool name = !p.empty() && p.find('/') == std::string::npos;
    const bool path = !p.empty() && p[0] == '/' &&
                      std::filesystem::path(p).lexically_normal().string() == p && p.back() != '/';
    if ((!name && !path) || p[0] == '-' || p.size() > 1024 ||
        std::any_of(p.begin(), p.end(),
                    [](char ch) { return static_cast<unsigned char>(ch) < 0x20; })) {
      return Status::InvalidArgument("worker.command_programs[" + std::to_string(i) + "]: '" + p +
                                     "' must be a program name or an absolute path without '.' "
                                     "or '..' parts");
    }
  }
  for (size_t i = 0; i < c.input_roots.size(); ++i) {
    if (c.input_roots[i].empty() || c.input_roots[i][0] != '/') {
      return Status::InvalidArgument("worker.input_roots[" + std::to_string(i) +
                                     "]: must be an absolute path, got '" + c.input_roots[i] + "'");
    }
  }
  if (!c.run_as.empty() && (c.run_as.size() > 64 || c.run_as[0] == '-' ||
                            !std::all_of(c.run_as.begin(), c.run_as.end(), [](char ch) {
                              return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' ||
                                     ch == '-' || ch == '.';
                            }))) {
    return Status::InvalidArgument("worker.run_as: '" + c.run_as + "' is not a user name");
  }
  TSR_RETURN_IF_ERROR(CheckAddress(c.scheduler_address));
  TSR_RETURN_IF_ERROR(CheckSecurity(&c));
  TSR_RETURN_IF_ERROR(CheckOneOf("worker.backend", c.backend, {"auto", "cpu", "cuda"}));
  TSR_RETURN_IF_ERROR(CheckRange("worker.threads", c.threads, 0, 4096));
  TSR_RETURN_IF_ERROR(CheckRange("worker.slots", c.slots, 0, kMaxSlots));
  TSR_RETURN_IF_ERROR(CheckRange("worker.simulate_gpus", c.simulate_gpus, 0, 16));
  TSR_RETURN_IF_ERROR(CheckGpuSharing(c));
  TSR_RETURN_IF_ERROR(CheckRange("worker.cache_mb", c.cache_mb, 64, 16777216));
  TSR_RETURN_IF_ERROR(CheckRange("heartbeat.interval_ms", c.heartbeat_interval_ms, 10, 600000));
  TSR_RETURN_IF_ERROR(CheckRange("heartbeat.liveness", c.heartbeat_liveness, 1, 1000));
  if (c.gpu_telemetry_interval_ms != 0) {
    TSR_RETURN_IF_ERROR(
        CheckRange("gpu_telemetry.interval_ms", c.gpu_telemetry_interval_ms, 100, 600000));
  }
  if (c.nvml_library.empty() || c.nvml_library.size() > 1024 ||
      std::any_of(c.nvml_library.begin(), c.nvml_library.end(),
                  [](char ch) { return static_cast<unsigned char>(ch) < 0x20; })) {
    return Status::InvalidArgument(
        "gpu_telemetry.nvml_library: must be a library name or path of 1..1024 printable "
        "characters");
  }
  TSR_RETURN_IF_ERROR(
      CheckOneOf("log.level", c.log_level, {"trace", "debug", "info", "warn", "error", "off"}));
  TSR_RETURN_IF_ERROR(ValidateCloudConfig(c.cloud));
  if (c.name.empty()) c.name = default_name;
  c.data_dir_given = !c.data_dir.empty();
  if (c.data_dir.empty()) {
    std::error_code ec;
    std::string name;
    for (char ch : c.name) {
      const bool plain = std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '.';
      name += plain ? ch : '_';
    }
    // The process id keeps workers of the same name on one machine (local farms, tests) apart.
    c.data_dir = (std::filesystem::temp_directory_path(ec) /
                  ("tessera-worker-" + name + "-" + std::to_string(::getpid())))
                     .string();
  } else if (c.data_dir[0] != '/') {
    return Status::InvalidArgument("worker.data_dir: must be an absolute path, got '" + c.data_dir +
                                   "'");
  }
  // The key pair persists only in a data directory that outlives the process.
  if (c.key_file.empty() && c.data_dir_given) c.key_file = c.data_dir + "/worker.key";
  return c;
}

StatusOr<Confinement> ResolveConfinement(const WorkerConfig& config) {
  Confinement out;
  out.command_programs = config.command_programs;
  if (!config.run_as.empty()) {
    StatusOr<subprocess::Identity> who = subprocess::LookupUser(config.run_as);
    if (!who.ok()) return who.status().WithContext("worker.run_as");
    const uid_t self = ::geteuid();
    if (who->uid != self) {
      if (self != 0) {
        return Status::FailedPrecondition(
            "worker.run_as: the worker runs as uid " + std::to_string(self) +
            ", not root, so it cannot run renderers as " + config.run_as + " (uid " +
            std::to_string(who->uid) + "); start it as root or leave run_as empty");
      }
      out.run_as = std::move(*who);
    }
  }
  for (size_t i = 0; i < config.input_roots.size(); ++i) {
    std::error_code ec;
    const std::filesystem::path root = std::filesystem::canonical(config.input_roots[i], ec);
    if (ec || !std::filesystem::is_directory(root, ec)) {
      return Status::NotFound("worker.input_roots[" + std::to_string(i) + "]: '" +
                              config.input_roots[i] + "' is not a folder on this machine");
    }
    out.input_roots.push_back(root.string());
  }
  return out;
}

StatusOr<WorkerConfig> LoadWorkerConfig(const ConfigFlags& flags, char** environ_vars,
                                        const std::string& default_name) {
  std::string path = flags.config_path;
  if (path.empty()) {
    std::error_code ec;
    if (std::filesystem::exists(kDefaultConfigPath, ec)) path = kDefaultConfigPath;
  }
  config::EnvironmentOverrides overrides;
  TSR_ASSIGN_OR_RETURN(YAML::Node root, config::LoadLayered(path,
                                                            {"scheduler", "worker", "heartbeat",
                                                             "gpu_telemetry", "log", "cloud"},
                                                            environ_vars, &overrides));
  // Flags go into the document so the same reader validates them and names the same fields.
  try {
    if (!flags.scheduler.empty()) root["scheduler"]["address"] = flags.scheduler;
    if (!flags.public_key.empty()) root["scheduler"]["public_key"] = flags.public_key;
    if (!flags.join_token.empty()) root["scheduler"]["join_token"] = flags.join_token;
    if (!flags.data_dir.empty()) root["worker"]["data_dir"] = flags.data_dir;
    if (!flags.name.empty()) root["worker"]["name"] = flags.name;
    if (!flags.backend.empty()) root["worker"]["backend"] = flags.backend;
    if (flags.threads >= 0) root["worker"]["threads"] = flags.threads;
    if (!flags.slots.empty()) root["worker"]["slots"] = flags.slots;
    if (!flags.pools.empty()) root["worker"]["pools"] = flags.pools;
    if (!flags.tags.empty()) root["worker"]["tags"] = flags.tags;
    if (!flags.command_programs.empty()) {
      root["worker"]["command_programs"] = flags.command_programs;
    }
    if (!flags.run_as.empty()) root["worker"]["run_as"] = flags.run_as;
    if (!flags.input_roots.empty()) root["worker"]["input_roots"] = flags.input_roots;
    if (!flags.log_level.empty()) root["log"]["level"] = flags.log_level;
  } catch (const YAML::Exception&) {
    // A section that is not a map cannot take the flag; the reader below names that section.
  }
  StatusOr<WorkerConfig> parsed = ParseWorkerConfig(root, default_name);
  if (!parsed.ok()) return config::NameEnvironmentOverride(parsed.status(), overrides);
  return parsed;
}

}  // namespace tessera::worker
