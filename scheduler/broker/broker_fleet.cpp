// The broker's worker-fleet side: who may connect (join tokens, enrolment, revocation), draining
// workers, tasks handed back by workers that must leave (spot interruptions), the result
// acknowledgements that let workers drop their spooled results, what workers cost, and the view
// of demand and capacity the autoscaler plans from.

#include <spdlog/spdlog.h>

#include <filesystem>

#include "scheduler/blobs/blob_store.h"
#include "scheduler/broker/broker.h"
#include "shared/base/utf8.h"
#include "shared/base/wall_time.h"

namespace tessera::broker {

using protocol::MessageType;
using Clock = std::chrono::steady_clock;

// ---- credentials (any thread) ----------------------------------------------------------------

std::string Broker::public_key_hex() const {
  return options_.curve ? curve::ToHex(options_.curve->public_key) : "";
}

Status Broker::LoadKeyRing() {
  TSR_ASSIGN_OR_RETURN(std::vector<store::JoinTokenRecord> tokens, store_.ListJoinTokens());
  const int64_t now = wall_time::NowMs();
  for (const store::JoinTokenRecord& t : tokens) {
    if (t.usable(now))
      keys_.Put(t.public_key, security::Admission::JoinToken(t.id, t.expires_at_ms));
  }
  TSR_ASSIGN_OR_RETURN(std::vector<store::WorkerKeyRecord> workers, store_.ListWorkerKeys());
  for (const store::WorkerKeyRecord& w : workers) {
    if (!w.revoked_at_ms) keys_.Put(w.public_key, security::Admission::Worker(w.name));
  }
  return Status::Ok();
}

StatusOr<NewJoinToken> Broker::CreateJoinToken(const std::string& note, int64_t ttl_s, int max_uses,
                                               const std::string& worker_name) {
  if (!options_.curve) {
    return Status::FailedPrecondition(
        "this scheduler runs without CURVE (broker.security: insecure): workers need no token");
  }
  if (ttl_s < 0) return Status::InvalidArgument("ttl: must be 0 (never expires) or positive");
  if (max_uses < 0) return Status::InvalidArgument("uses: must be 0 (unlimited) or positive");
  if (note.size() > 256) return Status::InvalidArgument("note: at most 256 characters");
  TSR_RETURN_IF_ERROR(utf8::Check(note, "note"));
  TSR_RETURN_IF_ERROR(utf8::Check(worker_name, "name"));
  if (worker_name.size() > protocol::kMaxNameBytes) {
    return Status::InvalidArgument("name: at most " + std::to_string(protocol::kMaxNameBytes) +
                                   " bytes");
  }
  NewJoinToken created;
  created.token = curve::NewJoinToken();
  TSR_ASSIGN_OR_RETURN(curve::KeyPair keys, curve::JoinTokenKeys(created.token));
  std::optional<int64_t> expires;
  if (ttl_s > 0) expires = wall_time::NowMs() + ttl_s * 1000;
  TSR_ASSIGN_OR_RETURN(created.record, store_.CreateJoinToken(keys.public_key, note, expires,
                                                              max_uses, worker_name));
  keys_.Put(keys.public_key, security::Admission::JoinToken(created.record.id, expires));
  spdlog::info("join token {} created{}{}", created.record.id,
               worker_name.empty() ? "" : " for worker " + worker_name,
               note.empty() ? "" : " (" + note + ")");
  return created;
}

StatusOr<store::JoinTokenRecord> Broker::RevokeJoinToken(int64_t token_id) {
  TSR_ASSIGN_OR_RETURN(store::JoinTokenRecord record, store_.RevokeJoinToken(token_id));
  keys_.RemoveToken(token_id);
  spdlog::info("join token {} revoked", token_id);
  return record;
}

Status Broker::RevokeWorker(const std::string& name) {
  TSR_ASSIGN_OR_RETURN(store::WorkerKeyRecord record, store_.SetWorkerRevoked(name, true));
  keys_.RemoveWorker(name);
  // Events are recorded on the broker thread, like everything it publishes.
  (void)OnBrokerThread<bool>([this, name]() -> StatusOr<bool> {
    RecordEvent(std::nullopt, std::nullopt, std::nullopt, "worker_revoked", name);
    auto it = workers_.FindByName(name);
    if (it == workers_.end()) return false;
    Send(it->first,
         protocol::Encode(MessageType::kReject, protocol::Reject{"revoked by an operator"}));
    DropWorker(it->first, "revoked by an operator");
    return true;
  });
  spdlog::warn("worker {} revoked: its key is refused from now on", name);
  return Status::Ok();
}

Status Broker::ReadmitWorker(const std::string& name) {
  TSR_ASSIGN_OR_RETURN(store::WorkerKeyRecord record, store_.SetWorkerRevoked(name, false));
  // Its old key stays out: the worker enrols again with a join token.
  (void)OnBrokerThread<bool>([this, name]() -> StatusOr<bool> {
    RecordEvent(std::nullopt, std::nullopt, std::nullopt, "worker_readmitted", name);
    return true;
  });
  spdlog::info("worker {} readmitted: it may enrol again with a join token", name);
  return Status::Ok();
}

Status Broker::SetWorkerDisabled(const std::string& name, bool disabled) {
  return OnBrokerThread<bool>([this, name, disabled]() -> StatusOr<bool> {
           TSR_RETURN_IF_ERROR(store_.SetWorkerDisabled(name, disabled));
           workers_.SetDisabled(name, disabled);
           RecordEvent(std::nullopt, std::nullopt, std::nullopt,
                       disabled ? "worker_disabled" : "worker_enabled", name);
           spdlog::info("worker {} {}", name,
                        disabled ? "disabled: no new tasks until enabled" : "enabled");
           return true;
         })
      .status();
}

Status Broker::DrainWorker(const std::string& name, const std::string& why) {
  StatusOr<bool> found = OnBrokerThread<bool>([this, name, why]() -> StatusOr<bool> {
    auto it = workers_.RequestDrain(name);
    if (it == workers_.end()) return false;
    Send(it->first, protocol::Encode(MessageType::kDrain, nlohmann::json::object()));
    RecordEvent(std::nullopt, std::nullopt, it->second.offer.id, "worker_draining", why);
    spdlog::info("worker {} told to drain: {}", name, why);
    return true;
  });
  if (!found.ok()) return found.status();
  if (!*found) return Status::NotFound("no worker named " + name + " is connected");
  return Status::Ok();
}

// ---- capacity and cost (broker thread) --------------------------------------------------------

StatusOr<CapacityView> Broker::Capacity() {
  return OnBrokerThread<CapacityView>([this]() -> StatusOr<CapacityView> {
    const auto now = now_;
    const auto seconds = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
    CapacityView view;
    // Waiting work: the queue, in dispatch order, less what project caps and named limits would
    // hold back now.
    std::map<std::string, int64_t> project_room, limit_room;
    for (const auto& [name, share] : options_.projects) {
      if (share.max_running > 0) {
        project_room[name] = share.max_running - shares_.project_running[name];
      }
    }
    for (const auto& [name, count] : options_.limits)
      limit_room[name] = count - limits_in_use_[name];
    std::map<int64_t, size_t> index_of;  // job id -> its entry in view.jobs
    for (const QueueKey& key : leases_.queue()) {
      const int64_t job_id = std::get<1>(key);
      const JobInfo& job = leases_.jobs().at(job_id);
      auto room = project_room.find(job.project);
      if (room != project_room.end() && room->second <= 0) continue;
      bool limited = false;
      for (const std::string& l : job.needs.limits) {
        auto it = limit_room.find(l);
        if (it != limit_room.end() && it->second <= 0) limited = true;
      }
      if (limited) continue;
      if (room != project_room.end()) --room->second;
      for (const std::string& l : job.needs.limits) {
        if (auto it = limit_room.find(l); it != limit_room.end()) --it->second;
      }
      auto [it, added] = index_of.try_emplace(job_id, view.jobs.size());
      if (added) view.jobs.push_back({.job_id = job_id});
      ++view.jobs[it->second].waiting;
    }
    // Running work counts too (a job with nothing waiting still needs its nodes).
    for (const auto& [job_id, job] : leases_.jobs()) {
      if (job.running > 0 && index_of.try_emplace(job_id, view.jobs.size()).second) {
        view.jobs.push_back({.job_id = job_id});
      }
    }
    for (CapacityView::JobDemand& d : view.jobs) {
      const JobInfo& job = leases_.jobs().at(d.job_id);
      d.name = job.name;
      d.priority = job.priority;
      d.running = job.running;
      d.pools = job.needs.pools;
      d.tags = job.needs.tags;
      d.resources = job.needs.resources;
      d.seconds_per_task = job.tasks_done > 0 ? job.done_seconds / job.tasks_done : 0;
      d.interruptible = job.interruptible;
      d.deadline_ms = job.deadline_ms;
    }
    std::stable_sort(view.jobs.begin(), view.jobs.end(), [](const auto& a, const auto& b) {
      return a.priority != b.priority ? a.priority > b.priority : a.job_id < b.job_id;
    });
    for (const auto& [identity, worker] : workers_) {
      CapacityView::WorkerActivity w;
      w.name = worker.offer.name;
      w.busy = !worker.tasks.empty();
      w.draining = worker.draining || worker.disabled;
      w.idle_seconds = w.busy ? 0 : seconds(now - worker.idle_since);
      for (int64_t task_id : worker.tasks) {
        const LiveTask& task = leases_.tasks().at(task_id);
        const JobInfo& job = leases_.jobs().at(task.job_id);
        const Lease* lease = task.LeaseOn(identity);
        if (!lease || job.tasks_done == 0) {
          w.busy_for_seconds.reset();
          break;
        }
        const double left =
            std::max(0.0, job.done_seconds / job.tasks_done - seconds(now - lease->leased_at));
        w.busy_for_seconds = std::max(w.busy_for_seconds.value_or(0), left);
      }
      view.workers.push_back(std::move(w));
    }
    return view;
  });
}

void Broker::MeterCosts(const std::string* only) {
  if (Status s = store_.AccrueWorkerCosts(workers_.Meter(now_, only)); !s.ok()) {
    spdlog::error("cannot record the workers' cost: {}", s.ToString());
  }
}

// ---- enrolment (broker thread) ---------------------------------------------------------------

void Broker::OnEnrol(const std::string& identity, const protocol::Envelope& env,
                     const std::string& user_id) {
  auto reject = [&](const std::string& reason) {
    noisy_.Log(spdlog::level::warn, "enrolment refused", "enrolment refused: {}", reason);
    Send(identity, protocol::Encode(MessageType::kReject, protocol::Reject{reason}));
  };
  if (!options_.curve) return reject("this scheduler does not enrol workers (insecure mode)");
  std::optional<security::Admission> who = security::ParseUserId(user_id);
  if (!who || who->kind != security::Admission::Kind::kJoinToken) {
    return reject("enrolment needs a join-token connection");
  }
  auto m = env.As<protocol::Enrol>();  // a valid UTF-8 name of 1..128 bytes (protocol::Check)
  if (!m.ok()) {
    DropMessage(identity, m.status().message());
    return reject(m.status().message());
  }
  StatusOr<std::string> key = curve::ParseKey(m->public_key, "public_key");
  if (!key.ok()) return reject(key.status().message());
  StatusOr<store::Store::Enrolment> enrolled = store_.EnrolWorker(m->name, *key, who->token_id);
  if (!enrolled.ok() && enrolled.status().code() == StatusCode::kAlreadyExists) {
    // Someone with a join token asked for a name that belongs to an enrolled worker.
    return RefuseName(identity, m->name, "enrolment_refused",
                      "enrolment with join token " + std::to_string(who->token_id) +
                          " refused: " + enrolled.status().message(),
                      /*retry_after_ms=*/0);
  }
  if (!enrolled.ok()) return reject(enrolled.status().message());
  if (enrolled->replaced_key) {
    // A token made for this name replaced its key: the machine holding the old one is out.
    keys_.Remove(*enrolled->replaced_key);
    if (auto old = workers_.FindByName(m->name); old != workers_.end()) {
      Send(old->first, protocol::Encode(MessageType::kReject,
                                        protocol::Reject{"this worker's key was replaced by a new "
                                                         "enrolment under its name"}));
      DropWorker(old->first, "its key was replaced by a new enrolment");
    }
  }
  keys_.Put(*key, security::Admission::Worker(m->name));
  // A token that just ran out of uses admits nobody new.
  if (!enrolled->token_usable) keys_.RemoveToken(who->token_id);
  RecordEvent(std::nullopt, std::nullopt, std::nullopt, "worker_enrolled",
              m->name + " with join token " + std::to_string(who->token_id));
  spdlog::info("worker {} enrolled with join token {}{}", m->name, who->token_id,
               enrolled->replaced_key ? " (its previous key is no longer valid)" : "");
  Send(identity, protocol::Encode(MessageType::kEnrolled, protocol::Enrolled{m->name}));
}

// ---- hand-backs and acknowledgements (broker thread) ------------------------------------------

void Broker::Ack(const std::string& identity, int64_t task_id, int attempt) {
  WorkerConn* worker = workers_.Find(identity);
  if (worker == nullptr) {
    // That connection is gone; the worker re-sends after it reconnects and gets the
    // acknowledgement then.
    return;
  }
  if (worker->acks_in_assign) {
    if (worker->pending_acks.empty()) acks_waiting_.push_back(identity);
    worker->pending_acks.push_back({task_id, attempt});
  } else {
    Send(identity,
         protocol::Encode(MessageType::kResultAck, protocol::ResultAck{task_id, attempt}));
  }
}

void Broker::SendPendingAcks() {
  for (const std::string& identity : acks_waiting_) {
    WorkerConn* worker = workers_.Find(identity);
    if (worker == nullptr) continue;  // gone: it re-sends its results when it is back
    for (const protocol::TaskRef& ref : worker->pending_acks) {
      Send(identity, protocol::Encode(MessageType::kResultAck,
                                      protocol::ResultAck{ref.task_id, ref.attempt}));
    }
    worker->pending_acks.clear();  // (empty if an assignment took them)
  }
  acks_waiting_.clear();
}

void Broker::SendAcks(LiveTask& task) {
  for (const auto& [identity, attempt] : task.acks) Ack(identity, task.task_id, attempt);
  task.acks.clear();
}

void Broker::ClearResume(LiveTask& task) {
  if (!task.checkpoint_hash.empty() && options_.blobs != nullptr) {
    options_.blobs->Remove(task.checkpoint_hash);
  }
  task.checkpoint_hash.clear();
  task.checkpoint_samples = 0;
  task.checkpoint_attempt = 0;
  task.resume_frame = 0;
}

void Broker::OnHandback(const std::string& identity, WorkerConn& worker, protocol::Envelope& env) {
  auto m = env.As<protocol::Handback>();
  if (!m.ok()) return DropMessage(identity, m.status().message());
  LiveTask* task = FindLease(identity, m->task_id, m->attempt, "hand-back");
  if (!task) {
    Ack(identity, m->task_id, m->attempt);
    return;
  }
  SaveLog(*task, m->attempt, worker, std::move(m->log));
  const int frame = std::clamp(m->frame, task->frame_start, task->frame_end);
  if (env.payload.size() > 0) {
    ClearResume(*task);
    if (std::string problem =
            KeepCheckpoint(*task, m->attempt, frame, m->samples_done, env.payload);
        !problem.empty()) {
      spdlog::warn("task {}: checkpoint from {} not kept ({}); frame {} restarts", task->task_id,
                   worker.offer.name, problem, frame);
    }
  } else if (task->checkpoint_hash.empty() || task->resume_frame != frame) {
    // Without a checkpoint: a periodic one of the same frame is still the best resume point.
    ClearResume(*task);
  }
  task->resume_frame = frame;
  spdlog::info("job {} task {} attempt {} handed back by {} at frame {}{} ({})", task->job_id,
               task->task_id, m->attempt, worker.offer.name, frame,
               task->checkpoint_hash.empty()
                   ? ""
                   : ", checkpoint after " + std::to_string(m->samples_done) + " samples",
               m->reason);
  RecordEvent(task->job_id, task->task_id, worker.offer.id, "task_handed_back", m->reason);
  task->acks.emplace_back(identity, m->attempt);
  EndAttempt(*task, m->attempt, store::AttemptOutcome::kHandedBack, "",
             "handed back by " + worker.offer.name + ": " + m->reason, /*charged=*/false);
  ReleaseLease(*task, identity);
  if (task->running()) {
    // A backup copy runs on; this copy just ends (not charged).
    (void)store_.EndCopy(task->task_id, m->attempt, /*count_failure=*/false);
    SendAcks(*task);
    return;
  }
  Requeue(*task, m->attempt, "handed back by " + worker.offer.name + ": " + m->reason,
          /*count_failure=*/false, /*handed_back=*/true);
}

namespace {
std::string GpuFaultKey(const std::string& worker) { return "worker_gpu_fault:" + worker; }
}  // namespace

void Broker::OnGpuSamples(WorkerConn& worker, const std::vector<protocol::GpuSample>& samples) {
  if (!worker.gpu_board.Record(samples, worker.offer.gpus.size(), wall_time::NowMs())) return;
  worker.offer.gpu_faults = worker.gpu_board.faults();
  const std::string& name = worker.offer.name;
  const std::string summary = worker.gpu_board.FaultSummary();
  if (summary.empty()) {
    ClearGpuFaultAlert(worker);
    spdlog::info("worker {}: its GPUs are healthy again", name);
    RecordEvent(std::nullopt, std::nullopt, worker.offer.id, "worker_gpu_healthy", name);
    if (options_.events) Publish("worker", {{"worker", name}, {"state", "gpu_healthy"}});
    return;
  }
  const std::string message =
      "worker " + name + " is unhealthy: " + summary + "; no new tasks on the faulted GPU(s)";
  spdlog::error("{}", message);
  if (options_.alerts) {
    options_.alerts->Raise(GpuFaultKey(name), "worker_gpu_fault", message, wall_time::NowMs());
  }
  RecordEvent(std::nullopt, std::nullopt, worker.offer.id, "worker_gpu_fault", summary);
  if (options_.events) {
    Publish("worker", {{"worker", name}, {"state", "gpu_fault"}, {"reason", summary}});
  }
}

void Broker::ClearGpuFaultAlert(const WorkerConn& worker) {
  if (options_.alerts) options_.alerts->Clear(GpuFaultKey(worker.offer.name));
}

}  // namespace tessera::broker
