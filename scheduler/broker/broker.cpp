#include "scheduler/broker/broker.h"

#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <zmq_addon.hpp>

#include "shared/plugins/plugin_catalog.h"
#include "shared/base/utf8.h"
#include "shared/base/wall_time.h"
#include "shared/wire/zmq_monitor.h"

namespace tessera::broker {

using protocol::MessageType;
using Clock = std::chrono::steady_clock;

Broker::Broker(store::Store& store, BrokerOptions options)
    : store_(store), options_(std::move(options)), noisy_(options_.noisy_log_interval) {
  shares_.projects = options_.projects;
}

Broker::~Broker() { Stop(); }

StatusOr<std::string> Broker::Start() {
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) return Status::Internal(std::string("eventfd: ") + std::strerror(errno));
  std::promise<StatusOr<std::string>> started;
  auto result = started.get_future();
  thread_ = std::thread([this, p = std::move(started)]() mutable { Run(std::move(p)); });
  StatusOr<std::string> endpoint = result.get();
  if (!endpoint.ok()) Stop();
  return endpoint;
}

void Broker::Stop() {
  {
    std::lock_guard<std::mutex> lock(inbox_mu_);
    stop_ = true;
  }
  if (wake_fd_ >= 0) {
    uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof(one));
  }
  if (thread_.joinable()) thread_.join();
  if (wake_fd_ >= 0) {
    ::close(wake_fd_);
    wake_fd_ = -1;
  }
}

void Broker::Post(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(inbox_mu_);
    inbox_.push_back(std::move(fn));
  }
  uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof(one));
}

// ---- the poll loop --------------------------------------------------------------------------

namespace {

// A C++ plugin a worker loaded from outside the build: what it declares becomes the spec that
// jobs naming it are validated against (shared/plugins/plugin_catalog.h).
Status AdoptNativePlugin(const protocol::PluginOffer& offer) {
  const auto has = [&](const char* cap) {
    return std::find(offer.capabilities.begin(), offer.capabilities.end(), cap) !=
           offer.capabilities.end();
  };
  TSR_ASSIGN_OR_RETURN(plugin::PluginSpec spec,
                       plugin::NativePluginSpec(offer.name, offer.description, has("tiles"),
                                                has("sample_parts"), offer.declaration));
  return plugin::RegisterNativePlugin(std::move(spec));
}

}  // namespace

