#pragma once
// tessera-worker configuration. Every key, with its default (deploy/examples/worker.yaml is the
// commented copy):
//
//   scheduler:
//     address: tcp://127.0.0.1:8471   # the scheduler's worker ROUTER (tcp://HOST:PORT or
//     ipc://PATH)
//     public_key: ""                  # the scheduler's CURVE public key (hex or Z85); required
//                                     #   unless the address is loopback/ipc (then empty means
//                                     #   an unencrypted link to an insecure local scheduler)
//     join_token: ""                  # tsrj-...: enrols this worker on first contact
//   worker:
//     name: <hostname>                # shown in the dashboard; empty means the hostname
//     backend: auto                   # auto | cpu | cuda
//     threads: 0                      # CPU render threads; 0 = all hardware threads
//     slots: 0                        # tasks rendered at once, 1..64; 0 = one per GPU (each
//                                     #   task pinned to its own GPU), or 1 without GPUs;
//                                     #   with gpu_sharing: shared, slots_per_gpu per GPU;
//                                     #   cores = one per CPU core. Tasks running at once
//                                     #   share the cores and RAM: a job's resources.cpu_cores
//                                     #   and ram_mb are held per task (a task declaring 4
//                                     #   cores takes 4 of them), and each render gets its
//                                     #   cpu_cores as threads, else the threads / slots
//     gpu_sharing: whole              # whole: one task per GPU | shared: tasks asking for a
//                                     #   resources.gpu_share share each GPU (vGPU-like)
//     slots_per_gpu: 0                # shared only, and required there: slots each GPU is
//                                     #   cut into, 2..32 (a share takes ceil(share x N))
//     memory_mb_per_slot: 0           # shared only: GPU memory one slot gives a task; slots x
//                                     #   this must fit each GPU's memory; 0 = not divided
//     pools: [default]                # pools this worker serves (jobs may ask for a pool)
//     tags: []                        # capabilities jobs may require (e.g. [houdini, cuda12])
//     data_dir: ""                    # task folders (DIR/tasks), the result spool (DIR/spool)
//                                     #   and the key pair; empty: a temporary
//                                     #   <temp dir>/tessera-worker-<name>-<pid>
//     key_file: ""                    # this worker's CURVE key pair, created on enrolment;
//                                     #   empty: DATA_DIR/worker.key when data_dir is set,
//                                     #   otherwise kept in memory (enrols at every start)
//     cache_mb: 20480                 # job assets kept in DATA_DIR/cache (least recently used
//                                     #   evicted first), 64..16777216
//     path_map: {}                    # shared storage mounted elsewhere here: scheduler path
//                                     #   prefix -> this machine's, e.g. {/mnt/projects:
//                                     #   /Volumes/projects}; the longest matching prefix wins
//     plugin_path: ""                 # colon-separated folders searched for renderer programs
//                                     #   (povray, blender, a command's program); empty: $PATH
//     native_plugins: []              # C++ renderer plugins to load (absolute paths of shared
//                                     #   libraries, plugins/api/renderer_api.h); the built-in
//                                     #   path tracer is always there
//     simulate_gpus: 0                # testing only: report N simulated GPUs (their tasks render
//                                     #   on the CPU) to exercise GPU slots and pinning
//     command_programs: []            # programs jobs of the `command` renderer may run: names
//                                     #   (looked up in plugin_path) or absolute paths, matched
//                                     #   exactly (listing python3 allows no other program; it
//                                     #   does allow any Python code). Empty: the command
//                                     #   renderer is off and not offered to the scheduler
//     run_as: ""                      # renderer processes run as this user (the worker, as root,
//                                     #   drops to its uid, gid and groups before exec); empty:
//                                     #   as the worker's own user. A worker not running as root
//                                     #   can only name itself
//     input_roots: []                 # folders (absolute) a scene may name files in by absolute
//                                     #   path, after symlinks and '..' are resolved; empty: a
//                                     #   scene reads only the files that travel with its job
//   heartbeat:
//     interval_ms: 1000               # used until the scheduler's kWelcome says otherwise
//     liveness: 5                     # silent intervals before the worker reconnects
//   gpu_telemetry:
//     interval_ms: 5000               # how often each GPU's load and health are read through
//                                     #   NVML and sent with a heartbeat; 0: off; 100..600000
//     nvml_library: libnvidia-ml.so.1 # opened at run time; a machine without it runs on
//                                     #   without telemetry (logged once)
//   log:
//     level: info                     # trace | debug | info | warn | error | off
//   cloud:
//     provider: none                  # none | aws | gcp | alibaba | tencent: read the instance's
//                                     #   region, zone, type and spot lifecycle at start-up and
//                                     #   watch for spot interruption notices
//     metadata_url: ""                # empty: the provider's metadata endpoint
//     spot_notice_url: ""             # empty: the provider's notice path under metadata_url
//     poll_interval_ms: 5000          # spot notice polling period, 100..600000
//
// Layering (lowest first): the YAML file, environment variables TESSERA_<SECTION>_<KEY>
// (e.g. TESSERA_WORKER_SLOTS=2), command-line flags. Unknown keys are errors naming the field.

