#include "tests/support/fake_worker.h"

#include <algorithm>
#include <iterator>

#include "shared/jobs/job_file.h"

namespace tessera::testing {

using protocol::MessageType;

namespace {

// Tests script short liveness windows: their fake workers beat this often.
constexpr std::chrono::milliseconds kTestHeartbeat{100};

}  // namespace

protocol::Register FakeWorker::Registration(const std::string& name) {
  protocol::Register reg;
  reg.name = name;
  reg.hostname = "fake";
  reg.cpu_cores = 1;
  reg.backends = {"cpu"};
  return reg;  // pool "default" and one slot: protocol::Register's own defaults
}

FakeWorker::FakeWorker(zmq::context_t& context, const std::string& endpoint,
                       protocol::Register registration, std::chrono::milliseconds heartbeat_every)
    : socket_(context, zmq::socket_type::dealer), registration_(std::move(registration)) {
  if (heartbeat_every.count() > 0) {
    fixed_interval_ = true;
    interval_ = heartbeat_every;
    next_beat_ = Clock::time_point();  // due at once
  }
  socket_.set(zmq::sockopt::linger, 0);
  socket_.connect(endpoint);
}

FakeWorker::FakeWorker(const std::string& endpoint, const std::string& name,
                       std::vector<std::string> pools, std::vector<std::string> tags,
                       std::vector<protocol::GpuInfo> gpus, int slots,
                       std::vector<std::string> features, int slots_per_gpu)
    : own_context_(std::make_unique<zmq::context_t>()),
      socket_(*own_context_, zmq::socket_type::dealer),
      registration_(Registration(name)),
      fixed_interval_(true),
      interval_(kTestHeartbeat),
      next_beat_(Clock::time_point()) {
  registration_.pools = std::move(pools);
  registration_.tags = std::move(tags);
  registration_.gpus = std::move(gpus);
  registration_.slots = slots;
  registration_.features = std::move(features);
  registration_.slots_per_gpu = slots_per_gpu;
  socket_.set(zmq::sockopt::linger, 0);
  socket_.connect(endpoint);
  Register();
}

void FakeWorker::Register() {
  registration_.running = running;
  welcomed_ = false;
  if (!fixed_interval_) next_beat_ = Clock::time_point::max();  // until the WELCOME
  Send(MessageType::kRegister, registration_);
}

void FakeWorker::Send(std::vector<zmq::message_t> frames) { zmq::send_multipart(socket_, frames); }

bool FakeWorker::TrySend(std::vector<zmq::message_t>& frames) {
  return zmq::send_multipart(socket_, frames, zmq::send_flags::dontwait).has_value();
}

void FakeWorker::Done(const protocol::Assign& a) {
  Send(MessageType::kTaskDone, protocol::TaskDone{a.task_id, a.attempt});
}

void FakeWorker::SendTinyFrames(const protocol::Assign& a) {
  static const float kPixel[4] = {0.5f, 0.5f, 0.5f, 1.0f};
  for (int f = a.frame_start; f <= a.frame_end; ++f) {
    protocol::FrameResult r{a.task_id, a.attempt, f, 1, 1, 4, 0.0, "sim", {}};
    SendWithPayload(MessageType::kFrameResult, r, zmq::message_t(kPixel, sizeof(kPixel)));
  }
}

void FakeWorker::CompleteAtOnce(const protocol::Assign& a) {
  if (a.renderer != spec::kRendererNoop) SendTinyFrames(a);
  Done(a);
}

void FakeWorker::RefuseBusy(const protocol::Assign& a) {
  Send(MessageType::kTaskFailed, protocol::TaskFailed{a.task_id, a.attempt, "slot busy", false});
}

void FakeWorker::Beat(Clock::time_point now) {
  protocol::Heartbeat beat;
  beat.running = running;
  beat.delivering = delivering;
  Send(MessageType::kHeartbeat, beat);
  // From now when it fell behind by more than an interval (no burst of beats to catch up), or
  // when no beat was scheduled (before the WELCOME).
  const bool behind = next_beat_ == Clock::time_point::max() || next_beat_ + interval_ < now;
  next_beat_ = behind ? now + interval_ : next_beat_ + interval_;
}

bool FakeWorker::BeatIfDue(Clock::time_point now) {
  if (now < next_beat_) return false;
  Beat(now);
  return true;
}

std::optional<protocol::Envelope> FakeWorker::Receive() {
  for (;;) {
    std::vector<zmq::message_t> frames;
    if (!zmq::recv_multipart(socket_, std::back_inserter(frames), zmq::recv_flags::dontwait)) {
      return std::nullopt;
    }
    StatusOr<protocol::Envelope> env = protocol::Decode(frames);
    if (!env.ok()) continue;
    if (env->type == MessageType::kWelcome) {
      welcomed_ = true;
      StatusOr<protocol::Welcome> welcome = env->As<protocol::Welcome>();
      if (!fixed_interval_) {
        if (welcome.ok()) interval_ = std::chrono::milliseconds(welcome->heartbeat_ms);
        next_beat_ = Clock::now() + interval_;
      }
    }
    return std::move(*env);
  }
}

std::vector<protocol::Envelope> FakeWorker::Poll(Clock::time_point until) {
  const Clock::time_point wake =
      std::min({next_beat_, Clock::now() + std::chrono::milliseconds(20), until});
  zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
  // Round up so the wait never ends early and busy-spins.
  const auto wait = std::chrono::ceil<std::chrono::milliseconds>(wake - Clock::now());
  zmq::poll(&item, 1, std::max(wait, std::chrono::milliseconds(0)));
  std::vector<protocol::Envelope> received;
  while (std::optional<protocol::Envelope> env = Receive()) received.push_back(std::move(*env));
  return received;
}

bool FakeWorker::WaitReadable(std::chrono::milliseconds timeout) {
  zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
  zmq::poll(&item, 1, std::chrono::milliseconds(0));
  if (item.revents & ZMQ_POLLIN) return true;
  // Heartbeats go out between messages, never while one waits unread: a beat sent with an
  // assignment still in the socket would tell the scheduler the worker does not hold it (a test
  // thread slowed by a loaded machine reads it late).
  BeatIfDue();
  item.revents = 0;
  zmq::poll(&item, 1, timeout);
  return (item.revents & ZMQ_POLLIN) != 0;
}

std::optional<protocol::Envelope> FakeWorker::WaitFor(protocol::MessageType type,
                                                      std::chrono::milliseconds timeout) {
  return WaitFor([type](protocol::MessageType t) { return t == type; }, timeout);
}

std::optional<protocol::Envelope> FakeWorker::Next(std::chrono::milliseconds timeout) {
  return WaitFor([](protocol::MessageType t) { return t != MessageType::kHeartbeatAck; }, timeout);
}

std::optional<protocol::Assign> FakeWorker::NextAssign(std::chrono::milliseconds timeout) {
  std::optional<protocol::Envelope> env = WaitFor(MessageType::kAssign, timeout);
  if (!env) return std::nullopt;
  StatusOr<protocol::Assign> assign = env->As<protocol::Assign>();
  if (!assign.ok()) return std::nullopt;
  return *assign;
}

}  // namespace tessera::testing
