// The broker's read-only mode: what it does while the data folder (SQLite's filesystem) is full.
//
// Memory never disagrees with the database. A pass whose commit fails for want of room is rolled
// back, and its effects in memory go with it: the tasks, jobs, leases and queue are loaded again
// from the store as it is (without writing to it), and nothing the pass queued for workers or
// other threads goes out. Then, until the data folder has room again:
//   - no leases: nothing is dispatched, no timer that writes runs (liveness, timeouts, costs);
//   - heartbeats are acknowledged, so workers stay connected and keep rendering;
//   - results (frames, done, failed, hand-backs) are not acknowledged: the workers keep them in
//     their spools and send them again after they register anew;
//   - registrations are answered "try again in 5 s";
//   - the data_full alert says why, and the API answers every write with 507 (ReadOnlyReason).
// Every kRoomCheckInterval the room on the data folder is checked; once it is back the broker
// reloads from the store the way start-up does (interrupted leases wait for their workers),
// clears the alert and asks every worker to register again.

#include <spdlog/spdlog.h>

#include <cstdio>

#include "scheduler/broker/broker.h"
#include "shared/base/disk_space.h"
#include "shared/base/wall_time.h"

namespace tessera::broker {

using protocol::MessageType;
using Clock = std::chrono::steady_clock;

namespace {

constexpr const char* kDataFullAlert = "data_full";

std::string Mebibytes(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return text;
}

}  // namespace

std::optional<std::string> Broker::ReadOnlyReason() const {
  std::lock_guard<std::mutex> lock(read_only_mu_);
  return read_only_reason_;
}

void Broker::ForgetLoadedState() {
  leases_.Clear();
  limits_in_use_.clear();
  shares_.project_running.clear();
  shares_.user_running.clear();
  acks_waiting_.clear();
  workers_.ForgetLeases();
  for (const auto& [identity, worker] : workers_) {
    transfers_.Forget(identity);  // its results come again, whole, after it registers anew
  }
  result_bytes_buffered_.store(static_cast<uint64_t>(transfers_.buffered_bytes()),
                               std::memory_order_relaxed);
  // An operator's hold as the store has it (a rolled-back request may have changed it here).
  if (StatusOr<std::vector<store::WorkerRecord>> known = store_.ListWorkers(); known.ok()) {
    std::set<std::string> disabled;
    for (const store::WorkerRecord& w : *known) {
      if (w.disabled) disabled.insert(w.name);
    }
    workers_.SetDisabledNames(std::move(disabled));
  }
}

void Broker::EnterReadOnly(const Status& why) {
  // Nothing of the rolled-back pass leaves: no assignment, acknowledgement or event, and the
  // requests it served are answered with the failure.
  outbox_.clear();
  after_commit_.clear();
  pending_events_.clear();
  for (auto& answer : answers_) Guarded("an answer", [&] { answer(why); });
  answers_.clear();
  // Frames the pass handed to the assembler are finished before anyone can see the scheduler
  // read-only: a frame of the rolled-back pass is on disk by then (its worker sends it again
  // after room is back, and it is written once more then).
  if (assembler_) assembler_->WaitIdle();

  const std::string dir = store_.data_dir();
  const std::string reason =
      "the scheduler is read-only until its data folder " + dir + " has " +
      Mebibytes(options_.data_resume_bytes) +
      " free again (no new leases; results wait on the workers): " + why.message();
  read_only_ = true;
  {
    std::lock_guard<std::mutex> lock(read_only_mu_);
    read_only_reason_ = reason;
  }
  ForgetLoadedState();
  // Memory as the store has it: what the failed pass changed is gone. Nothing is written (the
  // leases the store holds stay running there, and wait for their workers to re-attach them).
  if (Status s = LoadStoredTasks(std::nullopt, /*requeue_running=*/false); !s.ok()) {
    spdlog::error(
        "read-only: cannot reload the unfinished tasks ({}); they are loaded when room "
        "is back",
        s.ToString());
  }
  queue_depth_.store(leases_.queue().size(), std::memory_order_relaxed);
  if (options_.alerts) {
    options_.alerts->Raise(kDataFullAlert, kDataFullAlert, reason, wall_time::NowMs());
  }
  spdlog::error("{}", reason);
  next_room_check_ = Clock::now() + kRoomCheckInterval;
  next_timer_ = next_room_check_;
}

void Broker::RunReadOnlyPass(bool woken) {
  // No write group: nothing here writes except the requests of other threads, which write to
  // the store first (each in a transaction of its own) and answer with what it said.
  now_ = Clock::now();
  const auto now = now_;
  if (woken) DrainInbox();
  ReceiveMessages();
  Guarded("the data folder's room", [&] { CheckRoom(now); });
  Guarded("events", [&] { PublishPending(); });
  if (read_only_) next_timer_ = next_room_check_;
  FlushOutbox();
}

void Broker::OnMessageWhileReadOnly(const std::string& identity, const protocol::Envelope& env) {
  if (env.type == MessageType::kRegister || env.type == MessageType::kEnrol) {
    // A registration writes (the worker's row, its re-attached leases): not now.
    Send(identity,
         protocol::Encode(MessageType::kReject,
                          protocol::Reject{"the scheduler is read-only: its data folder is full",
                                           kReadOnlyRetryMs}));
    return;
  }
  WorkerConn* known = HeardFrom(identity, env.type);
  if (known == nullptr) return;
  WorkerConn& worker = *known;
  switch (env.type) {
    case MessageType::kHeartbeat:
      Send(identity, protocol::Encode(MessageType::kHeartbeatAck, nlohmann::json::object()));
      return;
    case MessageType::kBlobRequest:
      OnBlobRequest(identity, env);  // reads only
      return;
    case MessageType::kGoodbye:
      // Marked offline in the store when room is back (every worker registers anew then).
      transfers_.Forget(identity);
      workers_.Remove(identity);
      return;
    default:
      // Results, progress, hand-backs: not acknowledged, so the worker keeps them and sends
      // them again after it registers anew.
      noisy_.Log(spdlog::level::info, "read-only: held",
                 "read-only: {} from worker {} is not "
                 "acknowledged; the worker keeps it and sends it again once room is back",
                 protocol::MessageTypeName(env.type), worker.offer.name);
      return;
  }
}

void Broker::CheckRoom(Clock::time_point now) {
  if (!read_only_ || now < next_room_check_) return;
  next_room_check_ = now + kRoomCheckInterval;
  const std::string dir = store_.data_dir();
  StatusOr<disk_space::Room> room = disk_space::RoomFor(dir);
  if (!room.ok()) {
    noisy_.Log(spdlog::level::warn, "read-only: room", "read-only: {}", room.status().message());
    return;
  }
  if (room->read_only || room->free_bytes < options_.data_resume_bytes) return;

  // Room is back: load again the way start-up does -- leases that were running wait for their
  // workers to re-attach them -- in one transaction that must commit before anything is said.
  Status s;
  {
    store::Store::WriteGroup group(store_);
    ForgetLoadedState();
    s = store_.MarkAllWorkersOffline();
    if (s.ok()) s = LoadStoredTasks(std::nullopt, /*requeue_running=*/true);
    if (s.ok()) s = group.Commit();
  }
  if (!s.ok()) {
    spdlog::error("read-only: {} free on {}, but the scheduler cannot write yet: {}",
                  disk_space::Describe(*room), dir, s.ToString());
    ForgetLoadedState();
    (void)LoadStoredTasks(std::nullopt, /*requeue_running=*/false);
    if (s.code() == StatusCode::kStorageFull) return;  // checked again in kRoomCheckInterval
    spdlog::critical("cannot leave read-only mode: {}; stopping -- restart the scheduler",
                     s.ToString());
    spdlog::shutdown();
    std::_Exit(74);  // EX_IOERR, as for any other commit that fails
  }
  // Every worker registers anew: it re-attaches what it still renders and re-sends the results
  // it kept.
  const size_t workers = workers_.size();
  for (const auto& [identity, worker] : workers_) {
    Send(identity, protocol::Encode(MessageType::kUnknownWorker, nlohmann::json::object()));
  }
  workers_.Clear();
  read_only_ = false;
  {
    std::lock_guard<std::mutex> lock(read_only_mu_);
    read_only_reason_.reset();
  }
  if (options_.alerts) options_.alerts->Clear(kDataFullAlert);
  queue_depth_.store(leases_.queue().size(), std::memory_order_relaxed);
  next_timer_ = now + std::chrono::milliseconds(options_.heartbeat_ms);
  const std::string message = "the data folder " + dir + " has room again (" +
                              disk_space::Describe(*room) + "): the scheduler writes again; " +
                              std::to_string(workers) + " worker(s) asked to register anew";
  spdlog::warn("{}", message);
  RecordEvent(std::nullopt, std::nullopt, std::nullopt, "data_space_back", message);
}

}  // namespace tessera::broker
