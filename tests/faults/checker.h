#pragma once
// Fault-injection suite: what every scenario shares. A scenario runs a real scheduler and real
// workers (tests/support/farm.h), injects faults at points chosen by its seed, lets the job
// finish, and hands it to the Checker, which asserts the farm's invariants:
//   - every task ends, within a deadline, and is done exactly once: one `done` in its attempt
//     history (every attempt started has a row, none is left running, its charged failures are
//     all in failures_total), counters that agree with the rows, each frame file moved into
//     place at most once per scheduler run (inotify on the output folder);
//   - every frame is present and bit-identical to a fault-free reference render of the same job
//     made in the same test (the CPU path tracer is deterministic);
//   - no task was charged a failure for an operational fault, nothing is left in a worker's
//     result spool, no temporary file (".NAME.tmp-PID-N" or "NAME.tmp") is left anywhere in the
//     farm's folders, no split-frame part is left behind;
//   - the API answered /healthz and /api/v1/summary every 100 ms while the scheduler was up.
// The seed of each scenario is printed first; TESSERA_FAULT_SEED=N replays it.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/farm.h"

namespace tessera::faults {

using testing::LocalFarm;

// The scenario's seed: TESSERA_FAULT_SEED when set, else a fresh one. Printed (and recorded as a
// test property) before anything else, with the command line that replays it.
uint64_t ScenarioSeed(const std::string& scenario);

// Hits GET /healthz and GET /api/v1/summary every 100 ms on its own thread. A failure (no answer,
// or not 200) counts only when the scheduler was meant to be up for the whole request: the
// scenario brackets each kill and restart with SchedulerDown() / SchedulerUp(). It also notes
// the farm-level alerts the summaries showed and how often /healthz said "degraded".
class ApiProber {
 public:
  explicit ApiProber(LocalFarm& farm);
  ~ApiProber();
  ApiProber(const ApiProber&) = delete;
  ApiProber& operator=(const ApiProber&) = delete;

  // Call right before killing the scheduler.
  void SchedulerDown();
  // Call once StartScheduler returned true (it reads the farm's address again).
  void SchedulerUp();
  // Scheduler runs so far (1 after the first SchedulerUp); thread-safe.
  int incarnation() const { return incarnation_.load(); }
  // What the output watcher counts writes by: a run begins at each start, and each time the
  // scheduler is seen read-only (a pass it could not commit is rolled back and its memory
  // reloaded from the store, as at a start: frames of that pass are written again later).
  int run() const { return incarnation_.load() + read_only_episodes_.load(); }

  struct Counts {
    int probes = 0;                     // requests made while up
    int failures = 0;                   // of those, unanswered or not 200
    std::vector<std::string> samples;   // the first few failures, for the report
    std::set<std::string> alerts_seen;  // kinds of the alerts any summary showed
    int degraded = 0;                   // /healthz answers that said "degraded"
  };
  Counts counts();

 private:
  void Run();

  LocalFarm& farm_;
  std::mutex mu_;
  std::string url_, token_;  // guarded by mu_
  Counts counts_;            // guarded by mu_
  std::atomic<bool> up_{false};
  std::atomic<int> incarnation_{0};
  std::atomic<int> read_only_episodes_{0};
  bool read_only_ = false;  // the last /healthz said "degraded" (prober thread only)
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Counts, per file name and scheduler run, how often a file was moved or written into a folder
// (inotify IN_MOVED_TO / IN_CLOSE_WRITE): the farm writes each output aside and renames it into
// place, so two moves of one frame in one run are a duplicate write.
class OutputWatcher {
 public:
  explicit OutputWatcher(const ApiProber& prober);
  ~OutputWatcher();
  OutputWatcher(const OutputWatcher&) = delete;
  OutputWatcher& operator=(const OutputWatcher&) = delete;

  // Starts watching `dir` as soon as it exists (a job's output folder appears with its first
  // frame).
  void Watch(const std::string& dir);
  // name -> scheduler run (1: the first) -> writes, for `dir`.
  std::map<std::string, std::map<int, int>> Writes(const std::string& dir);
  // The scheduler was killed and reaped: every write it made is already queued, so they are
  // read now and counted to its run, and what follows to the next run -- also a restarted
  // scheduler's first writes (assemblies it resumes) before the prober sees it up.
  void SchedulerKilled();

