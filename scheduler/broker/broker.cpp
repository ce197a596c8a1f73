#include "scheduler/broker/broker.h"

#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <zmq_addon.hpp>

#include "shared/plugin_catalog.h"
#include "shared/wall_time.h"
#include "shared/zmq_monitor.h"

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
// jobs naming it are validated against (shared/plugin_catalog.h).
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
  for (const store::WorkerRecord& w : *known) {
    if (w.disabled) disabled_workers_.insert(w.name);
  }
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
  Status recovered = store_.MarkAllWorkersOffline();
  if (recovered.ok()) recovered = LoadStoredTasks(std::nullopt, /*requeue_running=*/true);
  // A data folder already full at start-up: up, read-only, rather than a restart loop.
  if (!recovered.ok() && recovered.code() != StatusCode::kStorageFull) {
    started.set_value(recovered);
    return;
  }
  if (recovered.ok()) ResumeAssemblies();
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
    Guarded("full filesystems", [&] { CheckStorage(Clock::now()); });
    Guarded("dispatch", [&] { Dispatch(); });
    // After dispatch, so backups only use workers the queue has no work for.
    if (timer) Guarded("straggler backups", [&] { StartBackups(); });
    Guarded("acknowledgements", [&] { SendPendingAcks(); });  // after the pass's last assignment
    Guarded("worker states", [&] { StoreWorkerStates(); });
    Guarded("events", [&] { PublishPending(); });
    queue_depth_.store(queue_.size(), std::memory_order_relaxed);
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
  for (auto& [identity, worker] : workers_) {
    const auto state = worker.tasks.empty() && worker.stopping.empty() ? store::WorkerState::kIdle
                                                                       : store::WorkerState::kBusy;
    if (state != worker.stored_state) {
      (void)store_.SetWorkerState(worker.offer.id, state);
      worker.stored_state = state;
      if (options_.events) {
        Publish("worker",
                {{"worker", worker.offer.name}, {"state", store::WorkerStateName(state)}});
      }
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
  const auto now = Clock::now();
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
        if (beat->draining && !worker.draining) {
          worker.draining = true;
          spdlog::info("worker {} is draining: it finishes its tasks and takes no new ones",
                       worker.offer.name);
        }
        SetWorkerDiskFull(worker, beat->disk_full);
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
        task->LeaseOn(identity)->last_progress = Clock::now();
        MarkJobChanged(task->job_id);
        (void)store_.SetTaskProgress(m->task_id, m->attempt, std::clamp(m->fraction, 0.0, 1.0));
      }
      break;
    }
    case MessageType::kFrameResult:
      OnFrameResult(identity, worker, env);
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
  if (auto old = FindWorker(reg->name); old != workers_.end()) {
    // A name belongs to its live connection: another peer (another connection: another routing
    // identity) is refused until that connection is gone -- closed, or silent past the liveness
    // deadline. The worker itself reconnecting has closed its old connection, so it gets in at
    // once, or after the deadline when the close has not reached us yet.
    const auto deadline =
        std::chrono::milliseconds(int64_t{options_.heartbeat_ms} * options_.liveness);
    const auto silent = Clock::now() - old->second.last_heard;
    if (old->first != identity && silent <= deadline && !PeerGone(old->first)) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - silent);
      return RefuseName(identity, reg->name, "registration_refused",
                        "worker " + reg->name +
                            " is connected from another peer; a name is held by its live "
                            "connection (try again once that one has gone)",
                        static_cast<int>(left.count()) + options_.heartbeat_ms);
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
  conn.disabled = disabled_workers_.count(reg->name) > 0;
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
  conn.gpu_busy.assign(reg->gpus.size(), false);
  conn.last_heard = Clock::now();
  conn.idle_since = conn.metered_until = conn.last_heard;
  conn.draining = reg->draining;
  conn.acks_in_assign = std::find(reg->features.begin(), reg->features.end(),
                                  protocol::kFeatureAcksInAssign) != reg->features.end();
  if (options_.price_of) {
    conn.price = options_.price_of(reg->name, reg->cloud);
    (void)store_.SetWorkerPrice(*id, conn.price.node_group, conn.price.per_hour);
  }
  WorkerConn& worker = workers_[identity] = std::move(conn);
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

