#pragma once
// The worker agent: registers with the scheduler, heartbeats, renders assigned tasks and sends
// the results, following shared/protocol.h.
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
//    carry on; results produced while unwelcomed wait in memory until the next kWelcome, then go
//    out in order. (Messages already queued in a DEALER that is then closed are lost: the protocol
//    has no result acknowledgement, so the scheduler's requeue is the recovery.)
//  - kAssign beyond `slots` running tasks: kTaskFailed "worker busy" (the scheduler requeues).
//    A repeated kAssign for an attempt already running is ignored.
//  - kCancel(task_id, attempt) for a running attempt stops its render; NOTHING more is sent for
//    that attempt (no kTaskFailed): the scheduler already knows, and fencing would drop it.
//    kCancel for any other attempt is ignored.
//  - kReject: Run() returns FailedPrecondition with the reason.
//  - Stop(): renders are cancelled, kGoodbye is sent, Run() returns Ok.
//  - Malformed or unexpected messages are logged (rate-limited) and ignored.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "shared/protocol.h"
#include "worker/hardware_probe.h"
#include "worker/task_runner.h"
#include "worker/worker_config.h"

namespace tessera::worker {

struct AgentOptions {
  std::string scheduler_address = "tcp://127.0.0.1:8471";
  std::string name;
  int slots = 1;
  std::vector<std::string> pools = {"default"};  // reported in kRegister
  std::vector<std::string> tags;
  int heartbeat_ms = 1000;  // until kWelcome says otherwise
  int liveness = 5;
  HardwareInfo hardware;              // reported in kRegister
  std::vector<std::string> backends;  // offered in kRegister
  RenderSettings render;
  std::chrono::milliseconds reconnect_min{100};
  std::chrono::milliseconds reconnect_max{5000};
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
  // Any thread: tasks occupying a slot (cancelled ones count until their thread has finished).
  int running_tasks() const { return running_tasks_.load(); }
  // Any thread: the id from the latest kWelcome, 0 before the first.
  int64_t worker_id() const { return worker_id_.load(); }

 private:
  using Clock = std::chrono::steady_clock;
  enum class LinkState { kDisconnected, kRegistering, kReady };

  struct Slot {
    std::unique_ptr<TaskRunner> runner;
    bool cancelled = false;
    double sent_fraction = -1;
    Clock::time_point sent_at{};
  };

  void Connect(Clock::time_point now);
  void Disconnect(Clock::time_point now, const std::string& reason);
  void OnTimers(Clock::time_point now);
  void SendProgress(Clock::time_point now);
  void DrainScheduler(Clock::time_point now);
  void DrainOutbox();
  void HandleMessage(std::vector<zmq::message_t>& frames, Clock::time_point now);
  void HandleAssign(const protocol::Envelope& env);
  void HandleCancel(const protocol::Envelope& env);
  void HandleOutbox(std::vector<zmq::message_t>& frames);
  // Task traffic: sent now when welcomed, otherwise kept until the next kWelcome.
  void SendTaskMessage(std::vector<zmq::message_t> frames);
  bool TrySend(std::vector<zmq::message_t>& frames);
  void FlushPending();
  void Shutdown(bool say_goodbye);
  Slot* FindSlot(const protocol::TaskRef& ref);
  bool AllowNoisyLog(Clock::time_point now);

  const AgentOptions options_;
  zmq::context_t context_;  // first: every socket below and in the runners lives in it
  const std::string outbox_endpoint_ = "inproc://tessera-worker-outbox";
  std::unique_ptr<zmq::socket_t> dealer_;            // I/O thread only; null while disconnected
  std::unique_ptr<zmq::socket_t> outbox_;            // I/O thread only
  std::vector<Slot> slots_;                          // I/O thread only
  std::deque<std::vector<zmq::message_t>> pending_;  // I/O thread only

  LinkState state_ = LinkState::kDisconnected;
  int heartbeat_ms_;
  int liveness_;
  std::chrono::milliseconds backoff_;
  Clock::time_point heard_at_{};
  Clock::time_point next_heartbeat_{};
  Clock::time_point reconnect_at_{};
  Clock::time_point noisy_log_at_{};
  int suppressed_logs_ = 0;
  Status reject_status_;

  std::atomic<bool> stop_requested_{false};
  std::atomic<int> running_tasks_{0};
  std::atomic<int64_t> worker_id_{0};
};

}  // namespace tessera::worker
