#include "tests/support/process.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace tessera::testing {

Process Process::Start(const std::vector<std::string>& argv, const std::string& log_path) {
  Process p;
  pid_t pid = ::fork();
  if (pid == 0) {
    int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::close(fd);
    }
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    _exit(127);
  }
  p.pid_ = pid;
  return p;
}

Process::~Process() { Stop(std::chrono::milliseconds(2000)); }

Process::Process(Process&& other) noexcept { *this = std::move(other); }

Process& Process::operator=(Process&& other) noexcept {
  std::swap(pid_, other.pid_);
  std::swap(exit_code_, other.exit_code_);
  return *this;
}

bool Process::running() {
  if (pid_ <= 0 || exit_code_) return false;
  int status = 0;
  pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
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
  if (pid_ <= 0) return;
  if (running()) {
    ::kill(pid_, SIGTERM);
    if (!Wait(grace)) {
      ::kill(pid_, SIGKILL);
      Wait(std::chrono::milliseconds(5000));
    }
  }
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

}  // namespace tessera::testing