std::set<Broker::QueueKey>::iterator Broker::NextTaskFor(const WorkerConn& worker,
                                                         std::vector<int>* gpus) {
  // Walk the queue one job at a time (it is ordered by priority, then job). Among the jobs of
  // the highest priority that have a task this worker can run now, the policy's fair share
  // picks one; only when none can run does a lower priority get the worker.
  std::vector<policy::Candidate> candidates;
  std::vector<std::set<QueueKey>::iterator> heads;
  std::vector<std::vector<int>> picked_gpus;
  for (auto it = queue_.begin(); it != queue_.end();) {
    const int neg_priority = std::get<0>(*it);
    if (!candidates.empty() && neg_priority != std::get<0>(*heads.front())) break;
    const int64_t job_id = std::get<1>(*it);
    const JobInfo& job = jobs_[job_id];
    if (policy::CouldEverRun(job.needs, worker.offer) &&
        policy::LimitsAllow(job.needs.limits, options_.limits, limits_in_use_)) {
      if (auto picked = policy::PickGpus(job.needs.resources, worker.offer, worker.gpu_busy)) {
        candidates.push_back({job_id, job.project, job.user, job.running, job.dispatched});
        heads.push_back(it);
        picked_gpus.push_back(std::move(*picked));
      }
    }
    it = queue_.lower_bound({neg_priority, job_id + 1, INT_MIN, INT64_MIN});
  }
  std::optional<size_t> best = policy::PickFairShare(candidates, shares_);
  if (!best) return queue_.end();
  *gpus = std::move(picked_gpus[*best]);
  return heads[*best];
}

Broker::WorkerConn* Broker::HeardFrom(const std::string& identity, MessageType type) {
  auto wit = workers_.find(identity);
  if (wit == workers_.end()) {
    // Not welcomed (or declared dead): ask it to register again.
    if (type != MessageType::kGoodbye) {
      Send(identity, protocol::Encode(MessageType::kUnknownWorker, nlohmann::json::object()));
    }
    return nullptr;
  }
  wit->second.last_heard = Clock::now();
  return &wit->second;
}

void Broker::DropWorker(std::string identity, const std::string& reason) {
  auto wit = workers_.find(identity);
  if (wit == workers_.end()) return;
  const WorkerConn& worker = wit->second;
  const std::string name = worker.offer.name;
  const int64_t worker_id = worker.offer.id;
  std::vector<int64_t> held(worker.tasks.begin(), worker.tasks.end());
  SetWorkerDiskFull(wit->second, "");  // its alert goes with it
  MeterCosts(&identity);
  for (int64_t task_id : held) {
    auto it = tasks_.find(task_id);
    if (it == tasks_.end()) continue;
    EndLease(it->second, identity,
             {store::AttemptOutcome::kLost, "", "worker " + name + " lost: " + reason,
              /*charged=*/false},
             /*cancel=*/false);
  }
  workers_.erase(identity);
  chunks_.Forget(identity);
  (void)store_.SetWorkerState(worker_id, store::WorkerState::kOffline);
  RecordEvent(std::nullopt, std::nullopt, worker_id, "worker_lost", reason);
  spdlog::warn("worker {} (id {}) removed: {}; {} task(s) requeued", name, worker_id, reason,
               held.size());
  UpdateAllFeasibility();
}

