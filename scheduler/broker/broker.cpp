// The broker's poll loop: the socket, the inbox of other threads' requests, one store write group
// per pass, worker messages handed to the parts, the timers, and the outbox released after the
// commit. The thread-safe entry points at the end post their work to the loop and wait.

#include "scheduler/broker/broker.h"

#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <variant>
#include <zmq_addon.hpp>

#include "scheduler/security/key_ring.h"
#include "shared/wire/curve_keys.h"

namespace tessera::broker {

using protocol::MessageType;

Broker::Broker(store::Store& store, BrokerOptions options, const Clock& clock)
    : store_(store), options_(std::move(options)), clock_(clock) {
  running_.shares.projects = options_.projects;
  pass_.later = [this](std::function<void(Pass&)> fn) {
    Post([this, fn = std::move(fn)] { fn(pass_); });
  };
}

Broker::~Broker() {
  Stop();
  // A ZAP handler left by a start that failed reads the fleet's key ring: it stops first.
  zap_.reset();
}

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

StatusOr<std::string> Broker::Bind() {
  if (options_.curve) {
    // The ZAP handler must be listening before the CURVE ROUTER binds.
    TSR_ASSIGN_OR_RETURN(zap_, security::ZapHandler::Start(context_, fleet_.keys()));
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
    outbox_.Attach(router_.get());
    return router_->get(zmq::sockopt::last_endpoint);
  } catch (const zmq::error_t& e) {
    if (monitor_) zmq_socket_monitor(router_->handle(), nullptr, 0);
    monitor_.reset();
    router_.reset();
    return Status::Unavailable("cannot bind broker at " + options_.bind_endpoint + ": " + e.what());
  }
}

void Broker::Run(std::promise<StatusOr<std::string>> started) {
  pass_.Begin(clock_);
  if (Status s = fleet_.Load(pass_); !s.ok()) return started.set_value(s);
  StatusOr<std::string> endpoint = Bind();
  if (!endpoint.ok()) return started.set_value(endpoint.status());
  {
    std::lock_guard<std::mutex> lock(assembler_mu_);
    // The assembler's answers come back to the loop as work for a later pass; it meters its
    // busy time on the broker's clock.
    assembler_ = std::make_unique<assembler::Assembler>(
        options_.assembler_threads,
        [this](assembler::Result result) {
          Post([this, result = std::move(result)] {
            std::visit(
                [this](const auto& written) {
                  if constexpr (std::is_same_v<std::decay_t<decltype(written)>,
                                               assembler::InputsGathered>) {
                    steps_.OnInputsGathered(pass_, written);
                  } else {
                    task_ends_.OnWritten(pass_, written);
                  }
                },
                result);
          });
        },
        clock_);
    pass_.assembler = assembler_.get();
  }
  Status recovered = store_.MarkAllWorkersOffline();
  if (recovered.ok()) recovered = jobs_.Load(pass_, std::nullopt, /*requeue_running=*/true);
  // A data folder already full at start-up: up, read-only, rather than a restart loop.
  if (!recovered.ok() && recovered.code() != StatusCode::kStorageFull) {
    return started.set_value(recovered);
  }
  if (recovered.ok()) {
    task_ends_.ResumeAssemblies(pass_);
    steps_.CancelStepsOfEndedSteps(pass_);
  }
  started.set_value(*endpoint);
  spdlog::info("broker listening on {} (heartbeat {} ms, liveness {}), {}", *endpoint,
               options_.heartbeat_ms, options_.liveness,
               options_.curve ? "CURVE encrypted, enrolled workers only"
                              : "INSECURE: unencrypted, any peer admitted");

  next_timer_ = pass_.now + std::chrono::milliseconds(options_.heartbeat_ms);
  if (!recovered.ok()) EnterReadOnly(recovered);
  for (;;) {
    zmq::pollitem_t items[] = {{router_->handle(), 0, ZMQ_POLLIN, 0},
                               {nullptr, wake_fd_, ZMQ_POLLIN, 0},
                               {monitor_->handle(), 0, ZMQ_POLLIN, 0}};
    // Until the next timer, as of the last pass's time (a pass is short next to the interval).
    auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next_timer_ - pass_.now);
    try {
      zmq::poll(items, 3, std::max<std::chrono::milliseconds>(wait, std::chrono::milliseconds(0)));
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) {
        boundary_.noisy().LogAt(pass_.now, spdlog::level::err, "poll", "poll: {}", e.what());
      }
    }
    const bool woken = items[1].revents & ZMQ_POLLIN;
    if (woken) {
      uint64_t n;
      (void)!::read(wake_fd_, &n, sizeof(n));
      std::lock_guard<std::mutex> lock(inbox_mu_);
      if (stop_) break;
    }
    if (items[2].revents & ZMQ_POLLIN) {
      Guarded("reading handshake events",
              [&] { boundary_.DrainHandshakeEvents(pass_, *monitor_); });
    }
    // Each step of a pass has its own guard (RunPass); this one is the last resort, so that no
    // exception ever leaves the thread.
    Guarded("a pass of the poll loop", [&] { RunPass(woken); });
  }
  std::unique_ptr<assembler::Assembler> assembler;
  {
    std::lock_guard<std::mutex> lock(assembler_mu_);
    assembler = std::move(assembler_);
    pass_.assembler = nullptr;
  }
  assembler.reset();  // finish pending writes; their completions are dropped with the inbox
  outbox_.Attach(nullptr);
  zmq_socket_monitor(router_->handle(), nullptr, 0);
  monitor_.reset();
  router_.reset();
  zap_.reset();
  spdlog::info("broker stopped");
}

