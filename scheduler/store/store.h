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
//
// One facade, one file per concern (all in scheduler/store/):
//   store.h / store.cpp   this class; opening the database, the reader pool, the checkpointer
//   records.h             the records it reads and writes (JobRecord, TaskRecord, ...)
//   schema.cpp            the numbered migrations (PRAGMA user_version) and their backfills
//   jobs.cpp              submitting, cancelling, pausing, retrying and deleting jobs; a job's
//                         stored files, blocklist, frame flags and events
//   tasks.cpp             task transitions fenced by attempt, job counters and state, the
//                         unfinished tasks loaded at start-up
//   write_group.cpp       the group commit (WriteGroup): writes recorded and applied together
//   workers.cpp           worker registration, state, heartbeats; the C++ plugins they offer
//   credentials.cpp       join tokens, enrolled worker keys, API tokens
//   costs.cpp             GPU-seconds and money per task, job, worker and day; autoscaler nodes
//   attempts.cpp          the attempt history and task logs
//   idempotency.cpp       Idempotency-Keys of POSTs that created something
//   queries.cpp           reads for the API: lists and single jobs, tasks, workers, the summary
//   rows.h / rows.cpp     how job and task rows become records (shared by the files above)
//   table.h               Table: one declaration of a record's columns serves its SELECTs,
//                         RETURNINGs and row reader
//   sqlite.h / sqlite.cpp RAII wrappers of sqlite3 connections, statements and transactions

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

#include "scheduler/store/records.h"
#include "scheduler/store/sqlite.h"
#include "shared/jobs/job_file.h"
#include "shared/wire/protocol.h"
#include "shared/base/status.h"

namespace tessera::store {

struct PluginFiles;  // rows.h

class Store {
 public:
  static constexpr int kSchemaVersion = 32;

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

  // ---- jobs (jobs.cpp; HTTP threads) ------------------------------------------------------------
  // Stores a validated job and all of its tasks in one transaction. `output_dir_for` maps the
  // new job id to its absolute output directory (it may create it; an error aborts the submit).
  // With `request`, its Idempotency-Key is recorded in the same transaction (resource "job",
  // the new id); a key already recorded aborts it with kAlreadyExists.
  StatusOr<JobRecord> CreateJob(const spec::JobSpec& spec, const std::string& job_yaml,
                                const std::function<StatusOr<std::string>(int64_t)>& output_dir_for,
                                const IdempotentRequest* request = nullptr);
  // Stores a job with steps in one transaction: the job's row (renderer spec::kRendererSteps,
  // its folder from `output_dir_for`), then every step as a job of its own in the spec's order
  // (each after the steps it depends on, whose ids become its depends_on / frame_depends_on),
  // its folder from `step_dir_for(step index, step job id, the job's folder)`.
  using StepDirFn = std::function<StatusOr<std::string>(size_t, int64_t, const std::string&)>;
  StatusOr<JobRecord> CreatePipeline(
      const spec::PipelineSpec& pipeline, const std::string& job_yaml,
      const std::function<StatusOr<std::string>(int64_t)>& output_dir_for,
      const StepDirFn& step_dir_for, const IdempotentRequest* request = nullptr);
  // The steps of a job with steps, in the order they were stored (each after those it needs).
  StatusOr<std::vector<JobRecord>> PipelineSteps(int64_t job_id);
  // Marks the job and its unfinished tasks canceled; returns the leases that were running.
  // `reason` (when given) becomes the job's error, e.g. "step sim failed".
  StatusOr<std::vector<Lease>> CancelJob(int64_t job_id, const std::string& reason = "");
  // A step canceled because a step it needed failed goes back to queued, its canceled tasks
  // with it (retrying its job). Returns how many tasks moved.
  StatusOr<int> ReviveStep(int64_t job_id);
  // Sets the job's error unless it has one (the first reason a job failed is the one kept).
  Status SetJobError(int64_t job_id, const std::string& error);
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

  // ---- tasks (tasks.cpp; broker thread) ---------------------------------------------------------
  // Tasks not yet finished (of `job_id` and, for a job with steps, its steps; of every job
  // without), for the broker's queue at start-up; tasks that were running when the
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
  // A running attempt's progress (0..1) and status line (shown with the task).
  Status SetTaskProgress(int64_t task_id, int attempt, double progress,
                         const std::string& status_line = "");
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
  // Replaces a job's assets (path -> blob SHA-256): the input frames of a step that takes another
  // step's frames, once gathered. The blobs a job names are kept while it exists (BlobInUse).
  Status SetJobAssets(int64_t job_id, const std::map<std::string, std::string>& assets);

  // ---- workers (workers.cpp; broker thread) -----------------------------------------------------
  // Inserts or refreshes the worker by name; returns its id.
  StatusOr<int64_t> UpsertWorker(const protocol::Register& reg);
  Status SetWorkerState(int64_t worker_id, WorkerState state);
  // Disabled workers get no new tasks (running ones finish); NotFound for an unknown name.
  Status SetWorkerDisabled(const std::string& name, bool disabled);
  Status TouchWorkers(const std::vector<std::pair<int64_t, int64_t>>& id_and_last_seen_ms);
  // At start-up nobody is connected yet.
  Status MarkAllWorkersOffline();
  // C++ renderer plugins offered by workers (schema 23): the latest description of each.
  Status SaveNativePlugin(const protocol::PluginOffer& offer);
  StatusOr<std::vector<protocol::PluginOffer>> NativePlugins();

