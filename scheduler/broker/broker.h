#pragma once
// The broker: the scheduler's single-threaded ZeroMQ ROUTER poll loop (after zguide's Majordomo
// broker). It welcomes workers, tracks their liveness from heartbeats, leases queued tasks to
// workers with free slots, fences every task message by (task_id, attempt), hands frame results
// to the assembler, and requeues the leases of workers that go silent.
//
// Files: broker.cpp (the poll loop: socket, inbox, outbox, one write group per pass, message
// dispatch, registration), broker_dispatch.cpp (leasing queued tasks through the policy,
// re-attaching, straggler backups, the timers), broker_leases.cpp (the life of each lease),
// broker_jobs.cpp (job operations, loading, dependencies), broker_fleet.cpp (join tokens,
// enrolment, drain, hand-backs, acknowledgements, capacity, cost), broker_checkpoints.cpp,
// broker_transfer.cpp (chunks and blobs on the wire), broker_storage.cpp (full filesystems:
// outputs held, workers' full disks), broker_degraded.cpp (read-only mode while the data folder
// is full), broker_boundary.cpp (counters; dropped messages, refused peers, caught exceptions).
// Beside it, owned by the poll loop and taking the pass's `now` as an argument, the parts that
// decide: WorkerRegistry (worker_registry.h: connections, liveness, holds, cost, slots and
// GPUs), LeaseTable (lease_table.h: live tasks, the queue, fencing, timeouts, backups, frame
// gates, re-attach deadlines) and Transfers (transfers.h: chunk reassembly, blob serving). The
// parts decide; the broker writes the store, sends and publishes.
//
// Threads: the ROUTER socket and every member below `// broker thread only` belong to the broker
// thread. Other threads talk to it only through Post(), which queues a closure and wakes the poll
// loop through an eventfd.
//
// Group commit: each pass of the poll loop (inbox, up to kMessagesPerPass worker messages,
// timers, dispatch) makes its store writes inside one Store::WriteGroup. Everything that tells
// the outside world about those writes -- assignments, cancels, acknowledgements, the answers to
// other threads' requests -- is held in the outbox and released only after the commit.
//
// Read-only mode: a pass whose commit fails because the data folder is full (kStorageFull) is
// rolled back, memory is reloaded from the store, and the broker stops writing until room is
// back (broker_degraded.cpp). Any other commit failure stops the scheduler (exit 74).

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>
#include <zmq.hpp>

#include "scheduler/assembler/assembler.h"
#include "scheduler/broker/lease_table.h"
#include "scheduler/broker/transfers.h"
#include "scheduler/broker/worker_registry.h"
#include "scheduler/events/event_bus.h"
#include "scheduler/events/farm_alerts.h"
#include "scheduler/policy/policy.h"
#include "scheduler/security/key_ring.h"
#include "scheduler/store/store.h"
#include "shared/wire/curve_keys.h"
#include "shared/base/disk_space.h"
#include "shared/base/logging.h"
#include "shared/wire/protocol.h"
#include "shared/base/status.h"

namespace tessera::blobs {
class BlobStore;
}

