#include "shared/base/subprocess.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

extern char** environ;

namespace tessera::subprocess {

namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kMaxLine = 64 * 1024;

bool IsExecutableFile(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

}  // namespace

std::optional<std::string> FindProgram(const std::string& name, const std::string& search_path) {
  if (name.empty()) return std::nullopt;
  if (name.find('/') != std::string::npos) {
    if (name[0] == '/' && IsExecutableFile(name)) return name;
    return std::nullopt;
  }
  size_t pos = 0;
  while (pos <= search_path.size()) {
    size_t next = search_path.find(':', pos);
    if (next == std::string::npos) next = search_path.size();
    std::string dir = search_path.substr(pos, next - pos);
    if (!dir.empty() && dir[0] == '/') {
      std::string candidate = dir + "/" + name;
      if (IsExecutableFile(candidate)) return candidate;
    }
    pos = next + 1;
  }
  return std::nullopt;
}

namespace {

// posix_spawn of argv with stdin from /dev/null and stdout+stderr to `output_fd`, in `cwd` (empty:
// ours), with default signal handling and an empty mask (both daemons block SIGINT/SIGTERM in
// their threads; a child must not inherit that). `own_group`: in a new process group, so a kill
// of the group reaches everything it starts. Returns posix_spawn's error (0: started).
int Spawn(const std::vector<std::string>& argv, const std::string& cwd, int output_fd,
          bool own_group, char** envp, pid_t* pid) {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&actions);
  posix_spawnattr_init(&attr);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, output_fd, 1);
  posix_spawn_file_actions_adddup2(&actions, output_fd, 2);
  if (!cwd.empty()) posix_spawn_file_actions_addchdir_np(&actions, cwd.c_str());
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
  if (own_group) {
    posix_spawnattr_setpgroup(&attr, 0);
    flags |= POSIX_SPAWN_SETPGROUP;
  }
  posix_spawnattr_setflags(&attr, flags);
  std::vector<char*> cargv;
  for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  const int rc = ::posix_spawn(pid, cargv[0], &actions, &attr, cargv.data(), envp);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  return rc;
}

// Writes a fixed message to fd 2 and exits: the only ways out of a forked child.
[[noreturn]] void ChildFail(const char* what) {
  const char prefix[] = "cannot start the program: ";
  (void)!::write(2, prefix, sizeof(prefix) - 1);
  (void)!::write(2, what, std::strlen(what));
  (void)!::write(2, "\n", 1);
  ::_exit(127);
}

// fork + exec for a program that runs as another user (posix_spawn cannot change the user).
// Between fork and exec only async-signal-safe calls: everything is prepared before the fork,
// and the user is changed with raw system calls (the child has a single thread).
int SpawnAs(const std::vector<std::string>& argv, const std::string& cwd, int output_fd,
            char** envp, const Identity& who, pid_t* pid) {
  std::vector<char*> cargv;
  for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  const pid_t child = ::fork();
  if (child < 0) return errno;
  if (child == 0) {
    ::setpgid(0, 0);
    const int in = ::open("/dev/null", O_RDONLY);
    if (in < 0 || ::dup2(in, 0) < 0 || ::dup2(output_fd, 1) < 0 || ::dup2(output_fd, 2) < 0) {
      ::_exit(127);
    }
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; ++sig) ::sigaction(sig, &dfl, nullptr);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    if (!cwd.empty() && ::chdir(cwd.c_str()) != 0) ChildFail("cannot enter its folder");
      // No file of the worker's stays open in a program running as someone else.
#ifdef SYS_close_range
    ::syscall(SYS_close_range, 3U, ~0U, 0U);
#endif
    if (::syscall(SYS_setgroups, who.groups.size(), who.groups.data()) != 0) {
      ChildFail("setgroups failed");
    }
    if (::syscall(SYS_setresgid, who.gid, who.gid, who.gid) != 0) ChildFail("setgid failed");
    if (::syscall(SYS_setresuid, who.uid, who.uid, who.uid) != 0) ChildFail("setuid failed");
    // A set-uid program (su, sudo) cannot take the privileges back.
    ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    ::execve(cargv[0], cargv.data(), envp);
    ChildFail("exec failed");
  }
  ::setpgid(child, child);  // also here, so the group exists before the parent ever kills it
  *pid = child;
  return 0;
}

// The child's environment per `options`; empty when it is ours unchanged.
std::vector<std::string> ChildEnvironment(const RunOptions& options) {
  std::vector<std::string> env;
  if (!options.scrub_environment && options.set_env.empty()) return env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry(*e);
    const std::string name = entry.substr(0, entry.find('='));
    if (options.scrub_environment && name.rfind("TESSERA_", 0) == 0) continue;
    if (options.set_env.count(name)) continue;
    env.push_back(entry);
  }
  for (const auto& [name, value] : options.set_env) env.push_back(name + "=" + value);
  return env;
}

}  // namespace

