#pragma once
// The scheduler's durable state in SQLite: jobs, tasks, workers, events. SQLite is the truth;
// the broker keeps in-memory indexes rebuilt from it at start-up.
//
// Threads: every method may be called from any thread. Writes go through one writer connection
// under a mutex (BEGIN IMMEDIATE per call, or one shared transaction while the calling thread
// holds a WriteGroup); reads use a pool of read-only connections (WAL lets them run beside the
// writer); WAL checkpoints run on a thread and connection of the store's own. Job rows carry
// per-state task counters, updated in the same transaction as every task change, so status queries
// never scan the task table.

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
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
  int64_t in(TaskState s) const {
    switch (s) {
      case TaskState::kQueued:
        return queued;
      case TaskState::kRunning:
        return running;
      case TaskState::kDone:
        return done;
      case TaskState::kFailed:
        return failed;
      case TaskState::kCanceled:
        return canceled;
    }
    return 0;
  }
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
  int parts_per_frame = 1;                    // tasks (tiles x sample parts) that make one frame
  bool interruptible = true;                  // spot nodes may run it
  std::optional<int64_t> deadline_ms;         // must be done by then (the autoscaler plans for it)
  double gpu_seconds = 0;                     // of every attempt of its tasks, so far
  double cost = 0;                            // of those attempts, at their workers' prices
  bool exr_float = false;                     // EXR frames in 32-bit float (else half)
  std::map<std::string, std::string> assets;  // path -> blob SHA-256, fetched by workers
  bool output_shared = false;     // output_dir is on shared storage: workers write whole frames
  int checkpoint_interval_s = 0;  // seconds between a running task's checkpoints; 0: none

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
  int attempt = 0;         // attempts started so far; the current lease's fencing number
  int failures = 0;        // render failures counted against max_retries (a retry resets it)
  int failures_total = 0;  // every charged failure of the task, never reset
  std::optional<int64_t> worker_id;
  std::optional<std::string> worker_name;
  double progress = 0;
  std::string message;
  std::optional<int64_t> started_at_ms, finished_at_ms;
  std::vector<int64_t> failed_on;  // workers a charged failure happened on
  bool interrupted = false;        // it was running when the scheduler stopped
  protocol::FramePart part;        // the part of its frames it renders (default: whole frames)
  double gpu_seconds = 0;          // of all its attempts
  double cost = 0;
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
  // What it reported about its machine (workers.details_json; empty for older workers).
  std::string os, cpu_model;
  protocol::CloudInfo cloud;
  bool disabled = false;      // an operator said: no new tasks for it
  std::string node_group;     // the autoscaler's node group it belongs to ("" for none)
  double price_per_hour = 0;  // what it costs while registered, idle or not
  double cost = 0;            // what it has cost so far
};

// What the farm cost on one UTC day: every worker's registered time at its price, and the
// GPU-seconds its tasks took.
struct CostDay {
  std::string day;  // "2026-12-03"
  double cost = 0;
  double gpu_seconds = 0;
};

// A node the autoscaler requested from a provider, until it is terminated.
struct AutoscalerNodeRecord {
  int64_t id = 0;
  std::string group;
  std::string worker_name;  // "" until a node its provider names registers
  std::string provider_id;  // "" until known
  int64_t requested_at_ms = 0;
  bool draining = false;  // being scaled in: terminated once its worker has left
};

// A join token: a new worker that presents it (through its CURVE key pair) may enrol once per
// use. Only its public key is stored.
struct JoinTokenRecord {
  int64_t id = 0;
  std::string public_key;  // Z85
  std::string note;
  int64_t created_at_ms = 0;
  std::optional<int64_t> expires_at_ms;  // none: never
  int max_uses = 0;                      // 0: unlimited
  int uses = 0;
  std::optional<int64_t> revoked_at_ms;
  // Made for this worker name: it enrols only that name, and may replace the key the name is
  // enrolled with (a replacement machine). "": any name that has no valid key.
  std::string worker_name;
  // Whether it still admits a new enrolment at `now_ms`.
  bool usable(int64_t now_ms) const {
    return !revoked_at_ms && (!expires_at_ms || *expires_at_ms > now_ms) &&
           (max_uses == 0 || uses < max_uses);
  }
};

// How one attempt of a task ended. Every attempt is recorded `running` when its lease starts
// and then ends exactly once: `done` only when the task is recorded done (its frames written).
enum class AttemptOutcome { kRunning, kDone, kFailed, kLost, kHandedBack, kCanceled };
const char* AttemptOutcomeName(AttemptOutcome o);