void Broker::RunPass(bool woken) {
  if (read_only_.active()) return RunReadOnlyPass(woken);
  pass_.Begin(clock_);
  Status committed;
  {
    store::Store::WriteGroup group(store_);
    // Every step is guarded on its own (each inbox closure and each message too, inside), so an
    // exception drops one step and the pass still commits what the others did.
    if (woken) DrainInbox();
    ReceiveMessages();
    const bool timer = pass_.now >= next_timer_;
    if (timer) {
      Guarded("the timers", [&] { OnTimer(); });
      next_timer_ = pass_.now + std::chrono::milliseconds(options_.heartbeat_ms);
    }
    Guarded("full filesystems", [&] { full_outputs_.Check(pass_); });
    Guarded("dispatch", [&] { dispatch_.Run(pass_); });
    // After dispatch, so backups only use workers the queue has no work for.
    if (timer) Guarded("straggler backups", [&] { dispatch_.StartBackups(pass_); });
    // After the pass's last assignment, which carries what it can.
    Guarded("acknowledgements", [&] { acks_.SendWaiting(pass_); });
    Guarded("worker states", [&] { fleet_.StoreStates(pass_); });
    Guarded("events", [&] { events_.Flush(pass_.now, outbox_); });
    counters_.queue_depth.store(table_.queue().size(), std::memory_order_relaxed);
    committed = group.Commit();
  }  // (a failed commit is rolled back here)
  if (committed.code() == StatusCode::kStorageFull) {
    // The data folder is full: the pass is undone in memory too, and the broker waits for space
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
  Release();
}

void Broker::RunReadOnlyPass(bool woken) {
  // No write group: nothing here writes except the requests of other threads, which write to
  // the store first (each in a transaction of its own) and answer with what it said.
  pass_.Begin(clock_);
  if (woken) DrainInbox();
  ReceiveMessages();
  Guarded("the data folder's free space", [&] {
    if (read_only_.CheckDataFolder(pass_)) {
      next_timer_ = pass_.now + std::chrono::milliseconds(options_.heartbeat_ms);
    }
  });
  Guarded("events", [&] { events_.Flush(pass_.now, outbox_); });
  if (read_only_.active()) next_timer_ = read_only_.next_check();
  Release();
}

void Broker::EnterReadOnly(const Status& why) {
  // Nothing of the rolled-back pass leaves: no assignment, acknowledgement or event, and the
  // requests it served are answered with the failure.
  events_.Discard();
  for (auto& answer : outbox_.Discard()) Guarded("an answer", [&] { answer(why); });
  pass_.finished_jobs.clear();
  // Frames the pass handed to the assembler are finished before anyone can see the scheduler
  // read-only: a frame of the rolled-back pass is on disk by then (its worker sends it again
  // after space is back, and it is written once more then).
  if (assembler_) assembler_->WaitIdle();
  read_only_.Enter(pass_, why);
  next_timer_ = read_only_.next_check();
}

void Broker::Release() {
  Outbox::Committed committed = outbox_.Release();
  for (auto& fn : committed.after_commit) Guarded("an answer", [&] { fn(); });
  for (auto& answer : committed.answers) Guarded("an answer", [&] { answer(Status::Ok()); });
}

void Broker::DrainInbox() {
  std::deque<std::function<void()>> batch;
  {
    std::lock_guard<std::mutex> lock(inbox_mu_);
    batch.swap(inbox_);
  }
  // The jobs a request finished release (or cancel) the jobs after them before the next one.
  for (auto& fn : batch) {
    Guarded("a request from another thread", [&] {
      fn();
      steps_.OnJobsFinished(pass_);
    });
  }
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
      boundary_.noisy().LogAt(pass_.now, spdlog::level::warn, "receive", "receive: {}", e.what());
      return;
    }
    // The jobs a message finished release (or cancel) the jobs after them before the next one.
    Guarded("a worker message", [&] {
      HandleMessage(frames);
      steps_.OnJobsFinished(pass_);
    });
  }
}

