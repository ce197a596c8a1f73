// tessera-worker: registers this machine with the scheduler and renders what it is given.
//
// Signals: SIGTERM drains (running tasks finish and are delivered, no new ones are taken, then
// the worker exits); a second SIGTERM hands the running tasks back with checkpoints and exits;
// SIGINT stops at once (renders are cancelled and their tasks requeued). A spot-interruption
// notice (cloud.provider) acts like the second SIGTERM.
// Exit codes: 0 clean stop; 1 rejected (revoked, a join token refused, a scheduler key that is
// not the scheduler's) or failed at run time; 2 bad config/flags, or a host without /proc.
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "shared/base/logging.h"
#include "worker/agent.h"
#include "worker/cloud_metadata.h"
#include "worker/command_plugin.h"
#include "worker/hardware_probe.h"
#include "worker/worker_config.h"

extern char** environ;

namespace {

using tessera::worker::Agent;

// Signals are blocked in every thread and taken synchronously here, so stopping the agent needs
// nothing async-signal-safe.
void WaitForSignals(const sigset_t* set, Agent* agent, const std::atomic<bool>* done) {
  const timespec tick{0, 200 * 1000 * 1000};
  int terms = 0;
  while (!done->load()) {
    int sig = sigtimedwait(set, nullptr, &tick);
    if (sig == SIGINT) {
      spdlog::info("SIGINT received: stopping now");
      agent->Stop();
      return;
    }
    if (sig == SIGTERM && ++terms == 1) {
      spdlog::info("SIGTERM received: draining (a second SIGTERM hands running tasks back)");
      agent->Drain();
    } else if (sig == SIGTERM) {
      spdlog::info("second SIGTERM received: handing running tasks back");
      agent->Leave("the worker was stopped (second SIGTERM)");
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  // Started by the worker bundle's launcher (deploy/bundle/launcher.sh) the process is named
  // after the bundled dynamic loader; ps, top and pgrep should show the worker.
  ::prctl(PR_SET_NAME, "tessera-worker");
  tessera::worker::ConfigFlags flags;
  CLI::App app{"Tessera worker agent: renders tasks from a tessera-scheduler"};
  app.add_option("--config", flags.config_path,
                 std::string("YAML config file (default ") + tessera::worker::kDefaultConfigPath +
                     " if it exists)");
  app.add_option("--scheduler", flags.scheduler, "scheduler address, tcp://HOST:PORT");
  app.add_option("--public-key", flags.public_key,
                 "the scheduler's CURVE public key (hex), for an encrypted link");
  app.add_option("--join-token", flags.join_token,
                 "join token (tsrj-...) to enrol with; prefer TESSERA_SCHEDULER_JOIN_TOKEN, "
                 "which other users cannot read from the process list");
  app.add_option("--data-dir", flags.data_dir,
                 "folder for task files, the result spool and the key pair (absolute path)");
  app.add_option("--name", flags.name, "worker name (default: the hostname)");
  app.add_option("--backend", flags.backend, "render backend: auto, cpu or cuda");
  app.add_option("--slots", flags.slots,
                 "tasks rendered at once: 1..64, or cores (one per CPU core)");
  app.add_option("--threads", flags.threads, "CPU render threads, 0 = all")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--log-level", flags.log_level, "trace, debug, info, warn, error or off");
  app.add_option("--pool", flags.pools,
                 "a pool this worker serves (repeat; replaces worker.pools)");
  app.add_option("--tag", flags.tags, "a tag this worker has (repeat; replaces worker.tags)");
  app.add_option("--command-program", flags.command_programs,
                 "a program jobs of the command renderer may run, a name or an absolute path "
                 "(repeat; replaces worker.command_programs)");
  app.add_option("--run-as", flags.run_as, "user renderer processes run as (worker.run_as)");
  app.add_option("--input-root", flags.input_roots,
                 "a folder scenes may read files from by absolute path (repeat; replaces "
                 "worker.input_roots)");
  bool exit_with_parent = false;
  app.add_flag("--exit-with-parent", exit_with_parent,
               "drain and leave when the program that started this worker exits (the "
               "scheduler's local autoscaler nodes)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (exit_with_parent) {
    // SIGTERM drains, as from an operator; a parent already gone leaves nothing to work for.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() == 1) return 0;
  }

  // The renderers the worker starts (Blender, POV-Ray, the CUDA driver) and its hardware probe
  // read /proc: without it (a bare chroot) they fail in ways that name nothing.
  if (::access("/proc/self/stat", R_OK) != 0) {
    std::fprintf(stderr,
                 "tessera-worker: /proc is not mounted here; the worker and the renderers it "
                 "starts need it (mount -t proc proc /proc)\n");
    return 2;
  }

  const std::string hostname = tessera::worker::Hostname();
  tessera::StatusOr<tessera::worker::WorkerConfig> config =
      tessera::worker::LoadWorkerConfig(flags, environ, hostname);
  if (!config.ok()) {
    std::fprintf(stderr, "tessera-worker: %s\n", config.status().message().c_str());
    return 2;
  }
  if (tessera::Status s = tessera::logging::Init("worker " + config->name, config->log_level);
      !s.ok()) {
    std::fprintf(stderr, "tessera-worker: log.level: %s\n", s.message().c_str());
    return 2;
  }

  tessera::StatusOr<tessera::worker::Confinement> confinement =
      tessera::worker::ResolveConfinement(*config);
  if (!confinement.ok()) {
    std::fprintf(stderr, "tessera-worker: %s\n", confinement.status().message().c_str());
    return 2;
  }

  tessera::worker::HardwareInfo hardware = tessera::worker::ProbeHardware();
  // Cloud facts are informational: a metadata service that does not answer does not stop a worker.
  if (tessera::StatusOr<tessera::protocol::CloudInfo> cloud =
          tessera::worker::ProbeCloud(config->cloud);
      cloud.ok()) {
    hardware.cloud = std::move(*cloud);
  } else {
    spdlog::warn("cloud.provider {}: {}; registering without cloud facts", config->cloud.provider,
                 cloud.status().message());
  }
  tessera::StatusOr<tessera::worker::AgentOptions> options =
      tessera::worker::MakeAgentOptions(*config, hardware);
  if (!options.ok()) {
    std::fprintf(stderr, "tessera-worker: %s\n", options.status().message().c_str());
    return 2;
  }
  options->render.command_programs = confinement->command_programs;
  options->render.run_as = confinement->run_as;
  options->render.input_roots = confinement->input_roots;
  if (confinement->run_as) {
    spdlog::info("renderers run as {} (uid {}, gid {})", confinement->run_as->user,
                 confinement->run_as->uid, confinement->run_as->gid);
  } else if (::geteuid() == 0) {
    spdlog::warn("renderers run as root: set worker.run_as to a user of their own");
  }
  options->render.command_plugins =
      std::make_shared<tessera::worker::CommandPluginList>(tessera::worker::DetectCommandPlugins(
          tessera::worker::EffectivePluginPath(config->plugin_path),
          confinement->command_programs));
  options->render.native = std::make_shared<const tessera::worker::NativePluginList>(
      tessera::worker::LoadNativePlugins(config->native_plugins));
  spdlog::info(
      "tessera-worker {} on {}: {} cores, {} MiB RAM, {} GPU(s), backends [{}], {} slot(s)",
      TESSERA_VERSION, hardware.hostname, hardware.cpu_cores, hardware.ram_mb,
      options->hardware.gpus.size(), fmt::join(options->backends, ", "), config->slots);

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);  // before any thread starts: all inherit it

  Agent agent(std::move(*options));
  std::atomic<bool> done{false};
  std::thread signal_thread(WaitForSignals, &signals, &agent, &done);
  tessera::worker::SpotNoticeWatcher spot(config->cloud);
  if (tessera::Status s = spot.Start([&agent](std::string reason) {
        spdlog::warn("spot interruption notice: {}", reason);
        agent.Leave("spot interruption: " + reason);
      });
      !s.ok()) {
    spdlog::error("spot notices will not be seen: {}", s.message());
  }
  tessera::Status status = agent.Run();
  spot.Stop();
  done.store(true);
  signal_thread.join();
  std::error_code ec;
  if (!config->data_dir_given) {
    // A temporary data directory dies with the process (nothing in it outlives it usefully).
    std::filesystem::remove_all(config->data_dir, ec);
  } else {
    // Task folders are removed as tasks end; the folders holding them go too once empty.
    std::filesystem::remove(config->data_dir + "/tasks", ec);
    std::filesystem::remove(config->data_dir + "/spool", ec);
  }
  if (!status.ok()) {
    spdlog::error("{}", status.message());
    return 1;
  }
  spdlog::info("stopped");
  return 0;
}
