#include "scheduler/autoscaler/providers.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "shared/base/subprocess.h"

namespace tessera::autoscaler {

namespace {

// What a template may use for `request`: its vars, plus {name} and {group}.
std::map<std::string, std::string> TemplateVars(const NodeRequest& request) {
  std::map<std::string, std::string> vars = request.vars;
  vars["name"] = request.worker_name;
  vars["group"] = request.group;
  return vars;
}

// Worker processes on this machine, one per node; the id is the process id.
class LocalProvider : public Provider {
 public:
  explicit LocalProvider(ProviderConfig config) : config_(std::move(config)) {}

  ~LocalProvider() override {
    // The scheduler is going away: its local workers drain and leave with it. A worker still
    // rendering after kDrainWait is told again (it hands its task back), then killed.
    std::lock_guard lock(mu_);
    for (pid_t pid : pids_) ::kill(pid, SIGTERM);
    const auto wait = [this](std::chrono::seconds limit) {
      const auto until = std::chrono::steady_clock::now() + limit;
      while (!pids_.empty() && std::chrono::steady_clock::now() < until) {
        Reap();
        if (!pids_.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    };
    wait(kDrainWait);
    for (pid_t pid : pids_) ::kill(pid, SIGTERM);
    wait(std::chrono::seconds(5));
    for (pid_t pid : pids_) ::kill(pid, SIGKILL);
    for (pid_t pid : pids_) ::waitpid(pid, nullptr, 0);
  }

  StatusOr<std::string> Create(const NodeRequest& request) override {
    std::vector<std::string> argv = {config_.worker_binary,
                                     "--name",
                                     request.worker_name,
                                     "--data-dir",
                                     config_.log_dir + "/" + request.worker_name,
                                     "--exit-with-parent"};
    // The scheduler's address, and on a CURVE farm its key and a join token to enrol with.
    for (const auto& [var, flag] :
         {std::pair{"scheduler", "--scheduler"}, std::pair{"public_key", "--public-key"},
          std::pair{"join_token", "--join-token"}}) {
      const auto it = request.vars.find(var);
      if (it != request.vars.end() && !it->second.empty())
        argv.insert(argv.end(), {flag, it->second});
    }
    for (const std::string& p : request.pools) argv.insert(argv.end(), {"--pool", p});
    for (const std::string& t : request.tags) argv.insert(argv.end(), {"--tag", t});
    for (const std::string& a : config_.worker_args) {
      TSR_ASSIGN_OR_RETURN(std::string arg, Substitute(a, TemplateVars(request)));
      argv.push_back(std::move(arg));
    }
    std::error_code ec;
    std::filesystem::create_directories(config_.log_dir, ec);
    TSR_ASSIGN_OR_RETURN(
        pid_t pid, subprocess::Start(argv, config_.log_dir + "/" + request.worker_name + ".log"));
    std::lock_guard lock(mu_);
    pids_.push_back(pid);
    Reap();
    return std::to_string(pid);
  }

  Status Terminate(const std::string& id) override {
    std::lock_guard lock(mu_);
    Reap();
    for (pid_t pid : pids_) {
      if (std::to_string(pid) == id) {
        ::kill(pid, SIGTERM);  // drains: the worker finishes its task, then exits
        return Status::Ok();
      }
    }
    return Status::NotFound("no local worker process " + id + " is running");
  }
  bool TerminateDrains() const override { return true; }

 private:
  // Collects the exit of workers that left (mu_ held).
  void Reap() {
    std::erase_if(pids_, [](pid_t pid) { return ::waitpid(pid, nullptr, WNOHANG) == pid; });
  }

  static constexpr std::chrono::seconds kDrainWait{10};
  const ProviderConfig config_;
  std::mutex mu_;
  std::vector<pid_t> pids_;
};

// A cloud's command-line tool, through argv templates.
class CommandProvider : public Provider {
 public:
  explicit CommandProvider(ProviderConfig config) : config_(std::move(config)) {}

  StatusOr<std::string> Create(const NodeRequest& request) override {
    std::string last;
    TSR_RETURN_IF_ERROR(Run(config_.create, TemplateVars(request), &last));
    while (!last.empty() && (last.back() == ' ' || last.back() == '\t')) last.pop_back();
    if (last.empty()) {
      return Status::Unavailable("the create command printed no instance id");
    }
    return last;
  }

  Status Terminate(const std::string& id) override {
    std::string ignored;
    return Run(config_.terminate, {{"id", id}}, &ignored);
  }
  bool TerminateDrains() const override { return false; }

 private:
  Status Run(const std::vector<std::string>& templ, const std::map<std::string, std::string>& vars,
             std::string* last_line) {
    std::vector<std::string> argv;
    for (const std::string& t : templ) {
      TSR_ASSIGN_OR_RETURN(std::string arg, Substitute(t, vars));
      argv.push_back(std::move(arg));
    }
    TSR_ASSIGN_OR_RETURN(std::vector<std::string> output, RunTool(argv, config_.timeout_s));
    *last_line = output.empty() ? "" : output.back();
    return Status::Ok();
  }

  const ProviderConfig config_;
};

}  // namespace

StatusOr<std::vector<std::string>> RunTool(std::vector<std::string> argv, int timeout_s,
                                           const std::string& what) {
  const char* path = std::getenv("PATH");
  std::optional<std::string> program =
      subprocess::FindProgram(argv[0], path ? path : "/usr/local/bin:/usr/bin:/bin");
  if (!program) return Status::Unavailable(argv[0] + ": not found in PATH");
  argv[0] = *program;
  std::vector<std::string> output;
  const subprocess::ProcessResult r = subprocess::RunProcess(
      argv, "/", nullptr, std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s),
      [&](const std::string& line) {
        if (!line.empty()) output.push_back(line);
      });
  const std::string tail = output.empty() ? "" : ": " + output.back();
  const std::string label = *program + (what.empty() ? "" : " " + what);
  if (!r.started) return Status::Unavailable(label + " could not be started" + tail);
  if (r.timed_out) {
    return Status::Unavailable(label + " ran longer than " + std::to_string(timeout_s) + " s" +
                               tail);
  }
  if (r.exit_code != 0) {
    return Status::Unavailable(label + " failed (exit " + std::to_string(r.exit_code) +
                               ", signal " + std::to_string(r.signal) + ")" + tail);
  }
  return output;
}

StatusOr<std::string> Substitute(const std::string& text,
                                 const std::map<std::string, std::string>& vars) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    // "{{" and "}}" are literal braces (cloud CLIs use them in their own syntax).
    if ((text[i] == '{' || text[i] == '}') && i + 1 < text.size() && text[i + 1] == text[i]) {
      out += text[i];
      i += 2;
      continue;
    }
    if (text[i] != '{') {
      out += text[i++];
      continue;
    }
    const size_t close = text.find('}', i);
    if (close == std::string::npos) {
      return Status::InvalidArgument("'" + text + "': a '{' without its '}'");
    }
    const std::string key = text.substr(i + 1, close - i - 1);
    auto it = vars.find(key);
    if (it == vars.end()) {
      std::string known;
      for (const auto& [k, v] : vars) known += (known.empty() ? "" : ", ") + k;
      return Status::InvalidArgument("'" + text + "': no value for {" + key + "} (known: " + known +
                                     ")");
    }
    out += it->second;
    i = close + 1;
  }
  return out;
}

StatusOr<std::unique_ptr<Provider>> MakeProvider(const ProviderConfig& config) {
  if (config.timeout_s < 1 || config.timeout_s > 3600) {
    return Status::InvalidArgument("provider.timeout_s: must be in [1, 3600]");
  }
  if (config.kind == "local") {
    if (config.worker_binary.empty()) {
      return Status::InvalidArgument("provider.worker_binary: required for a local provider");
    }
    return std::unique_ptr<Provider>(std::make_unique<LocalProvider>(config));
  }
  if (config.kind == "command") {
    if (config.create.empty()) return Status::InvalidArgument("provider.create: required");
    if (config.terminate.empty()) return Status::InvalidArgument("provider.terminate: required");
    return std::unique_ptr<Provider>(std::make_unique<CommandProvider>(config));
  }
  if (config.kind == "kubernetes") {
    if (config.deployment.empty()) {
      return Status::InvalidArgument("provider.deployment: required for a kubernetes provider");
    }
    return MakeKubernetesProvider(config);
  }
  return Status::InvalidArgument("provider.kind: expected local, command or kubernetes, got '" +
                                 config.kind + "'");
}

}  // namespace tessera::autoscaler
