#include "scheduler/cli/local_farm.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "scheduler/cli/api_client.h"
#include "shared/base/status.h"

namespace tessera::cli {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

constexpr auto kStartupTimeout = std::chrono::seconds(30);
// The scheduler drains its local workers (at most 15 s) before it exits.
constexpr auto kStopGrace = std::chrono::seconds(25);
constexpr auto kPollInterval = milliseconds(100);
constexpr int kExitInterrupted = 130;

// Blocks SIGINT, SIGTERM and SIGCHLD for the life of the farm so they are taken synchronously
// with sigtimedwait() in the one thread that runs `up`; children get the old mask back.
class SignalGate {
 public:
  SignalGate() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    sigaddset(&set_, SIGCHLD);
    sigprocmask(SIG_BLOCK, &set_, &old_mask_);
  }
  ~SignalGate() {
    // Drop anything still pending so unblocking does not kill us after a clean stop.
    timespec zero{0, 0};
    while (sigtimedwait(&set_, nullptr, &zero) > 0) {
    }
    sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
  }
  SignalGate(const SignalGate&) = delete;
  SignalGate& operator=(const SignalGate&) = delete;

  // Sleeps up to `timeout`; returns SIGINT or SIGTERM when one arrived, else 0 (SIGCHLD and
  // timeouts both return 0: the caller reaps and looks).
  int Wait(milliseconds timeout) {
    timespec ts{static_cast<time_t>(timeout.count() / 1000),
                static_cast<long>((timeout.count() % 1000) * 1000000)};
    int sig = sigtimedwait(&set_, nullptr, &ts);
    return (sig == SIGINT || sig == SIGTERM) ? sig : 0;
  }
  const sigset_t& old_mask() const { return old_mask_; }

 private:
  sigset_t set_;
  sigset_t old_mask_;
};

struct Child {
  std::string label;  // "scheduler", "worker local-1"
  std::string log_path;
  pid_t pid = -1;
  bool exited = false;
  int wait_status = 0;
};

std::string DescribeExit(int wait_status) {
  if (WIFEXITED(wait_status)) return "exit status " + std::to_string(WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) {
    return "killed by signal " + std::to_string(WTERMSIG(wait_status)) + " (" +
           strsignal(WTERMSIG(wait_status)) + ")";
  }
  return "status " + std::to_string(wait_status);
}

std::string LogTail(const std::string& path, size_t lines) {
  std::ifstream in(path);
  std::deque<std::string> tail;
  std::string line;
  while (std::getline(in, line)) {
    tail.push_back(line);
    if (tail.size() > lines) tail.pop_front();
  }
  std::string out;
  for (const auto& l : tail) out += "  | " + l + "\n";
  return out;
}

StatusOr<std::string> FindBinary(const std::string& name) {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    fs::path candidate = self.parent_path() / name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  const char* path_env = std::getenv("PATH");
  std::stringstream dirs(path_env != nullptr ? path_env : "");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) continue;
    fs::path candidate = fs::path(dir) / name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  return Status::NotFound("cannot find " + name + " next to this tessera (" +
                          (ec ? std::string("?") : self.parent_path().string()) +
                          ") or on PATH; build it or install it");
}

// The ports `tessera up` binds, each with the flag that sets it (0: the scheduler picks one).
std::array<std::pair<int, const char*>, 2> PortsOf(const UpOptions& options) {
  return {{{options.port, "--port"}, {options.broker_port, "--broker-port"}}};
}

// Fails fast with a clear message instead of letting the scheduler die on bind().
Status CheckPortFree(int port, const char* flag) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::Internal(std::string("socket: ") + std::strerror(errno));
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int rc = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  int err = errno;
  close(fd);
  if (rc == 0) return Status::Ok();
  if (err == EADDRINUSE) {
    return Status::FailedPrecondition("port " + std::to_string(port) +
                                      " on 127.0.0.1 is already in use (is another farm or "
                                      "scheduler running?); pick another with " +
                                      std::string(flag));
  }
  return Status::FailedPrecondition("cannot use port " + std::to_string(port) + ": " +
                                    std::strerror(err));
}

class LocalFarm {
 public:
  LocalFarm(const UpOptions& options, fs::path data_dir)
      : options_(options), data_dir_(std::move(data_dir)) {}
  ~LocalFarm() { StopAll(); }

  int Run();

 private:
  StatusOr<pid_t> Spawn(const std::string& binary, const std::vector<std::string>& args,
                        const std::string& log_path);
  // Reaps exited children; returns the first one that was not asked to stop.
  const Child* ReapUnexpected();
  // Waits (with signals as the clock) until `pred` holds, the deadline passes or a child dies.
  // Returns 0 on success, else an exit code after printing why.
  template <typename Pred>
  int WaitUntil(Clock::time_point deadline, const std::string& what, Pred pred);
  void StopGroup(std::vector<Child*> group);
  void StopAll();
  int ReportDeath(const Child& child);

  UpOptions options_;
  fs::path data_dir_;
  SignalGate gate_;
  std::vector<Child> children_;  // [0] is the scheduler once started
  bool stopping_ = false;
};