namespace tessera::broker {

struct BrokerOptions {
  std::string bind_endpoint = "tcp://127.0.0.1:8471";  // port 0 or '*' picks a free port
  int heartbeat_ms = 1000;
  int liveness = 5;  // missed heartbeats before a worker is declared dead
  int assembler_threads = 2;
  int max_image_side = 16384;         // frame results larger than this are rejected
  std::map<std::string, int> limits;  // named counted limits: name -> tasks allowed at once
  std::map<std::string, policy::ProjectShare> projects;  // fair-share weights and caps
  // Straggler backups: once a job has no queued tasks left, a running task that has taken
  // backup_factor x the job's mean task time (and at least backup_min_seconds) gets a backup
  // copy on an idle worker. 0 turns backups off.
  double backup_factor = 1.5;
  double backup_min_seconds = 60;
  // CURVE: the scheduler's key pair. Without it the ROUTER speaks plain TCP and admits every
  // peer (local farms on loopback only: the config refuses it anywhere else). With it, only the
  // keys the KeyRing (loaded from the store at Start) admits get in.
  std::optional<curve::KeyPair> curve;
  // Job assets, and handed-back checkpoints waiting for the task's next attempt, served to
  // workers that lack them (none: asset requests get an error, checkpoints are not kept).
  blobs::BlobStore* blobs = nullptr;
  // Where the broker tells the API's live readers what changed (none: it does not). Events go
  // out after the pass that caused them commits.
  events::EventBus* events = nullptr;
  // Farm-level alerts the broker raises and clears (a full outputs filesystem); none: it keeps
  // no alerts.
  events::FarmAlerts* alerts = nullptr;
  // Full filesystems: a write of a job's outputs that failed for want of room holds every job
  // whose outputs go to that filesystem (not charged to the task) until a check, this often,
  // finds room again. `room_of` asks a path's filesystem (tests give a fake one).
  std::chrono::milliseconds storage_check_interval{3000};
  std::function<StatusOr<disk_space::Room>(const std::string& path)> room_of = disk_space::RoomFor;
  // Cost: what a worker costs per hour, from its name and machine (its autoscaler node group's
  // price, or its instance type's); unset: workers cost nothing. Registered time is added to
  // each worker's cost and the day's every cost_interval.
  std::function<WorkerPrice(const std::string& name, const protocol::CloudInfo& cloud)> price_of;
  std::chrono::milliseconds cost_interval{10'000};
  // Lines a peer can cause at will (malformed messages, refused handshakes and registrations,
  // exceptions caught in the poll loop): at most one per kind per interval, with a count of the
  // ones left out. Every one is counted (Counters).
  std::chrono::milliseconds noisy_log_interval = logging::RateLimitedLog::kDefaultInterval;
  // Read-only mode: the room the data folder needs again before the broker writes again.
  uint64_t data_resume_bytes = uint64_t{16} << 20;
};

// What the autoscaler needs of the farm, at one moment: the work the broker would dispatch now
// (per job) and what each connected worker is doing.
struct CapacityView {
  struct JobDemand {
    int64_t job_id = 0;
    std::string name;
    int priority = 50;
    int64_t waiting = 0;  // dispatchable now (not paused, dependencies met, under project caps)
    int64_t running = 0;
    std::vector<std::string> pools, tags;
    spec::ResourceSpec resources;
    double seconds_per_task = 0;  // measured mean of its done tasks; 0: none yet
    bool interruptible = true;
    std::optional<int64_t> deadline_ms;
  };
  struct WorkerActivity {
    std::string name;
    bool busy = false;
    bool draining = false;                   // or disabled: takes no new work
    double idle_seconds = 0;                 // when not busy: since its last task ended
    std::optional<double> busy_for_seconds;  // when busy: until its tasks should end, if known
  };
  std::vector<JobDemand> jobs;  // in dispatch order
  std::vector<WorkerActivity> workers;
};

// A join token as created: the token itself is shown once and never stored.
struct NewJoinToken {
  std::string token;
  store::JoinTokenRecord record;
};

class Broker {
 public:
  Broker(store::Store& store, BrokerOptions options);
  ~Broker();  // Stop()s
  Broker(const Broker&) = delete;
  Broker& operator=(const Broker&) = delete;

  // Loads unfinished work from the store, binds the ROUTER and starts the broker thread.
  // Returns the endpoint workers should connect to (with the real port).
  StatusOr<std::string> Start();
  void Stop();

  // ---- thread-safe entry points ---------------------------------------------------------------
  // A job was committed to the store: queue its tasks.
  void JobSubmitted(int64_t job_id);
  // Cancels the job in the store and tells workers running its tasks to stop.
  Status CancelJob(int64_t job_id);
  // Job operations: the store changes first (durably), then the in-memory queue follows.
  Status SetJobPriority(int64_t job_id, int priority);
  Status SetJobPaused(int64_t job_id, bool paused);
  // Retry failed tasks (no frames) or re-render the finished tasks holding frames [first, last].
  // Returns how many tasks went back to the queue.
  StatusOr<int> RequeueFinished(int64_t job_id, std::optional<std::pair<int, int>> frames);
  // The renderer plugins each connected worker offers: {"workers": [{"id", "name", "plugins":
  // [{"name", "version"}]}]}.
  StatusOr<nlohmann::json> WorkerPlugins();
  // Each connected worker's GPU sharing, what its GPUs hold and what their telemetry says, by
  // worker name: {"NAME": {"slots_per_gpu", "memory_mb_per_slot", "health": "ok"|"unhealthy",
  // "health_reason", "gpus": [RoomClaims::View + GpuBoard::View + "name"]}}. `history`: with
  // each GPU's recent readings (the dashboard's charts; /metrics needs only the latest).
  StatusOr<nlohmann::json> WorkerGpuUse(bool history = true);
  // Why a task is (or is not) running: {"task_id", "state", "reason", "details": [...]}.
  StatusOr<nlohmann::json> Why(int64_t task_id);
  // The configured named limits (fixed at construction; safe from any thread).
  const std::map<std::string, int>& limits() const { return options_.limits; }
  // Why the scheduler is read-only (its data folder is full), or nullopt while it writes.
  // Thread-safe.
  std::optional<std::string> ReadOnlyReason() const;