void Broker::OnTimer() {
  const auto now = Clock::now();
  const auto deadline = std::chrono::milliseconds(options_.heartbeat_ms * options_.liveness);
  std::vector<std::string> dead;
  for (const auto& [identity, worker] : workers_) {
    if (now - worker.last_heard > deadline) dead.push_back(identity);
  }
  for (const std::string& identity : dead) DropWorker(identity, "missed heartbeats");
  // Interrupted tasks whose worker did not come back in time go back to the queue.
  for (auto it = reattach_.begin(); it != reattach_.end();) {
    if (now < it->second) {
      ++it;
      continue;
    }
    auto task = tasks_.find(it->first);
    if (task != tasks_.end() && !task->second.running()) Enqueue(task->second);
    it = reattach_.erase(it);
  }
  // Timeouts: a lease older than its job's task_timeout, or silent for longer than its
  // progress_timeout, is a (charged) failure.
  struct Expired {
    int64_t task_id;
    std::string identity, why;
  };
  std::vector<Expired> expired;
  for (const auto& [identity, worker] : workers_) {
    for (int64_t task_id : worker.tasks) {
      LiveTask& task = tasks_.at(task_id);
      const Lease* lease = task.LeaseOn(identity);
      const JobInfo& job = jobs_[task.job_id];
      if (!lease) continue;
      if (job.task_timeout_s > 0 &&
          now - lease->leased_at > std::chrono::seconds(job.task_timeout_s)) {
        expired.push_back(
            {task_id, identity, "timed out after " + std::to_string(job.task_timeout_s) + " s"});
      } else if (job.progress_timeout_s > 0 &&
                 now - lease->last_progress > std::chrono::seconds(job.progress_timeout_s)) {
        expired.push_back({task_id, identity,
                           "no progress for " + std::to_string(job.progress_timeout_s) + " s"});
      }
    }
  }
  for (const Expired& e : expired) {
    LiveTask& task = tasks_.at(e.task_id);
    spdlog::warn("job {} task {} on {}: {}", task.job_id, e.task_id,
                 workers_.at(e.identity).offer.name, e.why);
    ChargeWorker(task, workers_.at(e.identity));
    EndLease(task, e.identity,
             {store::AttemptOutcome::kFailed, protocol::kFailureTimeout, e.why, /*charged=*/true},
             /*cancel=*/true);
  }
  if (now >= next_meter_) {
    MeterCosts();
    next_meter_ = now + options_.cost_interval;
  }
  if (now >= next_touch_) {
    std::vector<std::pair<int64_t, int64_t>> seen;
    const int64_t wall_now = wall_time::NowMs();
    for (const auto& [identity, worker] : workers_) {
      auto age = std::chrono::duration_cast<std::chrono::milliseconds>(now - worker.last_heard);
      seen.emplace_back(worker.offer.id, wall_now - age.count());
    }
    (void)store_.TouchWorkers(seen);
    next_touch_ = now + std::chrono::seconds(5);
  }
}

void Broker::AddLease(LiveTask& task, const std::string& identity, WorkerConn& worker, int attempt,
                      const std::vector<int>& gpus) {
  CountRunning(jobs_[task.job_id], +1);
  MarkJobChanged(task.job_id);
  Lease lease;
  lease.attempt = attempt;
  lease.worker = identity;
  lease.gpus = gpus;
  lease.leased_at = lease.last_progress = Clock::now();
  task.leases.push_back(std::move(lease));
  worker.tasks.insert(task.task_id);
  worker.SetGpusBusy(gpus, true);
}

