// tessera-bench commands: short process tasks. A job of N `command` tasks (outputs: none) that
// each run one short program -- `cp` of a small file -- on one real tessera-worker with S slots,
// against `seq N | xargs -P S cp` of the same files, run side by side on this machine. Both
// copy every file (checked). Figures: tasks per second of each, their ratio (target >= 0.7),
// and the CPU the farm's own processes (scheduler + worker, not the cp they start) spend per
// task, beside the CPU xargs and its cp spend per copy.

#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/bench/bench.h"
#include "tests/support/farm.h"

namespace tessera::bench {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// User + system CPU seconds a live process has used itself (not its children): /proc/PID/stat.
double ProcessCpuSeconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream fields(stat.substr(close + 2));
  std::string skip;
  for (int i = 0; i < 11; ++i) fields >> skip;  // state .. cmajflt (fields 3-13)
  double utime = 0, stime = 0;
  fields >> utime >> stime;
  return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double ChildrenCpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_CHILDREN, &usage);
  auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

size_t CountFiles(const std::string& dir) {
  size_t n = 0;
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); ++it) ++n;
  return n;
}

void Run(int tasks, int slots) {
  TempDir dir("tessera-bench-commands");
  const std::string source = dir.path() + "/source.txt";
  std::ofstream(source) << std::string(4096, 'x');
  const std::string cp = "/bin/cp";

  // Baseline: xargs running the same copies, `slots` at once.
  const std::string by_xargs = dir.path() + "/xargs";
  fs::create_directories(by_xargs);
  const double xargs_cpu_before = ChildrenCpuSeconds();
  const auto xargs_start = Clock::now();
  const std::string command = "seq " + std::to_string(tasks) + " | xargs -P " +
                              std::to_string(slots) + " -I{} " + cp + " " + source + " " +
                              by_xargs + "/{}";
  if (std::system(command.c_str()) != 0) {
    std::fprintf(stderr, "xargs failed: %s\n", command.c_str());
    return;
  }
  const double xargs_s = std::chrono::duration<double>(Clock::now() - xargs_start).count();
  const double xargs_cpu = ChildrenCpuSeconds() - xargs_cpu_before;
  std::printf("xargs -P %d: %d copies in %.2f s\n", slots, tasks, xargs_s);

  // The farm: one scheduler, one worker with `slots` slots, logging as in production.
  testing::LocalFarm farm("bench-commands");
  farm.set_log_level("info");
  farm.set_command_programs({cp});
  if (!farm.StartScheduler()) {
    std::fprintf(stderr, "scheduler did not start:\n%s\n", farm.SchedulerLog().c_str());
    return;
  }
  if (!farm.StartWorkerWith("w1", {"--slots", std::to_string(slots), "--command-program", cp}) ||
      !farm.WaitForWorkers(1, std::chrono::seconds(30))) {
    std::fprintf(stderr, "worker did not start:\n%s\n", farm.WorkerLog("w1").c_str());
    return;
  }
  const std::string by_farm = dir.path() + "/farm";
  fs::create_directories(by_farm);
  const double farm_cpu_before =
      ProcessCpuSeconds(farm.scheduler().pid()) + ProcessCpuSeconds(farm.worker("w1").pid());
  const auto farm_start = Clock::now();
  std::string error;
  const int64_t job =
      farm.Submit("name: copies\nrenderer: command\nframes: 1-" + std::to_string(tasks) +
                      "\nsettings: {program: " + cp + ", argv: ['" + source + "', '" + by_farm +
                      "/{frame_start}']}\n",
                  "", &error);
  if (job < 0) {
    std::fprintf(stderr, "submit failed: %s\n", error.c_str());
    return;
  }
  const nlohmann::json done = farm.WaitForJob(job, std::chrono::seconds(600));
  const double farm_s = std::chrono::duration<double>(Clock::now() - farm_start).count();
  const double farm_cpu = ProcessCpuSeconds(farm.scheduler().pid()) +
                          ProcessCpuSeconds(farm.worker("w1").pid()) - farm_cpu_before;
  const size_t copied = CountFiles(by_farm);
  std::printf("farm, %d slots: %d tasks in %.2f s (%s), %zu files copied\n", slots, tasks, farm_s,
              done.value("state", std::string("?")).c_str(), copied);
  if (done.value("state", std::string()) != "done" || copied != static_cast<size_t>(tasks) ||
      CountFiles(by_xargs) != static_cast<size_t>(tasks)) {
    std::fprintf(stderr, "the runs did not copy every file\n");
    return;
  }
  const double farm_rate = tasks / farm_s, xargs_rate = tasks / xargs_s;
  PrintFigures({{"tasks", std::to_string(tasks)},
                {"slots", std::to_string(slots)},
                {"farm_tasks_per_s", Fixed(farm_rate, 1)},
                {"xargs_per_s", Fixed(xargs_rate, 1)},
                {"ratio", Fixed(farm_rate / xargs_rate, 2)},
                {"farm_cpu_ms_per_task", Fixed(farm_cpu * 1000 / tasks, 2)},
                {"xargs_cpu_ms_per_copy", Fixed(xargs_cpu * 1000 / tasks, 2)},
                {"target_ratio", "0.7"}});
}

}  // namespace

void AddCommandsCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "commands", "Short command tasks on one worker with slots, against xargs -P (target 0.7x)");
  static int tasks = 2000, slots = 8;
  cmd->add_option("--tasks", tasks, "command tasks (one cp each)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--slots", slots, "tasks at once (worker --slots, xargs -P)")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  cmd->callback([] { Run(tasks, slots); });
}

}  // namespace tessera::bench