// Failure classes the scheduler finds itself (beside the workers' protocol::kFailure*).
inline constexpr const char* kFailureOutputWrite = "output_write";  // a frame could not be written
inline constexpr const char* kFailureIncomplete = "incomplete";     // done, but frames were missing
inline constexpr const char* kFailureBadResult = "bad_result";      // a result the task cannot have
inline constexpr const char* kFailureBadPixels = "bad_pixels";  // output validation sent it back

struct AttemptEnd {
  AttemptOutcome outcome = AttemptOutcome::kLost;
  std::string failure_class;  // kFailed only
  std::string message;
  bool charged = false;  // counted against the task's retry budget
};

// One attempt of a task: how it ended and what it logged (the worker's and the renderer's lines).
// Rows from before schema 26 have only outcome, at and log (done, failed, handed_back).
struct TaskLogRecord {
  int64_t task_id = 0;
  int attempt = 0;
  int64_t job_id = 0;
  std::optional<int64_t> worker_id;
  std::optional<std::string> worker_name;  // when the worker is still known
  std::string outcome;                     // AttemptOutcomeName
  std::string failure_class;               // failed: its class ("" when not recorded)
  std::string message;
  std::optional<bool> charged;  // not recorded before schema 26
  std::vector<int> gpus;
  std::optional<int64_t> started_at_ms, ended_at_ms;
  int64_t at_ms = 0;  // last written
  std::string log;
};

// A bearer token of the HTTP API: who it speaks for and with which role. Only a hash of the
// token is stored; the token itself is shown once, when it is created.
struct ApiTokenRecord {
  int64_t id = 0;
  std::string secret_hash;  // hex SHA-256 of the token text
  std::string user;
  std::string role;  // viewer, submitter, operator, admin
  std::string note;
  int64_t created_at_ms = 0;
  std::optional<int64_t> expires_at_ms;  // none: never
  std::optional<int64_t> revoked_at_ms;
  bool usable(int64_t now_ms) const {
    return !revoked_at_ms && (!expires_at_ms || *expires_at_ms > now_ms);
  }
};

// A worker's enrolled CURVE key: what authenticates it on every connection.
struct WorkerKeyRecord {
  std::string name;
  std::string public_key;  // Z85
  std::optional<int64_t> token_id;
  int64_t enrolled_at_ms = 0;
  std::optional<int64_t> revoked_at_ms;
};

struct FarmSummary {
  std::vector<std::pair<std::string, int64_t>> jobs_by_state;
  TaskCounts tasks;
  std::vector<std::pair<std::string, int64_t>> workers_by_state;
  double cost_today = 0, gpu_seconds_today = 0;  // this UTC day
  double cost_per_hour = 0;                      // what the connected workers cost now
};

// A task that is running on a worker, as needed to tell the worker to stop.
struct Lease {
  int64_t task_id = 0;
  int attempt = 0;
  std::optional<int64_t> worker_id;
};

// A POST that created something, remembered under the Idempotency-Key its client sent, so a
// retry of it (its answer was lost) returns what was created instead of creating it again.
struct IdempotentRequest {
  std::string user;
  std::string key;
  std::string request_hash;  // SHA-256 of method, path and body: the same key, another request
  std::string resource;      // "job", "api_token", "join_token"
  int64_t resource_id = 0;
  int64_t created_at_ms = 0;
};

class Store {
 public:
  static constexpr int kSchemaVersion = 27;

  // Group commit: while a WriteGroup is alive, the writes made by the thread that opened it
  // form one transaction, and other threads' writes wait. The frequent writes of a broker pass
  // -- task transitions, worker states, progress -- are only recorded, and applied together
  // (job counters once per job) when the group commits; any other store call made inside the
  // group applies what was recorded first, so the group's reads see its own writes. The broker
  // opens one group per poll pass and sends nothing that depends on its writes until Commit()
  // has returned OK: durable before acknowledged, at one commit per pass instead of one per
  // state change.
  class WriteGroup {
   public:
    explicit WriteGroup(Store& store) : store_(store) { store_.BeginGroup(); }
    // Rolls back whatever was not committed.
    ~WriteGroup() { store_.EndGroup(); }
    WriteGroup(const WriteGroup&) = delete;
    WriteGroup& operator=(const WriteGroup&) = delete;
    Status Commit() { return store_.CommitGroup(); }

