#include "scheduler/broker/broker.h"

#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <zmq_addon.hpp>

namespace tessera::broker {

using protocol::MessageType;
using Clock = std::chrono::steady_clock;

Broker::Broker(store::Store& store, BrokerOptions options)
    : store_(store), options_(std::move(options)) {}

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

void Broker::JobSubmitted(int64_t job_id) {
  Post([this, job_id] { LoadTasks(job_id); });
}

Status Broker::CancelJob(int64_t job_id) {
  return OnBrokerThread<int>([this, job_id]() -> StatusOr<int> {
           TSR_ASSIGN_OR_RETURN(std::vector<store::Lease> leases, store_.CancelJob(job_id));
           for (const store::Lease& lease : leases) {
             auto it = tasks_.find(lease.task_id);
             if (it != tasks_.end() && it->second.running && it->second.attempt == lease.attempt) {
               CancelLease(it->second);
             }
           }
           DropQueued(job_id);
           for (auto it = tasks_.begin(); it != tasks_.end();) {
             it = it->second.job_id == job_id ? tasks_.erase(it) : std::next(it);
           }
           jobs_.erase(job_id);
           spdlog::info("job {} canceled ({} running tasks told to stop)", job_id, leases.size());
           return static_cast<int>(leases.size());
         })
      .status();
}

Status Broker::SetJobPriority(int64_t job_id, int priority) {
  return OnBrokerThread<int>([this, job_id, priority]() -> StatusOr<int> {
           TSR_RETURN_IF_ERROR(store_.SetJobPriority(job_id, priority));
           auto it = jobs_.find(job_id);
           if (it != jobs_.end()) {
             DropQueued(job_id);
             it->second.priority = priority;
             EnqueueJob(job_id);
           }
           spdlog::info("job {} priority set to {}", job_id, priority);
           return 0;
         })
      .status();
}

Status Broker::SetJobPaused(int64_t job_id, bool paused) {
  return OnBrokerThread<int>([this, job_id, paused]() -> StatusOr<int> {
           TSR_RETURN_IF_ERROR(store_.SetJobPaused(job_id, paused));
           auto it = jobs_.find(job_id);
           if (it != jobs_.end()) {
             it->second.paused = paused;
             if (paused) {
               DropQueued(job_id);
             } else {
               EnqueueJob(job_id);
             }
           }
           spdlog::info("job {} {}", job_id, paused ? "paused" : "resumed");
           return 0;
         })
      .status();
}

StatusOr<int> Broker::RequeueFinished(int64_t job_id, std::optional<std::pair<int, int>> frames) {
  return OnBrokerThread<int>([this, job_id, frames]() -> StatusOr<int> {
    TSR_ASSIGN_OR_RETURN(int moved,
                         frames ? store_.RerenderFrames(job_id, frames->first, frames->second)
                                : store_.RetryFailedTasks(job_id));
    if (moved > 0) LoadTasks(job_id);
    spdlog::info("job {}: {} task(s) requeued by request", job_id, moved);
    return moved;
  });
}

StatusOr<nlohmann::json> Broker::Why(int64_t task_id) {
  return OnBrokerThread<nlohmann::json>([this, task_id]() -> StatusOr<nlohmann::json> {
    auto it = tasks_.find(task_id);
    if (it == tasks_.end()) {
      StatusOr<store::TaskRecord> rec = store_.GetTask(task_id);
      if (!rec.ok()) return rec.status();
      std::string state = store::TaskStateName(rec->state);
      return nlohmann::json{
          {"task_id", task_id},
          {"state", state},
          {"reason", "the task is " + state + (rec->message.empty() ? "" : ": " + rec->message)},
          {"details", nlohmann::json::array()}};
    }
    const LiveTask& task = it->second;
    const JobInfo& job = jobs_[task.job_id];
    nlohmann::json details = nlohmann::json::array();
    std::string reason;
    if (task.running) {
      auto wit = workers_.find(task.worker);
      reason = "running on worker " + (wit != workers_.end() ? wit->second.name : "?") +
               ", attempt " + std::to_string(task.attempt);
    } else if (!job.waiting_on.empty()) {
      reason = "waiting for job(s) it depends on:";
      for (int64_t dep : job.waiting_on) {
        StatusOr<store::JobRecord> other = store_.GetJob(dep);
        reason += " " + std::to_string(dep) + " (" +
                  (other.ok() ? store::JobStateName(other->state) : "unknown") + ")";
      }
    } else if (!LimitsAllow(job)) {
      reason = "a limit is at its maximum:";
      for (const std::string& name : job.limits) {
        auto max = options_.limits.find(name);
        reason += " " + name + " (" + std::to_string(limits_in_use_[name]) + " of " +
                  (max == options_.limits.end() ? std::string("0, not configured")
                                                : std::to_string(max->second)) +
                  " in use)";
      }
    } else if (job.paused) {
      reason = "job " + std::to_string(task.job_id) + " is paused (tessera resume " +
               std::to_string(task.job_id) + ")";
    } else if (workers_.empty()) {
      reason = "no workers are connected";
    } else {
      int eligible = 0, free = 0;
      for (const auto& [identity, worker] : workers_) {
        const bool fits = WorkerFits(job, worker);
        eligible += fits;
        free += fits && worker.free_slots() > 0;
        std::string why_not = job.blocklist.count(worker.id) ? "blocklisted for this job"
                              : !FitsResources(job.resources, worker)
                                  ? "lacks the resources one task needs (" +
                                        nlohmann::json(job.resources).dump() + ")"
                                  : "not in its pools or lacks its tags";
        details.push_back(worker.name + ": " +
                          (fits ? std::to_string(worker.free_slots()) + " free slot(s)" : why_not));
      }
      const QueueKey key{-job.priority, task.job_id, task.index, task.task_id};
      const auto ahead = std::distance(queue_.begin(), queue_.lower_bound(key));
      if (eligible == 0) {
        reason = "no connected worker can run job " + std::to_string(task.job_id) + " (pools " +
                 nlohmann::json(job.pools).dump() + ", tags " + nlohmann::json(job.tags).dump() +
                 ", resources " + nlohmann::json(job.resources).dump() + ", or blocklisted)";
      } else if (free == 0) {
        reason = "waiting for a free slot on " + std::to_string(eligible) + " worker(s); " +
                 std::to_string(ahead) + " queued task(s) are ahead of it";
      } else {
        reason = "about to be dispatched (" + std::to_string(ahead) + " task(s) ahead)";
      }
      details.push_back("failures so far: " + std::to_string(task.failures) + " of " +
                        std::to_string(job.max_retries) + " allowed retries");
    }
    return nlohmann::json{{"task_id", task_id},
                          {"state", task.running ? "running" : "queued"},
                          {"reason", reason},
                          {"details", details}};
  });
}

bool Broker::WorkerFits(const JobInfo& job, const WorkerConn& worker) {
  if (job.blocklist.count(worker.id)) return false;
  if (!job.pools.empty() && std::none_of(job.pools.begin(), job.pools.end(), [&](const auto& p) {
        return worker.pools.count(p) > 0;
      })) {
    return false;
  }
  if (!std::all_of(job.tags.begin(), job.tags.end(),
                   [&](const auto& t) { return worker.tags.count(t) > 0; })) {
    return false;
  }
  return FitsResources(job.resources, worker);
}

bool Broker::FitsResources(const spec::ResourceSpec& need, const WorkerConn& worker) {
  if (worker.cpu_cores < need.cpu_cores || worker.ram_mb < need.ram_mb) return false;
  int usable = 0;
  for (const protocol::GpuInfo& g : worker.gpus) {
    const double compute = g.compute_major + g.compute_minor / 10.0;
    usable += g.memory_mb >= need.gpu_memory_mb && compute + 1e-9 >= need.compute_capability;
  }
  return usable >= need.gpus;
}

bool Broker::LimitsAllow(const JobInfo& job) {
  for (const std::string& name : job.limits) {
    auto max = options_.limits.find(name);
    if (max == options_.limits.end() || limits_in_use_[name] >= max->second) return false;
  }
  return true;
}

void Broker::HoldLimits(const JobInfo& job, int delta) {
  for (const std::string& name : job.limits) limits_in_use_[name] += delta;
}

void Broker::DropQueued(int64_t job_id) {
  auto first = queue_.lower_bound({-jobs_[job_id].priority, job_id, INT_MIN, INT64_MIN});
  auto last = queue_.upper_bound({-jobs_[job_id].priority, job_id, INT_MAX, INT64_MAX});
  queue_.erase(first, last);
}

void Broker::EnqueueJob(int64_t job_id) {
  for (const auto& [id, task] : tasks_) {
    if (task.job_id == job_id && !task.running) Enqueue(task);
  }
}

// ---- loading from the store -----------------------------------------------------------------

Status Broker::LoadJob(int64_t job_id) {
  if (jobs_.count(job_id)) return Status::Ok();
  TSR_ASSIGN_OR_RETURN(store::JobRecord job, store_.GetJob(job_id));
  TSR_ASSIGN_OR_RETURN(std::string scene, store_.JobScene(job_id));
  JobInfo info;
  info.priority = job.priority;
  info.max_retries = job.max_retries;
  info.output_dir = job.output_dir;
  info.pattern = job.output_pattern;
  info.formats = job.output_formats;
  info.scene_yaml = std::make_shared<const std::string>(scene);
  info.paused = job.paused;
  info.task_timeout_s = job.task_timeout_s;
  info.progress_timeout_s = job.progress_timeout_s;
  info.blocklist_after = job.blocklist_after;
  info.limits = job.limits;
  info.pools = job.pools;
  info.tags = job.tags;
  info.resources = job.resources;
  for (int64_t dep : job.depends_on) {
    StatusOr<store::JobRecord> other = store_.GetJob(dep);
    // A dependency deleted from the farm was finished; only a live, unfinished one holds.
    if (other.ok() && other->state != store::JobState::kDone) info.waiting_on.insert(dep);
  }
  jobs_[job_id] = std::move(info);
  return Status::Ok();
}

void Broker::LoadTasks(std::optional<int64_t> job_id) {
  StatusOr<std::vector<store::TaskRecord>> tasks = store_.LoadUnfinishedTasks(job_id);
  if (!tasks.ok()) {
    spdlog::error("cannot load tasks: {}", tasks.status().ToString());
    return;
  }
  size_t added = 0;
  for (const store::TaskRecord& t : *tasks) {
    if (tasks_.count(t.id)) continue;
    if (Status s = LoadJob(t.job_id); !s.ok()) {
      spdlog::error("cannot load job {}: {}", t.job_id, s.ToString());
      continue;
    }
    LiveTask live;
    live.task_id = t.id;
    live.job_id = t.job_id;
    live.index = t.index;
    live.frame_start = t.frame_start;
    live.frame_end = t.frame_end;
    live.attempt = t.attempt;
    live.failures = t.failures;
    ++jobs_[t.job_id].unfinished;
    Enqueue(tasks_.emplace(t.id, std::move(live)).first->second);
    ++added;
  }
  if (job_id) {
    spdlog::info("job {} queued: {} tasks", *job_id, added);
  } else if (added) {
    spdlog::info("restored {} unfinished tasks from the store", added);
  }
  Dispatch();
}

void Broker::Enqueue(const LiveTask& task) {
  const JobInfo& job = jobs_[task.job_id];
  if (!job.paused && job.waiting_on.empty()) {
    queue_.insert({-job.priority, task.job_id, task.index, task.task_id});
  }
}

// ---- the poll loop --------------------------------------------------------------------------

void Broker::Run(std::promise<StatusOr<std::string>> started) {
  std::string endpoint;
  try {
    router_ = std::make_unique<zmq::socket_t>(context_, zmq::socket_type::router);
    router_->set(zmq::sockopt::linger, 0);
    router_->set(zmq::sockopt::router_mandatory, 1);
    router_->set(zmq::sockopt::maxmsgsize, protocol::kMaxMessageBytes);
    router_->bind(options_.bind_endpoint);
    endpoint = router_->get(zmq::sockopt::last_endpoint);
  } catch (const zmq::error_t& e) {
    router_.reset();
    started.set_value(
        Status::Unavailable("cannot bind broker at " + options_.bind_endpoint + ": " + e.what()));
    return;
  }
  if (Status s = store_.MarkAllWorkersOffline(); !s.ok()) {
    started.set_value(s);
    return;
  }
  assembler_ = std::make_unique<assembler::Assembler>(
      options_.assembler_threads,
      [this](assembler::FrameWritten w) { Post([this, w = std::move(w)] { OnFrameWritten(w); }); });
  LoadTasks(std::nullopt);
  started.set_value(endpoint);
  spdlog::info("broker listening on {} (heartbeat {} ms, liveness {})", endpoint,
               options_.heartbeat_ms, options_.liveness);

  next_timer_ = Clock::now() + std::chrono::milliseconds(options_.heartbeat_ms);
  next_touch_ = Clock::now() + std::chrono::seconds(5);
  std::vector<zmq::message_t> frames;
  for (;;) {
    zmq::pollitem_t items[] = {{router_->handle(), 0, ZMQ_POLLIN, 0},
                               {nullptr, wake_fd_, ZMQ_POLLIN, 0}};
    auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next_timer_ - Clock::now());
    try {
      zmq::poll(items, 2, std::max<std::chrono::milliseconds>(wait, std::chrono::milliseconds(0)));
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) spdlog::error("poll: {}", e.what());
    }
    if (items[1].revents & ZMQ_POLLIN) {
      uint64_t n;
      (void)!::read(wake_fd_, &n, sizeof(n));
      {
        std::lock_guard<std::mutex> lock(inbox_mu_);
        if (stop_) break;
      }
      DrainInbox();
    }
    // Bounded batch so timers and the inbox are never starved by a busy socket.
    for (int i = 0; i < 1000; ++i) {
      frames.clear();
      try {
        if (!zmq::recv_multipart(*router_, std::back_inserter(frames), zmq::recv_flags::dontwait)) {
          break;
        }
      } catch (const zmq::error_t& e) {
        spdlog::warn("receive: {}", e.what());
        break;
      }
      HandleMessage(frames);
    }
    if (Clock::now() >= next_timer_) {
      OnTimer();
      next_timer_ = Clock::now() + std::chrono::milliseconds(options_.heartbeat_ms);
    }
  }
  assembler_.reset();  // finish pending writes; their completions are dropped with the inbox
  router_.reset();
  spdlog::info("broker stopped");
}

