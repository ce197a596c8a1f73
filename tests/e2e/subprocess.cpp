#include "tests/e2e/subprocess.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace tessera::e2e {

namespace {

using Clock = std::chrono::steady_clock;

int DecodeWaitStatus(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

// Forks and execs argv; the child's stdout/stderr go to the given fds. The CLI's own settings
// (server, token, config file) are cleared, then `env` ("NAME=VALUE") is applied.
pid_t Spawn(const std::vector<std::string>& argv, int out_fd, int err_fd,
            const std::vector<std::string>& env = {}) {
  std::vector<std::string> storage = argv;
  std::vector<char*> args;
  for (auto& a : storage) args.push_back(a.data());
  args.push_back(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    int null_fd = open("/dev/null", O_RDONLY);
    dup2(null_fd, STDIN_FILENO);
    dup2(out_fd, STDOUT_FILENO);
    dup2(err_fd, STDERR_FILENO);
    for (const char* name : {"TESSERA_SERVER", "TESSERA_TOKEN", "TESSERA_TOKEN_FILE",
                             "TESSERA_CA_FILE", "TESSERA_CONFIG"}) {
      unsetenv(name);
    }
    setenv("XDG_CONFIG_HOME", "/nonexistent/tessera-test-config", 1);
    for (const std::string& entry : env) {
      const size_t eq = entry.find('=');
      setenv(entry.substr(0, eq).c_str(), entry.substr(eq + 1).c_str(), 1);
    }
    execv(args[0], args.data());
    dprintf(STDERR_FILENO, "exec %s failed: %d\n", args[0], errno);
    _exit(127);
  }
  return pid;
}

int MillisLeft(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::max<int64_t>(0, left.count()));
}

pid_t ParentOf(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t close_paren = text.rfind(')');
  if (close_paren == std::string::npos) return -1;
  std::istringstream rest(text.substr(close_paren + 2));
  char state = 0;
  pid_t ppid = -1;
  rest >> state >> ppid;
  return ppid;
}

}  // namespace

RunResult RunProcess(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                     const std::vector<std::string>& env) {
  RunResult result;
  int out_pipe[2];
  int err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) return result;
  pid_t pid = Spawn(argv, out_pipe[1], err_pipe[1], env);
  close(out_pipe[1]);
  close(err_pipe[1]);
  const auto deadline = Clock::now() + timeout;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_fds = 2;
  while (open_fds > 0) {
    int left = MillisLeft(deadline);
    if (left == 0) {
      result.timed_out = true;
      break;
    }
    if (poll(fds, 2, left) < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buf[4096];
      ssize_t n = read(fds[i].fd, buf, sizeof(buf));
      if (n > 0) {
        sinks[i]->append(buf, static_cast<size_t>(n));
      } else {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (auto& f : fds) {
    if (f.fd >= 0) close(f.fd);
  }
  if (result.timed_out) kill(pid, SIGKILL);
  int status = 0;
  // After EOF the child is exiting; bound the reap anyway.
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (MillisLeft(deadline) == 0 && !result.timed_out) {
      result.timed_out = true;
      kill(pid, SIGKILL);
    }
    usleep(10000);
  }
  result.exit_code = DecodeWaitStatus(status);
  return result;
}

BackgroundProcess::BackgroundProcess(const std::vector<std::string>& argv,
                                     const std::string& stderr_path) {
  int out_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) return;
  int err_fd = open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  pid_ = Spawn(argv, out_pipe[1], err_fd >= 0 ? err_fd : STDERR_FILENO);
  close(out_pipe[1]);
  if (err_fd >= 0) close(err_fd);
  stdout_fd_ = out_pipe[0];
}

BackgroundProcess::~BackgroundProcess() {
  if (pid_ > 0 && !exited_) {
    Children();
    kill(pid_, SIGKILL);
    Wait(std::chrono::seconds(5));
  }
  for (pid_t child : known_children_) {
    if (ProcessAlive(child)) kill(child, SIGKILL);
  }
  if (stdout_fd_ >= 0) close(stdout_fd_);
}

std::optional<std::string> BackgroundProcess::ReadLine(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (true) {
    size_t newline = buffer_.find('\n');
    if (newline != std::string::npos) {
      std::string line = buffer_.substr(0, newline);
      buffer_.erase(0, newline + 1);
      return line;
    }
    int left = MillisLeft(deadline);
    if (left == 0 || stdout_fd_ < 0) return std::nullopt;
    pollfd fd{stdout_fd_, POLLIN, 0};
    if (poll(&fd, 1, left) <= 0) continue;
    char buf[4096];
    ssize_t n = read(stdout_fd_, buf, sizeof(buf));
    if (n <= 0) return std::nullopt;
    buffer_.append(buf, static_cast<size_t>(n));
  }
}

std::optional<int> BackgroundProcess::Wait(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (true) {
    int status = 0;
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      exited_ = true;
      return DecodeWaitStatus(status);
    }
    if (r < 0 || MillisLeft(deadline) == 0) return std::nullopt;
    usleep(20000);
  }
}

std::vector<pid_t> BackgroundProcess::Children() {
  // Every process and its parent, then the tree under pid_ (children, their children...).
  std::vector<std::pair<pid_t, pid_t>> all;
  DIR* dir = opendir("/proc");
  if (dir == nullptr) return {};
  while (dirent* entry = readdir(dir)) {
    char* end = nullptr;
    long pid = std::strtol(entry->d_name, &end, 10);
    if (*end != '\0' || pid <= 0) continue;
    all.emplace_back(static_cast<pid_t>(pid), ParentOf(static_cast<pid_t>(pid)));
  }
  closedir(dir);
  std::vector<pid_t> children;
  std::vector<pid_t> parents = {pid_};
  while (!parents.empty()) {
    const pid_t parent = parents.back();
    parents.pop_back();
    for (const auto& [pid, ppid] : all) {
      if (ppid != parent) continue;
      children.push_back(pid);
      parents.push_back(pid);
    }
  }
  for (pid_t c : children) known_children_.push_back(c);
  return children;
}

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

bool ProcessAlive(pid_t pid) {
  if (kill(pid, 0) != 0) return false;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t close_paren = text.rfind(')');
  return close_paren == std::string::npos || close_paren + 2 >= text.size() ||
         text[close_paren + 2] != 'Z';
}

}  // namespace tessera::e2e
