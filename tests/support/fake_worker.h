#pragma once
// Test support: a worker with no agent behind it, speaking the real protocol
// (shared/wire/protocol.h) over a real DEALER socket. Tests script with it what a real worker
// will not show on demand (lost assignments, hangs, failures, odd hardware); the benchmarks'
// simulated fleets are many of them (tests/bench/sim_fleet.h). It takes its heartbeat interval
// from the WELCOME (unless it was given a fixed one) and sends heartbeats listing `running` and
// `delivering` when they are due.
//
// Threads: one thread at a time uses a FakeWorker (it owns its socket).

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "shared/wire/protocol.h"

namespace tessera::testing {

class FakeWorker {
 public:
  using Clock = std::chrono::steady_clock;

  // What a fake worker registers as unless told otherwise: one core, the cpu backend, one slot,
  // pool "default".
  static protocol::Register Registration(const std::string& name);

  // Connects on `context` (a fleet's workers share one); Register() then sends `registration`,
  // so a fleet connects everyone first and times the registrations alone. `heartbeat_every`: a
  // fixed interval, the first beat due at once; zero: the WELCOME's heartbeat_ms, the first beat
  // one interval after it, as the real agent does.
  FakeWorker(zmq::context_t& context, const std::string& endpoint, protocol::Register registration,
             std::chrono::milliseconds heartbeat_every = std::chrono::milliseconds(0));
  // A scripted worker for a test: on a context of its own, registered at once, beating every
  // 100 ms.
  FakeWorker(const std::string& endpoint, const std::string& name,
             std::vector<std::string> pools = {"default"}, std::vector<std::string> tags = {},
             std::vector<protocol::GpuInfo> gpus = {}, int slots = 1,
             std::vector<std::string> features = {}, int slots_per_gpu = 0);
  FakeWorker(const FakeWorker&) = delete;
  FakeWorker& operator=(const FakeWorker&) = delete;

  // What it registers with (change it, then Register() again to offer other hardware).
  protocol::Register& registration() { return registration_; }
  // (Re-)registers, reporting the tasks in `running` as still being rendered.
  void Register();

  // ---- sending ----
  template <typename T>
  void Send(protocol::MessageType type, const T& body) {
    Send(protocol::Encode(type, body));
  }
  template <typename T>
  void SendWithPayload(protocol::MessageType type, const T& body, zmq::message_t payload) {
    Send(protocol::Encode(type, body, std::move(payload)));
  }
  void Send(std::vector<zmq::message_t> frames);
  // Without blocking; false when ZeroMQ would block (the frames are then still the caller's).
  bool TrySend(std::vector<zmq::message_t>& frames);
  // Reports the task done.
  void Done(const protocol::Assign& a);
  // One 1x1 RGBA frame result for each frame of the task.
  void SendTinyFrames(const protocol::Assign& a);
  // Finishes the task at once: SendTinyFrames (not for noop tasks, which have no frames), Done.
  void CompleteAtOnce(const protocol::Assign& a);
  // Refuses the task, uncharged, as a worker whose slot is busy does.
  void RefuseBusy(const protocol::Assign& a);

  // ---- heartbeats ----
  // Sends a heartbeat (listing `running` and `delivering`) and schedules the next one interval
  // later (from now if it fell behind by more than an interval).
  void Beat(Clock::time_point now = Clock::now());
  // Beat() when one is due; true when it sent one.
  bool BeatIfDue(Clock::time_point now = Clock::now());
  Clock::time_point next_beat() const { return next_beat_; }
  std::chrono::milliseconds heartbeat_interval() const { return interval_; }
  // Moves the next beat (a fleet spreads its workers' beats over the interval).
  void set_next_beat(Clock::time_point at) { next_beat_ = at; }
  // WELCOME received since the last Register().
  bool welcomed() const { return welcomed_; }

  // ---- receiving ----
  // The next message already here, decoded (a WELCOME is also taken into account); nullopt
  // when none is waiting. Messages that do not decode are dropped.
  std::optional<protocol::Envelope> Receive();
  // Waits until a message arrives, `until`, the next beat or 20 ms, whichever is first; returns
  // every message that is here then.
  std::vector<protocol::Envelope> Poll(Clock::time_point until);
  // Waits for a message of `type`, heartbeating meanwhile; other messages are dropped.
  std::optional<protocol::Envelope> WaitFor(protocol::MessageType type,
                                            std::chrono::milliseconds timeout);
  // The next message other than a heartbeat acknowledgement.
  std::optional<protocol::Envelope> Next(std::chrono::milliseconds timeout);
  // Waits for the next message whose type `wanted` accepts, heartbeating meanwhile.
  template <typename Wanted>
  std::optional<protocol::Envelope> WaitFor(Wanted wanted, std::chrono::milliseconds timeout);
  // Waits for the next assignment and decodes it.
  std::optional<protocol::Assign> NextAssign(std::chrono::milliseconds timeout);

  // For a poll set or an epoll loop over many workers.
  zmq::socket_t& socket() { return socket_; }

  std::vector<protocol::TaskRef> running;     // what heartbeats report as rendering
  std::vector<protocol::TaskRef> delivering;  // and as results still being sent

 private:
  // Waits up to `timeout` for a message, sending the heartbeats that fall due meanwhile.
  bool WaitReadable(std::chrono::milliseconds timeout);

  std::unique_ptr<zmq::context_t> own_context_;  // when it has a context of its own
  zmq::socket_t socket_;
  protocol::Register registration_;
  bool fixed_interval_ = false;
  std::chrono::milliseconds interval_{1000};
  Clock::time_point next_beat_ = Clock::time_point::max();
  bool welcomed_ = false;
};

template <typename Wanted>
std::optional<protocol::Envelope> FakeWorker::WaitFor(Wanted wanted,
                                                      std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (!WaitReadable(std::chrono::milliseconds(20))) continue;
    std::optional<protocol::Envelope> env = Receive();
    if (env && wanted(env->type)) return env;
  }
  return std::nullopt;
}

}  // namespace tessera::testing