  // ---- the worker fleet (broker_fleet.cpp) ------------------------------------------------
  // Whether workers must present CURVE keys, and the scheduler's public key (hex; empty without).
  bool secure() const { return options_.curve.has_value(); }
  std::string public_key_hex() const;
  // Join tokens: a new one (ttl_s 0: never expires; max_uses 0: unlimited), and revocation
  // (connections it already admitted may still enrol nothing more). A token made for
  // `worker_name` enrols only that name, and may replace the key it is enrolled with (a
  // replacement machine); any other token enrols only names without a valid key.
  StatusOr<NewJoinToken> CreateJoinToken(const std::string& note, int64_t ttl_s, int max_uses,
                                         const std::string& worker_name = "");
  StatusOr<store::JoinTokenRecord> RevokeJoinToken(int64_t token_id);
  // Revoking a worker removes its key (new connections are refused), tells a connected worker it
  // is rejected and requeues its leases; readmitting lets it enrol again with a join token.
  Status RevokeWorker(const std::string& name);
  Status ReadmitWorker(const std::string& name);
  // Tells a connected worker to finish its running tasks, take no new ones, then leave.
  Status DrainWorker(const std::string& name, const std::string& why = "asked by an operator");
  // The demand and the workers' activity, for the autoscaler.
  StatusOr<CapacityView> Capacity();
  // A disabled worker stays connected but gets no new tasks, until enabled (kept in the store,
  // so it holds across reconnects and restarts). NotFound for a name that never registered.
  Status SetWorkerDisabled(const std::string& name, bool disabled);

  // ---- metrics (any thread) -------------------------------------------------------------------
  // Totals since the scheduler started, for /metrics: relaxed atomics the broker thread bumps,
  // so reading them never waits on (or slows) the poll loop.
  struct Counters {
    uint64_t tasks_dispatched = 0;       // assignments sent, backup copies of stragglers included
    uint64_t tasks_completed = 0;        // tasks recorded done
    double render_seconds = 0;           // lease start to done, of the copies that completed them
    uint64_t queue_depth = 0;            // a gauge: tasks in the dispatch queue after the last pass
    uint64_t blob_bytes_served = 0;      // asset bytes sent to workers
    uint64_t checkpoints_kept = 0;       // periodic checkpoints kept as tasks' resume points
    uint64_t result_bytes_buffered = 0;  // a gauge: chunked results being reassembled
    // Worker messages dropped at the boundary: malformed (not a Tessera message, a bad body) or
    // refused (a field that is not valid UTF-8, a list beyond its limit).
    uint64_t messages_dropped = 0;
    // Peers refused at the CURVE handshake: plaintext, the wrong server key, an unknown key.
    uint64_t handshakes_refused = 0;
    // Registrations and enrolments refused for the name they asked for (another live
    // connection holds it; it is enrolled with another key).
    uint64_t names_refused = 0;
    // Exceptions caught at the entry points of the broker's and the assembler's threads: what
    // was being done was dropped (a message, a pass's step, a frame: its task is retried).
    uint64_t errors_caught = 0;
    // Failed attempts by the class the worker reported (render, crash, scene_error, ...).
    std::map<std::string, uint64_t> failures_by_class;
    assembler::Assembler::Counters assembler;
  };
  Counters counters() const;

 private:
  // Worker messages per poll pass (one commit). Small passes send assignments sooner, so workers
  // answer while the broker handles the next pass; too small and commits dominate. With 100
  // workers on 2 cores (tessera-bench dispatch, noisy): 10 -> 51,000-51,700 tasks/s, 20-30 ->
  // 55,300-63,100, 50 -> 59,200-59,900, 100 -> 55,500-58,500, 2000 -> 52,200-57,900.
  static constexpr int kMessagesPerPass = 50;
  // Chunked results being reassembled, all workers together; beyond it a new one waits.
  static constexpr int64_t kChunkMemoryBudget = int64_t{4} << 30;

