#pragma once
// tessera-worker configuration. Every key, with its default (deploy/examples/worker.yaml is the
// commented copy):
//
//   scheduler:
//     address: tcp://127.0.0.1:8471   # the scheduler's worker ROUTER (tcp://HOST:PORT or
//     ipc://PATH)
//   worker:
//     name: <hostname>                # shown in the dashboard; empty means the hostname
//     backend: auto                   # auto | cpu | cuda
//     threads: 0                      # CPU render threads; 0 = all hardware threads
//     slots: 0                        # tasks rendered at once, 1..64; 0 = one per GPU (each
//                                     #   task pinned to its own GPU), or 1 without GPUs
//     pools: [default]                # pools this worker serves (jobs may ask for a pool)
//     tags: []                        # capabilities jobs may require (e.g. [houdini, cuda12])
//     data_dir: ""                    # task folders of renderer plugins go under DIR/tasks;
//                                     #   empty: <temp dir>/tessera-worker-<name>-<pid>
//     plugin_path: ""                 # colon-separated folders searched for renderer programs
//                                     #   (povray, blender, a command's program); empty: $PATH
//   heartbeat:
//     interval_ms: 1000               # used until the scheduler's kWelcome says otherwise
//     liveness: 5                     # silent intervals before the worker reconnects
//   log:
//     level: info                     # trace | debug | info | warn | error | off
//
// Layering (lowest first): the YAML file, environment variables TESSERA_<SECTION>_<KEY>
// (e.g. TESSERA_WORKER_SLOTS=2), command-line flags. Unknown keys are errors naming the field.

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "shared/status.h"

namespace tessera::worker {

inline constexpr const char* kDefaultConfigPath = "/etc/tessera/worker.yaml";
inline constexpr int kMaxSlots = 64;

struct WorkerConfig {
  std::string scheduler_address = "tcp://127.0.0.1:8471";
  std::string name;              // resolved to the hostname when empty
  std::string backend = "auto";  // "auto", "cpu" or "cuda"
  int threads = 0;
  int slots = 0;  // 0: one per GPU, 1 without GPUs
  std::vector<std::string> pools = {"default"};
  std::vector<std::string> tags;
  std::string data_dir;     // empty: <temp dir>/tessera-worker-<name>-<pid>
  std::string plugin_path;  // empty: $PATH
  int heartbeat_interval_ms = 1000;
  int heartbeat_liveness = 5;
  std::string log_level = "info";
};

// Parses the merged document (a map of sections, as config::LoadLayered returns it) and validates
// every value. An empty worker.name becomes `default_name`.
StatusOr<WorkerConfig> ParseWorkerConfig(const YAML::Node& root, const std::string& default_name);

// Command-line values; an empty string / negative number means "not given".
struct ConfigFlags {
  std::string config_path;
  std::string scheduler;
  std::string name;
  std::string backend;
  int threads = -1;
  std::string log_level;
};

// The whole layering: picks the file (flags.config_path, else kDefaultConfigPath when it exists),
// applies environment overrides from `environ_vars`, then the flags, then parses. A --config
// that does not exist is an error.
StatusOr<WorkerConfig> LoadWorkerConfig(const ConfigFlags& flags, char** environ_vars,
                                        const std::string& default_name);

}  // namespace tessera::worker