StatusOr<pid_t> LocalFarm::Spawn(const std::string& binary, const std::vector<std::string>& args,
                                 const std::string& log_path) {
  int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    return Status::Internal("cannot open " + log_path + ": " + std::strerror(errno));
  }
  std::vector<std::string> argv_storage = {binary};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t parent = getpid();

  pid_t pid = fork();
  if (pid < 0) {
    close(log_fd);
    return Status::Internal(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    // Own process group: a terminal Ctrl-C reaches only `up`, which then stops the scheduler (it
    // drains its workers first). PDEATHSIG covers `up` itself being killed with SIGKILL.
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(127);
    int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    sigprocmask(SIG_SETMASK, &gate_.old_mask(), nullptr);
    execv(binary.c_str(), argv.data());
    dprintf(STDERR_FILENO, "tessera up: cannot run %s: %s\n", binary.c_str(), strerror(errno));
    _exit(127);
  }
  close(log_fd);
  return pid;
}

const Child* LocalFarm::ReapUnexpected() {
  const Child* unexpected = nullptr;
  for (Child& child : children_) {
    if (child.exited) continue;
    int status = 0;
    pid_t r = waitpid(child.pid, &status, WNOHANG);
    if (r == child.pid || (r < 0 && errno == ECHILD)) {
      child.exited = true;
      child.wait_status = status;
      if (!stopping_ && unexpected == nullptr) unexpected = &child;
    }
  }
  return unexpected;
}

int LocalFarm::ReportDeath(const Child& child) {
  std::cerr << "error: " << child.label << " (pid " << child.pid << ") exited unexpectedly ("
            << DescribeExit(child.wait_status) << "); its log is " << child.log_path << "\n"
            << LogTail(child.log_path, 8);
  StopAll();
  return 1;
}

template <typename Pred>
int LocalFarm::WaitUntil(Clock::time_point deadline, const std::string& what, Pred pred) {
  while (true) {
    if (const Child* dead = ReapUnexpected()) return ReportDeath(*dead);
    if (pred()) return 0;
    if (Clock::now() >= deadline) {
      std::cerr << "error: the local farm did not start within "
                << std::chrono::duration_cast<std::chrono::seconds>(kStartupTimeout).count()
                << " s: " << what << "; logs are in " << (data_dir_ / "logs").string() << "\n";
      StopAll();
      return 1;
    }
    if (gate_.Wait(kPollInterval) != 0) {
      std::cerr << "tessera up: interrupted during start-up; stopping\n";
      StopAll();
      return kExitInterrupted;
    }
  }
}

void LocalFarm::StopGroup(std::vector<Child*> group) {
  for (Child* c : group) {
    if (!c->exited) kill(c->pid, SIGTERM);
  }
  const auto deadline = Clock::now() + kStopGrace;
  bool forced = false;
  while (true) {
    ReapUnexpected();
    bool all_gone = std::all_of(group.begin(), group.end(), [](Child* c) { return c->exited; });
    if (all_gone) return;
    // A second Ctrl-C, or the grace period running out, escalates to SIGKILL.
    bool again = gate_.Wait(kPollInterval) != 0;
    if (!forced && (again || Clock::now() >= deadline)) {
      for (Child* c : group) {
        if (!c->exited) {
          std::cerr << "tessera up: " << c->label << " did not stop; killing it\n";
          kill(c->pid, SIGKILL);
        }
      }
      forced = true;
    }
  }
}

void LocalFarm::StopAll() {
  stopping_ = true;
  if (children_.empty()) return;
  StopGroup({&children_[0]});
}