  void Post(std::function<void()> fn);
  // Runs `fn` on the broker thread (inside a pass, which dispatches) and waits for its result.
  // The answer is released after the pass commits, like any other acknowledgement.
  template <typename T>
  StatusOr<T> OnBrokerThread(std::function<StatusOr<T>()> fn) {
    auto done = std::make_shared<std::promise<StatusOr<T>>>();
    auto result = done->get_future();
    Post([this, fn = std::move(fn), done] {
      auto value = std::make_shared<StatusOr<T>>(Status::Internal("the scheduler failed"));
      // The caller waits for an answer: an exception becomes one.
      Guarded("a request", [&] { *value = fn(); });
      // A pass that does not commit answers with why (its effects were undone).
      answers_.push_back([done, value](const Status& failed) {
        done->set_value(failed.ok() ? std::move(*value) : StatusOr<T>(failed));
      });
    });
    return result.get();
  }
  // Runs `fn` on the broker thread; an exception leaving it is caught, counted and logged
  // (rate-limited): what `fn` was doing is dropped and the broker goes on serving.
  template <typename F>
  void Guarded(const char* what, F&& fn) {
    try {
      fn();
    } catch (const std::exception& e) {
      OnCaught(what, e.what());
    } catch (...) {
      OnCaught(what, "an unknown exception");
    }
  }
  void OnCaught(const char* what, const char* error);
  // A worker message that was dropped at the boundary: counted, and logged (rate-limited).
  void DropMessage(const std::string& identity, const std::string& why);
  // The ROUTER's handshake events (refused peers), read on the broker thread.
  void DrainMonitor();
  // Whether the peer with this routing identity has gone (its connection closed): a message to
  // it cannot be routed.
  bool PeerGone(const std::string& identity);
  // A registration or enrolment refused for the name it asked for: logged and recorded as an
  // event (both rate-limited per name), counted, and the peer told why.
  void RefuseName(const std::string& identity, const std::string& name, const char* event,
                  const std::string& reason, int retry_after_ms);
  // ---- live events (after the pass commits) ---------------------------------------------------
  // The job's tasks or state changed: one "job" event per job at most every kJobEventInterval.
  void MarkJobChanged(int64_t job_id) {
    if (options_.events) changed_jobs_.insert(job_id);
  }
  void Publish(const char* kind, nlohmann::json data);
  // A notable event: stored (the events table) and published as a "notice". Broker thread.
  void RecordEvent(std::optional<int64_t> job_id, std::optional<int64_t> task_id,
                   std::optional<int64_t> worker_id, const std::string& kind,
                   const std::string& message);
  // Hands this pass's events to after_commit_.
  void PublishPending();

