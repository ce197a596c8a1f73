// tessera-worker: registers this machine with the scheduler and renders what it is given.
// Exit codes: 0 clean stop (SIGINT/SIGTERM), 1 rejected or failed at run time, 2 bad config/flags.
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "shared/logging.h"
#include "worker/agent.h"
#include "worker/hardware_probe.h"
#include "worker/plugin_host.h"
#include "worker/worker_config.h"

extern char** environ;

namespace {

using tessera::worker::Agent;

// Signals are blocked in every thread and taken synchronously here, so stopping the agent needs
// nothing async-signal-safe.
void WaitForSignals(const sigset_t* set, Agent* agent, const std::atomic<bool>* done) {
  const timespec tick{0, 200 * 1000 * 1000};
  while (!done->load()) {
    int sig = sigtimedwait(set, nullptr, &tick);
    if (sig == SIGINT || sig == SIGTERM) {
      spdlog::info("signal {} received: stopping", sig);
      agent->Stop();
      return;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  tessera::worker::ConfigFlags flags;
  CLI::App app{"Tessera worker agent: renders tasks from a tessera-scheduler"};
  app.add_option("--config", flags.config_path,
                 std::string("YAML config file (default ") + tessera::worker::kDefaultConfigPath +
                     " if it exists)");
  app.add_option("--scheduler", flags.scheduler, "scheduler address, tcp://HOST:PORT");
  app.add_option("--name", flags.name, "worker name (default: the hostname)");
  app.add_option("--backend", flags.backend, "render backend: auto, cpu or cuda");
  app.add_option("--threads", flags.threads, "CPU render threads, 0 = all")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--log-level", flags.log_level, "trace, debug, info, warn, error or off");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
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

  const tessera::worker::HardwareInfo hardware = tessera::worker::ProbeHardware();
  tessera::StatusOr<tessera::worker::AgentOptions> options =
      tessera::worker::MakeAgentOptions(*config, hardware);
  if (!options.ok()) {
    std::fprintf(stderr, "tessera-worker: %s\n", options.status().message().c_str());
    return 2;
  }
  options->render.plugins = std::make_shared<tessera::worker::PluginList>(
      tessera::worker::DetectPlugins(tessera::worker::EffectivePluginPath(config->plugin_path)));
  spdlog::info(
      "tessera-worker {} on {}: {} cores, {} MiB RAM, {} GPU(s), backends [{}], {} slot(s)",
      TESSERA_VERSION, hardware.hostname, hardware.cpu_cores, hardware.ram_mb, hardware.gpus.size(),
      fmt::join(options->backends, ", "), config->slots);

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);  // before any thread starts: all inherit it

  Agent agent(std::move(*options));
  std::atomic<bool> done{false};
  std::thread signal_thread(WaitForSignals, &signals, &agent, &done);
  tessera::Status status = agent.Run();
  done.store(true);
  signal_thread.join();
  // Task folders are removed as tasks end; the folders holding them go too once empty.
  std::error_code ec;
  std::filesystem::remove(config->data_dir + "/tasks", ec);
  std::filesystem::remove(config->data_dir, ec);
  if (!status.ok()) {
    spdlog::error("{}", status.message());
    return 1;
  }
  spdlog::info("stopped");
  return 0;
}