  // ---- cost and the autoscaler's nodes (costs.cpp) ----------------------------------------------
  // A task attempt ended: its GPU-seconds and money go to the task, its job and today.
  Status AddTaskCost(int64_t task_id, int64_t job_id, double gpu_seconds, double cost);
  // Registered time at the workers' prices: (worker id, money) each, and the sum to today.
  Status AccrueWorkerCosts(const std::vector<std::pair<int64_t, double>>& worker_costs);
  Status SetWorkerPrice(int64_t worker_id, const std::string& node_group, double price_per_hour);
  // The last `days` UTC days with any cost, oldest first.
  StatusOr<std::vector<CostDay>> CostDays(int days);
  StatusOr<int64_t> AddAutoscalerNode(const AutoscalerNodeRecord& node);
  Status UpdateAutoscalerNode(const AutoscalerNodeRecord& node);
  Status DeleteAutoscalerNode(int64_t id);
  StatusOr<std::vector<AutoscalerNodeRecord>> ListAutoscalerNodes();

  // ---- credentials (credentials.cpp; any thread) ------------------------------------------------
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

  // Output validation (jobs.cpp): a frame kept with bad pixels carries the reason until it is
  // written clean; the flags of frames [first, last].
  Status SetFrameFlag(int64_t job_id, int frame, const std::string& reason);
  Status ClearFrameFlag(int64_t job_id, int frame);
  StatusOr<std::map<int, std::string>> FrameFlags(int64_t job_id, int first, int last);
  // ---- idempotent requests (store/idempotency.cpp; HTTP threads) --------------------------------
  // The request first made with (user, key) within the last `max_age_ms`, if any.
  StatusOr<std::optional<IdempotentRequest>> FindIdempotentRequest(const std::string& user,
                                                                   const std::string& key,
                                                                   int64_t max_age_ms);
  // Records a request (after what it created was stored); kAlreadyExists when the key is taken.
  Status RecordIdempotentRequest(const IdempotentRequest& request);

  // Whether any stored job lists the blob (queries.cpp) `hash` among its assets.
  StatusOr<bool> BlobInUse(const std::string& hash);
  // The stored jobs whose output folder is `dir` (resolved, as stored): (id, user) pairs.
  StatusOr<std::vector<std::pair<int64_t, std::string>>> JobsWritingTo(const std::string& dir);

  // ---- attempts (attempts.cpp) ------------------------------------------------------------------
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

  // ---- webhook deliveries (webhook_cursors.cpp) ----------------------------------------------
  // The id of the last event `receiver` acknowledged; a receiver seen for the first time starts
  // at the newest event (it is sent what happens from now on, not the farm's history).
  StatusOr<int64_t> WebhookCursor(const std::string& receiver);
  Status SetWebhookCursor(const std::string& receiver, int64_t event_id);
  // Events after `after_id` of the given kinds, oldest first, at most `limit`.
  StatusOr<std::vector<EventRecord>> EventsAfter(int64_t after_id,
                                                 const std::vector<std::string>& kinds, int limit);

  Status AddEvent(std::optional<int64_t> job_id, std::optional<int64_t> task_id,
                  std::optional<int64_t> worker_id, const std::string& kind,
                  const std::string& message);

  // ---- reads (queries.cpp; any thread) ----------------------------------------------------------
  StatusOr<std::vector<JobRecord>> ListJobs(std::optional<JobState> state, int limit);
  // Newest first; every set field narrows the list. `before`: only jobs with a smaller id (the
  // next page after a page that ended at that id).
  struct JobFilter {
    std::optional<JobState> state;
    std::optional<bool> paused;  // set: only jobs held (true) or not held (false), unfinished
    std::string user, project;
    std::optional<int64_t> before;
    int limit = 100;
    bool steps = true;  // false: not the steps of jobs with steps (their jobs are listed)
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
  Status WriteTaskProgress(int64_t task_id, int attempt, double progress,
                           const std::string& status_line);
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
  // A job's row and tasks, inside the caller's transaction (CreateJob, CreatePipeline).
  struct StepLink {
    int64_t pipeline_id = 0;
    std::string name;
    std::string depends_on_json;  // [{"step", "per_frame"}]
  };
  StatusOr<int64_t> InsertJob(const spec::JobSpec& spec, const std::string& job_yaml,
                              const PluginFiles& files,
                              const std::function<StatusOr<std::string>(int64_t)>& output_dir_for,
                              const StepLink* step);
  Status RecordIdempotentJob(const IdempotentRequest* request, int64_t job_id);
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

// The store stamps its rows with wall-clock Unix ms (shared/base/wall_time.h).
using wall_time::NowMs;
using wall_time::UtcDay;

}  // namespace tessera::store
