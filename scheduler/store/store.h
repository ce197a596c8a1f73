#pragma once
// The scheduler's durable state in SQLite: jobs, tasks, workers, events. SQLite is the truth;
// the broker keeps in-memory indexes rebuilt from it at start-up.
//
// Threads: every method may be called from any thread. Writes go through one writer connection
// under a mutex (BEGIN IMMEDIATE per call, or one shared transaction while the calling thread
// holds a WriteGroup); reads use a pool of read-only connections (WAL lets them run beside the
// writer); WAL checkpoints run on a thread and connection of the store's own. Job rows carry
// per-state task counters, updated in the same transaction as every task change, so status
// queries never scan the task table.

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "scheduler/store/sqlite.h"
#include "shared/job_spec.h"
#include "shared/protocol.h"
#include "shared/status.h"

namespace tessera::store {

enum class JobState { kQueued, kRunning, kDone, kFailed, kCanceled };
enum class TaskState { kQueued, kRunning, kDone, kFailed, kCanceled };
enum class WorkerState { kIdle, kBusy, kOffline };

const char* JobStateName(JobState s);
const char* TaskStateName(TaskState s);
const char* WorkerStateName(WorkerState s);
bool IsTerminal(TaskState s);

struct TaskCounts {
  int64_t total = 0, queued = 0, running = 0, done = 0, failed = 0, canceled = 0;
};

struct JobRecord {
  int64_t id = 0;
  std::string name;
  JobState state = JobState::kQueued;
  int priority = 50;
  int frame_start = 0, frame_end = 0, chunk_size = 1, max_retries = 3;
  std::string output_dir;      // absolute
  std::string output_pattern;  // "name.####"
  std::vector<std::string> output_formats;
  TaskCounts tasks;
  std::optional<std::string> error;
  int64_t submitted_at_ms = 0;
  std::optional<int64_t> started_at_ms, finished_at_ms;
  bool paused = false;              // queued tasks are held back until resumed
  int task_timeout_s = 0;           // 0: none
  int progress_timeout_s = 0;       // 0: none
  int blocklist_after = 3;          // 0: never
  std::vector<int64_t> depends_on;  // jobs that must be done before this one starts
  std::vector<std::string> limits;  // named limits its running tasks hold
  std::vector<std::string> pools;   // empty: any
  std::vector<std::string> tags;    // required
  spec::ResourceSpec resources;     // per task
  std::string renderer = spec::kRendererPathTracer;
  std::string project = "default";
  std::string user;                       // who submitted it ("unknown" when not said)
  std::vector<int64_t> frame_depends_on;  // jobs whose same frames must be done first
  int fail_after_workers = 0;             // 0: off
  // Set by the scheduler when something the job cannot fix by waiting holds it, e.g. no
  // connected worker can ever run its tasks; cleared when that passes.
  std::optional<std::string> notice;

  bool produces_frames() const { return renderer != spec::kRendererNoop; }
  bool terminal() const {
    return state == JobState::kDone || state == JobState::kFailed || state == JobState::kCanceled;
  }
};

struct TaskRecord {
  int64_t id = 0;
  int64_t job_id = 0;
  int index = 0;
  int frame_start = 0, frame_end = 0;
  TaskState state = TaskState::kQueued;
  int attempt = 0;   // attempts started so far; the current lease's fencing number
  int failures = 0;  // render failures counted against max_retries
  std::optional<int64_t> worker_id;
  std::optional<std::string> worker_name;
  double progress = 0;
  std::string message;
  std::optional<int64_t> started_at_ms, finished_at_ms;
  std::vector<int64_t> failed_on;  // workers a charged failure happened on
  bool interrupted = false;        // it was running when the scheduler stopped
};

struct WorkerRecord {
  int64_t id = 0;
  std::string name;
  std::string hostname;
  WorkerState state = WorkerState::kOffline;
  int cpu_cores = 0;
  int64_t ram_mb = 0;
  std::vector<protocol::GpuInfo> gpus;
  std::vector<std::string> backends;
  std::string version;
  std::vector<int64_t> current_tasks;
  std::vector<std::string> pools, tags;
  int64_t registered_at_ms = 0, last_seen_ms = 0;
};

struct FarmSummary {
  std::vector<std::pair<std::string, int64_t>> jobs_by_state;
  TaskCounts tasks;
  std::vector<std::pair<std::string, int64_t>> workers_by_state;
};

// A task that is running on a worker, as needed to tell the worker to stop.
struct Lease {
  int64_t task_id = 0;
  int attempt = 0;
  std::optional<int64_t> worker_id;
};

class Store {
 public:
  static constexpr int kSchemaVersion = 10;