 private:
  void Run();
  // Reads the queued events and counts them to the current run; mu_ held.
  void ReadEvents();

  const ApiProber& prober_;
  int fd_ = -1;
  std::mutex mu_;
  std::set<std::string> pending_;                                            // guarded by mu_
  std::map<int, std::string> watches_;                                       // guarded by mu_
  std::map<std::string, std::map<std::string, std::map<int, int>>> writes_;  // guarded by mu_
  int kills_ = 0;                                                            // guarded by mu_
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// What a scenario did to the farm, for the checker's report.
struct FaultLog {
  int scheduler_kills = 0;
  int worker_kills = 0;
  int freezes = 0;
  int partitions = 0;
  int storage_faults = 0;           // a filesystem filled up or made read-only
  std::vector<std::string> events;  // "t=1.234s kill -9 worker w2 (3 tasks done)"

  void Add(const std::string& what);
  int total() const {
    return scheduler_kills + worker_kills + freezes + partitions + storage_faults;
  }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// The disk-full scenarios (a full tmpfs mounted over the outputs folder, or over the data
// folder) set `storage`, and the checker additionally asserts what DESIGN.md promises for an
// operational failure: no retry charged, a farm-level alert/event while it lasts, the scheduler
// up (read-only degraded mode rather than exiting), and the farm resuming by itself once space
// is freed. kOutputsFull: the job's `outputs_full` and `outputs_space_back` events were
// recorded, and no outputs_full alert is left once it is done. kDataFull: the scheduler stayed
// up (one run, /healthz said degraded), the summary showed the data_full alert, and it is gone.
enum class StorageFault { kNone, kOutputsFull, kDataFull };

// One job under test and its fault-free reference.
struct JobUnderTest {
  int64_t job_id = 0;
  std::string name;              // the job's name (frame files are NAME.FFFF.ext)
  int64_t reference_job_id = 0;  // 0: no frames to compare (noop renderer)
  std::string reference_name;
  int first_frame = 1, last_frame = 1;
  int expected_tasks = 0;
  std::vector<std::string> formats = {"exr", "png"};
  StorageFault storage = StorageFault::kNone;
};

class Checker {
 public:
  Checker(LocalFarm& farm, ApiProber& prober, OutputWatcher& watcher, uint64_t seed)
      : farm_(farm), prober_(prober), watcher_(watcher), seed_(seed) {}

  // Waits (up to `deadline`) for the job to end, then asserts every invariant above; each
  // violation is a test failure naming the seed. Prints one summary line. Returns the number of
  // violations.
  int Check(const JobUnderTest& job, const FaultLog& faults, std::chrono::seconds deadline);
  // Runs after the last job's check: no temporary file anywhere under the farm's folder, and the
  // prober's tally. Returns the number of violations.
  int CheckFarm(const std::vector<std::string>& more_dirs = {});

 private:
  int CheckTasks(const JobUnderTest& job, const nlohmann::json& view);
  int CheckFrames(const JobUnderTest& job, const nlohmann::json& view);
  int CheckWrites(const JobUnderTest& job, const std::string& output_dir);
  int CheckOutputsFull(const JobUnderTest& job);
  // kDataFull: the scheduler stayed up through it (one run, /healthz said degraded), the
  // summary showed the data_full alert, and the alert is gone now.
  int CheckDataFull(const JobUnderTest& job);

  LocalFarm& farm_;
  ApiProber& prober_;
  OutputWatcher& watcher_;
  uint64_t seed_;
};

// Names of leftover temporary files under `root` (recursively): ".NAME.tmp-PID-N" from the image
// writer and "NAME.tmp" from the other atomic writers.
std::vector<std::string> LeftoverTempFiles(const std::string& root);

// A pseudo-random duration in [lo, hi] from the scenario's generator.
std::chrono::milliseconds Between(std::mt19937_64& rng, int lo_ms, int hi_ms);

}  // namespace tessera::faults