  // Where and how the job's frames are written.
  static assembler::FrameOutput FrameOutputOf(const store::JobRecord& job);
  void EnqueueJob(int64_t job_id);  // puts its tasks that are not running back in
  // A lease starts (+1) or ends (-1): the job's, its project's and its user's running counts
  // and its named limits follow.
  void CountRunning(JobInfo& job, int delta);
  // Re-evaluates whether any connected worker could ever run the job; records a notice on the
  // job (and an event) when none can, and clears it when one can again.
  void UpdateFeasibility(int64_t job_id, JobInfo& job);
  void UpdateAllFeasibility();
  void Run(std::promise<StatusOr<std::string>> started);
  // One pass of the loop inside one store transaction; then the outbox goes out.
  void RunPass(bool woken);
  void ReceiveMessages();
  // Writes idle/busy for workers whose state changed during the pass (once per pass, not per
  // lease: a worker that finishes one task and gets the next stays busy).
  void StoreWorkerStates();
  void DrainInbox();
  void HandleMessage(std::vector<zmq::message_t>& frames);
  void OnRegister(const std::string& identity, const protocol::Envelope& env,
                  const std::string& user_id);
  // A registering worker still renders `ref` (or, `delivering`, holds its finished results):
  // take the lease back if its attempt is still the task's current one and nobody else holds
  // it; otherwise tell the worker to stop.
  void Reattach(const std::string& identity, WorkerConn& worker, const protocol::TaskRef& ref,
                bool delivering = false);
  // Worker fleet (broker_fleet.cpp): enrolment over a join-token connection, hand-backs, result
  // acknowledgements.
  // Fills keys_ from the store: usable join tokens and enrolled, unrevoked worker keys.
  Status LoadKeyRing();
  void OnEnrol(const std::string& identity, const protocol::Envelope& env,
               const std::string& user_id);
  void OnHandback(const std::string& identity, WorkerConn& worker, protocol::Envelope& env);
  // broker_transfer.cpp: large results in pieces, asset blobs served in pieces.
  void OnChunk(const std::string& identity, protocol::Envelope& env);
  // A shared-storage job's whole frame, written by the worker itself.
  void OnFrameWrittenByWorker(const std::string& identity, WorkerConn& worker, LiveTask& task,
                              const protocol::FrameResult& m);
  void OnBlobRequest(const std::string& identity, const protocol::Envelope& env);
  void Ack(const std::string& identity, int64_t task_id, int attempt);
  // The acknowledgements no assignment carried this pass go alone.
  void SendPendingAcks();
  // Sends the acks a task's finished copies wait for (its outcome is recorded in this pass).
  void SendAcks(LiveTask& task);
  // Forgets a task's hand-back (and deletes its checkpoint file).
  void ClearResume(LiveTask& task);
  // Checkpoints (broker_checkpoints.cpp). A running attempt's periodic checkpoint: kept as the
  // task's resume point when it names the current attempt and is ahead of the one kept.
  void OnCheckpoint(const std::string& identity, WorkerConn& worker, protocol::Envelope& env);
  // Checks a checkpoint of `frame` against the task and keeps it as a blob, in place of the
  // task's previous one: "" when kept, else why not (the previous one is then left as it was).
  std::string KeepCheckpoint(LiveTask& task, int attempt, int frame, int samples,
                             const zmq::message_t& payload);
  // Whether a task whose attempt ended uncharged without a hand-back (its worker lost) resumes
  // from its periodic checkpoint rather than starting over.
  bool ResumesFromCheckpoint(const LiveTask& task, bool count_failure) const;
  void OnFrameResult(const std::string& identity, WorkerConn& worker, protocol::Envelope& env);
  void OnTaskDone(const std::string& identity, WorkerConn& worker, const protocol::TaskDone& m);
  void OnTaskFailed(const std::string& identity, WorkerConn& worker, const protocol::TaskFailed& m);
  // What the failure's class leads to (the job's failure_policy): a scene error fails the task
  // at the requeue; out of memory raises the job's memory floor above this worker's (or fails
  // the task when no connected worker has more); a licence failure is uncharged and waits.
  // Returns whether the attempt is still charged.
  bool ApplyFailureClass(LiveTask& task, const WorkerConn& worker, const std::string& identity,
                         const protocol::TaskFailed& m);
  void OnFrameWritten(const assembler::FrameWritten& written);
  // A command task's file (`outputs: files`; broker_files.cpp): checked, then written into the
  // job's output folder by the assembler, or found on shared storage where its worker put it.
  void OnFileResult(const std::string& identity, WorkerConn& worker, protocol::Envelope& env);
  void OnFileWritten(const assembler::FrameWritten& written);
  void OnTimer();
  void Dispatch();

