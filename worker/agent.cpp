#include "worker/agent.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <thread>
#include <zmq_addon.hpp>

#include "shared/disk_space.h"
#include "shared/zmq_monitor.h"

namespace tessera::worker {
namespace {

using protocol::MessageType;

// The I/O loop wakes at least this often: it samples render progress, notices Stop() and runs
// timers. It also bounds the progress rate (the protocol asks for at most 4 per second).
constexpr std::chrono::milliseconds kTick{100};
constexpr std::chrono::milliseconds kProgressInterval{250};
// How long kGoodbye may take to leave once Stop() was asked for.
constexpr int kGoodbyeLingerMs = 500;
// Leave(): how long the path tracer may take to reach a checkpoint before renders are stopped.
constexpr std::chrono::seconds kLeaveTimeout{20};
// Drain / leave: how long the agent waits for the scheduler to acknowledge its last results.
constexpr std::chrono::seconds kDeliverTimeout{30};

std::string RefName(const protocol::TaskRef& ref) {
  return "task " + std::to_string(ref.task_id) + " attempt " + std::to_string(ref.attempt);
}

// A folder of the agent's (the result spool, the asset cache): as configured, else under the
// data directory, else a temporary one.
std::string AgentDir(const std::string& configured, const AgentOptions& o, const char* name) {
  if (!configured.empty()) return configured;
  if (!o.render.data_dir.empty()) return o.render.data_dir + "/" + name;
  static std::atomic<int> count{0};
  std::error_code ec;
  return (std::filesystem::temp_directory_path(ec) /
          ("tessera-" + std::string(name) + "-" + std::to_string(::getpid()) + "-" +
           std::to_string(++count)))
      .string();
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
  o.render.path_map = config.path_map;
  o.scheduler_public_key = config.scheduler_public_key;
  o.join_token = config.join_token;
  o.key_file = config.key_file;
  if (!config.data_dir.empty()) {  // else temporary folders (AgentDir)
    o.spool_dir = config.data_dir + "/spool";
    o.cache_dir = config.data_dir + "/cache";
  }
  o.cache_bytes = int64_t{config.cache_mb} << 20;
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
  if (config.simulate_gpus > 0) {
    // Scheduling sees real-looking GPUs; the renders behind them run on the CPU.
    o.render.backend = pathtracer::Backend::kCpu;
    o.backends = {"cpu"};
    o.hardware.gpus.clear();
    for (int i = 0; i < config.simulate_gpus; ++i) {
      protocol::GpuInfo gpu;
      gpu.index = i;
      gpu.name = "Simulated GPU " + std::to_string(i);
      gpu.memory_mb = 24576;
      gpu.compute_major = 8;
      gpu.compute_minor = 9;
      o.hardware.gpus.push_back(gpu);
    }
  }
  // Auto slots: one task per GPU, each pinned to its own; one task using every core without.
  if (o.slots == 0) o.slots = std::max<int>(1, static_cast<int>(o.hardware.gpus.size()));
  return o;
}

Agent::Agent(AgentOptions options)
    : options_(std::move(options)),
      heartbeat_ms_(options_.heartbeat_ms),
      liveness_(options_.liveness),
      backoff_(options_.reconnect_min),
      spool_(AgentDir(options_.spool_dir, options_, "spool")),
      cache_(AgentDir(options_.cache_dir, options_, "cache"), options_.cache_bytes) {}

void Agent::Leave(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(leave_mu_);
    if (leave_reason_.empty()) leave_reason_ = reason;
  }
  leave_requested_.store(true);
}

Agent::~Agent() {
  // Run() normally leaves nothing behind; this covers a Run() that threw.
  for (Slot& slot : slots_) slot.runner->Cancel();
  slots_.clear();
}

Status Agent::Run() {
  TSR_RETURN_IF_ERROR(spool_.Open());
  TSR_RETURN_IF_ERROR(cache_.Open());
  TSR_RETURN_IF_ERROR(LoadKeys());
  outbox_ = std::make_unique<zmq::socket_t>(context_, zmq::socket_type::pull);
  outbox_->set(zmq::sockopt::linger, 0);
  outbox_->bind(outbox_endpoint_);
  Connect(Clock::now());

  while (!stop_requested_.load() && reject_status_.ok()) {
    // Each message is handled under its own guard (DrainScheduler, DrainOutbox); this one keeps
    // any other exception of a pass from ending the agent: renders and results carry on.
    bool leave = false;
    Guarded("a pass of the I/O loop", [&] { leave = Pass(); });
    if (leave) break;  // drained, or left
  }

  Shutdown(/*say_goodbye=*/reject_status_.ok());
  return reject_status_;
}

bool Agent::Pass() {
  if (OnLifecycle(Clock::now())) return true;
  OnTimers(Clock::now());
  std::vector<zmq::pollitem_t> items = {{outbox_->handle(), 0, ZMQ_POLLIN, 0}};
  const size_t dealer_item = items.size();
  if (dealer_) items.push_back({dealer_->handle(), 0, ZMQ_POLLIN, 0});
  const size_t monitor_item = items.size();
  if (monitor_) items.push_back({monitor_->handle(), 0, ZMQ_POLLIN, 0});
  try {
    zmq::poll(items, kTick);
  } catch (const zmq::error_t& e) {
    if (e.num() == EINTR) return false;
    throw;
  }
  if (items[0].revents & ZMQ_POLLIN) DrainOutbox();
  if (items.size() > dealer_item && dealer_ && (items[dealer_item].revents & ZMQ_POLLIN)) {
    DrainScheduler(Clock::now());
  }
  if (items.size() > monitor_item && monitor_ && (items[monitor_item].revents & ZMQ_POLLIN)) {
    DrainMonitor(Clock::now());
  }
  return false;
}

template <typename F>
void Agent::Guarded(const char* what, F&& fn) {
  try {
    fn();
    return;
  } catch (const std::exception& e) {
    noisy_.Log(spdlog::level::err, std::string("caught:") + what,
               "exception while handling {}: {}; it was dropped and the worker goes on", what,
               e.what());
  } catch (...) {
    noisy_.Log(spdlog::level::err, std::string("caught:") + what,
               "unknown exception while handling {}; it was dropped and the worker goes on", what);
  }
  if (stop_requested_.load()) return;
  // A pass that throws at once again must not spin: the next one waits a tick.
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

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
  reg.pools = options_.pools;
  reg.tags = options_.tags;
  for (const Slot& slot : slots_) reg.running.push_back(slot.runner->ref());
  reg.delivering = spool_.Delivering();
  reg.draining = draining_;
  reg.features = {protocol::kFeatureAcksInAssign};
  for (const AvailablePlugin& p : *options_.render.plugins) {
    reg.plugins.push_back({p.spec.name, p.version, p.executable});
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
  chunks_.Reset();
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
  std::vector<zmq::message_t> frames = protocol::Encode(MessageType::kHeartbeat, hb);
  TrySend(frames);  // a heartbeat that cannot leave now is stale later: no retry
  next_heartbeat_ = now + std::chrono::milliseconds(heartbeat_ms_);
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
    Guarded("a message from the scheduler", [&] { HandleMessage(frames, now); });
  }
}

void Agent::DrainOutbox() {
  for (int i = 0; i < 1000; ++i) {
    std::vector<zmq::message_t> frames;
    if (!zmq::recv_multipart(*outbox_, std::back_inserter(frames), zmq::recv_flags::dontwait)) {
      return;
    }
    HandleOutbox(frames);  // (our own runners' messages: a failure here is a bug, not input)
  }
}

void Agent::HandleMessage(std::vector<zmq::message_t>& frames, Clock::time_point now) {
  // Decode takes the frames' bytes: it reads a copy (a failure is small), the original leaves.
  std::vector<zmq::message_t> copy;
  for (const zmq::message_t& f : frames) copy.emplace_back(f.data(), f.size());
  StatusOr<protocol::Envelope> env = protocol::Decode(copy);
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
      chunks_.Reset();
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
    case MessageType::kChunkAck: {
      StatusOr<protocol::ChunkAck> ack = env->As<protocol::ChunkAck>();
      if (!ack.ok()) return;
      if (std::optional<std::string> refused = chunks_.OnAck(*ack, now)) {
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

void Agent::HandleAssign(const protocol::Envelope& env) {
  StatusOr<protocol::Assign> a = env.As<protocol::Assign>();
  if (!a.ok()) {
    // Not run: the scheduler sees it missing from the heartbeats and requeues it.
    noisy_.Log(spdlog::level::warn, "malformed", "ignored a malformed ASSIGN: {}",
               a.status().message());
    return;
  }
  for (const protocol::TaskRef& done : a->acks) spool_.Ack(done);
  const protocol::TaskRef ref{a->task_id, a->attempt};
  auto fail = [&](const std::string& message, bool charge = true,
                  const char* failure_class = protocol::kFailureRender) {
    spdlog::info("{} job {}: refused: {}", RefName(ref), a->job_id, message);
    protocol::TaskFailed failed{ref.task_id, ref.attempt, message, charge};
    failed.failure_class = failure_class;
    std::vector<zmq::message_t> frames = protocol::Encode(MessageType::kTaskFailed, failed);
    if (Status s = spool_.Add(ref, frames, /*final=*/true); !s.ok()) {
      spdlog::error("{}: {}; sending it without a spool copy", RefName(ref), s.message());
    }
    SendResult(std::move(frames));
  };
  if (FindSlot(ref) != nullptr) {
    spdlog::debug("{}: repeated ASSIGN ignored, it is already running", RefName(ref));
    return;
  }
  if (draining_) return fail("worker is draining", /*charge=*/false);
  if (!disk_full_.empty()) {
    return fail("this worker's disk is full: " + disk_full_, /*charge=*/false,
                protocol::kFailureStorageFull);
  }
  if (static_cast<int>(slots_.size()) >= options_.slots)
    return fail("worker busy", /*charge=*/false);
  if (a->frame_end < a->frame_start) {
    return fail("invalid frame range " + std::to_string(a->frame_start) + ".." +
                std::to_string(a->frame_end));
  }
  Slot slot;
  RenderSettings render = options_.render;
  render.spool = &spool_;  // the runner spools its results itself, off this thread
  try {
    slot.runner =
        std::make_unique<TaskRunner>(context_, outbox_endpoint_, std::move(*a), std::move(render));
  } catch (const std::exception& e) {  // no thread, no socket: not the task's fault
    return fail(std::string("cannot start the task on this worker: ") + e.what(),
                /*charge=*/false);
  }
  slots_.push_back(std::move(slot));
  running_tasks_.store(static_cast<int>(slots_.size()));
  StartAssets(slots_.back());
}

void Agent::HandleCancel(const protocol::Envelope& env) {
  StatusOr<protocol::Cancel> c = env.As<protocol::Cancel>();
  if (!c.ok()) {
    noisy_.Log(spdlog::level::warn, "malformed", "ignored a malformed CANCEL: {}",
               c.status().message());
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
  bool final = false;
  if (!it->cancelled && frames.size() > 1) {
    frames.erase(frames.begin());
    final = IsFinalResult(frames);
    NoteResult(frames);
    SendResult(std::move(frames));  // the runner spooled it
  }
  if (tag->last) {
    // Ended without an outcome (cancelled): results it spooled before are of no use.
    if (!final) spool_.Ack(tag->ref);
    EraseSlot(it);
  }
}

void Agent::EraseSlot(std::vector<Slot>::iterator it) {
  for (const auto& [path, hash] : BlobsOf(it->runner->assign())) cache_.Release(hash);
  slots_.erase(it);  // joins the runner, which only has its socket left to close
  running_tasks_.store(static_cast<int>(slots_.size()));
}

// ---- assets ----------------------------------------------------------------------------------

std::map<std::string, std::string> Agent::BlobsOf(const protocol::Assign& assign) {
  std::map<std::string, std::string> blobs = assign.assets;
  if (!assign.resume_checkpoint.empty()) blobs[kCheckpointBlob] = assign.resume_checkpoint;
  return blobs;
}

void Agent::StartAssets(Slot& slot) {
  const std::map<std::string, std::string> blobs = BlobsOf(slot.runner->assign());
  for (const auto& [path, hash] : blobs) {
    cache_.Hold(hash);
    if (cache_.Lookup(hash)) continue;
    slot.awaiting.insert(hash);
    fetches_.try_emplace(hash);
  }
  if (blobs.empty()) return;
  if (slot.awaiting.empty()) return GiveAssets(slot);
  spdlog::info("{}: fetching {} of its {} asset(s) from the scheduler", RefName(slot.runner->ref()),
               slot.awaiting.size(), blobs.size());
  PumpFetches();
}

void Agent::GiveAssets(Slot& slot) {
  std::map<std::string, std::string> files;
  for (const auto& [path, hash] : BlobsOf(slot.runner->assign())) {
    std::optional<std::string> file = cache_.Lookup(hash);
    if (!file) {
      // Damaged on disk since it arrived: fetch it again.
      slot.awaiting.insert(hash);
      fetches_.try_emplace(hash);
      continue;
    }
    files[path] = *file;
  }
  if (slot.awaiting.empty()) {
    slot.runner->ProvideAssets(Status::Ok(), std::move(files));
  } else {
    PumpFetches();
  }
}

void Agent::PumpFetches() {
  if (state_ != LinkState::kReady) return;
  for (auto& [hash, f] : fetches_) {
    if (f.fd < 0) {
      f.fd =
          ::open(cache_.PartPathOf(hash).c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      if (f.fd < 0) {
        const int err = errno;
        EndFetch(hash,
                 disk_space::IsFullErrno(err)
                     ? disk_space::FullError("write the asset cache", cache_.PartPathOf(hash), err)
                     : Status::Internal("cannot write the asset cache: " +
                                        std::string(std::strerror(err))));
        return PumpFetches();  // fetches_ changed under the loop
      }
    }
    // The first piece tells the size; then a window of pieces is kept in flight.
    const int64_t limit = f.total < 0 ? protocol::kChunkBytes : f.total;
    while (f.requested < limit &&
           f.requested - f.received < protocol::kChunkWindow * protocol::kChunkBytes) {
      const int64_t length = std::min(protocol::kChunkBytes, limit - f.requested);
      std::vector<zmq::message_t> frames = protocol::Encode(
          MessageType::kBlobRequest, protocol::BlobRequest{hash, f.requested, length});
      if (!TrySend(frames)) return;
      f.requested += length;
    }
  }
}

void Agent::OnBlobData(protocol::Envelope& env) {
  StatusOr<protocol::BlobData> data = env.As<protocol::BlobData>();
  if (!data.ok()) return;
  auto it = fetches_.find(data->hash);
  if (it == fetches_.end()) return;
  BlobFetch& f = it->second;
  if (!data->error.empty()) {
    return EndFetch(data->hash,
                    Status::Unavailable("the scheduler cannot serve it: " + data->error));
  }
  if (data->offset != f.received || f.fd < 0) return;  // from before a reconnect
  f.total = data->total;
  const char* bytes = env.payload.data<char>();
  size_t left = env.payload.size();
  int64_t at = data->offset;
  while (left > 0) {
    ssize_t n = ::pwrite(f.fd, bytes, left, at);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      return EndFetch(data->hash, disk_space::IsFullErrno(err)
                                      ? disk_space::FullError("write the asset cache",
                                                              cache_.PartPathOf(data->hash), err)
                                      : Status::Internal("cannot write the asset cache: " +
                                                         std::string(std::strerror(err))));
    }
    bytes += n;
    left -= static_cast<size_t>(n);
    at += n;
  }
  f.received += static_cast<int64_t>(env.payload.size());
  if (f.received < f.total) return PumpFetches();
  ::close(f.fd);
  f.fd = -1;
  Status kept = cache_.Commit(data->hash);
  if (!kept.ok() && f.attempts < 2) {
    spdlog::warn("asset {}; fetching it again", kept.message());
    f = BlobFetch{};
    f.attempts = 2;
    return PumpFetches();
  }
  EndFetch(data->hash, kept);
  PumpFetches();
}

void Agent::EndFetch(const std::string& hash, const Status& status) {
  auto it = fetches_.find(hash);
  if (it != fetches_.end()) {
    if (it->second.fd >= 0) ::close(it->second.fd);
    fetches_.erase(it);
  }
  for (Slot& slot : slots_) {
    if (!slot.awaiting.erase(hash)) continue;
    if (!status.ok()) {
      std::string path = hash;
      for (const auto& [p, h] : BlobsOf(slot.runner->assign())) {
        if (h == hash) path = p == kCheckpointBlob ? "checkpoint" : p;
      }
      slot.awaiting.clear();
      slot.runner->ProvideAssets(Status(status.code(), "asset " + path + ": " + status.message()),
                                 {});
    } else if (slot.awaiting.empty()) {
      GiveAssets(slot);
    }
  }
}

void Agent::SendResult(std::vector<zmq::message_t> frames) {
  if (state_ != LinkState::kReady) return;  // the spool re-sends it after the next kWelcome
  pending_.push_back(std::move(frames));
  FlushPending();
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
  // In order: a large message goes in pieces (at most a window unacknowledged), and what follows
  // it waits until the scheduler has acknowledged its last piece.
  while (state_ == LinkState::kReady) {
    if (chunks_.active()) {
      chunks_.Pump([this](std::vector<zmq::message_t>& f) { return TrySend(f); }, Clock::now());
      return;  // the next kChunkAck (or timer tick) goes on
    }
    if (pending_.empty()) return;
    if (protocol::ChunkSender::NeedsChunks(pending_.front())) {
      chunks_.Start(std::move(pending_.front()));
      pending_.pop_front();
      continue;
    }
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
  for (auto& [hash, f] : fetches_) {
    if (f.fd >= 0) ::close(f.fd);
  }
  fetches_.clear();
  CloseDealer();
  outbox_.reset();
  state_ = LinkState::kDisconnected;
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

// ---- drain and leave -------------------------------------------------------------------------

bool Agent::OnLifecycle(Clock::time_point now) {
  if (drain_requested_.load() && !draining_) {
    draining_ = true;
    spdlog::info("draining: finishing {} running task(s), taking no new ones", slots_.size());
    if (state_ == LinkState::kReady) SendHeartbeat(now);  // the scheduler stops assigning now
  }
  if (leave_requested_.load() && !leaving_) {
    std::string reason;
    {
      std::lock_guard<std::mutex> lock(leave_mu_);
      reason = leave_reason_;
    }
    leaving_ = draining_ = true;
    leave_deadline_ = now + kLeaveTimeout;
    spdlog::warn("leaving ({}): handing back {} running task(s)", reason, slots_.size());
    for (Slot& slot : slots_) {
      if (!slot.cancelled) slot.runner->RequestHandback(reason);
    }
    if (state_ == LinkState::kReady) SendHeartbeat(now);
  }
  if (leaving_ && now >= leave_deadline_) {
    for (Slot& slot : slots_) slot.runner->Cancel();  // no checkpoint in time: hand back as is
  }
  if (!draining_) return false;
  if (!slots_.empty()) {
    idle_since_ = {};
    return false;
  }
  if (idle_since_ == Clock::time_point{}) idle_since_ = now;
  if (spool_.empty()) {
    spdlog::info("{}: every result delivered", leaving_ ? "left" : "drained");
    return true;
  }
  if (now - idle_since_ > kDeliverTimeout) {
    spdlog::warn("leaving with {} unacknowledged result(s) in the spool",
                 spool_.Delivering().size());
    return true;
  }
  return false;
}

Agent::Slot* Agent::FindSlot(const protocol::TaskRef& ref) {
  for (Slot& slot : slots_) {
    if (slot.runner->ref() == ref) return &slot;
  }
  return nullptr;
}

bool Agent::AllowNoisyLog(Clock::time_point now) {
  uint64_t suppressed = 0;
  if (!noisy_.Allow("link", now, &suppressed)) return false;
  if (suppressed > 0) spdlog::info("({} similar messages suppressed)", suppressed);
  return true;
}

// ---- a full disk -----------------------------------------------------------------------------

void Agent::NoteResult(const std::vector<zmq::message_t>& frames) {
  if (frames.empty() || frames[0].size() != 4) return;
  const auto type = static_cast<MessageType>(static_cast<const uint8_t*>(frames[0].data())[3]);
  if (type == MessageType::kFrameResult) {
    uint64_t bytes = 0;
    for (const zmq::message_t& f : frames) bytes += f.size();
    largest_result_ = std::max(largest_result_, bytes);
    return;
  }
  if (type != MessageType::kTaskFailed) return;
  // Decode takes the frames' bytes: it reads a copy (a failure is small), the original leaves.
  std::vector<zmq::message_t> copy;
  for (const zmq::message_t& f : frames) copy.emplace_back(f.data(), f.size());
  StatusOr<protocol::Envelope> env = protocol::Decode(copy);
  if (!env.ok()) return;
  StatusOr<protocol::TaskFailed> failed = env->As<protocol::TaskFailed>();
  if (!failed.ok() || failed->failure_class != protocol::kFailureStorageFull) return;
  // Before the failure leaves: the heartbeat that says so reaches the scheduler first, so the
  // task it requeues is not offered to this worker again.
  CheckDisk(Clock::now());
}

std::string Agent::FullFolder() const {
  // Room enough: max(64 MiB, twice the largest result so far), at most half the filesystem.
  const uint64_t wanted = std::max<uint64_t>(uint64_t{64} << 20, 2 * largest_result_);
  for (const std::string& dir : {spool_.dir(), cache_.dir(), options_.render.data_dir}) {
    if (dir.empty()) continue;
    StatusOr<disk_space::Room> room = disk_space::RoomFor(dir);
    if (!room.ok()) continue;
    const uint64_t enough =
        room->total_bytes > 0 ? std::min(wanted, room->total_bytes / 2) : wanted;
    if (room->read_only) return "read-only filesystem: " + dir;
    if (room->free_bytes < enough) {
      return "no space left on device: " + dir + " (" + disk_space::Describe(*room) + ")";
    }
  }
  return "";
}

void Agent::CheckDisk(Clock::time_point now) {
  next_disk_check_ = now + kDiskCheckInterval;
  const std::string full = FullFolder();
  if (full == disk_full_) return;
  if (full.empty()) {
    spdlog::info("disk space is back ({} was full): taking tasks again", disk_full_);
  } else if (disk_full_.empty()) {
    spdlog::warn("{}: no new tasks until there is room (checked every {} s)", full,
                 kDiskCheckInterval.count() / 1000);
  }
  disk_full_ = full;
  if (state_ == LinkState::kReady) SendHeartbeat(now);  // the scheduler knows at once
}

}  // namespace tessera::worker