   private:
    Store& store_;
  };

  // Opens <data_dir>/tessera.db, creating it and applying migrations as needed.
  static StatusOr<std::unique_ptr<Store>> Open(const std::string& data_dir,
                                               const std::string& synchronous = "NORMAL");

  int schema_version() const { return schema_version_; }
  // The folder holding the database (what fills up when the store reports kStorageFull).
  std::string data_dir() const;

  // ---- jobs (HTTP threads) ---------------------------------------------------------------
  // Stores a validated job and all of its tasks in one transaction. `output_dir_for` maps the
  // new job id to its absolute output directory (it may create it; an error aborts the submit).
  // With `request`, its Idempotency-Key is recorded in the same transaction (resource "job",
  // the new id); a key already recorded aborts it with kAlreadyExists.
  StatusOr<JobRecord> CreateJob(const spec::JobSpec& spec, const std::string& job_yaml,
                                const std::function<StatusOr<std::string>(int64_t)>& output_dir_for,
                                const IdempotentRequest* request = nullptr);
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
  // `requeue_running` false (all jobs only): nothing is written -- the tasks the store has
  // running come back marked interrupted but stay running in the store (read-only recovery
  // while the data folder is full).
  StatusOr<std::vector<TaskRecord>> LoadUnfinishedTasks(std::optional<int64_t> job_id,
                                                        bool requeue_running = true);
  StatusOr<std::string> JobScene(int64_t job_id);
  // The job file as it was submitted.
  StatusOr<std::string> JobYaml(int64_t job_id);
  // The broker passes each task's `job_id` (it knows it) to spare the store a lookup; 0 means
  // unknown, and the store reads it.
  // Records the attempt `running` on `worker_id` (with the GPUs it is pinned to) in the same
  // transaction; an older attempt of the task still recorded running is closed as lost.
  Status StartTask(int64_t task_id, int attempt, int64_t worker_id, int64_t job_id = 0,
                   const std::vector<int>& gpus = {});
  // A worker that re-registers still rendering `attempt` of a queued task whose current attempt
  // that still is (its lease was voided by a restart or a lost connection, not replaced) takes
  // the lease back: the task runs again under the same fencing token.
  Status ReattachTask(int64_t task_id, int attempt, int64_t worker_id, int64_t job_id = 0);
  // `worker_id` is the worker whose copy delivered the task.
  Status FinishTask(int64_t task_id, int attempt, int64_t worker_id, int64_t job_id = 0);
  // Back to the queue. `count_failure` charges the retry budget (render failure) or not (lost
  // worker, cancelled lease).
  Status RequeueTask(int64_t task_id, int attempt, const std::string& message, bool count_failure,
                     int64_t job_id = 0);
  Status FailTask(int64_t task_id, int attempt, const std::string& message, int64_t job_id = 0);
  Status SetTaskProgress(int64_t task_id, int attempt, double progress);
  // Straggler backups: a second copy of a running task starts as the next attempt beside the
  // first; either may finish it (FinishTask names the winner). EndCopy drops one copy (charging
  // the task's retry budget when `count_failure`) that
  // failed or lost while the other runs on.
  Status StartBackup(int64_t task_id, int attempt, std::optional<int64_t> worker_id = std::nullopt,
                     const std::vector<int>& gpus = {});
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
  // Disabled workers get no new tasks (running ones finish); NotFound for an unknown name.
  Status SetWorkerDisabled(const std::string& name, bool disabled);
  Status TouchWorkers(const std::vector<std::pair<int64_t, int64_t>>& id_and_last_seen_ms);
  // At start-up nobody is connected yet.
  Status MarkAllWorkersOffline();

  // ---- cost and the autoscaler's nodes (costs.cpp) -----------------------------------------
  // A task attempt ended: its GPU-seconds and money go to the task, its job and today.
  Status AddTaskCost(int64_t task_id, int64_t job_id, double gpu_seconds, double cost);
  // Registered time at the workers' prices: (worker id, money) each, and the sum to today.
  Status AccrueWorkerCosts(const std::vector<std::pair<int64_t, double>>& worker_costs);
  Status SetWorkerPrice(int64_t worker_id, const std::string& node_group, double price_per_hour);
  // C++ renderer plugins offered by workers (schema 23): the latest description of each.
  Status SaveNativePlugin(const protocol::PluginOffer& offer);
  StatusOr<std::vector<protocol::PluginOffer>> NativePlugins();
  // The last `days` UTC days with any cost, oldest first.
  StatusOr<std::vector<CostDay>> CostDays(int days);
  StatusOr<int64_t> AddAutoscalerNode(const AutoscalerNodeRecord& node);
  Status UpdateAutoscalerNode(const AutoscalerNodeRecord& node);
  Status DeleteAutoscalerNode(int64_t id);
  StatusOr<std::vector<AutoscalerNodeRecord>> ListAutoscalerNodes();