  // Group commit: while a WriteGroup is alive, every write made by the thread that opened it
  // joins one transaction (each call still all-or-nothing, as a savepoint), and other threads'
  // writes wait. The broker opens one per poll pass and sends nothing that depends on those
  // writes until Commit() has returned OK: durable before acknowledged, at one commit per pass
  // instead of one per state change.
  class WriteGroup {
   public:
    explicit WriteGroup(Store& store) : store_(store), lock_(store.write_mu_), tx_(*store.writer_) {
      store_.group_thread_.store(std::this_thread::get_id());
    }
    // Rolls back whatever was not committed.
    ~WriteGroup() { store_.EndGroup(); }
    WriteGroup(const WriteGroup&) = delete;
    WriteGroup& operator=(const WriteGroup&) = delete;
    Status Commit() { return store_.CommitGroup(tx_); }

   private:
    Store& store_;
    std::lock_guard<std::recursive_mutex> lock_;
    Transaction tx_;
  };

  // Opens <data_dir>/tessera.db, creating it and applying migrations as needed.
  static StatusOr<std::unique_ptr<Store>> Open(const std::string& data_dir,
                                               const std::string& synchronous = "NORMAL");

  int schema_version() const { return schema_version_; }

  // ---- jobs (HTTP threads) ---------------------------------------------------------------
  // Stores a validated job and all of its tasks in one transaction. `output_dir_for` maps the
  // new job id to its absolute output directory (it may create it; an error aborts the submit).
  StatusOr<JobRecord> CreateJob(
      const spec::JobSpec& spec, const std::string& job_yaml,
      const std::function<StatusOr<std::string>(int64_t)>& output_dir_for);
  // Marks the job and its unfinished tasks canceled; returns the leases that were running.
  StatusOr<std::vector<Lease>> CancelJob(int64_t job_id);
  // Operations on an unfinished job (FailedPrecondition once it is done, failed or canceled).
  Status SetJobPriority(int64_t job_id, int priority);
  Status SetJobPaused(int64_t job_id, bool paused);
  // Failed tasks go back to the queue with a fresh retry budget (the job may be failed).
  // Returns how many were requeued.
  StatusOr<int> RetryFailedTasks(int64_t job_id);
  // Finished (done or failed) tasks holding any frame in [first, last] are rendered again.
  StatusOr<int> RerenderFrames(int64_t job_id, int first, int last);
  // Removes a finished job with its tasks and events (its output files stay on disk).
  Status DeleteJob(int64_t job_id);

  // ---- tasks (broker thread) -------------------------------------------------------------
  // Tasks not yet finished, for the broker's queue at start-up; tasks that were running when the
  // scheduler stopped come back queued (their lease is gone; the next attempt fences it off).
  StatusOr<std::vector<TaskRecord>> LoadUnfinishedTasks(std::optional<int64_t> job_id);
  StatusOr<std::string> JobScene(int64_t job_id);
  Status StartTask(int64_t task_id, int attempt, int64_t worker_id);
  // A worker that re-registers still rendering `attempt` of a queued task whose current attempt
  // that still is (its lease was voided by a restart or a lost connection, not replaced) takes
  // the lease back: the task runs again under the same fencing token.
  Status ReattachTask(int64_t task_id, int attempt, int64_t worker_id);
  // `worker_id` is the worker whose copy delivered the task.
  Status FinishTask(int64_t task_id, int attempt, int64_t worker_id);
  // Back to the queue. `count_failure` charges the retry budget (render failure) or not (lost
  // worker, cancelled lease).
  Status RequeueTask(int64_t task_id, int attempt, const std::string& message, bool count_failure);
  Status FailTask(int64_t task_id, int attempt, const std::string& message);
  Status SetTaskProgress(int64_t task_id, int attempt, double progress);
  // Straggler backups: a second copy of a running task starts as the next attempt beside the
  // first; either may finish it (FinishTask names the winner). EndCopy drops one copy (charging
  // the task's retry budget when `count_failure`) that
  // failed or lost while the other runs on.
  Status StartBackup(int64_t task_id, int attempt);
  Status EndCopy(int64_t task_id, int attempt, bool count_failure);
  // A charged failure of `task_id` on `worker_id`: adds the worker to the task's failed_on and
  // counts it against the job's failures on that worker (its blocklist, which survives restarts).
  Status RecordWorkerFailure(int64_t job_id, int64_t task_id, int64_t worker_id);
  // The job's charged failures by worker id.
  StatusOr<std::vector<std::pair<int64_t, int>>> WorkerFailures(int64_t job_id);
  // Frame ranges of the job's tasks that are not done, in frame order (frame-on-frame
  // dependencies wait on these).
  StatusOr<std::vector<std::pair<int, int>>> UndoneFrameRanges(int64_t job_id);
  Status SetJobNotice(int64_t job_id, const std::optional<std::string>& notice);

  // ---- workers (broker thread) -----------------------------------------------------------
  // Inserts or refreshes the worker by name; returns its id.
  StatusOr<int64_t> UpsertWorker(const protocol::Register& reg);
  Status SetWorkerState(int64_t worker_id, WorkerState state);
  Status TouchWorkers(const std::vector<std::pair<int64_t, int64_t>>& id_and_last_seen_ms);
  // At start-up nobody is connected yet.
  Status MarkAllWorkersOffline();