bool Broker::StartLease(LiveTask& task, const std::string& identity, WorkerConn& worker,
                        std::vector<int> gpus, bool backup) {
  JobInfo& job = jobs_[task.job_id];
  const int attempt = task.attempt + 1;
  // The lease is written in this pass's transaction; the assignment leaves only after that
  // commits (FlushOutbox), so a worker never holds a lease the store does not.
  Status s = backup ? store_.StartBackup(task.task_id, attempt, worker.offer.id, gpus)
                    : store_.StartTask(task.task_id, attempt, worker.offer.id, task.job_id, gpus);
  if (!s.ok()) {
    spdlog::error("task {}: cannot start lease: {}", task.task_id, s.ToString());
    return false;
  }
  task.attempt = attempt;
  ++job.dispatched;
  dispatched_.fetch_add(1, std::memory_order_relaxed);
  AddLease(task, identity, worker, attempt, gpus);
  protocol::Assign assign{task.task_id,     attempt,         task.job_id,
                          task.frame_start, task.frame_end,  *job.scene_yaml,
                          job.renderer,     std::move(gpus), task.part};
  assign.scene_name = job.scene_name;
  assign.settings = job.settings;
  if (job.assets) assign.assets = *job.assets;
  if (job.output_shared && task.part.whole()) {
    assign.output = {job.output.dir, job.output.pattern, job.output.formats, job.output.exr_float};
  }
  assign.timeout_s = job.task_timeout_s;
  assign.checkpoint_interval_s = job.checkpoint_interval_s;
  assign.gpu_memory_mb = job.needs.resources.gpu_memory_mb;
  if (task.resume_frame > 0 || !task.checkpoint_hash.empty()) {
    // A handed-back (or lost, checkpointed) task resumes where its last copy stopped (the worker
    // fetches the checkpoint).
    assign.resume_frame = task.resume_frame;
    assign.resume_checkpoint = task.checkpoint_hash;
    assign.resume_samples = task.checkpoint_hash.empty() ? 0 : task.checkpoint_samples;
    if (!task.checkpoint_hash.empty()) {
      spdlog::info(
          "job {} task {} attempt {} resumes frame {} from attempt {}'s checkpoint after "
          "{} samples",
          task.job_id, task.task_id, attempt, task.resume_frame, task.checkpoint_attempt,
          task.checkpoint_samples);
    }
  }
  // Its finished results made durable in this pass ride along (the commit precedes the send).
  assign.acks.swap(worker.pending_acks);
  Send(identity, protocol::Encode(MessageType::kAssign, assign));
  // Per task at debug: a busy farm leases thousands a second. Job-level changes log at info.
  spdlog::debug("job {} task {} (frames {}-{}) -> worker {}, attempt {}{}", task.job_id,
                task.task_id, task.frame_start, task.frame_end, worker.offer.name, attempt,
                backup ? " (backup copy of a straggler)" : "");
  return true;
}

void Broker::Dispatch() {
  if (queue_.empty()) return;
  for (auto& [identity, worker] : workers_) {
    while (worker.free_slots() > 0 && !queue_.empty()) {
      std::vector<int> gpus;
      auto next = NextTaskFor(worker, &gpus);
      if (next == queue_.end()) break;
      QueueKey key = *next;
      queue_.erase(next);
      auto it = tasks_.find(std::get<3>(key));
      if (it == tasks_.end() || it->second.running()) continue;
      StartLease(it->second, identity, worker, std::move(gpus), /*backup=*/false);
    }
    if (queue_.empty()) return;
  }
}

