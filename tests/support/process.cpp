#include "tests/support/process.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

extern char** environ;

namespace tessera::testing {

namespace {

using Clock = std::chrono::steady_clock;

// The CLI's own settings: a client run never sees the developer's.
constexpr const char* kClientSettings[] = {
    "TESSERA_SERVER=",  "TESSERA_TOKEN=",  "TESSERA_TOKEN_FILE=",
    "TESSERA_CA_FILE=", "TESSERA_CONFIG=", "XDG_CONFIG_HOME="};

// The test's environment without the CLI's settings, its config folder out of reach, then `env`
// ("NAME=VALUE", replacing an entry of the same name).
std::vector<std::string> ClientEnvironment(const std::vector<std::string>& env) {
  std::vector<std::string> out;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry(*e);
    if (std::none_of(std::begin(kClientSettings), std::end(kClientSettings),
                     [&](const char* name) { return entry.starts_with(name); })) {
      out.emplace_back(entry);
    }
  }
  out.emplace_back("XDG_CONFIG_HOME=/nonexistent/tessera-test-config");
  for (const std::string& entry : env) {
    const size_t eq = entry.find('=');
    const std::string named = eq == std::string::npos ? entry + "=" : entry;
    const std::string name = named.substr(0, named.find('=') + 1);
    std::erase_if(out, [&](const std::string& e) { return e.starts_with(name); });
    out.push_back(named);
  }
  return out;
}

// Where a child's stdout and stderr go.
struct ChildIo {
  int out_fd = -1;
  int err_fd = -1;
};

// Forks and execs argv[0]: stdin from /dev/null, stdout and stderr to `io`, the environment
// `env` (nullopt: the test's own). Everything the child needs is built before the fork, so the
// child only calls async-signal-safe functions. -1 when fork fails.
pid_t Spawn(const std::vector<std::string>& argv, ChildIo io,
            const std::optional<std::vector<std::string>>& env) {
  std::vector<std::string> arg_storage = argv;
  std::vector<char*> args;
  for (std::string& a : arg_storage) args.push_back(a.data());
  args.push_back(nullptr);
  std::vector<std::string> env_storage = env.value_or(std::vector<std::string>{});
  std::vector<char*> envp;
  for (std::string& e : env_storage) envp.push_back(e.data());
  envp.push_back(nullptr);
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(null_fd, STDIN_FILENO);
    ::dup2(io.out_fd, STDOUT_FILENO);
    ::dup2(io.err_fd, STDERR_FILENO);
    char** child_env = env ? envp.data() : environ;
    ::execve(args[0], args.data(), child_env);
    ::dprintf(STDERR_FILENO, "exec %s failed: %s\n", args[0], std::strerror(errno));
    ::_exit(127);
  }
  if (null_fd >= 0) ::close(null_fd);
  return pid;
}

int DecodeWaitStatus(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

int MillisLeft(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::max<int64_t>(0, left.count()));
}

// The text of /proc/<pid>/stat after the command name: "S PPID ...".
std::string StatAfterName(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close_paren = text.rfind(')');
  if (close_paren == std::string::npos || close_paren + 2 >= text.size()) return "";
  return text.substr(close_paren + 2);
}

pid_t ParentOf(pid_t pid) {
  std::istringstream rest(StatAfterName(pid));
  char state = 0;
  pid_t ppid = -1;
  rest >> state >> ppid;
  return ppid;
}

// Reads both pipes until EOF on both or the deadline; true when the deadline came first.
bool DrainPipes(int out_fd, int err_fd, RunResult* result, Clock::time_point deadline) {
  pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
  std::string* sinks[2] = {&result->out, &result->err};
  int open_fds = 2;
  bool timed_out = false;
  while (open_fds > 0) {
    const int left = MillisLeft(deadline);
    if (left == 0) {
      timed_out = true;
      break;
    }
    if (::poll(fds, 2, left) < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buf[4096];
      const ssize_t n = ::read(fds[i].fd, buf, sizeof(buf));
      if (n > 0) {
        sinks[i]->append(buf, static_cast<size_t>(n));
      } else {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (const pollfd& f : fds) {
    if (f.fd >= 0) ::close(f.fd);
  }
  return timed_out;
}

}  // namespace

RunResult RunProcess(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                     const std::vector<std::string>& env) {
  RunResult result;
  int out_pipe[2];
  int err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) return result;
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    return result;
  }
  const pid_t pid = Spawn(argv, {out_pipe[1], err_pipe[1]}, ClientEnvironment(env));
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  if (pid < 0) {
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    return result;
  }
  const auto deadline = Clock::now() + timeout;
  result.timed_out = DrainPipes(out_pipe[0], err_pipe[0], &result, deadline);
  if (result.timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  // After EOF the child is exiting; bound the reap anyway.
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (MillisLeft(deadline) == 0 && !result.timed_out) {
      result.timed_out = true;
      ::kill(pid, SIGKILL);
    }
    ::usleep(10000);
  }
  result.exit_code = DecodeWaitStatus(status);
  return result;
}

