#pragma once
// The worker agent: registers with the scheduler, heartbeats, renders assigned tasks and sends
// the results, following shared/wire/protocol.h.
//
// Threading: Run() is the agent's I/O thread. It creates and is the only user of the DEALER
// connected to the scheduler and of the inproc "outbox" PULL. Each task renders on its own
// thread (TaskRunner), which owns a PUSH into the outbox and never sees the DEALER. Stop(),
// running_tasks() and worker_id() may be called from any thread.
//
// Behaviour the scheduler relies on:
//  - kRegister on every (re)connect; kHeartbeat (running TaskRefs) every heartbeat_ms once
//    welcomed, with kWelcome's timings.
//  - Nothing heard for heartbeat_ms * liveness, or kUnknownWorker: the DEALER is closed
//    (linger 0), recreated after a capped exponential backoff and registers again. Running renders
//    carry on. Every result message (frame results, done, failed, hand-back) goes through the
//    ResultSpool on disk first and is re-sent after each kWelcome until the scheduler's
//    kResultAck for its attempt; kRegister lists finished-but-unacknowledged attempts as
//    `delivering` so the scheduler re-attaches them.
//  - CURVE (scheduler_public_key set): the DEALER authenticates with this worker's key pair.
//    Without an enrolled pair it first connects with its join token's pair, sends kEnrol and,
//    on kEnrolled, saves its pair (key_file) and reconnects with it. A handshake the scheduler
//    refuses (ZAP) is seen through a socket monitor: an enrolled key that is refused is enrolled
//    again once with the join token if there is one; otherwise Run() returns
//    FailedPrecondition saying why.
//  - Drain() (SIGTERM, or kDrain from the scheduler): no new tasks (heartbeats say draining);
//    once the running ones are done and their results acknowledged, kGoodbye and Run() returns.
//  - Leave() (spot interruption, second SIGTERM): running tasks are handed back -- the path
//    tracer checkpoints at its next pass -- and once the hand-backs are acknowledged (or
//    kLeaveTimeout passed) the agent says goodbye and Run() returns.
//  - kAssign beyond `slots` running tasks: kTaskFailed "worker busy" (the scheduler requeues).
//    A repeated kAssign for an attempt already running is ignored.
//  - kCancel(task_id, attempt) for a running attempt stops its render; NOTHING more is sent for
//    that attempt (no kTaskFailed): the scheduler already knows, and fencing would drop it.
//    kCancel for any other attempt is ignored.
//  - kReject: Run() returns FailedPrecondition with the reason; a kReject with retry_after_ms
//    (another live connection holds this worker's name) only closes the connection, and the
//    agent connects again after that long.
//  - Stop(): renders are cancelled, kGoodbye is sent, Run() returns Ok.
//  - Malformed or unexpected messages are logged (rate-limited) and ignored; so is a message
//    whose handling throws: no exception ends the I/O loop.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "shared/base/logging.h"
#include "shared/wire/curve_keys.h"
#include "shared/wire/piece_transfer.h"
#include "shared/wire/protocol.h"
#include "worker/blob_cache.h"
#include "worker/gpu_telemetry.h"
#include "worker/hardware_probe.h"
#include "worker/result_spool.h"
#include "worker/task_runner.h"
#include "worker/worker_config.h"