Broker::Counters Broker::counters() const {
  Counters c;
  c.tasks_dispatched = dispatched_.load(std::memory_order_relaxed);
  c.tasks_completed = completed_.load(std::memory_order_relaxed);
  c.render_seconds = static_cast<double>(render_ns_.load(std::memory_order_relaxed)) / 1e9;
  c.queue_depth = queue_depth_.load(std::memory_order_relaxed);
  c.blob_bytes_served = blob_bytes_served_.load(std::memory_order_relaxed);
  c.checkpoints_kept = checkpoints_kept_.load(std::memory_order_relaxed);
  c.result_bytes_buffered = result_bytes_buffered_.load(std::memory_order_relaxed);
  c.messages_dropped = messages_dropped_.load(std::memory_order_relaxed);
  c.handshakes_refused = handshakes_refused_.load(std::memory_order_relaxed);
  c.names_refused = names_refused_.load(std::memory_order_relaxed);
  c.errors_caught = errors_caught_.load(std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(assembler_mu_);
  if (assembler_) c.assembler = assembler_->counters();
  c.errors_caught += c.assembler.errors_caught;
  return c;
}

// ---- the boundary: dropped messages, refused peers, caught exceptions ------------------------

void Broker::OnCaught(const char* what, const char* error) {
  errors_caught_.fetch_add(1, std::memory_order_relaxed);
  noisy_.Log(spdlog::level::err, std::string("caught:") + what,
             "exception while handling {}: {}; it was dropped and the scheduler goes on", what,
             error);
}

void Broker::DropMessage(const std::string& identity, const std::string& why) {
  messages_dropped_.fetch_add(1, std::memory_order_relaxed);
  auto worker = workers_.find(identity);
  noisy_.Log(spdlog::level::warn, "dropped message", "dropped a message from {}: {}",
             worker != workers_.end() ? "worker " + worker->second.offer.name
                                      : std::string("an unregistered peer"),
             why);
}

bool Broker::PeerGone(const std::string& identity) {
  // ROUTER_MANDATORY: a message to a routing identity whose connection closed fails at once
  // with EHOSTUNREACH. A heartbeat acknowledgement is harmless to a worker that is still there.
  std::vector<zmq::message_t> probe =
      protocol::Encode(MessageType::kHeartbeatAck, nlohmann::json::object());
  probe.insert(probe.begin(), zmq::message_t(identity.data(), identity.size()));
  try {
    (void)zmq::send_multipart(*router_, probe, zmq::send_flags::dontwait);
  } catch (const zmq::error_t& e) {
    return e.num() == EHOSTUNREACH;
  }
  return false;
}

void Broker::RefuseName(const std::string& identity, const std::string& name, const char* event,
                        const std::string& reason, int retry_after_ms) {
  names_refused_.fetch_add(1, std::memory_order_relaxed);
  // Logged and recorded at most once per interval per name: a peer retrying in a loop (or an
  // attacker) writes a line, not the disk full.
  if (noisy_.Log(spdlog::level::warn, std::string(event) + ":" + name, "{}: {}", event, reason)) {
    RecordEvent(std::nullopt, std::nullopt, std::nullopt, event, reason);
    if (options_.events) {
      Publish("worker", {{"worker", name}, {"state", "refused"}, {"reason", reason}});
    }
  }
  Send(identity, protocol::Encode(MessageType::kReject, protocol::Reject{reason, retry_after_ms}));
}

void Broker::DrainMonitor() {
  for (int i = 0; i < 1000; ++i) {
    std::optional<zmq_monitor::Event> next = zmq_monitor::Next(*monitor_);
    if (!next) return;
    const auto& [event, value, endpoint] = *next;
    handshakes_refused_.fetch_add(1, std::memory_order_relaxed);
    // A refused key is logged by the ZAP handler, which knows the peer's address.
    if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) continue;
    const bool mismatch = event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL &&
                          value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH;
    const char* why = "the peer broke the ZeroMQ handshake (not a Tessera worker?)";
    const char* key = "protocol";
    if (options_.curve && (mismatch || event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL)) {
      // A plaintext peer is seen either way: as the mismatch, or hanging up first.
      key = "no curve";
      why =
          "the peer does not speak CURVE or hung up during the handshake (a plaintext "
          "client, a worker without scheduler.public_key, a port scan)";
    } else if (mismatch) {
      key = "curve";
      why =
          "the peer speaks CURVE, but this scheduler runs without it (broker.security: "
          "insecure)";
    } else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) {
      key = "hung up";
      why = "the peer hung up during the handshake";
    } else if (value == ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC) {
      key = "cryptographic";
      why =
          "its CURVE handshake does not decrypt: the peer has the wrong server key (check "
          "the worker's scheduler.public_key against tessera-scheduler --print-public-key)";
    }
    noisy_.Log(spdlog::level::warn, std::string("refused:") + key,
               "refused a connection on {}: {} (event 0x{:x}, code 0x{:x})", endpoint, why, event,
               value);
  }
}

}  // namespace tessera::broker