  // ---- credentials (credentials.cpp; any thread) -----------------------------------------
  StatusOr<JoinTokenRecord> CreateJoinToken(const std::string& public_key, const std::string& note,
                                            std::optional<int64_t> expires_at_ms, int max_uses,
                                            const std::string& worker_name = "");
  StatusOr<std::vector<JoinTokenRecord>> ListJoinTokens();
  StatusOr<JoinTokenRecord> RevokeJoinToken(int64_t token_id);
  // Enrols the worker `name` with `public_key`, using one use of the token, in one transaction.
  // A name never changes hands silently: when it is enrolled with another valid key, only a
  // token made for that name may replace the key (a replacement machine, a lost key);
  // otherwise AlreadyExists, and an operator revokes and readmits the name first.
  // FailedPrecondition when the token is no longer usable or is for another name, or the name
  // is revoked (not yet readmitted).
  struct Enrolment {
    std::optional<std::string> replaced_key;  // the worker's previous key, if it had one
    bool token_usable = true;                 // false: that was the token's last use
  };
  StatusOr<Enrolment> EnrolWorker(const std::string& name, const std::string& public_key,
                                  int64_t token_id);
  // Revokes the worker's key, or readmits a revoked name: its old key is forgotten for good and
  // the name may enrol again with a join token. NotFound if it never enrolled. Returns the
  // record as it was.
  StatusOr<WorkerKeyRecord> SetWorkerRevoked(const std::string& name, bool revoked);
  StatusOr<std::vector<WorkerKeyRecord>> ListWorkerKeys();
  StatusOr<ApiTokenRecord> CreateApiToken(const ApiTokenRecord& token);
  StatusOr<std::vector<ApiTokenRecord>> ListApiTokens();
  StatusOr<ApiTokenRecord> RevokeApiToken(int64_t token_id);

  // Output validation: a frame kept with bad pixels carries the reason until it is written
  // clean; the flags of frames [first, last].
  Status SetFrameFlag(int64_t job_id, int frame, const std::string& reason);
  Status ClearFrameFlag(int64_t job_id, int frame);
  StatusOr<std::map<int, std::string>> FrameFlags(int64_t job_id, int first, int last);
  // ---- idempotent requests (store/idempotency.cpp; HTTP threads) --------------------------
  // The request first made with (user, key) within the last `max_age_ms`, if any.
  StatusOr<std::optional<IdempotentRequest>> FindIdempotentRequest(const std::string& user,
                                                                   const std::string& key,
                                                                   int64_t max_age_ms);
  // Records a request (after what it created was stored); kAlreadyExists when the key is taken.
  Status RecordIdempotentRequest(const IdempotentRequest& request);

  // Whether any stored job lists the blob `hash` among its assets.
  StatusOr<bool> BlobInUse(const std::string& hash);
  // The stored jobs whose output folder is `dir` (resolved, as stored): (id, user) pairs.
  StatusOr<std::vector<std::pair<int64_t, std::string>>> JobsWritingTo(const std::string& dir);

  // ---- attempts (attempts.cpp) ----------------------------------------------------------
  // A task attempt's log, as its final message brought it (replaces an earlier copy; the
  // attempt's outcome is not touched).
  Status SaveTaskLog(const TaskLogRecord& log);
  // Ends the attempt with `end` unless it already ended (the first outcome recorded stands). In
  // a WriteGroup it is applied with the group. `done` is recorded by FinishTask, never here.
  Status EndAttempt(int64_t task_id, int attempt, int64_t job_id, const AttemptEnd& end);
  StatusOr<std::vector<TaskLogRecord>> TaskLogs(int64_t task_id);
  // Attempts ended so far, by (outcome, failure class): what the store holds, plus those of
  // deleted jobs (a counter never goes down).
  std::map<std::pair<std::string, std::string>, int64_t> AttemptCounts() const;