namespace tessera::worker {

struct AgentOptions {
  std::string scheduler_address = "tcp://127.0.0.1:8471";
  std::string name;
  int slots = 1;
  // GPU sharing, reported in kRegister: slots each GPU is cut into (0: whole GPUs) and the GPU
  // memory one slot gives (0: not divided).
  int slots_per_gpu = 0;
  int64_t memory_mb_per_slot = 0;
  std::vector<std::string> pools = {"default"};  // reported in kRegister
  std::vector<std::string> tags;
  int heartbeat_ms = 1000;  // until kWelcome says otherwise
  int liveness = 5;
  // GPU telemetry (gpu_telemetry.h): read every gpu_telemetry_ms (0: off) through NVML from
  // nvml_library, when the worker registers GPUs.
  int gpu_telemetry_ms = 5000;
  std::string nvml_library = "libnvidia-ml.so.1";
  HardwareInfo hardware;              // reported in kRegister
  std::vector<std::string> backends;  // offered in kRegister
  RenderSettings render;
  std::chrono::milliseconds reconnect_min{100};
  std::chrono::milliseconds reconnect_max{5000};
  // CURVE: the scheduler's public key (Z85; empty = unencrypted), this worker's join token, and
  // where its enrolled key pair is kept (empty: memory only).
  std::string scheduler_public_key;
  std::string join_token;
  std::string key_file;
  std::string spool_dir;  // the result spool; empty: <render.data_dir>/spool
  std::string cache_dir;  // the asset cache; empty: <render.data_dir>/cache
  int64_t cache_bytes = int64_t{20480} << 20;
};

// Combines the config with the probed hardware. backend: cuda on a machine without a usable GPU
// is an error naming worker.backend.
StatusOr<AgentOptions> MakeAgentOptions(const WorkerConfig& config, const HardwareInfo& hardware);

class Agent {
 public:
  explicit Agent(AgentOptions options);
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Runs until Stop() (returns Ok) or a kReject (returns FailedPrecondition). Call once.
  Status Run();
  // Any thread; Run() returns within a few hundred ms plus the time renders take to cancel.
  void Stop() { stop_requested_.store(true); }
  // Any thread: finish the running tasks, take no new ones, deliver, then leave.
  void Drain() { drain_requested_.store(true); }
  // Any thread: hand the running tasks back (with checkpoints) and leave.
  void Leave(const std::string& reason);
  // Any thread: tasks occupying a slot (cancelled ones count until their thread has finished).
  int running_tasks() const { return running_tasks_.load(); }
  // Any thread: the id from the latest kWelcome, 0 before the first.
  int64_t worker_id() const { return worker_id_.load(); }

 private:
  using Clock = std::chrono::steady_clock;
  enum class LinkState { kDisconnected, kRegistering, kReady };

  struct Slot {
    std::unique_ptr<TaskRunner> runner;
    std::set<std::string> awaiting;  // asset blobs still being fetched for it
    bool cancelled = false;
    double sent_fraction = -1;
    std::string sent_status;  // the status line last sent
    Clock::time_point sent_at{};
  };

  // One turn of the I/O loop; true once the agent may go (drained, or left).
  bool Pass();
  // Runs `fn`; an exception is logged (rate-limited) and what `fn` was doing dropped.
  template <typename F>
  void Guarded(const char* what, F&& fn);
  void Connect(Clock::time_point now);
  void CloseDealer();  // and its monitor
  void Disconnect(Clock::time_point now, const std::string& reason);
  void OnTimers(Clock::time_point now);
  void SendProgress(Clock::time_point now);
  void DrainScheduler(Clock::time_point now);
  void DrainOutbox();
  void HandleMessage(std::vector<zmq::message_t>& frames, Clock::time_point now);
  void HandleAssign(const protocol::Envelope& env);
  void HandleCancel(const protocol::Envelope& env);
  void HandleOutbox(std::vector<zmq::message_t>& frames);
  // A result message, already in the spool: sent now when welcomed, in order behind what is
  // pending (the spool re-sends it after every kWelcome until acknowledged).
  void SendResult(std::vector<zmq::message_t> frames);
  bool TrySend(std::vector<zmq::message_t>& frames);
  void FlushPending();
  // CURVE: keys at start-up, the socket monitor's handshake events, enrolment.
  Status LoadKeys();
  void DrainMonitor(Clock::time_point now);
  void OnEnrolled(const protocol::Envelope& env, Clock::time_point now);
  // Drain / leave: applies requests from other threads, and returns true once the agent may go.
  bool OnLifecycle(Clock::time_point now);
  void SendHeartbeat(Clock::time_point now);
  void Shutdown(bool say_goodbye);
  Slot* FindSlot(const protocol::TaskRef& ref);
  // Assets: an assignment's blobs come from the cache, or are fetched from the scheduler a
  // window of kBlobRequest pieces at a time into it; the runner gets them once all are there.
  struct BlobFetch {
    int fd = -1;           // the .part file
    int64_t total = -1;    // the blob's size, once the first piece told it
    int64_t received = 0;  // bytes written, in order
    int64_t requested = 0;
    int attempts = 1;
  };
  // The blobs an assignment needs: its assets by path, and a resumed attempt's checkpoint under
  // kCheckpointBlob.
  static std::map<std::string, std::string> BlobsOf(const protocol::Assign& assign);
  void StartAssets(Slot& slot);
  void GiveAssets(Slot& slot);
  void PumpFetches();
  void OnBlobData(protocol::Envelope& env);
  void EndFetch(const std::string& hash, const Status& status);
  void EraseSlot(std::vector<Slot>::iterator it);
  // A full disk: a result on its way out (the largest frame sets how much room is enough; a
  // storage_full failure checks the disk at once), the first folder of the agent's (spool,
  // cache, task folders) without room enough ("" when all have), and the check itself, which
  // sets disk_full_ and tells the scheduler when it changes.
  void NoteResult(const std::vector<zmq::message_t>& frames);
  std::string FullFolder() const;
  void CheckDisk(Clock::time_point now);
  bool AllowNoisyLog(Clock::time_point now);