int LocalFarm::Run() {
  const int n = options_.workers;
  int threads = options_.threads;
  if (threads <= 0) {
    threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / n);
  }
  for (const auto& [port, flag] : PortsOf(options_)) {
    if (port == 0) continue;
    Status free = CheckPortFree(port, flag);
    if (!free.ok()) {
      std::cerr << "error: " << flag << ": " << free.message() << "\n";
      return 1;
    }
  }
  StatusOr<std::string> scheduler_bin = FindBinary("tessera-scheduler");
  StatusOr<std::string> worker_bin = FindBinary("tessera-worker");  // the scheduler starts them
  for (const auto* bin : {&scheduler_bin, &worker_bin}) {
    if (!bin->ok()) {
      std::cerr << "error: " << bin->status().message() << "\n";
      return 1;
    }
  }
  std::error_code ec;
  fs::create_directories(data_dir_ / "logs", ec);
  if (ec) {
    std::cerr << "error: --data: cannot create " << (data_dir_ / "logs").string() << ": "
              << ec.message() << "\n";
    return 1;
  }
  const fs::path info_path = data_dir_ / "scheduler.json";
  fs::remove(info_path, ec);  // stale from an earlier run; only the new scheduler writes it
  // The workers are the scheduler's: an autoscaler node group of local worker processes held at
  // n nodes, named local-<id>, logging to logs/<name>.log. They drain and leave with it.
  const fs::path config_path = data_dir_ / "up-scheduler.yaml";
  {
    const nlohmann::json worker_bin_json = *worker_bin, logs_json = (data_dir_ / "logs").string();
    std::ofstream config(config_path);
    config << "# Written by `tessera up` at every start.\nautoscaler:\n  interval_s: 1\n"
           << "  groups:\n    - name: local\n      provider:\n        kind: local\n"
           << "        worker_binary: " << worker_bin_json.dump() << "\n"
           << "        worker_args: [--threads, '" << threads << "']\n"
           << "        log_dir: " << logs_json.dump() << "\n"
           << "      price_per_hour: 0\n      min_nodes: " << n << "\n      max_nodes: " << n
           << "\n";
    if (!config) {
      std::cerr << "error: --data: cannot write " << config_path.string() << "\n";
      return 1;
    }
  }

  const auto deadline = Clock::now() + kStartupTimeout;
  const std::string scheduler_log = (data_dir_ / "logs" / "scheduler.log").string();
  StatusOr<pid_t> pid = Spawn(*scheduler_bin,
                              {"--config", config_path.string(), "--data", data_dir_.string(),
                               "--api", "127.0.0.1:" + std::to_string(options_.port), "--broker",
                               "tcp://127.0.0.1:" + std::to_string(options_.broker_port),
                               // A farm on this machine only: workers connect over loopback without
                               // CURVE keys, and the API (on 127.0.0.1) takes no tokens.
                               "--security", "insecure", "--auth", "none"},
                              scheduler_log);
  if (!pid.ok()) {
    std::cerr << "error: cannot start tessera-scheduler: " << pid.status().message() << "\n";
    return 1;
  }
  children_.push_back({"scheduler", scheduler_log, *pid});

  nlohmann::json info;
  int rc = WaitUntil(deadline, "the scheduler never wrote " + info_path.string(), [&] {
    std::ifstream in(info_path);
    if (!in) return false;
    nlohmann::json parsed = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_discarded() || !parsed.contains("api_url") ||
        !parsed.contains("broker_endpoint")) {
      return false;
    }
    info = std::move(parsed);
    return true;
  });
  if (rc != 0) return rc;
  const std::string api_url = info.value("api_url", std::string());
  const std::string broker = info.value("broker_endpoint", std::string());

  ApiClient client({api_url, "", ""});
  rc = WaitUntil(deadline, "GET " + api_url + "/healthz never answered", [&] {
    StatusOr<json> health = client.Get("/healthz");
    return health.ok();
  });
  if (rc != 0) return rc;

  rc = WaitUntil(deadline, "not all " + std::to_string(n) + " workers registered", [&] {
    StatusOr<json> reply = client.Get("/api/v1/workers");
    if (!reply.ok() || !reply->contains("workers") || !(*reply)["workers"].is_array()) {
      return false;
    }
    int online = 0;
    for (const json& w : (*reply)["workers"]) {
      online += w.value("node_group", std::string()) == "local" &&
                w.value("state", std::string()) != "offline";
    }
    return online >= n;
  });
  if (rc != 0) return rc;

  std::cout << "Tessera farm ready: API " << api_url << "  (scheduler + " << n << " workers, data "
            << data_dir_.string() << ")" << std::endl;
  std::cout << "Workers' port: " << broker << "  (more workers: tessera-worker --scheduler "
            << broker << ")" << std::endl;
  std::cout << "Local insecure mode: workers connect over loopback without CURVE encryption and "
               "the API takes no tokens; run tessera-scheduler with its defaults "
               "(broker.security: curve, api.auth: token) for a networked farm"
            << std::endl;
  // Its workers run as this user with no worker config: the path tracer and the renderers they
  // find (POV-Ray, Blender), never a program a job names.
  std::cout << "The command renderer is off on these workers (worker.command_programs is empty); "
               "a farm that needs it runs tessera-worker with a config that lists its programs"
            << std::endl;

  while (true) {
    int sig = gate_.Wait(std::chrono::seconds(1));
    if (sig != 0) {
      std::cerr << "tessera up: " << strsignal(sig) << "; stopping the workers and the scheduler\n";
      StopAll();
      std::cerr << "tessera up: farm stopped\n";
      return 0;
    }
    if (const Child* dead = ReapUnexpected()) return ReportDeath(*dead);
  }
}

}  // namespace

int RunUp(const UpOptions& options) {
  if (options.workers < 1 || options.workers > 256) {
    std::cerr << "error: --workers: must be in [1, 256], got " << options.workers << "\n";
    return 2;
  }
  for (const auto& [port, flag] : PortsOf(options)) {
    if (port < 0 || port > 65535) {
      std::cerr << "error: " << flag << ": must be in [0, 65535], got " << port << "\n";
      return 2;
    }
  }
  if (options.port != 0 && options.port == options.broker_port) {
    std::cerr << "error: --broker-port: " << options.port << " is also the API's --port\n";
    return 2;
  }
  std::error_code ec;
  fs::path data_dir = fs::weakly_canonical(fs::absolute(options.data_dir, ec), ec);
  if (ec || options.data_dir.empty()) {
    std::cerr << "error: --data: '" << options.data_dir << "' is not a usable directory path\n";
    return 2;
  }
  LocalFarm farm(options, data_dir);
  return farm.Run();
}

}  // namespace tessera::cli