  // Lease bookkeeping.
  // The task whose copy on `identity` has `attempt`, or nullptr (logged) for stale messages.
  LiveTask* FindLease(const std::string& identity, int64_t task_id, int attempt, const char* what);
  // Removes the copy on `identity` and frees its slot (its GPUs too unless it is stopping).
  // Keeps an attempt's log (from its final message) for `tessera logs` and the dashboard.
  void SaveLog(const LiveTask& task, int attempt, const WorkerConn& worker, std::string log);
  // Records how the attempt ended (the first outcome recorded for it stands), in this pass.
  void EndAttempt(const LiveTask& task, int attempt, store::AttemptOutcome outcome,
                  const std::string& failure_class, const std::string& message, bool charged);
  void ReleaseLease(LiveTask& task, const std::string& identity);
  // A copy's GPU-seconds and its share of its worker's price go to the task and its job.
  void ChargeLease(const LiveTask& task, const Lease& lease, const WorkerConn& worker);
  // Adds the workers' registered time since they were last metered to their cost (all of them,
  // or just `only`).
  void MeterCosts(const std::string* only = nullptr);
  // Tells the holder of that copy to stop; its slot and GPUs stay reserved until its heartbeat
  // no longer lists it.
  void CancelLease(LiveTask& task, const std::string& identity);
  // Cancels every running copy of the task (the job was cancelled, a race was won, ...); each
  // copy's attempt ends canceled with `why` unless its outcome was already recorded.
  void CancelAllLeases(LiveTask& task, const std::string& why);
  // The copy on `identity` ended without finishing the task (failure, loss, timeout): its
  // attempt ends with `end` (its message the reason, charged or not); with another copy still
  // running it is just dropped; otherwise the task is requeued. `cancel` also tells the worker
  // to stop it.
  void EndLease(LiveTask& task, const std::string& identity, const store::AttemptEnd& end,
                bool cancel);
  // Frees the slots of stopped cancelled leases, and requeues leases the worker does not hold
  // (a lost assignment) once they are older than two heartbeats.
  void OnHeartbeat(const std::string& identity, WorkerConn& worker,
                   const protocol::Heartbeat& beat);
  // Near the end of a job, starts backup copies of its slowest running tasks on idle workers.
  void StartBackups();
  // Counts a charged failure against the worker for the task's job (durably); blocklists it at
  // the job's threshold.
  void ChargeWorker(LiveTask& task, const WorkerConn& worker);
  // A result the worker sent wrongly (a frame or file that breaks the protocol's rules): its
  // worker is charged and the copy ends, failed with "bad <what> result: <problem>".
  void RefuseResult(LiveTask& task, const std::string& identity, const WorkerConn& worker,
                    int attempt, const char* what, const std::string& problem);
  // First queued task the worker may run (skipping jobs that blocklist it), or queue_.end().
  // `gpus` receives the GPUs the task would be pinned to.
  std::set<QueueKey>::iterator NextTaskFor(const WorkerConn& worker, std::vector<int>* gpus);
  // Back to the queue (or failed for good): `attempt` is the copy that ended, the last one.
  // `handed_back`: the frames it delivered stay delivered and the next attempt resumes.
  void Requeue(LiveTask& task, int attempt, const std::string& reason, bool count_failure,
               bool handed_back = false);
  // Books a running copy of the task on the worker: slot, GPUs, running counts.
  void AddLease(LiveTask& task, const std::string& identity, WorkerConn& worker, int attempt,
                const std::vector<int>& gpus);
  // Starts a lease (the task's next attempt) of `task` on the worker and sends the assignment.
  bool StartLease(LiveTask& task, const std::string& identity, WorkerConn& worker,
                  std::vector<int> gpus, bool backup);
  void MaybeComplete(LiveTask& task);
  // The task was recorded done: the straggler baseline and the counters follow.
  void CountDone(JobInfo& job, const LiveTask& task);
  // Drops a finished task from memory (and its job, once it has no unfinished tasks).
  void Forget(int64_t task_id);
  // A job left memory (all its tasks finished): release the jobs that were waiting on it.
  void OnJobFinished(int64_t job_id);

  // ---- jobs with steps (broker_steps.cpp) --------------------------------------------------
  // Cancels a job (a job with steps: each unfinished step, then the job) and tells the workers
  // running its tasks to stop; `reason` is recorded as its error. Returns the leases stopped.
  StatusOr<int> CancelNow(int64_t job_id, const std::string& reason);
  // A step ended failed or canceled: the unfinished steps depending on it are canceled (and
  // theirs after them), the job's error says which step failed.
  void CancelStepsAfter(const store::JobRecord& ended);
  // At start-up: steps left waiting on a step that failed before a crash are canceled.
  void CancelStepsOfEndedSteps();
  // A step taking another step's frames (plugin.yaml input_frames): LoadJob finds that step, and
  // once it is done its PNG frames are stored in the blob store on an assembler thread and become
  // this step's assets (stored: blob GC keeps them while the job lives), then its task queues.
  // An OpenJD step of a job bundle likewise takes what the steps before it returned into its
  // sessions' output folders, over the bundle's attached files.
  void FindInputFrames(const store::JobRecord& record, JobInfo& job);
  void FindReturnedFiles(const store::JobRecord& record, JobInfo& job);
  void GatherInputFrames(int64_t job_id, JobInfo& job);
  void GatherReturnedFiles(int64_t job_id, JobInfo& job);
  void OnInputFramesGathered(const assembler::FrameWritten& gathered);
  // How `tessera why` names a job `job` depends on: "step render" (a step of the same job) or
  // "job 12".
  std::string DependencyName(const JobInfo& job, int64_t dep);
  // The job itself, or a job with steps' steps (in their stored order).
  StatusOr<std::vector<int64_t>> JobsOf(int64_t job_id);
  // Applies an operation to the job, and to each of its steps when it has steps.
  Status ForEachStep(int64_t job_id, const std::function<Status(int64_t)>& apply);
  void Enqueue(const LiveTask& task);
  // Frame-on-frame dependencies: whether the task still waits on an undone frame; the gate of a
  // depended-on job (built from the store on first use); a depended-on task finished.
  bool WaitsOnFrames(const LiveTask& task, const JobInfo& job);
  FrameGate& GateFor(int64_t job_id);
  void OnFramesDone(int64_t job_id, int frame_start, int frame_end);
  // Split frames: a frame's last part (LeaseTable::IsLastPart) is recorded done only after
  // AssembleFrame has written the frame (OnFrameAssembled).
  void AssembleFrame(LiveTask& task, const JobInfo& job);
  void OnFrameAssembled(const assembler::FrameWritten& written);
  // At start-up: frames whose parts were all stored before a restart but never assembled.
  void ResumeAssemblies();
  // The registered worker a message came from, its last_heard now; nullptr (and the sender asked
  // to register again, unless it was saying goodbye) when it is not registered.
  WorkerConn* HeardFrom(const std::string& identity, protocol::MessageType type);
  // `identity` by value: callers pass the key of the map entry this erases.
  void DropWorker(std::string identity, const std::string& reason);

