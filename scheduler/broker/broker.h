#pragma once
// The broker: the scheduler's single-threaded ZeroMQ ROUTER poll loop (after zguide's Majordomo
// broker). The loop owns the socket, reads worker messages and other threads' requests, and runs
// each pass of work inside one store write group; the parts it calls decide and act:
//
//   Fleet (fleet.h)              workers: registration, enrolment, heartbeats and liveness,
//                                holds, departures, cost, GPU telemetry, full disks
//   Dispatch (dispatch.h)        the queue walk over the policy, leases started, re-attaching,
//                                straggler backups; `why` and the autoscaler's capacity view
//   TaskEnds (task_ends.h)       results, done, failures by class, hand-backs, timeouts, the
//                                assembler's answers, split frames assembled
//   Leases (leases.h)            the life of one running copy: booked, charged, cancelled,
//                                ended, the task requeued or retired
//   Steps (steps.h)              job dependencies and jobs with steps: finished jobs release
//                                or cancel the ones after them, cancelling, gathering inputs
//   Jobs (jobs.h)                holding submitted jobs, loading jobs and tasks from the store;
//                                priority, pause, requeue
//   TaskQueue (task_queue.h)     when a task may be queued: holds, frame gates, licence waits
//   FullOutputs (full_outputs.h) output filesystems out of space: jobs held, then released
//   ReadOnlyMode (read_only.h)   the data folder full: reload, wait for space, resume
//   Checkpoints, ResultAcks, Feasibility, BulkTransfers, Boundary: each in its own header.
// Under them, the state they act on, which takes time as an argument: WorkerRegistry
// (worker_registry.h), LeaseTable (lease_table.h), RunningCounts (running_counts.h).
//
// Each part is called with the pass context (pass.h): the pass's time, read once as the pass
// begins from the Clock the broker was given -- the one place the broker reads time -- and the
// store, outbox, event sink and counters it acts through. Parts get the parts they need at
// construction; the graph has no cycle (a part reports to the loop through the pass instead of
// calling one above it: Pass::finished_jobs), and each part is tested alone with a ManualClock
// (tests/scheduler/broker/).
//
// Threads: the ROUTER socket and every part belong to the broker thread. Other threads talk to
// it only through Post(), which queues a closure and wakes the poll loop through an eventfd; the
// entry points below do that and wait for the answer (OnBrokerThread).
//
// Group commit: each pass of the poll loop (inbox, up to kMessagesPerPass worker messages,
// timers, dispatch) makes its store writes inside one Store::WriteGroup. Everything that tells
// the outside world about those writes -- assignments, cancels, acknowledgements, the answers to
// other threads' requests -- is held in the outbox and released only after the commit.
//
// Read-only mode: a pass whose commit fails because the data folder is full (kStorageFull) is
// rolled back, memory is reloaded from the store, and the broker stops writing until there is
// space again (read_only.h). Any other commit failure stops the scheduler (exit 74).

#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <zmq.hpp>

#include "scheduler/assembler/assembler.h"
#include "scheduler/broker/boundary.h"
#include "scheduler/broker/broker_counters.h"
#include "scheduler/broker/broker_options.h"
#include "scheduler/broker/bulk_transfers.h"
#include "scheduler/broker/capacity_view.h"
#include "scheduler/broker/checkpoints.h"
#include "scheduler/broker/dispatch.h"
#include "scheduler/broker/event_sink.h"
#include "scheduler/broker/feasibility.h"
#include "scheduler/broker/fleet.h"
#include "scheduler/broker/full_outputs.h"
#include "scheduler/broker/jobs.h"
#include "scheduler/broker/lease_table.h"
#include "scheduler/broker/leases.h"
#include "scheduler/broker/outbox.h"
#include "scheduler/broker/pass.h"
#include "scheduler/broker/read_only.h"
#include "scheduler/broker/result_acks.h"
#include "scheduler/broker/running_counts.h"
#include "scheduler/broker/steps.h"
#include "scheduler/broker/submitted_job.h"
#include "scheduler/broker/task_ends.h"
#include "scheduler/broker/task_queue.h"
#include "scheduler/broker/worker_registry.h"
#include "scheduler/store/store.h"
#include "shared/base/clock.h"
#include "shared/base/status.h"

namespace tessera::security {
class ZapHandler;
}

namespace tessera::broker {

class Broker {
 public:
  using Counters = BrokerCounters::Values;

  // `clock`: where every pass reads its time (Clock::Real(), or a ManualClock in tests); it
  // must outlive the broker.
  Broker(store::Store& store, BrokerOptions options, const Clock& clock);
  ~Broker();  // Stop()s
  Broker(const Broker&) = delete;
  Broker& operator=(const Broker&) = delete;

  // Loads unfinished work from the store, binds the ROUTER and starts the broker thread.
  // Returns the endpoint workers should connect to (with the real port).
  StatusOr<std::string> Start();
  void Stop();

