#include "worker/agent.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <iterator>
#include <zmq_addon.hpp>

namespace tessera::worker {
namespace {

using protocol::MessageType;

// The I/O loop wakes at least this often: it samples render progress, notices Stop() and runs
// timers. It also bounds the progress rate (the protocol asks for at most 4 per second).
constexpr std::chrono::milliseconds kTick{100};
constexpr std::chrono::milliseconds kProgressInterval{250};
// Warnings about an unreachable scheduler or malformed messages: at most one per interval.
constexpr std::chrono::seconds kNoisyLogInterval{10};
// How long kGoodbye may take to leave once Stop() was asked for.
constexpr int kGoodbyeLingerMs = 500;

std::string RefName(const protocol::TaskRef& ref) {
  return "task " + std::to_string(ref.task_id) + " attempt " + std::to_string(ref.attempt);
}

}  // namespace

StatusOr<AgentOptions> MakeAgentOptions(const WorkerConfig& config, const HardwareInfo& hardware) {
  AgentOptions o;
  o.scheduler_address = config.scheduler_address;
  o.name = config.name;
  o.slots = config.slots;
  o.pools = config.pools;
  o.tags = config.tags;
  o.heartbeat_ms = config.heartbeat_interval_ms;
  o.liveness = config.heartbeat_liveness;
  o.hardware = hardware;
  o.render.cpu_threads = config.threads;
  o.render.data_dir = config.data_dir;
  o.render.plugin_path = config.plugin_path;
  const bool has_cuda = std::find(hardware.backends.begin(), hardware.backends.end(), "cuda") !=
                        hardware.backends.end();
  if (config.backend == "cpu") {
    o.render.backend = pathtracer::Backend::kCpu;
    o.backends = {"cpu"};
  } else if (config.backend == "cuda") {
    if (!has_cuda) {
      return Status::FailedPrecondition(
          "worker.backend: 'cuda' was asked for but this machine has no usable CUDA device");
    }
    o.render.backend = pathtracer::Backend::kCuda;
    o.backends = {"cuda"};
  } else {
    o.render.backend = pathtracer::Backend::kAuto;
    o.backends = hardware.backends;
  }
  // GPUs this worker will not render on are not offered: the scheduler pins tasks to the GPUs
  // a worker registers.
  if (o.render.backend == pathtracer::Backend::kCpu) o.hardware.gpus.clear();
  // Auto slots: one task per GPU, each pinned to its own; one task using every core without.
  if (o.slots == 0) o.slots = std::max<int>(1, static_cast<int>(o.hardware.gpus.size()));
  return o;
}

Agent::Agent(AgentOptions options)
    : options_(std::move(options)),
      heartbeat_ms_(options_.heartbeat_ms),
      liveness_(options_.liveness),
      backoff_(options_.reconnect_min) {}

Agent::~Agent() {
  // Run() normally leaves nothing behind; this covers a Run() that threw.
  for (Slot& slot : slots_) slot.runner->Cancel();
  slots_.clear();
}

Status Agent::Run() {
  outbox_ = std::make_unique<zmq::socket_t>(context_, zmq::socket_type::pull);
  outbox_->set(zmq::sockopt::linger, 0);
  outbox_->bind(outbox_endpoint_);
  Connect(Clock::now());

  while (!stop_requested_.load() && reject_status_.ok()) {
    OnTimers(Clock::now());
    std::vector<zmq::pollitem_t> items = {{outbox_->handle(), 0, ZMQ_POLLIN, 0}};
    if (dealer_) items.push_back({dealer_->handle(), 0, ZMQ_POLLIN, 0});
    try {
      zmq::poll(items, kTick);
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) continue;
      throw;
    }
    if (items[0].revents & ZMQ_POLLIN) DrainOutbox();
    if (items.size() > 1 && (items[1].revents & ZMQ_POLLIN)) DrainScheduler(Clock::now());
  }

  Shutdown(/*say_goodbye=*/reject_status_.ok());
  return reject_status_;
}