  // ---- full filesystems (broker_storage.cpp) ----------------------------------------------
  // A frame, part or assembly write of the job's outputs failed for want of room: the task is
  // requeued uncharged (or, for an assembly, kept until there is room) and every job whose
  // outputs share the filesystem is held, with an alert. True when `written` was such a failure.
  bool OnOutputsFull(const assembler::FrameWritten& written, LiveTask* task);
  // A worker reported a failure of class storage_full for a shared-outputs job: held like above
  // when the scheduler sees that job's output filesystem full too.
  void CheckSharedOutputs(int64_t job_id);
  // Holds a job just loaded when its outputs go to a filesystem that is full.
  void HoldIfOutputsFull(int64_t job_id, JobInfo& job);
  // Every storage_check_interval: releases the jobs of a filesystem that has room again.
  void CheckStorage(std::chrono::steady_clock::time_point now);
  // A worker's heartbeat (or its leaving, with ""): its full disk raises or clears its alert.
  void SetWorkerDiskFull(WorkerConn& worker, const std::string& disk_full);
  // A heartbeat's GPU readings (broker_fleet.cpp): kept for the API and /metrics; a GPU whose
  // reading carries a fault takes no new task (policy::WorkerOffer::gpu_faults), and the
  // worker's alert is raised, or cleared once none has one (or the worker goes).
  void OnGpuSamples(WorkerConn& worker, const std::vector<protocol::GpuSample>& samples);
  void ClearGpuFaultAlert(const WorkerConn& worker);
  // Why a held job's task waits ("" when the job is not held).
  std::string HeldReason(const JobInfo& job) const;
  // Holds every loaded job whose outputs share the filesystem of `folder` (raises the alert).
  void HoldOutputs(const std::string& folder, const std::string& why);
  Status LoadJob(int64_t job_id);
  void LoadTasks(std::optional<int64_t> job_id);
  // LoadTasks, saying whether the store could be read; `requeue_running` as in
  // Store::LoadUnfinishedTasks.
  Status LoadStoredTasks(std::optional<int64_t> job_id, bool requeue_running);

  // ---- read-only mode (broker_degraded.cpp) ---------------------------------------------------
  // The pass's commit failed for want of room on the data folder: the pass was rolled back;
  // nothing it queued goes out, requests it served are answered with `why`, memory is reloaded
  // from the store (without writing), the data_full alert is raised.
  void EnterReadOnly(const Status& why);
  // A pass while read-only: requests from other threads, worker messages (heartbeats answered,
  // results not acknowledged, registrations asked to come back), the room check. Writes nothing
  // itself.
  void RunReadOnlyPass(bool woken);
  void OnMessageWhileReadOnly(const std::string& identity, const protocol::Envelope& env);
  // Every kRoomCheckInterval: with data_resume_bytes free again, reloads memory from the store
  // the way start-up does (in a pass that commits), asks every worker to register again (they
  // re-attach their tasks and re-send their spooled results) and leaves read-only mode.
  void CheckRoom(std::chrono::steady_clock::time_point now);
  // Forgets every task, job, lease and queue entry held in memory (the workers stay connected,
  // holding nothing).
  void ForgetLoadedState();

  // Queues a message for the worker; it leaves after the pass's commit (FlushOutbox).
  void Send(const std::string& identity, std::vector<zmq::message_t> frames);
  void FlushOutbox();

  store::Store& store_;
  BrokerOptions options_;
  std::thread thread_;
  int wake_fd_ = -1;
  std::mutex inbox_mu_;
  std::deque<std::function<void()>> inbox_;
  bool stop_ = false;  // guarded by inbox_mu_

  // Who may connect (CURVE farms); thread-safe, shared with the ZAP handler's thread.
  security::KeyRing keys_;

