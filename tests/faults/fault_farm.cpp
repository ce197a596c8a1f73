#include "tests/faults/fault_farm.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "tests/support/process.h"

namespace tessera::faults {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::Process;
using testing::WaitFor;
using namespace std::chrono_literals;

FaultFarm::FaultFarm(const std::string& name, uint64_t seed, int liveness)
    : farm_("faults-" + name, /*heartbeat_ms=*/200, liveness),
      rng_(seed),
      prober_(farm_),
      watcher_(prober_),
      checker_(farm_, prober_, watcher_, seed) {}

bool FaultFarm::StartScheduler() {
  if (!farm_.StartScheduler()) return false;
  prober_.SchedulerUp();
  return true;
}

void FaultFarm::KillScheduler(const std::string& when) {
  prober_.SchedulerDown();
  farm_.KillScheduler(SIGKILL);
  watcher_.SchedulerKilled();
  ++faults_.scheduler_kills;
  faults_.Add("kill -9 scheduler " + when);
}

bool FaultFarm::RestartScheduler() {
  if (!farm_.StartScheduler(/*reuse_ports=*/true)) return false;
  prober_.SchedulerUp();
  faults_.Add("scheduler restarted (run " + std::to_string(prober_.incarnation()) + ")");
  return true;
}

bool FaultFarm::StartWorker(const std::string& name, std::vector<std::string> extra,
                            const std::vector<std::string>& launcher) {
  extra.insert(extra.end(), {"--data-dir", farm_.dir() + "/worker-" + name + "-data"});
  return farm_.StartWorkerWith(name, extra, launcher);
}

void FaultFarm::KillWorker(const std::string& name, const std::string& when) {
  farm_.worker(name).Signal(SIGKILL);
  farm_.worker(name).Wait(5s);
  ++faults_.worker_kills;
  faults_.Add("kill -9 worker " + name + " " + when);
}

int64_t FaultFarm::Submit(const std::string& job_yaml, const std::string& scene_yaml) {
  std::string error;
  const int64_t id = farm_.Submit(job_yaml, scene_yaml, &error);
  EXPECT_GT(id, 0) << error;
  if (id > 0) {
    const json view = farm_.Get("/api/v1/jobs/" + std::to_string(id));
    if (view.is_object() && view.contains("job")) {
      watcher_.Watch(view["job"].value("output_dir", ""));
    }
  }
  return id;
}

json FaultFarm::Counts(int64_t job) {
  const json view = farm_.Get("/api/v1/jobs/" + std::to_string(job));
  if (!view.is_object() || !view.contains("job")) return json::object();
  return view["job"]["tasks"];
}

int FaultFarm::Done(int64_t job) { return Counts(job).value("done", -1); }

bool FaultFarm::WaitForDone(int64_t job, int n, std::chrono::seconds timeout) {
  return WaitFor([&] { return Done(job) >= n; }, timeout, 20ms);
}

int FaultFarm::RunningOn(int64_t job, const std::string& worker) {
  const json tasks =
      farm_.Get("/api/v1/jobs/" + std::to_string(job) + "/tasks?state=running")["tasks"];
  int n = 0;
  if (tasks.is_array()) {
    for (const json& t : tasks) n += t.value("worker_name", json()) == worker;
  }
  return n;
}

std::string FaultFarm::WorkerState(const std::string& worker) {
  const nlohmann::json res = farm_.Get("/api/v1/workers/" + worker);
  return res.is_object() && res.contains("worker") ? res["worker"].value("state", "") : "";
}

std::string PathTracerJob(const std::string& name, const std::string& frames,
                          const std::string& extra) {
  return "name: " + name + "\nscene: scene.yaml\nframes: " + frames + "\n" + extra;
}

// ---- NetnsLink -----------------------------------------------------------------------------

namespace {

std::string IpTool() {
  for (const char* path : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
    if (::access(path, X_OK) == 0) return path;
  }
  return "";
}

// Runs `ip ARGS...`; its output goes to `log`. Returns whether it exited 0.
bool Ip(const std::vector<std::string>& args, const std::string& log) {
  const std::string ip = IpTool();
  if (ip.empty()) return false;
  std::vector<std::string> argv = {ip};
  argv.insert(argv.end(), args.begin(), args.end());
  Process p = Process::Start(argv, log);
  return p.Wait(10s).value_or(-1) == 0;
}

}  // namespace

NetnsLink::NetnsLink() {
  const int pid = static_cast<int>(::getpid());
  ns_ = "tsrf-" + std::to_string(pid);
  host_if_ = "tsrf" + std::to_string(pid) + "h";  // at most 15 characters
  peer_if_ = "tsrf" + std::to_string(pid) + "p";
  // A /30 of 10.231.0.0/16 per process: .1 the scheduler's side, .2 the worker's.
  const int slot = pid % 16384;
  const std::string net = "10.231." + std::to_string(slot / 64) + ".";
  host_address_ = net + std::to_string(slot % 64 * 4 + 1);
  peer_address_ = net + std::to_string(slot % 64 * 4 + 2);
  const std::string log = testing::MakeTempDir("tsrf-ip") + "/ip.log";
  if (IpTool().empty()) {
    error_ = "the ip tool (iproute2) is not installed";
    return;
  }
  // Leftovers of an earlier process with the same PID.
  Ip({"link", "del", host_if_}, log);
  Ip({"netns", "del", ns_}, log);
  const std::vector<std::vector<std::string>> steps = {
      {"netns", "add", ns_},
      {"link", "add", host_if_, "type", "veth", "peer", "name", peer_if_},
      {"link", "set", peer_if_, "netns", ns_},
      {"addr", "add", host_address_ + "/30", "dev", host_if_},
      {"link", "set", host_if_, "up"},
      {"-n", ns_, "addr", "add", peer_address_ + "/30", "dev", peer_if_},
      {"-n", ns_, "link", "set", peer_if_, "up"},
      {"-n", ns_, "link", "set", "lo", "up"},
  };
  for (const auto& step : steps) {
    if (!Ip(step, log)) {
      std::string cmd = "ip";
      for (const std::string& a : step) cmd += " " + a;
      error_ =
          "'" + cmd + "' failed (network namespaces need CAP_NET_ADMIN): " + testing::ReadFile(log);
      return;
    }
  }
}

NetnsLink::~NetnsLink() {
  const std::string log = "/dev/null";
  Ip({"link", "del", host_if_}, log);  // removes its peer too
  Ip({"netns", "del", ns_}, log);
}

std::vector<std::string> NetnsLink::Launcher() const { return {IpTool(), "netns", "exec", ns_}; }

bool NetnsLink::Cut() { return Ip({"link", "set", host_if_, "down"}, "/dev/null"); }

bool NetnsLink::Heal() { return Ip({"link", "set", host_if_, "up"}, "/dev/null"); }

}  // namespace tessera::faults