  // ---- thread-safe entry points ---------------------------------------------------------------
  // A job was committed to the store: queue its tasks, from what its submission stored (copied
  // into the message the broker thread runs; nothing is read back).
  void JobSubmitted(SubmittedJob submitted);
  // The same for a job the caller knows by id only: the broker thread reads the job and its
  // tasks from the store. For jobs stored without a submission in hand (tools, benchmarks,
  // tests that write the store directly).
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
  // "health_reason", "gpus": [SlotClaims::View + GpuBoard::View + "name"]}}. `history`: with
  // each GPU's recent readings (the dashboard's charts; /metrics needs only the latest).
  StatusOr<nlohmann::json> WorkerGpuUse(bool history = true);
  // Why a task is (or is not) running: {"task_id", "state", "reason", "details": [...]}.
  StatusOr<nlohmann::json> Why(int64_t task_id);
  // The configured named limits (fixed at construction; safe from any thread).
  const std::map<std::string, int>& limits() const { return options_.limits; }
  // Why the scheduler is read-only (its data folder is full), or nullopt while it writes.
  std::optional<std::string> ReadOnlyReason() const { return read_only_.Reason(); }

  // ---- the worker fleet -----------------------------------------------------------------------
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

  // Totals since the scheduler started, for /metrics (any thread; never waits on the loop).
  Counters counters() const;

 private:
  // Worker messages per poll pass (one commit). Small passes send assignments sooner, so workers
  // answer while the broker handles the next pass; too small and commits dominate. With 100
  // workers on 2 cores (tessera-bench dispatch, noisy): 10 -> 51,000-51,700 tasks/s, 20-30 ->
  // 55,300-63,100, 50 -> 59,200-59,900, 100 -> 55,500-58,500, 2000 -> 52,200-57,900.
  static constexpr int kMessagesPerPass = 50;
  // Results sent in pieces being reassembled, all workers together; beyond it a new one waits.
  static constexpr int64_t kReassemblyMemoryBudget = int64_t{4} << 30;

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
      outbox_.Answer([done, value](const Status& failed) {
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
      boundary_.Caught(pass_, what, e.what());
    } catch (...) {
      boundary_.Caught(pass_, what, "an unknown exception");
    }
  }
  // The broker thread: start-up, then the poll loop until Stop().
  void Run(std::promise<StatusOr<std::string>> started);
  // Binds the ROUTER (with its handshake monitor, and CURVE's ZAP handler before it); returns
  // the endpoint bound.
  StatusOr<std::string> Bind();
  // One pass of the loop inside one store write group; then the outbox goes out.
  void RunPass(bool woken);
  // A pass while read-only (read_only.h): requests, worker messages, the data folder's check.
  void RunReadOnlyPass(bool woken);
  // The pass's commit failed for want of space: nothing it queued goes out, the requests it
  // served are told why, and the broker turns read-only.
  void EnterReadOnly(const Status& why);
  // After a pass commits: messages go out, then what waited for the commit.
  void Release();
  void DrainInbox();
  void ReceiveMessages();
  // A worker message, handed to the part it concerns.
  void HandleMessage(std::vector<zmq::message_t>& frames);
  // A piece of a large result; once whole, the result is handled as if it came in one piece.
  void OnPiece(const std::string& identity, protocol::Envelope& env);
  // Every heartbeat interval: liveness, licence waits and re-attach deadlines, timeouts, cost.
  void OnTimer();

  store::Store& store_;
  BrokerOptions options_;
  const Clock& clock_;
  std::thread thread_;
  int wake_fd_ = -1;
  std::mutex inbox_mu_;
  std::deque<std::function<void()>> inbox_;
  bool stop_ = false;  // guarded by inbox_mu_

  // Counters (written on the broker thread, read by counters() on any thread).
  BrokerCounters counters_;
  // Held where the broker thread creates and destroys assembler_, and by counters() to read it.
  mutable std::mutex assembler_mu_;

  // broker thread only
  zmq::context_t context_;
  std::unique_ptr<security::ZapHandler> zap_;  // before router_: the ROUTER asks it
  std::unique_ptr<zmq::socket_t> router_;
  std::unique_ptr<zmq::socket_t> monitor_;  // the ROUTER's handshake failures
  std::unique_ptr<assembler::Assembler> assembler_;
  Outbox outbox_;
  EventSink events_{store_, options_.events};
  Pass pass_{store_, outbox_, events_, counters_};
  Clock::SteadyTime next_timer_{};

  // The state the parts act on.
  WorkerRegistry workers_{
      std::chrono::milliseconds(int64_t{options_.heartbeat_ms} * options_.liveness)};
  LeaseTable table_;
  RunningCounts running_;
  // The parts, each after the parts it uses.
  Boundary boundary_{options_, workers_, counters_};
  BulkTransfers transfers_{options_.blobs, kReassemblyMemoryBudget};
  Feasibility feasibility_{workers_, table_};
  ResultAcks acks_{workers_};
  Checkpoints checkpoints_{table_, options_.blobs, boundary_};
  TaskQueue queue_{table_};
  Leases leases_{
      {table_, workers_, running_, queue_, checkpoints_, acks_, feasibility_, boundary_}};
  Dispatch dispatch_{{options_, table_, workers_, running_, leases_, queue_}};
  FullOutputs full_outputs_{{options_, table_, leases_, queue_, feasibility_}};
  Steps steps_{{options_, table_, leases_, queue_, checkpoints_}};
  Jobs jobs_{{options_, table_, queue_, steps_, full_outputs_, feasibility_}};
  TaskEnds task_ends_{{options_, table_, workers_, leases_, queue_, checkpoints_, acks_,
                       full_outputs_, feasibility_, boundary_}};
  Fleet fleet_{
      {options_, workers_, table_, leases_, dispatch_, feasibility_, transfers_, boundary_}};
  ReadOnlyMode read_only_{
      {options_, table_, workers_, running_, acks_, transfers_, jobs_, fleet_, boundary_}};
};

}  // namespace tessera::broker