void Broker::Run(std::promise<StatusOr<std::string>> started) {
  std::string endpoint;
  // C++ plugins workers offered before a restart: their jobs must still parse.
  StatusOr<std::vector<protocol::PluginOffer>> natives = store_.NativePlugins();
  if (!natives.ok()) {
    started.set_value(natives.status());
    return;
  }
  for (const protocol::PluginOffer& offer : *natives) {
    if (Status s = AdoptNativePlugin(offer); !s.ok()) {
      spdlog::warn("renderer plugin {}: {}", offer.name, s.message());
    }
  }
  // Workers an operator disabled stay disabled when they come back.
  StatusOr<std::vector<store::WorkerRecord>> known = store_.ListWorkers();
  if (!known.ok()) {
    started.set_value(known.status());
    return;
  }
  std::set<std::string> disabled;
  for (const store::WorkerRecord& w : *known) {
    if (w.disabled) disabled.insert(w.name);
  }
  workers_.SetDisabledNames(std::move(disabled));
  if (options_.curve) {
    // The ZAP handler must be listening before the CURVE ROUTER binds.
    if (Status s = LoadKeyRing(); !s.ok()) {
      started.set_value(s);
      return;
    }
    StatusOr<std::unique_ptr<security::ZapHandler>> zap =
        security::ZapHandler::Start(context_, keys_);
    if (!zap.ok()) {
      started.set_value(zap.status());
      return;
    }
    zap_ = std::move(*zap);
  }
  try {
    router_ = std::make_unique<zmq::socket_t>(context_, zmq::socket_type::router);
    router_->set(zmq::sockopt::linger, 0);
    router_->set(zmq::sockopt::router_mandatory, 1);
    router_->set(zmq::sockopt::maxmsgsize, protocol::kMaxMessageBytes);
    if (options_.curve) {
      router_->set(zmq::sockopt::curve_server, 1);
      router_->set(zmq::sockopt::curve_secretkey, options_.curve->secret_key);
      router_->set(zmq::sockopt::zap_domain, "tessera");
    }
    // Peers refused at the handshake never reach the socket: only its monitor sees them.
    const char* monitor = "inproc://tessera-broker-monitor";
    if (zmq_socket_monitor(router_->handle(), monitor,
                           ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                               ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                               ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) != 0) {
      throw zmq::error_t();
    }
    monitor_ = std::make_unique<zmq::socket_t>(context_, zmq::socket_type::pair);
    monitor_->set(zmq::sockopt::linger, 0);
    monitor_->connect(monitor);
    router_->bind(options_.bind_endpoint);
    endpoint = router_->get(zmq::sockopt::last_endpoint);
  } catch (const zmq::error_t& e) {
    if (monitor_) zmq_socket_monitor(router_->handle(), nullptr, 0);
    monitor_.reset();
    router_.reset();
    started.set_value(
        Status::Unavailable("cannot bind broker at " + options_.bind_endpoint + ": " + e.what()));
    return;
  }
  {
    std::lock_guard<std::mutex> lock(assembler_mu_);
    assembler_ = std::make_unique<assembler::Assembler>(
        options_.assembler_threads, [this](assembler::FrameWritten w) {
          Post([this, w = std::move(w)] { OnFrameWritten(w); });
        });
  }
  now_ = Clock::now();
  Status recovered = store_.MarkAllWorkersOffline();
  if (recovered.ok()) recovered = LoadStoredTasks(std::nullopt, /*requeue_running=*/true);
  // A data folder already full at start-up: up, read-only, rather than a restart loop.
  if (!recovered.ok() && recovered.code() != StatusCode::kStorageFull) {
    started.set_value(recovered);
    return;
  }
  if (recovered.ok()) {
    ResumeAssemblies();
    CancelStepsOfEndedSteps();
  }
  started.set_value(endpoint);
  spdlog::info("broker listening on {} (heartbeat {} ms, liveness {}), {}", endpoint,
               options_.heartbeat_ms, options_.liveness,
               options_.curve ? "CURVE encrypted, enrolled workers only"
                              : "INSECURE: unencrypted, any peer admitted");

  next_timer_ = Clock::now() + std::chrono::milliseconds(options_.heartbeat_ms);
  next_touch_ = Clock::now() + std::chrono::seconds(5);
  if (!recovered.ok()) EnterReadOnly(recovered);
  for (;;) {
    zmq::pollitem_t items[] = {{router_->handle(), 0, ZMQ_POLLIN, 0},
                               {nullptr, wake_fd_, ZMQ_POLLIN, 0},
                               {monitor_->handle(), 0, ZMQ_POLLIN, 0}};
    auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next_timer_ - Clock::now());
    try {
      zmq::poll(items, 3, std::max<std::chrono::milliseconds>(wait, std::chrono::milliseconds(0)));
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) noisy_.Log(spdlog::level::err, "poll", "poll: {}", e.what());
    }
    const bool woken = items[1].revents & ZMQ_POLLIN;
    if (woken) {
      uint64_t n;
      (void)!::read(wake_fd_, &n, sizeof(n));
      std::lock_guard<std::mutex> lock(inbox_mu_);
      if (stop_) break;
    }
    if (items[2].revents & ZMQ_POLLIN) Guarded("reading handshake events", [&] { DrainMonitor(); });
    // Each step of a pass has its own guard (RunPass); this one is the last resort, so that no
    // exception ever leaves the thread.
    Guarded("a pass of the poll loop", [&] { RunPass(woken); });
  }
  std::unique_ptr<assembler::Assembler> assembler;
  {
    std::lock_guard<std::mutex> lock(assembler_mu_);
    assembler = std::move(assembler_);
  }
  assembler.reset();  // finish pending writes; their completions are dropped with the inbox
  zmq_socket_monitor(router_->handle(), nullptr, 0);
  monitor_.reset();
  router_.reset();
  zap_.reset();
  spdlog::info("broker stopped");
}