  Status AddEvent(std::optional<int64_t> job_id, std::optional<int64_t> task_id,
                  std::optional<int64_t> worker_id, const std::string& kind,
                  const std::string& message);

  // ---- reads (any thread) ----------------------------------------------------------------
  StatusOr<std::vector<JobRecord>> ListJobs(std::optional<JobState> state, int limit);
  // Newest first; every set field narrows the list. `before`: only jobs with a smaller id (the
  // next page after a page that ended at that id).
  struct JobFilter {
    std::optional<JobState> state;
    std::optional<bool> paused;  // set: only jobs held (true) or not held (false), unfinished
    std::string user, project;
    std::optional<int64_t> before;
    int limit = 100;
  };
  StatusOr<std::vector<JobRecord>> ListJobs(const JobFilter& filter);
  StatusOr<JobRecord> GetJob(int64_t job_id);
  StatusOr<std::vector<TaskRecord>> ListTasks(int64_t job_id);  // all of them, in index order
  // In task index order: those in `state` (when set) with an index above `after_index`, at most
  // `limit` of them.
  struct TaskFilter {
    std::optional<TaskState> state;
    int after_index = -1;
    int limit = static_cast<int>(spec::kMaxTasksPerJob);  // default: every task of the job
  };
  StatusOr<std::vector<TaskRecord>> ListTasks(int64_t job_id, const TaskFilter& filter);
  StatusOr<TaskRecord> GetTask(int64_t task_id);
  StatusOr<std::vector<WorkerRecord>> ListWorkers();
  StatusOr<FarmSummary> Summary();

  ~Store();

 private:
  Store(std::string path, std::unique_ptr<Db> writer);
  Status Migrate();
  // Inserts `request` on `db` inside the caller's transaction, first dropping keys older than a
  // day; kAlreadyExists when (user, key) is already recorded.
  static Status InsertIdempotentRequest(Db& db, const IdempotentRequest& request);
  Status StartCheckpointer(const std::string& synchronous);
  // Per-job task counter changes, summed over a batch of transitions and written once per job.
  struct CountDeltas {
    int64_t queued = 0, running = 0, done = 0, failed = 0, canceled = 0;
    void Add(TaskState s, int64_t n);
  };
  Status ApplyCounts(int64_t job_id, const CountDeltas& delta);

  // A write recorded in a WriteGroup, applied on the writer when the group commits (or earlier,
  // when the group's thread needs the writer for something else).
  struct Deferred {
    enum class Kind { kTransition, kWorkerState, kProgress, kAttemptEnd };
    Kind kind = Kind::kTransition;
    int64_t id = 0;  // task id, or worker id for kWorkerState
    int attempt = 0;
    TaskState to = TaskState::kQueued;
    WorkerState worker_state = WorkerState::kIdle;
    bool count_failure = false;
    std::optional<int64_t> worker_id;
    int64_t job_id = 0;  // kTransition: the task's job, when known
    double progress = 0;
    std::string message;
    std::vector<int> gpus;                           // kTransition to running: the lease's GPUs
    AttemptOutcome outcome = AttemptOutcome::kLost;  // kAttemptEnd
    std::string failure_class;                       // kAttemptEnd
  };
  // Applies `ops` in order inside the writer's open transaction, then the job counters they
  // changed. A write the fencing refuses (memory and store disagree, which only a bug causes) is
  // logged and skipped; the first storage error is returned.
  Status ApplyDeferred(std::vector<Deferred>& ops);
  bool InGroup() const { return group_thread_.load() == std::this_thread::get_id(); }
  void BeginGroup();
  // The group's thread needs the writer: opens the group's transaction (once) and applies the
  // writes recorded so far.
  void EnterGroupTransaction();
  Status CommitGroup();
  void EndGroup();
  // In a WriteGroup, records `op` and returns true; elsewhere returns false.
  bool Defer(Deferred op);
  // The write mutex, taken by every store method that reads or writes on the writer (except the
  // writes a group only records); on the group's thread it enters the group's transaction first.
  std::recursive_mutex& PrepareWrite() {
    if (InGroup()) EnterGroupTransaction();
    return write_mu_;
  }
  class WriteLock {
   public:
    explicit WriteLock(Store& store) : lock_(store.PrepareWrite()) {}

