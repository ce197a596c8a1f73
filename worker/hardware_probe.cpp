#include "worker/hardware_probe.h"

#include <sys/sysinfo.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <climits>
#include <fstream>
#include <sstream>
#include <thread>

namespace tessera::worker {
namespace {

int64_t TotalRamMb() {
  struct sysinfo info {};
  if (sysinfo(&info) == 0 && info.totalram > 0) {
    return static_cast<int64_t>(info.totalram) * info.mem_unit / (1024 * 1024);
  }
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  while (std::getline(meminfo, line)) {
    if (line.rfind("MemTotal:", 0) == 0) {
      std::istringstream fields(line.substr(9));
      int64_t kb = 0;
      fields >> kb;
      return kb / 1024;
    }
  }
  return 0;
}

std::string Trim(const std::string& text) {
  const size_t begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "";
  return text.substr(begin, text.find_last_not_of(" \t\r\n") - begin + 1);
}

// The value of KEY=VALUE in an os-release file, without shell quotes.
std::string OsReleaseValue(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + "=", 0) != 0) continue;
    std::string value = Trim(line.substr(key.size() + 1));
    if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') &&
        value.back() == value.front()) {
      value = value.substr(1, value.size() - 2);
    }
    return value;
  }
  return "";
}

}  // namespace

std::string OsDescription() {
  std::string distro = OsReleaseValue("/etc/os-release", "PRETTY_NAME");
  if (distro.empty()) distro = OsReleaseValue("/usr/lib/os-release", "PRETTY_NAME");
  std::string kernel;
  struct utsname u {};
  if (uname(&u) == 0) {
    kernel = std::string(u.sysname) + " " + u.release + " " + u.machine;
  }
  if (distro.empty()) return kernel;
  if (kernel.empty()) return distro;
  return distro + ", " + kernel;
}

std::string CpuModel() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    if (Trim(line.substr(0, colon)) == "model name") {
      std::string model = Trim(line.substr(colon + 1));
      if (!model.empty()) return model;
    }
  }
  struct utsname u {};
  if (uname(&u) == 0) return u.machine;
  return "";
}

std::string Hostname() {
  char buf[HOST_NAME_MAX + 1] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

HardwareInfo ProbeHardware() {
  HardwareInfo hw;
  hw.hostname = Hostname();
  unsigned cores = std::thread::hardware_concurrency();
  hw.cpu_cores = cores == 0 ? 1 : static_cast<int>(cores);
  hw.ram_mb = TotalRamMb();
  hw.os = OsDescription();
  hw.cpu_model = CpuModel();
  hw.gpus = ProbeGpus();
  hw.backends.push_back("cpu");
  if (!hw.gpus.empty()) hw.backends.push_back("cuda");
  return hw;
}

}  // namespace tessera::worker