void Agent::Connect(Clock::time_point now) {
  dealer_ = std::make_unique<zmq::socket_t>(context_, zmq::socket_type::dealer);
  dealer_->set(zmq::sockopt::linger, 0);
  try {
    dealer_->connect(options_.scheduler_address);
  } catch (const zmq::error_t& e) {
    dealer_.reset();
    state_ = LinkState::kDisconnected;
    reconnect_at_ = now + backoff_;
    backoff_ = std::min(backoff_ * 2, options_.reconnect_max);
    if (AllowNoisyLog(now)) {
      spdlog::error("cannot connect to {}: {}", options_.scheduler_address, e.what());
    }
    return;
  }
  protocol::Register reg;
  reg.name = options_.name;
  reg.hostname = options_.hardware.hostname;
  reg.version = TESSERA_VERSION;
  reg.cpu_cores = options_.hardware.cpu_cores;
  reg.ram_mb = options_.hardware.ram_mb;
  reg.gpus = options_.hardware.gpus;
  reg.backends = options_.backends;
  reg.slots = options_.slots;
  reg.pools = options_.pools;
  reg.tags = options_.tags;
  for (const Slot& slot : slots_) reg.running.push_back(slot.runner->ref());
  for (const AvailablePlugin& p : *options_.render.plugins) {
    reg.plugins.push_back({p.spec.name, p.version, p.executable});
  }
  std::vector<zmq::message_t> frames = protocol::Encode(MessageType::kRegister, reg);
  TrySend(frames);  // queued by ZeroMQ until the TCP connection is up
  state_ = LinkState::kRegistering;
  heard_at_ = now;
  spdlog::debug("registering with {}", options_.scheduler_address);
}

void Agent::Disconnect(Clock::time_point now, const std::string& reason) {
  if (state_ == LinkState::kReady) {
    spdlog::warn("lost the scheduler ({}); reconnecting to {}", reason, options_.scheduler_address);
  } else if (AllowNoisyLog(now)) {
    spdlog::warn("no welcome from the scheduler at {} ({}); retrying", options_.scheduler_address,
                 reason);
  }
  dealer_.reset();  // linger 0: whatever it still held is dropped, results stay in pending_
  state_ = LinkState::kDisconnected;
  reconnect_at_ = now + backoff_;
  backoff_ = std::min(backoff_ * 2, options_.reconnect_max);
}

void Agent::OnTimers(Clock::time_point now) {
  if (state_ == LinkState::kDisconnected) {
    if (now >= reconnect_at_) Connect(now);
    return;
  }
  const auto silence_limit = std::chrono::milliseconds(int64_t{heartbeat_ms_} * liveness_);
  if (now - heard_at_ > silence_limit) {
    Disconnect(now, "nothing heard for " + std::to_string(silence_limit.count()) + " ms");
    return;
  }
  if (state_ != LinkState::kReady) return;
  if (now >= next_heartbeat_) {
    protocol::Heartbeat hb;
    for (const Slot& slot : slots_) hb.running.push_back(slot.runner->ref());
    std::vector<zmq::message_t> frames = protocol::Encode(MessageType::kHeartbeat, hb);
    TrySend(frames);  // a heartbeat that cannot leave now is stale later: no retry
    next_heartbeat_ = now + std::chrono::milliseconds(heartbeat_ms_);
  }
  SendProgress(now);
}

void Agent::SendProgress(Clock::time_point now) {
  for (Slot& slot : slots_) {
    if (slot.cancelled || now - slot.sent_at < kProgressInterval) continue;
    const double fraction = slot.runner->progress();
    if (fraction <= slot.sent_fraction) continue;
    protocol::Progress p;
    p.task_id = slot.runner->ref().task_id;
    p.attempt = slot.runner->ref().attempt;
    p.fraction = fraction;
    p.message = "frame " + std::to_string(slot.runner->current_frame());
    std::vector<zmq::message_t> frames = protocol::Encode(MessageType::kProgress, p);
    TrySend(frames);  // progress is only a hint: never queued
    slot.sent_fraction = fraction;
    slot.sent_at = now;
  }
}

void Agent::DrainScheduler(Clock::time_point now) {
  // Only whole multipart messages are read; at most a burst per wake-up keeps timers fair.
  for (int i = 0; i < 1000 && dealer_; ++i) {
    std::vector<zmq::message_t> frames;
    if (!zmq::recv_multipart(*dealer_, std::back_inserter(frames), zmq::recv_flags::dontwait)) {
      return;
    }
    heard_at_ = now;  // any traffic proves the scheduler is alive
    HandleMessage(frames, now);
  }
}