void Broker::HandleMessage(std::vector<zmq::message_t>& frames) {
  if (frames.size() < 2) {
    if (!frames.empty()) boundary_.DropMessage(pass_, frames[0].to_string(), "an empty message");
    return;
  }
  std::string identity = frames[0].to_string();
  StatusOr<protocol::Envelope> decoded = protocol::Decode(frames, 1);
  if (!decoded.ok()) return boundary_.DropMessage(pass_, identity, decoded.status().message());
  protocol::Envelope& env = *decoded;
  if (read_only_.active()) return read_only_.OnMessage(pass_, identity, env);
  if (env.type == MessageType::kRegister || env.type == MessageType::kEnrol) {
    // On a CURVE farm the ZAP handler tagged the connection with who its key belongs to.
    std::string user_id;
    if (options_.curve) {
      try {
        user_id = frames[1].gets("User-Id");
      } catch (const zmq::error_t&) {
      }
    }
    if (env.type == MessageType::kRegister) return fleet_.OnRegister(pass_, identity, env, user_id);
    return fleet_.OnEnrol(pass_, identity, env, user_id);
  }
  WorkerConn* worker = fleet_.Sender(pass_, identity, env.type);
  if (worker == nullptr) return;
  switch (env.type) {
    case MessageType::kHeartbeat:
      return fleet_.OnHeartbeat(pass_, identity, *worker, env);
    case MessageType::kProgress:
      return task_ends_.OnProgress(pass_, identity, env);
    case MessageType::kFrameResult:
      return task_ends_.OnFrameResult(pass_, identity, *worker, env);
    case MessageType::kFileResult:
      return task_ends_.OnFileResult(pass_, identity, *worker, env);
    case MessageType::kTaskDone: {
      auto m = env.As<protocol::TaskDone>();
      if (!m.ok()) return boundary_.DropMessage(pass_, identity, m.status().message());
      return task_ends_.OnTaskDone(pass_, identity, *worker, *m);
    }
    case MessageType::kTaskFailed: {
      auto m = env.As<protocol::TaskFailed>();
      if (!m.ok()) return boundary_.DropMessage(pass_, identity, m.status().message());
      return task_ends_.OnTaskFailed(pass_, identity, *worker, *m);
    }
    case MessageType::kHandback:
      return task_ends_.OnHandback(pass_, identity, *worker, env);
    case MessageType::kCheckpoint:
      return checkpoints_.OnCheckpoint(pass_, identity, *worker, env);
    case MessageType::kPiece:
      return OnPiece(identity, env);
    case MessageType::kBlobRequest:
      return transfers_.OnBlobRequest(pass_, boundary_, identity, env);
    case MessageType::kGoodbye:
      return fleet_.Drop(pass_, identity, "worker shut down");
    default:
      boundary_.DropMessage(pass_, identity,
                            std::string("unexpected ") + protocol::MessageTypeName(env.type) +
                                " from worker " + worker->offer.name);
  }
}

void Broker::OnPiece(const std::string& identity, protocol::Envelope& env) {
  std::optional<protocol::PieceReceiver::Outcome> out =
      transfers_.OnPiece(pass_, boundary_, identity, env);
  if (!out) return;
  if (out->message) {
    // The whole message is here: handle it as if it had come in one piece.
    std::vector<zmq::message_t> frames;
    frames.reserve(4);
    frames.emplace_back(identity.data(), identity.size());
    for (zmq::message_t& f : *out->message) frames.push_back(std::move(f));
    HandleMessage(frames);
  }
  outbox_.Send(identity, protocol::Encode(MessageType::kPieceAck, out->ack));
}

void Broker::OnTimer() {
  fleet_.DropSilent(pass_);
  queue_.EnqueueDue(pass_);
  task_ends_.EndExpired(pass_);
  fleet_.MeterAndTouch(pass_);
  steps_.OnJobsFinished(pass_);
}

// ---- thread-safe entry points ---------------------------------------------------------------

void Broker::JobSubmitted(SubmittedJob submitted) {
  Post([this, submitted = std::move(submitted)] { jobs_.Submitted(pass_, submitted); });
}

void Broker::JobSubmitted(int64_t job_id) {
  Post([this, job_id] { jobs_.Submitted(pass_, job_id); });
}