void Broker::RunPass(bool woken) {
  if (read_only_) return RunReadOnlyPass(woken);
  now_ = Clock::now();
  Status committed;
  {
    store::Store::WriteGroup group(store_);
    // Every step is guarded on its own (each inbox closure and each message too, inside), so an
    // exception drops one step and the pass still commits what the others did.
    if (woken) DrainInbox();
    ReceiveMessages();
    const bool timer = Clock::now() >= next_timer_;
    if (timer) {
      Guarded("the timers", [&] { OnTimer(); });
      next_timer_ = Clock::now() + std::chrono::milliseconds(options_.heartbeat_ms);
    }
    Guarded("full filesystems", [&] { CheckStorage(now_); });
    Guarded("dispatch", [&] { Dispatch(); });
    // After dispatch, so backups only use workers the queue has no work for.
    if (timer) Guarded("straggler backups", [&] { StartBackups(); });
    Guarded("acknowledgements", [&] { SendPendingAcks(); });  // after the pass's last assignment
    Guarded("worker states", [&] { StoreWorkerStates(); });
    Guarded("events", [&] { PublishPending(); });
    queue_depth_.store(leases_.queue().size(), std::memory_order_relaxed);
    committed = group.Commit();
  }  // (a failed commit is rolled back here)
  if (committed.code() == StatusCode::kStorageFull) {
    // The data folder is full: the pass is undone in memory too, and the broker waits for room
    // read-only instead of exiting into a restart loop while the disk is still full.
    return EnterReadOnly(committed);
  }
  if (!committed.ok()) {
    // The pass's decisions live in memory but not in the database, and nothing of them has
    // been sent. Carrying on would let the two disagree; stopping loses nothing that was
    // acknowledged, and a restart (systemd's Restart=on-failure) reloads the committed truth.
    spdlog::critical(
        "cannot commit scheduler state: {}; stopping so memory never disagrees "
        "with the database -- restart the scheduler to resume",
        committed.ToString());
    spdlog::shutdown();
    std::_Exit(74);  // EX_IOERR
  }
  FlushOutbox();
}

void Broker::StoreWorkerStates() {
  for (const auto& [worker, state] : workers_.TakeStateChanges()) {
    (void)store_.SetWorkerState(worker->offer.id, state);
    if (options_.events) {
      Publish("worker", {{"worker", worker->offer.name}, {"state", store::WorkerStateName(state)}});
    }
  }
}

void Broker::Publish(const char* kind, nlohmann::json data) {
  if (options_.events) pending_events_.emplace_back(kind, std::move(data));
}

void Broker::RecordEvent(std::optional<int64_t> job_id, std::optional<int64_t> task_id,
                         std::optional<int64_t> worker_id, const std::string& kind,
                         const std::string& message) {
  (void)store_.AddEvent(job_id, task_id, worker_id, kind, message);
  if (!options_.events) return;
  nlohmann::json data = {{"event", kind}, {"message", message}};
  if (job_id) data["job_id"] = *job_id;
  if (task_id) data["task_id"] = *task_id;
  if (worker_id) data["worker_id"] = *worker_id;
  Publish("notice", std::move(data));
}

void Broker::PublishPending() {
  if (!options_.events) return;
  const auto now = now_;
  if (!changed_jobs_.empty() && now >= next_job_events_) {
    for (int64_t id : changed_jobs_) Publish("job", {{"job_id", id}});
    changed_jobs_.clear();
    next_job_events_ = now + kJobEventInterval;
  }
  if (pending_events_.empty()) return;
  after_commit_.push_back([bus = options_.events, events = std::move(pending_events_)]() mutable {
    for (auto& [kind, data] : events) bus->Publish(kind, std::move(data));
  });
  pending_events_.clear();
}

void Broker::ReceiveMessages() {
  // Bounded, so timers and the inbox are never starved by a busy socket.
  std::vector<zmq::message_t> frames;
  for (int i = 0; i < kMessagesPerPass; ++i) {
    frames.clear();
    try {
      if (!zmq::recv_multipart(*router_, std::back_inserter(frames), zmq::recv_flags::dontwait)) {
        return;
      }
    } catch (const zmq::error_t& e) {
      noisy_.Log(spdlog::level::warn, "receive", "receive: {}", e.what());
      return;
    }
    Guarded("a worker message", [&] { HandleMessage(frames); });
  }
}

void Broker::DrainInbox() {
  std::deque<std::function<void()>> batch;
  {
    std::lock_guard<std::mutex> lock(inbox_mu_);
    batch.swap(inbox_);
  }
  for (auto& fn : batch) Guarded("a request from another thread", [&] { fn(); });
}

void Broker::Send(const std::string& identity, std::vector<zmq::message_t> frames) {
  outbox_.emplace_back(identity, std::move(frames));
}

void Broker::FlushOutbox() {
  for (auto& [identity, frames] : outbox_) {
    frames.insert(frames.begin(), zmq::message_t(identity.data(), identity.size()));
    try {
      zmq::send_multipart(*router_, frames, zmq::send_flags::dontwait);
    } catch (const zmq::error_t& e) {
      // EHOSTUNREACH: the peer is gone; liveness will clean it up. A dropped assignment is
      // noticed by heartbeat reconciliation (the worker does not list it) and requeued.
      spdlog::debug("send to worker failed: {}", e.what());
    }
  }
  outbox_.clear();
  for (auto& answer : after_commit_) Guarded("an answer", [&] { answer(); });
  after_commit_.clear();
  for (auto& answer : answers_) Guarded("an answer", [&] { answer(Status::Ok()); });
  answers_.clear();
}