  const AgentOptions options_;
  zmq::context_t context_;  // first: every socket below and in the runners lives in it
  const std::string outbox_endpoint_ = "inproc://tessera-worker-outbox";
  std::unique_ptr<zmq::socket_t> dealer_;   // I/O thread only; null while disconnected
  std::unique_ptr<zmq::socket_t> monitor_;  // the DEALER's handshake events
  int monitor_count_ = 0;                   // a fresh inproc endpoint per DEALER
  std::unique_ptr<zmq::socket_t> outbox_;   // I/O thread only
  std::vector<Slot> slots_;                 // I/O thread only
  // Result messages that could not leave at once (send queue full) while welcomed; cleared on
  // every reconnect, when the spool is replayed instead.
  std::deque<std::vector<zmq::message_t>> pending_;  // I/O thread only
  protocol::PieceSender result_pieces_;  // the large result being sent in pieces (I/O thread only)
  std::optional<curve::KeyPair> own_keys_;  // CURVE: this worker's pair
  bool enrolled_ = false;       // own_keys_ are known to the scheduler (else: enrol first)
  bool reenrol_tried_ = false;  // a refused enrolled key is re-enrolled only once per run
  bool draining_ = false;       // I/O thread's view of drain_requested_
  bool leaving_ = false;        // I/O thread's view of leave_requested_
  // CURVE handshakes that failed (other than the scheduler's ZAP refusal) since the scheduler
  // last answered. One that never answered in this run is given up on after kHandshakeGiveUp:
  // the key is not its key, or it does not speak CURVE, and retrying cannot change that.
  static constexpr std::chrono::seconds kHandshakeGiveUp{10};
  bool answered_ = false;
  int handshake_failures_ = 0;
  Clock::time_point handshake_failing_since_{};
  Clock::time_point leave_deadline_{};
  Clock::time_point idle_since_{};  // drain/leave: when the last task ended

  LinkState state_ = LinkState::kDisconnected;
  int heartbeat_ms_;
  int liveness_;
  std::chrono::milliseconds backoff_;
  ResultSpool spool_;                         // I/O thread only
  BlobCache cache_;                           // I/O thread only
  std::map<std::string, BlobFetch> fetches_;  // by hash; I/O thread only
  Clock::time_point heard_at_{};
  Clock::time_point next_heartbeat_{};
  Clock::time_point reconnect_at_{};
  // Warnings about an unreachable scheduler, malformed messages, exceptions caught: at most one
  // per kind every 10 s.
  logging::RateLimitedLog noisy_{std::chrono::seconds(10)};
  Status reject_status_;
  // Non-empty while a disk the agent writes is full (what and where): no new tasks, and the
  // heartbeat says so. Checked every kDiskCheckInterval until there is room again.
  static constexpr std::chrono::milliseconds kDiskCheckInterval{2000};
  std::string disk_full_;
  Clock::time_point next_disk_check_{};
  uint64_t largest_result_ = 0;
  // Each GPU's load and health, read on the monitor's thread; null without GPUs or NVML.
  std::unique_ptr<GpuMonitor> gpu_monitor_;

  std::atomic<bool> stop_requested_{false};
  std::atomic<bool> drain_requested_{false};
  std::atomic<bool> leave_requested_{false};
  std::mutex leave_mu_;
  std::string leave_reason_;  // guarded by leave_mu_
  std::atomic<int> running_tasks_{0};
  std::atomic<int64_t> worker_id_{0};
};

}  // namespace tessera::worker