Status Broker::CancelJob(int64_t job_id) {
  return OnBrokerThread<int>([this, job_id] { return steps_.Cancel(pass_, job_id, ""); }).status();
}

Status Broker::SetJobPriority(int64_t job_id, int priority) {
  return OnBrokerThread<bool>([this, job_id, priority]() -> StatusOr<bool> {
           TSR_RETURN_IF_ERROR(jobs_.SetPriority(pass_, job_id, priority));
           return true;
         })
      .status();
}

Status Broker::SetJobPaused(int64_t job_id, bool paused) {
  return OnBrokerThread<bool>([this, job_id, paused]() -> StatusOr<bool> {
           TSR_RETURN_IF_ERROR(jobs_.SetPaused(pass_, job_id, paused));
           return true;
         })
      .status();
}

StatusOr<int> Broker::RequeueFinished(int64_t job_id, std::optional<std::pair<int, int>> frames) {
  return OnBrokerThread<int>(
      [this, job_id, frames] { return jobs_.RequeueFinished(pass_, job_id, frames); });
}

StatusOr<nlohmann::json> Broker::WorkerPlugins() {
  return OnBrokerThread<nlohmann::json>(
      [this]() -> StatusOr<nlohmann::json> { return fleet_.Plugins(); });
}

StatusOr<nlohmann::json> Broker::WorkerGpuUse(bool history) {
  return OnBrokerThread<nlohmann::json>(
      [this, history]() -> StatusOr<nlohmann::json> { return fleet_.GpuUse(history); });
}

StatusOr<nlohmann::json> Broker::Why(int64_t task_id) {
  return OnBrokerThread<nlohmann::json>([this, task_id] { return dispatch_.Why(pass_, task_id); });
}

StatusOr<CapacityView> Broker::Capacity() {
  return OnBrokerThread<CapacityView>(
      [this]() -> StatusOr<CapacityView> { return dispatch_.Capacity(pass_); });
}

std::string Broker::public_key_hex() const {
  return options_.curve ? curve::ToHex(options_.curve->public_key) : "";
}

StatusOr<NewJoinToken> Broker::CreateJoinToken(const std::string& note, int64_t ttl_s, int max_uses,
                                               const std::string& worker_name) {
  // On the broker thread: its expiry counts from the pass's wall time.
  return OnBrokerThread<NewJoinToken>([this, note, ttl_s, max_uses, worker_name] {
    return fleet_.CreateJoinToken(pass_, note, ttl_s, max_uses, worker_name);
  });
}

StatusOr<store::JoinTokenRecord> Broker::RevokeJoinToken(int64_t token_id) {
  return fleet_.RevokeJoinToken(store_, token_id);
}

Status Broker::RevokeWorker(const std::string& name) {
  TSR_RETURN_IF_ERROR(fleet_.RevokeKey(store_, name));
  // Events are recorded on the broker thread, like everything it publishes.
  (void)OnBrokerThread<bool>([this, name]() -> StatusOr<bool> {
    fleet_.Revoked(pass_, name);
    return true;
  });
  return Status::Ok();
}

Status Broker::ReadmitWorker(const std::string& name) {
  TSR_ASSIGN_OR_RETURN(store::WorkerKeyRecord record, store_.SetWorkerRevoked(name, false));
  // Its old key stays out: the worker enrols again with a join token.
  (void)OnBrokerThread<bool>([this, name]() -> StatusOr<bool> {
    events_.Record(std::nullopt, std::nullopt, std::nullopt, "worker_readmitted", name);
    return true;
  });
  spdlog::info("worker {} readmitted: it may enrol again with a join token", name);
  return Status::Ok();
}

Status Broker::SetWorkerDisabled(const std::string& name, bool disabled) {
  return OnBrokerThread<bool>([this, name, disabled]() -> StatusOr<bool> {
           TSR_RETURN_IF_ERROR(fleet_.SetDisabled(pass_, name, disabled));
           return true;
         })
      .status();
}

Status Broker::DrainWorker(const std::string& name, const std::string& why) {
  StatusOr<bool> found = OnBrokerThread<bool>(
      [this, name, why]() -> StatusOr<bool> { return fleet_.Drain(pass_, name, why); });
  if (!found.ok()) return found.status();
  if (!*found) return Status::NotFound("no worker named " + name + " is connected");
  return Status::Ok();
}

Broker::Counters Broker::counters() const {
  Counters c = counters_.Read();
  std::lock_guard<std::mutex> lock(assembler_mu_);
  if (assembler_) c.assembler = assembler_->counters();
  c.errors_caught += c.assembler.errors_caught;
  return c;
}

}  // namespace tessera::broker
