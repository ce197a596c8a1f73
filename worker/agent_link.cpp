// The worker agent's link to the scheduler (agent.h; the parts are listed in agent.cpp):
// connecting and registering, reconnecting with backoff, heartbeats and progress, the
// scheduler's messages, and CURVE: keys at start-up, enrolment, refused handshakes.
#include <spdlog/spdlog.h>
#include <sys/utsname.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>

#include "shared/openjd/openjd.h"
#include "shared/plugins/renderer_names.h"
#include "shared/wire/zmq_monitor.h"
#include "worker/agent.h"
#include "worker/agent_internal.h"
#include "worker/openjd_task.h"

namespace tessera::worker {
namespace {

// "x86_64" or "arm64" (OpenJD's names), from the kernel's; "" for anything else.
std::string CpuArchitectureTag() {
  struct utsname u {};
  if (uname(&u) != 0) return "";
  const std::string machine = u.machine;
  if (machine == "x86_64" || machine == "amd64") return "x86_64";
  if (machine == "aarch64" || machine == "arm64") return "arm64";
  return "";
}

}  // namespace

namespace {

using protocol::MessageType;

// At most 4 progress messages a second, as the protocol asks.
constexpr std::chrono::milliseconds kProgressInterval{250};

}  // namespace

void Agent::CloseDealer() {
  if (dealer_ && monitor_) zmq_socket_monitor(dealer_->handle(), nullptr, 0);
  monitor_.reset();
  dealer_.reset();  // linger 0: whatever it still held is dropped; results stay in the spool
}

void Agent::Connect(Clock::time_point now) {
  dealer_ = std::make_unique<zmq::socket_t>(context_, zmq::socket_type::dealer);
  dealer_->set(zmq::sockopt::linger, 0);
  const bool secure = !options_.scheduler_public_key.empty();
  try {
    if (secure) {
      // Enrolled: this worker's own pair. Not yet: the join token's pair, which may only enrol.
      curve::KeyPair client = *own_keys_;
      if (!enrolled_) {
        StatusOr<curve::KeyPair> token = curve::JoinTokenKeys(options_.join_token);
        TSR_CHECK(token.ok());  // validated with the config
        client = *token;
      }
      dealer_->set(zmq::sockopt::curve_serverkey, options_.scheduler_public_key);
      dealer_->set(zmq::sockopt::curve_publickey, client.public_key);
      dealer_->set(zmq::sockopt::curve_secretkey, client.secret_key);
      // The scheduler's ZAP verdict shows only as a handshake event: watch for it.
      const std::string monitor =
          "inproc://tessera-worker-monitor-" + std::to_string(++monitor_count_);
      zmq_socket_monitor(dealer_->handle(), monitor.c_str(),
                         ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                             ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL);
      monitor_ = std::make_unique<zmq::socket_t>(context_, zmq::socket_type::pair);
      monitor_->set(zmq::sockopt::linger, 0);
      monitor_->connect(monitor);
    }
    dealer_->connect(options_.scheduler_address);
  } catch (const zmq::error_t& e) {
    CloseDealer();
    state_ = LinkState::kDisconnected;
    reconnect_at_ = now + backoff_;
    backoff_ = std::min(backoff_ * 2, options_.reconnect_max);
    if (AllowNoisyLog(now)) {
      spdlog::error("cannot connect to {}: {}", options_.scheduler_address, e.what());
    }
    return;
  }
  if (secure && !enrolled_) {
    protocol::Enrol enrol{options_.name, own_keys_->public_key};
    std::vector<zmq::message_t> frames = protocol::Encode(MessageType::kEnrol, enrol);
    TrySend(frames);
    state_ = LinkState::kRegistering;
    heard_at_ = now;
    spdlog::info("enrolling with {} using the join token", options_.scheduler_address);
    return;
  }
  protocol::Register reg;
  reg.name = options_.name;
  reg.hostname = options_.hardware.hostname;
  reg.os = options_.hardware.os;
  reg.cpu_model = options_.hardware.cpu_model;
  reg.cloud = options_.hardware.cloud;
  reg.version = TESSERA_VERSION;
  reg.cpu_cores = options_.hardware.cpu_cores;
  reg.ram_mb = options_.hardware.ram_mb;
  reg.gpus = options_.hardware.gpus;
  reg.backends = options_.backends;
  reg.slots = options_.slots;
  reg.slots_per_gpu = options_.slots_per_gpu;
  reg.memory_mb_per_slot = options_.memory_mb_per_slot;
  reg.pools = options_.pools;
  reg.tags = options_.tags;
  // The CPU architecture is a tag of every worker (OpenJD's attr.worker.cpu.arch asks for it).
  if (const std::string arch = CpuArchitectureTag();
      !arch.empty() && std::find(reg.tags.begin(), reg.tags.end(), arch) == reg.tags.end()) {
    reg.tags.push_back(arch);
  }
  for (const Slot& slot : slots_) reg.running.push_back(slot.runner->ref());
  reg.delivering = spool_.Delivering();
  reg.draining = draining_;
  reg.features = {protocol::kFeatureAcksInAssign};
  for (const CommandPlugin& p : *options_.render.command_plugins) {
    reg.plugins.push_back({p.spec.name, p.version, p.executable});
  }
  // OpenJD tasks run programs as the command renderer does: offered on the same condition.
  if (OffersOpenJd(options_.render.command_programs)) {
    reg.plugins.push_back({spec::kRendererOpenJd, openjd::kSpecificationVersion, ""});
  }
  for (const auto& p : *options_.render.native) {
    if (p->path().empty()) continue;  // compiled in: every scheduler knows it
    protocol::PluginOffer offer{p->name(), p->version(), p->path()};
    offer.native = true;
    offer.description = p->description();
    offer.capabilities = p->CapabilityNames();
    offer.declaration = p->declaration_yaml();
    reg.plugins.push_back(std::move(offer));
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
  CloseDealer();
  pending_.clear();  // the spool re-sends them after the next kWelcome
  result_pieces_.Reset();
  for (auto& [hash, f] : fetches_) f.requested = f.received;  // asked again once welcomed
  state_ = LinkState::kDisconnected;
  reconnect_at_ = now + backoff_;
  backoff_ = std::min(backoff_ * 2, options_.reconnect_max);
}

void Agent::OnTimers(Clock::time_point now) {
  if (!disk_full_.empty() && now >= next_disk_check_) CheckDisk(now);
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
  if (now >= next_heartbeat_) SendHeartbeat(now);
  FlushPending();
  PumpFetches();
  SendProgress(now);
}

void Agent::SendHeartbeat(Clock::time_point now) {
  protocol::Heartbeat hb;
  for (const Slot& slot : slots_) hb.running.push_back(slot.runner->ref());
  hb.delivering = spool_.Delivering();
  hb.draining = draining_;
  hb.disk_full = disk_full_;
  if (gpu_monitor_) {
    if (auto samples = gpu_monitor_->TakeFresh()) hb.gpu_samples = std::move(*samples);
  }
  std::vector<zmq::message_t> frames = protocol::Encode(MessageType::kHeartbeat, hb);
  TrySend(frames);  // a heartbeat that cannot leave now is stale later: no retry
  next_heartbeat_ = now + std::chrono::milliseconds(heartbeat_ms_);
}

void Agent::SendProgress(Clock::time_point now) {
  for (Slot& slot : slots_) {
    if (slot.cancelled || now - slot.sent_at < kProgressInterval) continue;
    const double fraction = slot.runner->progress();
    std::string status = slot.runner->status_line();
    if (fraction <= slot.sent_fraction && status == slot.sent_status) continue;
    protocol::Progress p;
    p.task_id = slot.runner->ref().task_id;
    p.attempt = slot.runner->ref().attempt;
    p.fraction = fraction;
    p.message = status;
    std::vector<zmq::message_t> frames = protocol::Encode(MessageType::kProgress, p);
    TrySend(frames);  // progress is only a hint: never queued
    slot.sent_fraction = fraction;
    slot.sent_status = std::move(status);
    slot.sent_at = now;
  }
}

void Agent::HandleMessage(std::vector<zmq::message_t>& frames, Clock::time_point now) {
  StatusOr<protocol::Envelope> env = agent_internal::DecodeCopy(frames);
  if (!env.ok()) {
    noisy_.Log(spdlog::level::warn, "malformed", "ignored a malformed message: {}",
               env.status().message());
    return;
  }
  switch (env->type) {
    case MessageType::kWelcome: {
      StatusOr<protocol::Welcome> w = env->As<protocol::Welcome>();
      if (!w.ok()) {
        noisy_.Log(spdlog::level::warn, "malformed", "ignored a malformed WELCOME: {}",
                   w.status().message());
        return;
      }
      if (w->heartbeat_ms > 0) heartbeat_ms_ = w->heartbeat_ms;
      if (w->liveness > 0) liveness_ = w->liveness;
      worker_id_.store(w->worker_id);
      answered_ = true;
      handshake_failures_ = 0;
      if (state_ != LinkState::kReady) {
        spdlog::info("registered with {} as worker {} (heartbeat {} ms, liveness {})",
                     options_.scheduler_address, w->worker_id, heartbeat_ms_, liveness_);
      }
      state_ = LinkState::kReady;
      backoff_ = options_.reconnect_min;
      next_heartbeat_ = now;  // tell a restarted scheduler at once what is still running
      // Everything not yet acknowledged goes (again), in order; the scheduler's fencing drops
      // what it already has.
      pending_.clear();
      result_pieces_.Reset();
      for (std::vector<zmq::message_t>& message : spool_.Replay()) {
        pending_.push_back(std::move(message));
      }
      FlushPending();
      PumpFetches();
      return;
    }
    case MessageType::kEnrolled:
      OnEnrolled(*env, now);
      return;
    case MessageType::kBlobData:
      OnBlobData(*env);
      return;
    case MessageType::kPieceAck: {
      StatusOr<protocol::PieceAck> ack = env->As<protocol::PieceAck>();
      if (!ack.ok()) return;
      if (std::optional<std::string> refused = result_pieces_.OnAck(*ack, now)) {
        spdlog::error("the scheduler refused a result: {}", *refused);
      }
      FlushPending();
      return;
    }
    case MessageType::kResultAck: {
      StatusOr<protocol::ResultAck> ack = env->As<protocol::ResultAck>();
      if (ack.ok()) spool_.Ack({ack->task_id, ack->attempt});
      return;
    }
    case MessageType::kDrain:
      if (!drain_requested_.exchange(true))
        spdlog::info("the scheduler asked this worker to drain");
      return;
    case MessageType::kReject: {
      StatusOr<protocol::Reject> r = env->As<protocol::Reject>();
      std::string reason = r.ok() ? r->reason : "(no reason given)";
      if (r.ok() && r->retry_after_ms > 0) {
        // Not now (another live connection holds this worker's name): connect again later.
        noisy_.Log(spdlog::level::warn, "not now",
                   "the scheduler refused this connection for now: {}; trying again in {} ms",
                   reason, r->retry_after_ms);
        Disconnect(now, "refused for now");
        reconnect_at_ = std::max(
            reconnect_at_, now + std::chrono::milliseconds(std::min(r->retry_after_ms, 60'000)));
        return;
      }
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

// ---- CURVE keys and enrolment ----------------------------------------------------------------

Status Agent::LoadKeys() {
  if (options_.scheduler_public_key.empty()) {
    spdlog::warn(
        "connecting to {} WITHOUT encryption (no scheduler.public_key): only for a "
        "local farm",
        options_.scheduler_address);
    return Status::Ok();
  }
  std::error_code ec;
  if (!options_.key_file.empty() && std::filesystem::exists(options_.key_file, ec)) {
    TSR_ASSIGN_OR_RETURN(own_keys_, curve::LoadKeyFile(options_.key_file));
    enrolled_ = true;
    spdlog::info("using the enrolled key pair in {}", options_.key_file);
    return Status::Ok();
  }
  if (options_.join_token.empty()) {
    return Status::FailedPrecondition(
        "scheduler.join_token: this worker has no enrolled key pair (" +
        (options_.key_file.empty() ? std::string("worker.key_file is not set")
                                   : options_.key_file + " does not exist") +
        "), so it needs a join token (`tessera join-token create`) to enrol");
  }
  own_keys_ = curve::Generate();
  enrolled_ = false;
  return Status::Ok();
}

void Agent::OnEnrolled(const protocol::Envelope& env, Clock::time_point now) {
  if (enrolled_ || !own_keys_) return;
  StatusOr<protocol::Enrolled> e = env.As<protocol::Enrolled>();
  if (!options_.key_file.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(options_.key_file).parent_path(), ec);
    if (Status s = curve::SaveKeyFile(options_.key_file, *own_keys_); !s.ok()) {
      // It still works for this run; the next start enrols again.
      spdlog::error("enrolled, but cannot keep the key pair: {}", s.message());
    }
  }
  enrolled_ = true;
  answered_ = true;
  handshake_failures_ = 0;
  spdlog::info("enrolled as worker {}{}; reconnecting with its own key pair",
               e.ok() ? e->name : options_.name,
               options_.key_file.empty() ? "" : " (key pair saved to " + options_.key_file + ")");
  CloseDealer();
  state_ = LinkState::kDisconnected;
  backoff_ = options_.reconnect_min;
  reconnect_at_ = now;
}

void Agent::DrainMonitor(Clock::time_point now) {
  for (int i = 0; i < 100 && monitor_; ++i) {
    std::optional<zmq_monitor::Event> next = zmq_monitor::Next(*monitor_);
    if (!next) return;
    const uint16_t event = next->event;
    const uint32_t value = next->value;
    if (event != ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) {
      // A scheduler that cannot read the handshake closes the connection at once; one that
      // answers too late (ETIMEDOUT) may only be busy.
      const bool timed_out = event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL && value == ETIMEDOUT;
      if (!timed_out && handshake_failures_++ == 0) handshake_failing_since_ = now;
      if (!answered_ && handshake_failures_ >= 3 &&
          now - handshake_failing_since_ >= kHandshakeGiveUp) {
        reject_status_ = Status::FailedPrecondition(
            "every CURVE handshake with " + options_.scheduler_address + " failed for " +
            std::to_string(kHandshakeGiveUp.count()) + " s (" +
            std::to_string(handshake_failures_) +
            " tries): scheduler.public_key is not that scheduler's key (`tessera-scheduler "
            "--print-public-key` on it shows it), or it does not use CURVE (broker.security)");
        spdlog::error("{}", reject_status_.message());
        return;
      }
      if (AllowNoisyLog(now)) {
        spdlog::warn(
            "CURVE handshake with {} failed: is scheduler.public_key the scheduler's "
            "key (tessera-scheduler --print-public-key)?",
            options_.scheduler_address);
      }
      continue;
    }
    if (enrolled_ && !options_.join_token.empty() && !reenrol_tried_) {
      // The scheduler lost this key (a new database) or replaced it: enrol again, once.
      spdlog::warn("the scheduler refused this worker's key; enrolling again with the join token");
      reenrol_tried_ = true;
      enrolled_ = false;
      own_keys_ = curve::Generate();
      CloseDealer();
      state_ = LinkState::kDisconnected;
      reconnect_at_ = now;
      return;
    }
    reject_status_ = Status::FailedPrecondition(
        enrolled_ ? "the scheduler refused this worker's key (status " + std::to_string(value) +
                        "): the worker was revoked or the scheduler does not know it; enrol it "
                        "again with a join token (scheduler.join_token)"
                  : "the scheduler refused the join token (status " + std::to_string(value) +
                        "): it is revoked, expired or used up; create one with `tessera join-token "
                        "create`");
    spdlog::error("{}", reject_status_.message());
    return;
  }
}

}  // namespace tessera::worker