void Broker::HandleMessage(std::vector<zmq::message_t>& frames) {
  if (frames.size() < 2) {
    if (!frames.empty()) DropMessage(frames[0].to_string(), "an empty message");
    return;
  }
  std::string identity = frames[0].to_string();
  StatusOr<protocol::Envelope> decoded = protocol::Decode(frames, 1);
  if (!decoded.ok()) return DropMessage(identity, decoded.status().message());
  protocol::Envelope& env = *decoded;
  if (read_only_) return OnMessageWhileReadOnly(identity, env);
  if (env.type == MessageType::kRegister || env.type == MessageType::kEnrol) {
    // On a CURVE farm the ZAP handler tagged the connection with who its key belongs to.
    std::string user_id;
    if (options_.curve) {
      try {
        user_id = frames[1].gets("User-Id");
      } catch (const zmq::error_t&) {
      }
    }
    if (env.type == MessageType::kRegister) {
      OnRegister(identity, env, user_id);
    } else {
      OnEnrol(identity, env, user_id);
    }
    return;
  }
  WorkerConn* known = HeardFrom(identity, env.type);
  if (known == nullptr) return;
  WorkerConn& worker = *known;
  switch (env.type) {
    case MessageType::kHeartbeat: {
      Send(identity, protocol::Encode(MessageType::kHeartbeatAck, nlohmann::json::object()));
      auto beat = env.As<protocol::Heartbeat>();
      if (!beat.ok()) DropMessage(identity, beat.status().message());
      if (beat.ok()) {
        if (beat->draining && WorkerRegistry::MarkDraining(worker)) {
          spdlog::info("worker {} is draining: it finishes its tasks and takes no new ones",
                       worker.offer.name);
        }
        SetWorkerDiskFull(worker, beat->disk_full);
        if (!beat->gpu_samples.empty()) OnGpuSamples(worker, beat->gpu_samples);
        OnHeartbeat(identity, worker, *beat);
      }
      break;
    }
    case MessageType::kProgress: {
      auto m = env.As<protocol::Progress>();
      if (!m.ok()) {
        DropMessage(identity, m.status().message());
        break;
      }
      if (LiveTask* task = FindLease(identity, m->task_id, m->attempt, "progress")) {
        task->LeaseOn(identity)->last_progress = now_;
        MarkJobChanged(task->job_id);
        (void)store_.SetTaskProgress(m->task_id, m->attempt, std::clamp(m->fraction, 0.0, 1.0),
                                     utf8::Truncate(m->message, protocol::kMaxStatusLineBytes));
      }
      break;
    }
    case MessageType::kFrameResult:
      OnFrameResult(identity, worker, env);
      break;
    case MessageType::kFileResult:
      OnFileResult(identity, worker, env);
      break;
    case MessageType::kTaskDone: {
      auto m = env.As<protocol::TaskDone>();
      if (m.ok()) OnTaskDone(identity, worker, *m);
      if (!m.ok()) DropMessage(identity, m.status().message());
      break;
    }
    case MessageType::kTaskFailed: {
      auto m = env.As<protocol::TaskFailed>();
      if (m.ok()) OnTaskFailed(identity, worker, *m);
      if (!m.ok()) DropMessage(identity, m.status().message());
      break;
    }
    case MessageType::kHandback:
      OnHandback(identity, worker, env);
      break;
    case MessageType::kCheckpoint:
      OnCheckpoint(identity, worker, env);
      break;
    case MessageType::kChunk:
      OnChunk(identity, env);
      break;
    case MessageType::kBlobRequest:
      OnBlobRequest(identity, env);
      break;
    case MessageType::kGoodbye:
      DropWorker(identity, "worker shut down");
      break;
    default:
      DropMessage(identity, std::string("unexpected ") + protocol::MessageTypeName(env.type) +
                                " from worker " + worker.offer.name);
  }
}