  // Counters (written on the broker thread, read by counters() on any thread).
  std::atomic<uint64_t> dispatched_{0};
  std::atomic<uint64_t> completed_{0};
  std::atomic<uint64_t> render_ns_{0};
  std::atomic<uint64_t> queue_depth_{0};
  std::atomic<uint64_t> blob_bytes_served_{0};
  std::atomic<uint64_t> checkpoints_kept_{0};
  std::atomic<uint64_t> result_bytes_buffered_{0};
  std::atomic<uint64_t> messages_dropped_{0};
  std::atomic<uint64_t> handshakes_refused_{0};
  std::atomic<uint64_t> names_refused_{0};
  std::atomic<uint64_t> errors_caught_{0};
  // Lines a peer can cause at will (BrokerOptions::noisy_log_interval).
  logging::RateLimitedLog noisy_;
  // Held where the broker thread creates and destroys assembler_, and by counters() to read it.
  mutable std::mutex assembler_mu_;

  // broker thread only
  zmq::context_t context_;
  std::unique_ptr<security::ZapHandler> zap_;  // before router_: the ROUTER asks it
  std::unique_ptr<zmq::socket_t> router_;
  std::unique_ptr<zmq::socket_t> monitor_;  // the ROUTER's handshake failures
  std::unique_ptr<assembler::Assembler> assembler_;
  // Connected workers: liveness, holds, cost, slots and GPUs.
  WorkerRegistry workers_{
      std::chrono::milliseconds(int64_t{options_.heartbeat_ms} * options_.liveness)};
  // Large results arriving in pieces (at most kChunkMemoryBudget bytes buffered in all), and
  // blobs served in pieces.
  Transfers transfers_{options_.blobs, kChunkMemoryBudget};
  // Unfinished tasks and their jobs, the queue, leases and their deadlines.
  LeaseTable leases_;
  std::map<std::string, int> limits_in_use_;  // named limit -> running tasks holding it
  // Tasks held back by a licence failure until then (LiveTask::not_before); OnTimer queues them.
  std::multimap<std::chrono::steady_clock::time_point, int64_t> waiting_tasks_;
  // Counters::failures_by_class (read from other threads).
  mutable std::mutex failures_mu_;
  std::map<std::string, uint64_t> failures_by_class_;
  policy::FarmShares shares_;  // fair share: running tasks by project and user
  std::vector<std::pair<std::string, std::vector<zmq::message_t>>> outbox_;  // after commit
  // Workers given acknowledgements to carry in this pass (WorkerConn::pending_acks).
  std::vector<std::string> acks_waiting_;
  std::vector<std::function<void()>> after_commit_;  // answers to other threads' requests
  static constexpr std::chrono::milliseconds kJobEventInterval{250};
  std::set<int64_t> changed_jobs_;
  std::chrono::steady_clock::time_point next_job_events_{};
  // The pass's time: read once as each pass of the poll loop begins, and handed to the parts.
  std::chrono::steady_clock::time_point now_{};
  std::vector<std::pair<const char*, nlohmann::json>> pending_events_;
  std::chrono::steady_clock::time_point next_timer_;
  std::chrono::steady_clock::time_point next_touch_;
  std::chrono::steady_clock::time_point next_meter_;
  // A filesystem that took no more of the outputs, by its device, with the jobs it holds.
  struct FullOutputs {
    std::string folder;  // the output folder whose write failed: the alert's key
    std::set<int64_t> jobs;
    std::vector<assembler::AssembleJob> assemblies;  // frames to assemble once there is room
    std::chrono::steady_clock::time_point next_check;
  };
  std::map<dev_t, FullOutputs> full_outputs_;
  // Parts folders of assembled frames that could not be removed yet (a read-only filesystem):
  // tried again with each storage check.
  std::vector<std::filesystem::path> leftover_parts_;
  std::chrono::steady_clock::time_point next_leftover_try_{};
  // The answers to other threads' requests made in this pass (OnBrokerThread): given after the
  // commit, with the commit's failure if it failed.
  std::vector<std::function<void(const Status&)>> answers_;
  // Read-only mode (broker_degraded.cpp): the broker thread's flag, and the reason any thread
  // may read.
  static constexpr std::chrono::seconds kRoomCheckInterval{2};
  static constexpr int kReadOnlyRetryMs = 5000;  // registrations: "try again in 5 s"
  bool read_only_ = false;
  std::chrono::steady_clock::time_point next_room_check_{};
  mutable std::mutex read_only_mu_;
  std::optional<std::string> read_only_reason_;  // guarded by read_only_mu_
};

}  // namespace tessera::broker
