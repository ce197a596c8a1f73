#include "worker/hardware_probe.h"

#include <sys/sysinfo.h>
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

}  // namespace

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
  hw.gpus = ProbeGpus();
  hw.backends.push_back("cpu");
  if (!hw.gpus.empty()) hw.backends.push_back("cuda");
  return hw;
}

}  // namespace tessera::worker