void Broker::OnRegister(const std::string& identity, const protocol::Envelope& env,
                        const std::string& user_id) {
  // Every string is valid UTF-8 from here on, every list within its limit (protocol::Check).
  auto reg = env.As<protocol::Register>();
  if (reg.ok() && options_.curve) {
    // Only an enrolled key registers, and only under the name it was enrolled as.
    std::optional<security::Admission> who = security::ParseUserId(user_id);
    if (!who || who->kind != security::Admission::Kind::kWorker) {
      reg = Status::PermissionDenied("this connection may only enrol (it used a join token)");
    } else if (who->worker_name != reg->name) {
      reg = Status::PermissionDenied("this key is enrolled as worker '" + who->worker_name +
                                     "', not '" + reg->name + "'");
    } else if (!keys_.HasWorker(reg->name)) {
      reg = Status::PermissionDenied("worker " + reg->name + " was revoked");
    }
  }
  if (!reg.ok()) {
    DropMessage(identity, reg.status().message());
    Send(identity,
         protocol::Encode(MessageType::kReject, protocol::Reject{reg.status().message()}));
    return;
  }
  bool drain_requested = false;
  if (auto old = workers_.FindByName(reg->name); old != workers_.end()) {
    // A name belongs to its live connection: another peer (another connection: another routing
    // identity) is refused until that connection is gone -- closed, or silent past the liveness
    // deadline. The worker itself reconnecting has closed its old connection, so it gets in at
    // once, or after the deadline when the close has not reached us yet.
    const std::optional<std::chrono::milliseconds> left = workers_.AliveFor(old->second, now_);
    if (old->first != identity && left && !PeerGone(old->first)) {
      return RefuseName(identity, reg->name, "registration_refused",
                        "worker " + reg->name +
                            " is connected from another peer; a name is held by its live "
                            "connection (try again once that one has gone)",
                        static_cast<int>(left->count()) + options_.heartbeat_ms);
    }
    // The same worker coming back (new connection or restart): its old leases are void.
    drain_requested = old->second.drain_requested;
    DropWorker(old->first, "worker re-registered");
  }
  StatusOr<int64_t> id = store_.UpsertWorker(*reg);
  if (!id.ok()) {
    spdlog::error("cannot record worker {}: {}", reg->name, id.status().ToString());
    Send(identity,
         protocol::Encode(MessageType::kReject, protocol::Reject{"scheduler storage error"}));
    return;
  }
  WorkerConn conn;
  conn.offer.id = *id;
  conn.offer.name = reg->name;
  conn.offer.pools = {reg->pools.begin(), reg->pools.end()};
  conn.offer.tags = {reg->tags.begin(), reg->tags.end()};
  conn.offer.cpu_cores = reg->cpu_cores;
  conn.offer.ram_mb = reg->ram_mb;
  conn.offer.gpus = reg->gpus;
  for (const protocol::PluginOffer& p : reg->plugins) {
    if (p.native) {
      if (Status s = AdoptNativePlugin(p); !s.ok()) {
        spdlog::warn("worker {}: renderer plugin {} not accepted: {}", reg->name, p.name,
                     s.message());
        continue;
      }
      if (Status s = store_.SaveNativePlugin(p); !s.ok()) {
        spdlog::error("worker {}: renderer plugin {}: {}", reg->name, p.name, s.message());
      }
    }
    conn.offer.plugins[p.name] = p.version;
  }
  conn.slots = std::clamp(reg->slots, 1, 64);
  conn.offer.slots_per_gpu = reg->slots_per_gpu;
  conn.offer.memory_mb_per_slot = reg->memory_mb_per_slot;
  conn.claims.Reset(reg->gpus.size());
  conn.draining = reg->draining;
  conn.acks_in_assign = std::find(reg->features.begin(), reg->features.end(),
                                  protocol::kFeatureAcksInAssign) != reg->features.end();
  if (options_.price_of) {
    conn.price = options_.price_of(reg->name, reg->cloud);
    (void)store_.SetWorkerPrice(*id, conn.price.node_group, conn.price.per_hour);
  }
  WorkerConn& worker = workers_.Add(identity, std::move(conn), now_);
  for (const protocol::TaskRef& ref : reg->delivering) {
    Reattach(identity, worker, ref, /*delivering=*/true);
  }
  for (const protocol::TaskRef& ref : reg->running) Reattach(identity, worker, ref);
  UpdateAllFeasibility();
  RecordEvent(std::nullopt, std::nullopt, *id, "worker_registered", reg->hostname);
  std::string backends;
  for (const std::string& b : reg->backends) backends += (backends.empty() ? "" : ",") + b;
  spdlog::info("worker {} (id {}, {} cores, {} GPUs, backends {}) registered", reg->name, *id,
               reg->cpu_cores, reg->gpus.size(), backends);
  Send(identity,
       protocol::Encode(MessageType::kWelcome,
                        protocol::Welcome{*id, options_.heartbeat_ms, options_.liveness}));
  if (drain_requested) {
    // Told to drain on its previous connection, which may never have delivered it.
    worker.draining = worker.drain_requested = true;
    if (!reg->draining) {
      Send(identity, protocol::Encode(MessageType::kDrain, nlohmann::json::object()));
      spdlog::info("worker {} told to drain again: it registered anew while draining", reg->name);
    }
  }
}

}  // namespace tessera::broker
