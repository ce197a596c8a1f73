#pragma once
// Test support: a real local farm for integration tests — a tessera-scheduler process on
// loopback with ephemeral ports and its own data directory, real tessera-worker processes, and a
// small HTTP client for the scheduler's API.

#include <chrono>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/support/process.h"
#include "tests/support/scenes.h"

namespace tessera::testing {

class LocalFarm {
 public:
  // Creates a data directory; heartbeats are fast so worker death is noticed within a second.
  explicit LocalFarm(const std::string& name, int heartbeat_ms = 200, int liveness = 5);
  ~LocalFarm();

  // Adds YAML to the scheduler's config file (call before StartScheduler). The file holds only
  // the `broker:` section at first, so indented lines appended first continue that section.
  void AppendSchedulerConfig(const std::string& yaml);
  // Starts the scheduler and waits for its ready file. Returns false (with the log) on failure.
  // With reuse_ports the scheduler binds the ports of its previous run (workers reconnect).
  bool StartScheduler(bool reuse_ports = false);
  void KillScheduler(int sig = SIGKILL);
  bool StartWorker(const std::string& name, int threads = 1);
  // Switches the scheduler (before StartScheduler) to CURVE: workers then need the scheduler's
  // public key and a join token (CreateJoinToken).
  void UseCurve();
  // The address the scheduler's broker binds at its first start (default tcp://127.0.0.1:0);
  // anything but loopback needs UseCurve().
  void set_broker_bind(std::string endpoint) { broker_bind_ = std::move(endpoint); }
  // A join token from the API (and the scheduler's public key, hex); empty on failure.
  std::string CreateJoinToken(std::string* public_key, int uses = 0);
  // A worker with the usual test flags (CPU, one thread, --command-program for each of
  // command_programs() unless `extra` gives its own) plus `extra` (e.g. --config FILE,
  // --public-key, --join-token, --data-dir). Returns whether it is running.
  // `launcher` goes before the worker's path (e.g. {"/usr/sbin/ip", "netns", "exec", "NS"} to run
  // it in another network namespace); it must exec the worker, so the handle's PID is the worker.
  bool StartWorkerWith(const std::string& name, const std::vector<std::string>& extra,
                       const std::vector<std::string>& launcher = {});
  std::string WorkerLog(const std::string& name) const;
  // The programs test workers let the command renderer run (worker.command_programs, which is
  // empty on a real worker until an operator lists some). Empty: the command renderer is off.
  const std::vector<std::string>& command_programs() const { return command_programs_; }
  void set_command_programs(std::vector<std::string> programs) {
    command_programs_ = std::move(programs);
  }
  Process& worker(const std::string& name) { return workers_.at(name); }

  // The bearer token sent with every request: the admin token the scheduler wrote at first start
  // (api.auth: token is the default), unless a test sets another.
  const std::string& token() const { return token_; }
  void set_token(std::string token) { token_ = std::move(token); }
  // A CA certificate to trust, for a scheduler serving HTTPS.
  void set_ca_file(std::string path) { ca_file_ = std::move(path); }
  const std::string& api_url() const { return api_url_; }

  // HTTP against the API; `status` receives the HTTP status (-1: unreachable).
  nlohmann::json Get(const std::string& path, int* status = nullptr);
  nlohmann::json Post(const std::string& path, const nlohmann::json& body, int* status = nullptr);
  // Returns the HTTP status (-1: unreachable).
  int Delete(const std::string& path);

  // Submits a job; returns its id or -1 (with the error in *error).
  int64_t Submit(const std::string& job_yaml, const std::string& scene_yaml,
                 std::string* error = nullptr);
  // Polls until the job reaches a terminal state or the timeout; returns the last job view.
  nlohmann::json WaitForJob(int64_t id, std::chrono::seconds timeout);
  // Polls until `n` workers are registered and not offline.
  bool WaitForWorkers(size_t n, std::chrono::seconds timeout);

  const std::string& dir() const { return dir_; }
  Process& scheduler() { return scheduler_; }
  // The daemons' log level (before they start): debug for tests, info for benchmarks, which
  // measure the farm as it runs in production.
  void set_log_level(std::string level) { log_level_ = std::move(level); }
  const std::string& broker_endpoint() const { return broker_endpoint_; }
  std::string SchedulerLog() const;

 private:
  nlohmann::json Request(const std::string& method, const std::string& path,
                         const nlohmann::json* body, int* status);

  std::string dir_;
  std::string api_url_;
  std::string token_;
  std::string ca_file_;
  std::string broker_endpoint_;
  std::string broker_bind_ = "tcp://127.0.0.1:0";
  std::string log_level_ = "debug";
  Process scheduler_;
  std::map<std::string, Process> workers_;
  std::vector<std::string> command_programs_ = {"echo", "false", "true", "sleep"};
};

// A job's tasks, as GET /api/v1/jobs/<job>/tasks lists them.
nlohmann::json Tasks(LocalFarm& farm, int64_t job);

}  // namespace tessera::testing
