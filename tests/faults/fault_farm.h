#pragma once
// Fault-injection suite: a real local farm with the suite's instruments attached (API prober,
// output watcher, checker, fault log) and the faults themselves: kill -9 of the scheduler or a
// worker, SIGSTOP/SIGCONT of a worker, and a network partition between namespaces.

#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tests/faults/checker.h"
#include "tests/support/farm.h"

namespace tessera::faults {

// Not thread-safe: one scenario thread drives it (the prober and watcher run on their own).
class FaultFarm {
 public:
  // Heartbeats every 200 ms; a worker silent for `liveness` beats is lost.
  FaultFarm(const std::string& name, uint64_t seed, int liveness = 5);

  LocalFarm& farm() { return farm_; }
  std::mt19937_64& rng() { return rng_; }
  FaultLog& faults() { return faults_; }
  Checker& checker() { return checker_; }

  bool StartScheduler();
  // kill -9 of the scheduler (the prober stops counting first), logged.
  void KillScheduler(const std::string& when);
  // Starts it again on the same ports; the workers reconnect by themselves.
  bool RestartScheduler();
  // A worker with its own data folder under the farm's (so a restarted worker finds its spool),
  // one render thread; `launcher` as in LocalFarm::StartWorkerWith.
  bool StartWorker(const std::string& name, std::vector<std::string> extra = {},
                   const std::vector<std::string>& launcher = {});
  void KillWorker(const std::string& name, const std::string& when);

  // Submits and starts watching the job's output folder; -1 (and a test failure) on error.
  int64_t Submit(const std::string& job_yaml, const std::string& scene_yaml);
  // The job's task counts (`done` etc.), or an empty object while the API does not answer.
  nlohmann::json Counts(int64_t job);
  int Done(int64_t job);
  // Waits until the job has at least `n` tasks done (or ended); false after `timeout`.
  bool WaitForDone(int64_t job, int n, std::chrono::seconds timeout);
  // Tasks running on `worker` now.
  int RunningOn(int64_t job, const std::string& worker);
  // The worker's state as the API reports it (idle, busy, offline...), or "" while it cannot.
  std::string WorkerState(const std::string& worker);

 private:
  LocalFarm farm_;
  std::mt19937_64 rng_;
  FaultLog faults_;
  ApiProber prober_;
  OutputWatcher watcher_;
  Checker checker_;
};

// A job of the built-in path tracer over TinySceneYaml frames: "name: N\nscene: scene.yaml\n...".
std::string PathTracerJob(const std::string& name, const std::string& frames,
                          const std::string& extra = "");

// Two network namespaces' worth of wiring: a veth pair with one end in the root namespace (where
// the scheduler and the test run) and the other in a new namespace for a worker. Names and the
// /30 subnet are derived from the PID, so concurrent test processes do not collide. Everything
// is removed on destruction.
class NetnsLink {
 public:
  // Creates the namespace and the link; on failure ok() is false and error() says why.
  NetnsLink();
  ~NetnsLink();
  NetnsLink(const NetnsLink&) = delete;
  NetnsLink& operator=(const NetnsLink&) = delete;

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  // The scheduler's address on the link (root namespace side) and the launcher that runs a
  // program in the worker's namespace.
  const std::string& host_address() const { return host_address_; }
  std::vector<std::string> Launcher() const;
  // Cuts / heals the link (the root side of the veth pair goes down / up).
  bool Cut();
  bool Heal();

 private:
  std::string ns_, host_if_, peer_if_, host_address_, peer_address_, error_;
};

}  // namespace tessera::faults