Process Process::Start(const std::vector<std::string>& argv, const std::string& log_path) {
  Process p;
  const int log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  const int fd = log_fd >= 0 ? log_fd : STDERR_FILENO;
  p.pid_ = Spawn(argv, {fd, fd}, std::nullopt);
  if (log_fd >= 0) ::close(log_fd);
  return p;
}

Process Process::StartClient(const std::vector<std::string>& argv, const std::string& stderr_path) {
  Process p;
  int out_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) return p;
  const int err_fd = ::open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  p.pid_ = Spawn(argv, {out_pipe[1], err_fd >= 0 ? err_fd : STDERR_FILENO}, ClientEnvironment({}));
  ::close(out_pipe[1]);
  if (err_fd >= 0) ::close(err_fd);
  p.stdout_fd_ = out_pipe[0];
  return p;
}

Process::~Process() {
  if (running()) Descendants();
  Stop(std::chrono::milliseconds(2000));
  for (pid_t pid : descendants_) {
    if (ProcessAlive(pid)) ::kill(pid, SIGKILL);
  }
  if (stdout_fd_ >= 0) ::close(stdout_fd_);
}

Process::Process(Process&& other) noexcept { *this = std::move(other); }

Process& Process::operator=(Process&& other) noexcept {
  // The handle given up goes away with `other`, which stops it.
  std::swap(pid_, other.pid_);
  std::swap(exit_code_, other.exit_code_);
  std::swap(stdout_fd_, other.stdout_fd_);
  std::swap(buffered_, other.buffered_);
  std::swap(descendants_, other.descendants_);
  return *this;
}

bool Process::running() {
  if (pid_ <= 0 || exit_code_) return false;
  int status = 0;
  const pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    exit_code_ = DecodeWaitStatus(status);
    return false;
  }
  return r == 0;
}

void Process::Signal(int sig) {
  if (running()) ::kill(pid_, sig);
}

std::optional<int> Process::Wait(std::chrono::milliseconds timeout) {
  WaitFor([this] { return !running(); }, timeout, std::chrono::milliseconds(10));
  return exit_code_;
}

void Process::Stop(std::chrono::milliseconds grace) {
  if (!running()) return;
  ::kill(pid_, SIGTERM);
  if (!Wait(grace)) {
    ::kill(pid_, SIGKILL);
    Wait(std::chrono::milliseconds(5000));
  }
}

std::optional<std::string> Process::ReadLine(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (true) {
    const size_t newline = buffered_.find('\n');
    if (newline != std::string::npos) {
      std::string line = buffered_.substr(0, newline);
      buffered_.erase(0, newline + 1);
      return line;
    }
    const int left = MillisLeft(deadline);
    if (left == 0 || stdout_fd_ < 0) return std::nullopt;
    pollfd fd{stdout_fd_, POLLIN, 0};
    if (::poll(&fd, 1, left) <= 0) continue;
    char buf[4096];
    const ssize_t n = ::read(stdout_fd_, buf, sizeof(buf));
    if (n <= 0) return std::nullopt;
    buffered_.append(buf, static_cast<size_t>(n));
  }
}

std::vector<pid_t> Process::Descendants() {
  // Every process and its parent, then the tree under pid_ (children, their children...).
  std::vector<std::pair<pid_t, pid_t>> all;
  DIR* dir = ::opendir("/proc");
  if (dir == nullptr) return {};
  while (dirent* entry = ::readdir(dir)) {
    char* end = nullptr;
    const long pid = std::strtol(entry->d_name, &end, 10);
    if (*end != '\0' || pid <= 0) continue;
    all.emplace_back(static_cast<pid_t>(pid), ParentOf(static_cast<pid_t>(pid)));
  }
  ::closedir(dir);
  std::vector<pid_t> found;
  std::vector<pid_t> parents = {pid_};
  while (!parents.empty()) {
    const pid_t parent = parents.back();
    parents.pop_back();
    for (const auto& [pid, ppid] : all) {
      if (ppid != parent) continue;
      found.push_back(pid);
      parents.push_back(pid);
    }
  }
  descendants_.insert(descendants_.end(), found.begin(), found.end());
  return found;
}

int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

bool ProcessAlive(pid_t pid) {
  if (::kill(pid, 0) != 0) return false;
  const std::string rest = StatAfterName(pid);
  return rest.empty() || rest[0] != 'Z';
}

std::string Bin(const std::string& name) { return std::string(TSR_BIN_DIR) + "/" + name; }

std::string MakeTempDir(const std::string& prefix) {
  std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
  char* dir = ::mkdtemp(tmpl.data());
  return dir ? std::string(dir) : std::string();
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

std::string FileMode(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "missing";
  char text[8];
  std::snprintf(text, sizeof(text), "%03o", st.st_mode & 0777);
  return text;
}

}  // namespace tessera::testing