   private:
    std::lock_guard<std::recursive_mutex> lock_;
  };
  // One task transition (StartTask, FinishTask, ...): recorded in a WriteGroup, otherwise in a
  // transaction of its own.
  Status Transition(int64_t task_id, int attempt, TaskState to, const std::string& message,
                    bool count_failure, std::optional<int64_t> worker_id, int64_t job_id,
                    bool reattach = false, const std::vector<int>& gpus = {});
  // Moves one task to `to` (one statement, fenced by `attempt`; a failure also records the job's
  // error) and adds the counter change to `counts` (by job id), or -- when null -- writes the
  // job's counters and state at once. Caller holds a transaction on the writer.
  // `reattach`: a start under the current attempt (ReattachTask) rather than the next.
  // `job_id`: the task's job when the caller knows it (0: read from the row).
  Status TransitionTask(int64_t task_id, int attempt, TaskState to, const std::string& message,
                        bool count_failure, std::optional<int64_t> worker_id, int64_t job_id,
                        bool reattach, std::unordered_map<int64_t, CountDeltas>* counts,
                        const std::vector<int>& gpus = {});
  Status WriteWorkerState(int64_t worker_id, WorkerState state);
  Status WriteTaskProgress(int64_t task_id, int attempt, double progress);
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

  // Attempt records (attempts.cpp); the caller holds a transaction on the writer.
  // A new attempt, running on `worker_id`.
  Status InsertAttempt(int64_t task_id, int attempt, int64_t job_id,
                       std::optional<int64_t> worker_id, const std::vector<int>& gpus);
  // Ends the attempt unless it already ended.
  Status CloseAttempt(int64_t task_id, int attempt, int64_t job_id, const AttemptEnd& end);
  // A re-attached attempt runs again: a `lost` recorded for it is taken back.
  Status ReopenAttempt(int64_t task_id, int attempt);
  // Ends every attempt still running that `where` selects (SQL over task_logs, a constant: ?1
  // is bound to `id`, ?2 to `extra`) with `end`.
  Status CloseAttemptsWhere(const char* where, int64_t id, int64_t extra, const AttemptEnd& end);
  // At start-up: attempts left running whose lease cannot come back are closed as lost.
  Status CloseStaleAttempts();
  Status LoadAttemptCounts();
  // Outcomes written inside the open transaction count once it commits (or are dropped).
  void CountAttempts(const AttemptEnd& end, int64_t n);
  void SettleAttemptCounts(bool committed);

  // A read-only connection borrowed from the pool for one call.
  class Reader {
   public:
    Reader(Store* store, std::unique_ptr<Db> db) : store_(store), owned_(std::move(db)) {
      db_ = owned_.get();
    }
    explicit Reader(Db* writer) : db_(writer) {}
    Reader(Reader&&) = default;
    ~Reader() {
      if (owned_) store_->ReturnReader(std::move(owned_));
    }
    Db& operator*() { return *db_; }
    Db* operator->() { return db_; }

   private:
    Store* store_ = nullptr;
    std::unique_ptr<Db> owned_;
    Db* db_ = nullptr;
  };
  StatusOr<Reader> BorrowReader();
  void ReturnReader(std::unique_ptr<Db> db);

  std::string path_;
  int schema_version_ = 0;
  std::recursive_mutex write_mu_;  // recursive: a WriteGroup's thread writes inside it
  std::unique_ptr<Db> writer_;
  std::atomic<std::thread::id> group_thread_;  // the thread inside a WriteGroup, if any
  // The open group (its thread only): recorded writes, and its transaction once it needed one.
  std::vector<Deferred> group_ops_;
  std::unique_lock<std::recursive_mutex> group_lock_;
  std::optional<Transaction> group_tx_;
  Status group_error_;  // the first failure applying the group's writes
  std::mutex pool_mu_;
  std::vector<std::unique_ptr<Db>> readers_;
  // WAL checkpoints on a thread and connection of their own.
  std::thread checkpointer_;
  std::mutex checkpoint_mu_;
  std::condition_variable checkpoint_cv_;
  bool stopping_ = false;  // guarded by checkpoint_mu_
  // Attempt outcomes: written in the open transaction (under write_mu_), and committed.
  std::vector<std::pair<std::pair<std::string, std::string>, int64_t>> attempts_pending_;
  mutable std::mutex attempt_counts_mu_;
  std::map<std::pair<std::string, std::string>, int64_t> attempt_counts_;
};

// The store stamps its rows with wall-clock Unix ms (shared/wall_time.h).
using wall_time::NowMs;
using wall_time::UtcDay;

}  // namespace tessera::store