void Agent::DrainOutbox() {
  for (int i = 0; i < 1000; ++i) {
    std::vector<zmq::message_t> frames;
    if (!zmq::recv_multipart(*outbox_, std::back_inserter(frames), zmq::recv_flags::dontwait)) {
      return;
    }
    HandleOutbox(frames);
  }
}

void Agent::HandleMessage(std::vector<zmq::message_t>& frames, Clock::time_point now) {
  StatusOr<protocol::Envelope> env = protocol::Decode(frames);
  if (!env.ok()) {
    if (AllowNoisyLog(now)) spdlog::warn("ignored a malformed message: {}", env.status().message());
    return;
  }
  switch (env->type) {
    case MessageType::kWelcome: {
      StatusOr<protocol::Welcome> w = env->As<protocol::Welcome>();
      if (!w.ok()) {
        spdlog::warn("ignored a malformed WELCOME: {}", w.status().message());
        return;
      }
      if (w->heartbeat_ms > 0) heartbeat_ms_ = w->heartbeat_ms;
      if (w->liveness > 0) liveness_ = w->liveness;
      worker_id_.store(w->worker_id);
      if (state_ != LinkState::kReady) {
        spdlog::info("registered with {} as worker {} (heartbeat {} ms, liveness {})",
                     options_.scheduler_address, w->worker_id, heartbeat_ms_, liveness_);
      }
      state_ = LinkState::kReady;
      backoff_ = options_.reconnect_min;
      next_heartbeat_ = now;  // tell a restarted scheduler at once what is still running
      FlushPending();
      return;
    }
    case MessageType::kReject: {
      StatusOr<protocol::Reject> r = env->As<protocol::Reject>();
      std::string reason = r.ok() ? r->reason : "(no reason given)";
      spdlog::error("the scheduler rejected this worker: {}", reason);
      reject_status_ = Status::FailedPrecondition("rejected by the scheduler: " + reason);
      return;
    }
    case MessageType::kHeartbeatAck:
      return;
    case MessageType::kAssign:
      HandleAssign(*env);
      return;
    case MessageType::kCancel:
      HandleCancel(*env);
      return;
    case MessageType::kUnknownWorker:
      Disconnect(now, "the scheduler does not know this worker");
      return;
    default:
      if (AllowNoisyLog(now)) {
        spdlog::warn("ignored a {} message: not one a scheduler sends",
                     protocol::MessageTypeName(env->type));
      }
      return;
  }
}

void Agent::HandleAssign(const protocol::Envelope& env) {
  StatusOr<protocol::Assign> a = env.As<protocol::Assign>();
  if (!a.ok()) {
    spdlog::warn("ignored a malformed ASSIGN: {}", a.status().message());
    return;
  }
  const protocol::TaskRef ref{a->task_id, a->attempt};
  auto fail = [&](const std::string& message, bool charge = true) {
    spdlog::info("{} job {}: refused: {}", RefName(ref), a->job_id, message);
    SendTaskMessage(protocol::Encode(
        MessageType::kTaskFailed, protocol::TaskFailed{ref.task_id, ref.attempt, message, charge}));
  };
  if (FindSlot(ref) != nullptr) {
    spdlog::debug("{}: repeated ASSIGN ignored, it is already running", RefName(ref));
    return;
  }
  if (static_cast<int>(slots_.size()) >= options_.slots)
    return fail("worker busy", /*charge=*/false);
  if (a->frame_end < a->frame_start) {
    return fail("invalid frame range " + std::to_string(a->frame_start) + ".." +
                std::to_string(a->frame_end));
  }
  Slot slot;
  slot.runner =
      std::make_unique<TaskRunner>(context_, outbox_endpoint_, std::move(*a), options_.render);
  slots_.push_back(std::move(slot));
  running_tasks_.store(static_cast<int>(slots_.size()));
}