  Status AddEvent(std::optional<int64_t> job_id, std::optional<int64_t> task_id,
                  std::optional<int64_t> worker_id, const std::string& kind,
                  const std::string& message);

  // ---- reads (any thread) ----------------------------------------------------------------
  StatusOr<std::vector<JobRecord>> ListJobs(std::optional<JobState> state, int limit);
  StatusOr<JobRecord> GetJob(int64_t job_id);
  StatusOr<std::vector<TaskRecord>> ListTasks(int64_t job_id);
  StatusOr<TaskRecord> GetTask(int64_t task_id);
  StatusOr<std::vector<WorkerRecord>> ListWorkers();
  StatusOr<FarmSummary> Summary();

  ~Store();

 private:
  Store(std::string path, std::unique_ptr<Db> writer);
  Status Migrate();
  Status StartCheckpointer(const std::string& synchronous);
  // Per-job task counter changes. Inside a WriteGroup they are summed in memory and written
  // once per job: before anything else on the group's thread reads or writes (WriteLock,
  // BorrowReader) and before the commit. A write that fails there fails the commit.
  struct CountDeltas {
    int64_t queued = 0, running = 0, done = 0, failed = 0, canceled = 0;
    void Add(TaskState s, int64_t n);
    void Add(const CountDeltas& other);
  };
  bool InGroup() const { return group_thread_.load() == std::this_thread::get_id(); }
  Status ApplyCounts(int64_t job_id, const CountDeltas& delta);
  void FlushDeferredCounts();
  Status CommitGroup(Transaction& tx);
  void EndGroup();
  // The write mutex, with the group's deferred counts written first: every store method that
  // reads or writes on the writer takes this, except the task transitions that only add to
  // those counts.
  class WriteLock {
   public:
    explicit WriteLock(Store& store) : lock_(store.write_mu_) {
      if (store.InGroup()) store.FlushDeferredCounts();
    }

   private:
    std::lock_guard<std::recursive_mutex> lock_;
  };
  // One task transition (StartTask, FinishTask, ...): inside a WriteGroup a single statement,
  // otherwise in a transaction of its own.
  Status Transition(int64_t task_id, int attempt, TaskState to, const std::string& message,
                    bool count_failure, std::optional<int64_t> worker_id, bool reattach = false);
  // Moves one task to `to` and keeps the job's counters and state in step (deferred inside a
  // WriteGroup). Caller holds a transaction on the writer, or the group.
  // `reattach`: a start under the current attempt (ReattachTask) rather than the next.
  Status TransitionTask(int64_t task_id, int attempt, TaskState to, const std::string& message,
                        bool count_failure, std::optional<int64_t> worker_id,
                        bool reattach = false);
  // A task's fencing state, read on the writer (inside a transaction).
  struct TaskFence {
    TaskState state = TaskState::kQueued;
    int attempt = 0;  // the highest attempt started
    int64_t job_id = 0;
    std::vector<int> live;  // attempts running now
    bool IsLive(int a) const { return std::find(live.begin(), live.end(), a) != live.end(); }
  };
  StatusOr<TaskFence> ReadFence(int64_t task_id);
  static Status StaleAttempt(int64_t task_id, int attempt, const TaskFence& fence);
  Status RefreshJobState(int64_t job_id);
  // Reads the job's state on the writer (inside a transaction).
  StatusOr<JobState> JobStateForUpdate(int64_t job_id);
  // Moves every task of the job in `from_states` matching `extra_where` back to queued with a
  // fresh retry budget, keeping counters and job state in step. Returns how many moved.
  StatusOr<int> RequeueFinished(int64_t job_id, const std::string& task_filter, int first,
                                int last);

  // A read-only connection borrowed from the pool for one call.
  class Reader;
  StatusOr<Reader> BorrowReader();
  void ReturnReader(std::unique_ptr<Db> db);

  std::string path_;
  int schema_version_ = 0;
  std::recursive_mutex write_mu_;  // recursive: a WriteGroup's thread writes inside it
  std::unique_ptr<Db> writer_;
  std::atomic<std::thread::id> group_thread_;  // the thread inside a WriteGroup, if any
  std::unordered_map<int64_t, CountDeltas> deferred_counts_;  // by job id; the group's thread
  Status deferred_error_;                                     // the first failed flush
  std::mutex pool_mu_;
  std::vector<std::unique_ptr<Db>> readers_;
  // WAL checkpoints on a thread and connection of their own.
  std::thread checkpointer_;
  std::mutex checkpoint_mu_;
  std::condition_variable checkpoint_cv_;
  bool stopping_ = false;  // guarded by checkpoint_mu_
};

int64_t NowMs();

}  // namespace tessera::store