#include <yaml-cpp/yaml.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "shared/base/status.h"
#include "shared/base/subprocess.h"
#include "worker/cloud_metadata.h"

namespace tessera::worker {

inline constexpr const char* kDefaultConfigPath = "/etc/tessera/worker.yaml";
inline constexpr int kMaxSlots = 64;

struct WorkerConfig {
  std::string scheduler_address = "tcp://127.0.0.1:8471";
  std::string scheduler_public_key;  // Z85 once parsed; empty: unencrypted (local only)
  std::string join_token;
  std::string name;              // resolved to the hostname when empty
  std::string backend = "auto";  // "auto", "cpu" or "cuda"
  int threads = 0;
  int slots = 0;  // 0: one per GPU (slots_per_gpu per GPU when shared), 1 without GPUs
  bool slots_per_core = false;        // slots: cores -- one per CPU core (at most kMaxSlots)
  std::string gpu_sharing = "whole";  // "whole" or "shared"
  int slots_per_gpu = 0;              // shared: 2..32
  int64_t memory_mb_per_slot = 0;     // shared: GPU memory per slot, 0 = not divided
  std::vector<std::string> pools = {"default"};
  std::vector<std::string> tags;
  std::string data_dir;                         // empty: <temp dir>/tessera-worker-<name>-<pid>
  bool data_dir_given = false;                  // false: data_dir is the temporary default
  std::string key_file;                         // empty: keys in memory only
  std::string plugin_path;                      // empty: $PATH
  std::vector<std::string> native_plugins;      // shared libraries of C++ renderer plugins
  int simulate_gpus = 0;                        // testing: N simulated GPUs rendered on the CPU
  int cache_mb = 20480;                         // the asset cache's bound
  std::map<std::string, std::string> path_map;  // shared storage: scheduler prefix -> local
  std::vector<std::string> command_programs;    // what the command renderer may run; empty: off
  std::string run_as;                           // renderers' user; empty: the worker's
  std::vector<std::string> input_roots;         // where absolute scene paths may lead
  int heartbeat_interval_ms = 1000;
  int heartbeat_liveness = 5;
  int gpu_telemetry_interval_ms = 5000;  // 0: off
  std::string nvml_library = "libnvidia-ml.so.1";
  std::string log_level = "info";
  CloudConfig cloud;
};

// Parses the merged document (a map of sections, as config::LoadLayered returns it) and validates
// every value. An empty worker.name becomes `default_name`.
StatusOr<WorkerConfig> ParseWorkerConfig(const YAML::Node& root, const std::string& default_name);

inline constexpr size_t kMaxCommandPrograms = 256;
inline constexpr size_t kMaxInputRoots = 64;

// What the programs this worker runs may do, resolved against the machine at start-up.
struct Confinement {
  std::vector<std::string> command_programs;
  std::optional<subprocess::Identity> run_as;  // unset: the worker's own user
  std::vector<std::string> input_roots;        // canonical
};
// Refused (the worker does not start) when run_as names no user, or names another user while
// the worker is not root, or an input root does not exist.
StatusOr<Confinement> ResolveConfinement(const WorkerConfig& config);

// Command-line values; an empty string / negative number means "not given".
struct ConfigFlags {
  std::string config_path;
  std::string scheduler;
  std::string public_key;
  std::string join_token;
  std::string data_dir;
  std::string name;
  std::string backend;
  int threads = -1;
  std::string slots;  // a number or "cores"
  std::string log_level;
  std::vector<std::string> pools;             // non-empty: replaces worker.pools
  std::vector<std::string> tags;              // non-empty: replaces worker.tags
  std::vector<std::string> command_programs;  // non-empty: replaces worker.command_programs
  std::string run_as;
  std::vector<std::string> input_roots;  // non-empty: replaces worker.input_roots
};

// The whole layering: picks the file (flags.config_path, else kDefaultConfigPath when it exists),
// applies environment overrides from `environ_vars`, then the flags, then parses. A --config
// that does not exist is an error.
StatusOr<WorkerConfig> LoadWorkerConfig(const ConfigFlags& flags, char** environ_vars,
                                        const std::string& default_name);

}  // namespace tessera::worker