void Agent::HandleCancel(const protocol::Envelope& env) {
  StatusOr<protocol::Cancel> c = env.As<protocol::Cancel>();
  if (!c.ok()) {
    spdlog::warn("ignored a malformed CANCEL: {}", c.status().message());
    return;
  }
  Slot* slot = FindSlot({c->task_id, c->attempt});
  if (slot == nullptr || slot->cancelled) {
    spdlog::debug("CANCEL for {} ignored: not running here", RefName({c->task_id, c->attempt}));
    return;
  }
  spdlog::info("{}: cancel requested by the scheduler", RefName(slot->runner->ref()));
  slot->cancelled = true;
  slot->runner->Cancel();
}

void Agent::HandleOutbox(std::vector<zmq::message_t>& frames) {
  std::optional<OutboxTag> tag = frames.empty() ? std::nullopt : DecodeOutboxTag(frames[0]);
  TSR_CHECK(tag.has_value());  // the outbox is fed only by our own runners
  auto it = std::find_if(slots_.begin(), slots_.end(),
                         [&](const Slot& s) { return s.runner->ref() == tag->ref; });
  TSR_CHECK(it != slots_.end());
  if (!it->cancelled && frames.size() > 1) {
    frames.erase(frames.begin());
    SendTaskMessage(std::move(frames));
  }
  if (tag->last) {
    slots_.erase(it);  // joins the runner, which only has its socket left to close
    running_tasks_.store(static_cast<int>(slots_.size()));
  }
}

void Agent::SendTaskMessage(std::vector<zmq::message_t> frames) {
  if (state_ == LinkState::kReady && pending_.empty() && TrySend(frames)) return;
  pending_.push_back(std::move(frames));
}

bool Agent::TrySend(std::vector<zmq::message_t>& frames) {
  if (!dealer_) return false;
  try {
    for (size_t i = 0; i < frames.size(); ++i) {
      zmq::send_flags flags = zmq::send_flags::dontwait;
      if (i + 1 < frames.size()) flags = flags | zmq::send_flags::sndmore;
      // Only the first part can fail with EAGAIN; a started multipart message always completes.
      if (!dealer_->send(frames[i], flags)) return false;
    }
  } catch (const zmq::error_t& e) {
    spdlog::warn("send to the scheduler failed: {}", e.what());
    return false;
  }
  return true;
}

void Agent::FlushPending() {
  while (!pending_.empty() && state_ == LinkState::kReady) {
    if (!TrySend(pending_.front())) return;
    pending_.pop_front();
  }
}

void Agent::Shutdown(bool say_goodbye) {
  for (Slot& slot : slots_) {
    slot.cancelled = true;
    slot.runner->Cancel();
  }
  if (say_goodbye && dealer_ && state_ == LinkState::kReady) {
    std::vector<zmq::message_t> frames =
        protocol::Encode(MessageType::kGoodbye, nlohmann::json::object());
    if (TrySend(frames)) spdlog::info("said goodbye to the scheduler");
    dealer_->set(zmq::sockopt::linger, kGoodbyeLingerMs);
  }
  // Runners block on their outbox sends, so keep draining until each has sent its last message.
  auto waiting_since = Clock::now();
  while (!slots_.empty()) {
    std::vector<zmq::pollitem_t> items = {{outbox_->handle(), 0, ZMQ_POLLIN, 0}};
    try {
      zmq::poll(items, kTick);
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) throw;
    }
    if (items[0].revents & ZMQ_POLLIN) DrainOutbox();
    if (Clock::now() - waiting_since > std::chrono::seconds(2)) {
      spdlog::warn("waiting for {} render(s) to stop", slots_.size());
      waiting_since = Clock::now();
    }
  }
  dealer_.reset();
  outbox_.reset();
  state_ = LinkState::kDisconnected;
}

Agent::Slot* Agent::FindSlot(const protocol::TaskRef& ref) {
  for (Slot& slot : slots_) {
    if (slot.runner->ref() == ref) return &slot;
  }
  return nullptr;
}

bool Agent::AllowNoisyLog(Clock::time_point now) {
  if (now - noisy_log_at_ < kNoisyLogInterval) {
    ++suppressed_logs_;
    return false;
  }
  if (suppressed_logs_ > 0) spdlog::info("({} similar messages suppressed)", suppressed_logs_);
  suppressed_logs_ = 0;
  noisy_log_at_ = now;
  return true;
}

}  // namespace tessera::worker