void Broker::DrainInbox() {
  std::deque<std::function<void()>> batch;
  {
    std::lock_guard<std::mutex> lock(inbox_mu_);
    batch.swap(inbox_);
  }
  for (auto& fn : batch) fn();
}

void Broker::Send(const std::string& identity, std::vector<zmq::message_t> frames) {
  frames.insert(frames.begin(), zmq::message_t(identity.data(), identity.size()));
  try {
    zmq::send_multipart(*router_, frames, zmq::send_flags::dontwait);
  } catch (const zmq::error_t& e) {
    // EHOSTUNREACH: the peer is gone; liveness will clean it up.
    spdlog::debug("send to worker failed: {}", e.what());
  }
}

void Broker::HandleMessage(std::vector<zmq::message_t>& frames) {
  if (frames.size() < 2) return;
  std::string identity = frames[0].to_string();
  StatusOr<protocol::Envelope> decoded = protocol::Decode(frames, 1);
  if (!decoded.ok()) {
    spdlog::warn("dropping malformed message: {}", decoded.status().message());
    return;
  }
  protocol::Envelope& env = *decoded;
  if (env.type == MessageType::kRegister) {
    OnRegister(identity, env);
    return;
  }
  auto wit = workers_.find(identity);
  if (wit == workers_.end()) {
    // Not welcomed (or declared dead): ask it to register again.
    if (env.type != MessageType::kGoodbye) {
      Send(identity, protocol::Encode(MessageType::kUnknownWorker, nlohmann::json::object()));
    }
    return;
  }
  WorkerConn& worker = wit->second;
  worker.last_heard = Clock::now();
  switch (env.type) {
    case MessageType::kHeartbeat: {
      Send(identity, protocol::Encode(MessageType::kHeartbeatAck, nlohmann::json::object()));
      auto beat = env.As<protocol::Heartbeat>();
      if (beat.ok()) OnHeartbeat(worker, *beat);
      break;
    }
    case MessageType::kProgress: {
      auto m = env.As<protocol::Progress>();
      if (!m.ok()) break;
      if (LiveTask* task = FindLease(identity, m->task_id, m->attempt, "progress")) {
        task->last_progress = Clock::now();
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
      break;
    }
    case MessageType::kTaskFailed: {
      auto m = env.As<protocol::TaskFailed>();
      if (m.ok()) OnTaskFailed(identity, worker, *m);
      break;
    }
    case MessageType::kGoodbye:
      DropWorker(identity, "worker shut down");
      break;
    default:
      spdlog::warn("worker {} sent unexpected {}", worker.name,
                   protocol::MessageTypeName(env.type));
  }
  Dispatch();
}

void Broker::OnRegister(const std::string& identity, const protocol::Envelope& env) {
  auto reg = env.As<protocol::Register>();
  if (reg.ok() && (reg->name.empty() || reg->name.size() > 128)) {
    reg = Status::InvalidArgument("name: must be 1..128 characters");
  }
  if (!reg.ok()) {
    Send(identity,
         protocol::Encode(MessageType::kReject, protocol::Reject{reg.status().message()}));
    return;
  }
  // The same worker coming back (new connection or restart): its old leases are void.
  for (auto it = workers_.begin(); it != workers_.end(); ++it) {
    if (it->second.name == reg->name) {
      DropWorker(it->first, "worker re-registered");
      break;
    }
  }
  StatusOr<int64_t> id = store_.UpsertWorker(*reg);
  if (!id.ok()) {
    spdlog::error("cannot record worker {}: {}", reg->name, id.status().ToString());
    Send(identity,
         protocol::Encode(MessageType::kReject, protocol::Reject{"scheduler storage error"}));
    return;
  }
  WorkerConn conn;
  conn.id = *id;
  conn.name = reg->name;
  conn.slots = std::clamp(reg->slots, 1, 64);
  conn.pools = {reg->pools.begin(), reg->pools.end()};
  conn.tags = {reg->tags.begin(), reg->tags.end()};
  conn.cpu_cores = reg->cpu_cores;
  conn.ram_mb = reg->ram_mb;
  conn.gpus = reg->gpus;
  conn.last_heard = Clock::now();
  workers_[identity] = std::move(conn);
  (void)store_.AddEvent(std::nullopt, std::nullopt, *id, "worker_registered", reg->hostname);
  spdlog::info("worker {} (id {}, {} cores, {} GPUs, backends {}) registered", reg->name, *id,
               reg->cpu_cores, reg->gpus.size(), nlohmann::json(reg->backends).dump());
  Send(identity,
       protocol::Encode(MessageType::kWelcome,
                        protocol::Welcome{*id, options_.heartbeat_ms, options_.liveness}));
  Dispatch();
}

Broker::LiveTask* Broker::FindLease(const std::string& identity, int64_t task_id, int attempt,
                                    const char* what) {
  auto it = tasks_.find(task_id);
  if (it == tasks_.end() || !it->second.running || it->second.attempt != attempt ||
      it->second.worker != identity) {
    spdlog::info("ignoring {} for task {} attempt {}: not the current lease", what, task_id,
                 attempt);
    return nullptr;
  }
  return &it->second;
}

void Broker::OnFrameResult(const std::string& identity, WorkerConn& worker,
                           protocol::Envelope& env) {
  auto m = env.As<protocol::FrameResult>();
  if (!m.ok()) {
    spdlog::warn("worker {}: {}", worker.name, m.status().message());
    return;
  }
  LiveTask* task = FindLease(identity, m->task_id, m->attempt, "frame result");
  if (!task) return;
  const size_t expected = static_cast<size_t>(std::max(0, m->width)) *
                          static_cast<size_t>(std::max(0, m->height)) *
                          static_cast<size_t>(std::max(0, m->channels)) * sizeof(float);
  std::string problem;
  if (m->frame < task->frame_start || m->frame > task->frame_end) {
    problem = "frame " + std::to_string(m->frame) + " is not part of the task";
  } else if (m->width <= 0 || m->height <= 0 || m->width > options_.max_image_side ||
             m->height > options_.max_image_side || m->channels < 1 ||
             m->channels > protocol::kMaxChannels ||
             (!m->channel_names.empty() &&
              m->channel_names.size() != static_cast<size_t>(m->channels))) {
    problem = "image size " + std::to_string(m->width) + "x" + std::to_string(m->height) + "x" +
              std::to_string(m->channels) + " is out of range";
  } else if (env.payload.size() != expected) {
    problem = "payload is " + std::to_string(env.payload.size()) + " bytes, expected " +
              std::to_string(expected);
  } else if (task->frames_written.count(m->frame)) {
    return;  // duplicate delivery
  }
  if (!problem.empty()) {
    spdlog::warn("task {} attempt {}: bad frame result from {}: {}", task->task_id, task->attempt,
                 worker.name, problem);
    CancelLease(*task);
    Requeue(*task, "bad frame result: " + problem, /*count_failure=*/true);
    return;
  }
  const JobInfo& job = jobs_[task->job_id];
  assembler::FrameJob out;
  out.job_id = task->job_id;
  out.task_id = task->task_id;
  out.attempt = task->attempt;
  out.frame = m->frame;
  out.output_dir = job.output_dir;
  out.pattern = job.pattern;
  out.formats = job.formats;
  out.image.width = m->width;
  out.image.height = m->height;
  out.image.channels = m->channels;
  out.image.channel_names = m->channel_names;
  out.image.pixels.resize(expected / sizeof(float));
  std::memcpy(out.image.pixels.data(), env.payload.data(), expected);
  ++task->frames_in_flight;
  task->last_progress = Clock::now();
  assembler_->Submit(std::move(out));
  spdlog::debug("task {} attempt {}: frame {} received from {} ({:.2f} s on {})", task->task_id,
                task->attempt, m->frame, worker.name, m->render_seconds, m->backend);
}

void Broker::OnFrameWritten(const assembler::FrameWritten& written) {
  auto it = tasks_.find(written.task_id);
  if (it == tasks_.end() || it->second.attempt != written.attempt) return;
  LiveTask& task = it->second;
  --task.frames_in_flight;
  if (!written.status.ok()) {
    spdlog::error("job {} task {}: cannot write frame {}: {}", task.job_id, task.task_id,
                  written.frame, written.status.ToString());
    if (task.running) {
      CancelLease(task);
    }
    Requeue(task, "output write failed: " + written.status.message(), /*count_failure=*/true);
    Dispatch();
    return;
  }
  task.frames_written.insert(written.frame);
  MaybeComplete(task);
}

void Broker::OnTaskDone(const std::string& identity, WorkerConn& worker,
                        const protocol::TaskDone& m) {
  LiveTask* task = FindLease(identity, m.task_id, m.attempt, "task done");
  if (!task) return;
  task->worker_done = true;
  ReleaseFromWorker(*task);
  MaybeComplete(*task);
}

void Broker::MaybeComplete(LiveTask& task) {
  if (!task.worker_done || task.frames_in_flight > 0) return;
  const size_t frames = static_cast<size_t>(task.frame_end - task.frame_start + 1);
  if (task.frames_written.size() != frames) {
    Requeue(task,
            "worker reported done but delivered " + std::to_string(task.frames_written.size()) +
                " of " + std::to_string(frames) + " frames",
            /*count_failure=*/true);
    return;
  }
  if (Status s = store_.FinishTask(task.task_id, task.attempt); !s.ok()) {
    spdlog::error("task {}: cannot record completion: {}", task.task_id, s.ToString());
    return;
  }
  spdlog::info("job {} task {} (frames {}-{}) done, attempt {}", task.job_id, task.task_id,
               task.frame_start, task.frame_end, task.attempt);
  Forget(task.task_id);
}

void Broker::Forget(int64_t task_id) {
  auto it = tasks_.find(task_id);
  if (it == tasks_.end()) return;
  int64_t job_id = it->second.job_id;
  tasks_.erase(it);
  if (--jobs_[job_id].unfinished <= 0) {
    jobs_.erase(job_id);
    spdlog::info("job {} has no unfinished tasks left", job_id);
    OnJobFinished(job_id);
  }
}

void Broker::OnJobFinished(int64_t job_id) {
  StatusOr<store::JobRecord> job = store_.GetJob(job_id);
  if (!job.ok() || job->state != store::JobState::kDone) return;  // dependents keep waiting
  for (auto& [id, info] : jobs_) {
    if (info.waiting_on.erase(job_id) && info.waiting_on.empty()) {
      spdlog::info("job {}: dependency job {} is done; its tasks are queued", id, job_id);
      EnqueueJob(id);
    }
  }
}

void Broker::OnTaskFailed(const std::string& identity, WorkerConn& worker,
                          const protocol::TaskFailed& m) {
  LiveTask* task = FindLease(identity, m.task_id, m.attempt, "task failure");
  if (!task) return;
  spdlog::warn("job {} task {} attempt {} failed on {}: {}", task->job_id, task->task_id,
               task->attempt, worker.name, m.message);
  if (m.charge) ChargeWorker(*task, worker);
  ReleaseFromWorker(*task);
  Requeue(*task, m.message, /*count_failure=*/m.charge);
}

void Broker::ReleaseFromWorker(LiveTask& task) {
  if (task.running) {
    --jobs_[task.job_id].running;
    HoldLimits(jobs_[task.job_id], -1);
  }
  auto wit = workers_.find(task.worker);
  if (wit != workers_.end()) {
    WorkerConn& worker = wit->second;
    worker.tasks.erase(task.task_id);
    if (worker.tasks.empty() && worker.stopping.empty()) {
      (void)store_.SetWorkerState(worker.id, store::WorkerState::kIdle);
    }
  }
  task.running = false;
  task.worker.clear();
}

void Broker::CancelLease(LiveTask& task) {
  Send(task.worker,
       protocol::Encode(MessageType::kCancel, protocol::Cancel{task.task_id, task.attempt}));
  auto wit = workers_.find(task.worker);
  if (wit != workers_.end()) wit->second.stopping.insert(task.task_id);
  ReleaseFromWorker(task);
}

void Broker::OnHeartbeat(WorkerConn& worker, const protocol::Heartbeat& beat) {
  auto listed = [&](int64_t task_id, int attempt) {
    return std::any_of(beat.running.begin(), beat.running.end(), [&](const protocol::TaskRef& r) {
      return r.task_id == task_id && (attempt == 0 || r.attempt == attempt);
    });
  };
  for (auto it = worker.stopping.begin(); it != worker.stopping.end();) {
    it = listed(*it, 0) ? std::next(it) : worker.stopping.erase(it);
  }
  // An assignment may cross a heartbeat already on its way, hence the grace period.
  const auto grace = std::chrono::milliseconds(2 * options_.heartbeat_ms);
  std::vector<int64_t> lost;
  for (int64_t task_id : worker.tasks) {
    const LiveTask& task = tasks_.at(task_id);
    if (!listed(task_id, task.attempt) && Clock::now() - task.leased_at > grace) {
      lost.push_back(task_id);
    }
  }
  for (int64_t task_id : lost) {
    LiveTask& task = tasks_.at(task_id);
    ReleaseFromWorker(task);
    Requeue(task, "worker " + worker.name + " does not hold the lease (assignment lost)",
            /*count_failure=*/false);
  }
  if (worker.tasks.empty() && worker.stopping.empty()) {
    (void)store_.SetWorkerState(worker.id, store::WorkerState::kIdle);
  }
}

void Broker::ChargeWorker(const LiveTask& task, const WorkerConn& worker) {
  JobInfo& job = jobs_[task.job_id];
  int failures = ++job.failures_by_worker[worker.id];
  if (job.blocklist_after > 0 && failures >= job.blocklist_after &&
      job.blocklist.insert(worker.id).second) {
    spdlog::warn("job {}: worker {} blocklisted after {} failures", task.job_id, worker.name,
                 failures);
    (void)store_.AddEvent(task.job_id, task.task_id, worker.id, "worker_blocklisted",
                          worker.name + " failed " + std::to_string(failures) + " tasks");
  }
}

std::set<Broker::QueueKey>::iterator Broker::NextTaskFor(const WorkerConn& worker) {
  // Walk the queue one job at a time (it is ordered by priority, then job). Within the highest
  // priority that has a job this worker may run, the job with the fewest running tasks wins,
  // then the one served least so far, then the oldest: fair share, so no job starves because
  // another of equal priority was submitted first.
  auto best = queue_.end();
  std::pair<int, int64_t> best_load;
  for (auto it = queue_.begin(); it != queue_.end();) {
    const int neg_priority = std::get<0>(*it);
    if (best != queue_.end() && neg_priority != std::get<0>(*best)) break;
    const int64_t job_id = std::get<1>(*it);
    const JobInfo& job = jobs_[job_id];
    if (WorkerFits(job, worker) && LimitsAllow(job)) {
      std::pair<int, int64_t> load{job.running, job.dispatched};
      if (best == queue_.end() || load < best_load) {
        best = it;
        best_load = load;
      }
    }
    it = queue_.lower_bound({neg_priority, job_id + 1, INT_MIN, INT64_MIN});
  }
  return best;
}

void Broker::Requeue(LiveTask& task, const std::string& reason, bool count_failure) {
  const JobInfo& job = jobs_[task.job_id];
  if (count_failure) ++task.failures;
  if (count_failure && task.failures > job.max_retries) {
    Status s = store_.FailTask(task.task_id, task.attempt, reason);
    if (!s.ok()) spdlog::error("task {}: cannot record failure: {}", task.task_id, s.ToString());
    spdlog::error("job {} task {} failed permanently after {} failures: {}", task.job_id,
                  task.task_id, task.failures, reason);
    Forget(task.task_id);
    return;
  }
  Status s = store_.RequeueTask(task.task_id, task.attempt, reason, count_failure);
  if (!s.ok()) spdlog::error("task {}: cannot requeue: {}", task.task_id, s.ToString());
  spdlog::info("job {} task {} requeued ({}): {}", task.job_id, task.task_id,
               count_failure ? "failure " + std::to_string(task.failures) : "not charged", reason);
  task.running = false;
  task.worker_done = false;
  task.frames_written.clear();
  Enqueue(task);
}

void Broker::DropWorker(const std::string& identity, const std::string& reason) {
  auto wit = workers_.find(identity);
  if (wit == workers_.end()) return;
  WorkerConn worker = std::move(wit->second);
  workers_.erase(wit);
  for (int64_t task_id : worker.tasks) {
    auto it = tasks_.find(task_id);
    if (it == tasks_.end()) continue;
    if (it->second.running) {
      --jobs_[it->second.job_id].running;
      HoldLimits(jobs_[it->second.job_id], -1);
    }
    it->second.running = false;
    it->second.worker.clear();
    Requeue(it->second, "worker " + worker.name + " lost: " + reason, /*count_failure=*/false);
  }
  (void)store_.SetWorkerState(worker.id, store::WorkerState::kOffline);
  (void)store_.AddEvent(std::nullopt, std::nullopt, worker.id, "worker_lost", reason);
  spdlog::warn("worker {} (id {}) removed: {}; {} task(s) requeued", worker.name, worker.id, reason,
               worker.tasks.size());
}

void Broker::OnTimer() {
  const auto now = Clock::now();
  const auto deadline = std::chrono::milliseconds(options_.heartbeat_ms * options_.liveness);
  std::vector<std::string> dead;
  for (const auto& [identity, worker] : workers_) {
    if (now - worker.last_heard > deadline) dead.push_back(identity);
  }
  for (const std::string& identity : dead) DropWorker(identity, "missed heartbeats");
  // Timeouts: a lease older than its job's task_timeout, or silent for longer than its
  // progress_timeout, is a (charged) failure.
  std::vector<std::pair<int64_t, std::string>> expired;
  for (const auto& [identity, worker] : workers_) {
    for (int64_t task_id : worker.tasks) {
      const LiveTask& task = tasks_.at(task_id);
      const JobInfo& job = jobs_[task.job_id];
      if (job.task_timeout_s > 0 &&
          now - task.leased_at > std::chrono::seconds(job.task_timeout_s)) {
        expired.emplace_back(task_id,
                             "timed out after " + std::to_string(job.task_timeout_s) + " s");
      } else if (job.progress_timeout_s > 0 &&
                 now - task.last_progress > std::chrono::seconds(job.progress_timeout_s)) {
        expired.emplace_back(task_id,
                             "no progress for " + std::to_string(job.progress_timeout_s) + " s");
      }
    }
  }
  for (const auto& [task_id, why] : expired) {
    LiveTask& task = tasks_.at(task_id);
    spdlog::warn("job {} task {} attempt {}: {}", task.job_id, task_id, task.attempt, why);
    auto wit = workers_.find(task.worker);
    if (wit != workers_.end()) ChargeWorker(task, wit->second);
    CancelLease(task);
    Requeue(task, why, /*count_failure=*/true);
  }
  if (now >= next_touch_) {
    std::vector<std::pair<int64_t, int64_t>> seen;
    const int64_t wall_now = store::NowMs();
    for (const auto& [identity, worker] : workers_) {
      auto age = std::chrono::duration_cast<std::chrono::milliseconds>(now - worker.last_heard);
      seen.emplace_back(worker.id, wall_now - age.count());
    }
    (void)store_.TouchWorkers(seen);
    next_touch_ = now + std::chrono::seconds(5);
  }
  if (!dead.empty() || !expired.empty()) Dispatch();
}

void Broker::Dispatch() {
  if (queue_.empty()) return;
  for (auto& [identity, worker] : workers_) {
    while (worker.free_slots() > 0 && !queue_.empty()) {
      auto next = NextTaskFor(worker);
      if (next == queue_.end()) break;
      QueueKey key = *next;
      queue_.erase(next);
      auto it = tasks_.find(std::get<3>(key));
      if (it == tasks_.end() || it->second.running) continue;
      LiveTask& task = it->second;
      const JobInfo& job = jobs_[task.job_id];
      int attempt = task.attempt + 1;
      // Durable before sent: the lease exists in SQLite before the worker hears of it.
      if (Status s = store_.StartTask(task.task_id, attempt, worker.id); !s.ok()) {
        spdlog::error("task {}: cannot start lease: {}", task.task_id, s.ToString());
        continue;
      }
      task.attempt = attempt;
      ++jobs_[task.job_id].running;
      HoldLimits(jobs_[task.job_id], +1);
      ++jobs_[task.job_id].dispatched;
      task.leased_at = task.last_progress = Clock::now();
      task.running = true;
      task.worker = identity;
      task.worker_done = false;
      task.frames_written.clear();
      if (worker.tasks.empty() && worker.stopping.empty()) {
        (void)store_.SetWorkerState(worker.id, store::WorkerState::kBusy);
      }
      worker.tasks.insert(task.task_id);
      protocol::Assign assign{task.task_id,     attempt,        task.job_id,
                              task.frame_start, task.frame_end, *job.scene_yaml};
      Send(identity, protocol::Encode(MessageType::kAssign, assign));
      spdlog::info("job {} task {} (frames {}-{}) -> worker {}, attempt {}", task.job_id,
                   task.task_id, task.frame_start, task.frame_end, worker.name, attempt);
    }
    if (queue_.empty()) return;
  }
}

}  // namespace tessera::broker