StatusOr<pid_t> Start(const std::vector<std::string>& argv, const std::string& log_path) {
  const int log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) return Status::Internal("cannot open " + log_path + ": " + std::strerror(errno));
  pid_t pid = -1;
  const int rc = Spawn(argv, "", log_fd, /*own_group=*/false, environ, &pid);
  ::close(log_fd);
  if (rc != 0) return Status::Unavailable("cannot start " + argv[0] + ": " + std::strerror(rc));
  return pid;
}

StatusOr<Identity> LookupUser(const std::string& user) {
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* found = nullptr;
  const int rc = ::getpwnam_r(user.c_str(), &pw, buf.data(), buf.size(), &found);
  if (rc != 0 || found == nullptr) {
    return Status::NotFound("user '" + user + "' does not exist on this machine");
  }
  Identity who;
  who.user = user;
  who.uid = pw.pw_uid;
  who.gid = pw.pw_gid;
  who.home = pw.pw_dir != nullptr ? pw.pw_dir : "/";
  int count = 64;
  std::vector<gid_t> groups(static_cast<size_t>(count));
  while (::getgrouplist(user.c_str(), pw.pw_gid, groups.data(), &count) < 0) {
    if (count > 65536) return Status::Internal("user '" + user + "': too many groups");
    groups.resize(static_cast<size_t>(count) * 2);
    count = static_cast<int>(groups.size());
  }
  groups.resize(static_cast<size_t>(count));
  who.groups = std::move(groups);
  return who;
}

ProcessResult RunProcess(const std::vector<std::string>& argv, const std::string& cwd,
                         const std::atomic<bool>* cancel, std::optional<Clock::time_point> deadline,
                         const std::function<void(const std::string&)>& on_line,
                         const RunOptions& options) {
  ProcessResult result;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return result;
  const std::vector<std::string> env = ChildEnvironment(options);
  std::vector<char*> envp;
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  char** child_env = env.empty() && !options.scrub_environment ? environ : envp.data();
  // Its own process group, so cancel and timeout reach every process it starts.
  pid_t pid = -1;
  const int rc = options.run_as ? SpawnAs(argv, cwd, fds[1], child_env, *options.run_as, &pid)
                                : Spawn(argv, cwd, fds[1], /*own_group=*/true, child_env, &pid);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    on_line(std::string("cannot start ") + argv[0] + ": " + std::strerror(rc));
    return result;
  }
  result.started = true;

  std::string line;
  bool eof = false, exited = false, killed = false;
  int status = 0;
  char buf[8192];
  std::optional<Clock::time_point> kill_at;  // notified (SIGTERM): SIGKILL then
  auto kill_group = [&] {
    if (killed) return;
    if (options.notify_period.count() > 0 && !kill_at) {
      ::kill(-pid, SIGTERM);
      kill_at = Clock::now() + options.notify_period;
      return;
    }
    ::kill(-pid, SIGKILL);
    killed = true;
  };
  while (!eof || !exited) {
    if (kill_at && !killed && Clock::now() >= *kill_at) kill_group();
    if (!killed && !kill_at) {
      if (cancel && cancel->load()) {
        result.cancelled = true;
        kill_group();
      } else if (deadline && Clock::now() >= *deadline) {
        result.timed_out = true;
        kill_group();
      }
    }
    if (!eof) {
      pollfd p{fds[0], POLLIN, 0};
      if (::poll(&p, 1, 100) > 0) {
        ssize_t n = ::read(fds[0], buf, sizeof(buf));
        if (n <= 0 && !(n < 0 && errno == EINTR)) {
          eof = true;
        } else {
          for (ssize_t i = 0; i < n; ++i) {
            if (buf[i] == '\n' || buf[i] == '\r') {
              on_line(line);
              line.clear();
            } else if (line.size() < kMaxLine) {
              line += buf[i];
            }
          }
        }
      }
    } else if (!exited) {
      ::usleep(20000);
    }
    if (!exited) {
      pid_t w = ::waitpid(pid, &status, WNOHANG);
      if (w == pid) {
        exited = true;
        // Anything it left running in its group (and holding the pipe) goes too.
        ::kill(-pid, SIGKILL);
      }
    }
  }
  if (!line.empty()) on_line(line);
  ::close(fds[0]);
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  return result;
}

}  // namespace tessera::subprocess
