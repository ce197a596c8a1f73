#include "scheduler/broker/read_only.h"

#include <spdlog/spdlog.h>

#include <cstdio>

#include "scheduler/broker/broker_counters.h"
#include "scheduler/broker/event_sink.h"
#include "scheduler/broker/outbox.h"
#include "scheduler/events/farm_alerts.h"
#include "scheduler/store/store.h"
#include "shared/base/disk_space.h"

namespace tessera::broker {

using protocol::MessageType;

namespace {

constexpr const char* kDataFullAlert = "data_full";

std::string Mebibytes(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return text;
}

}  // namespace

std::optional<std::string> ReadOnlyMode::Reason() const {
  std::lock_guard<std::mutex> lock(reason_mu_);
  return reason_;
}

void ReadOnlyMode::Unload(Pass& pass) {
  p_.table.Clear();
  p_.running.Clear();
  p_.acks.Clear();
  p_.workers.ForgetLeases();
  for (const auto& [identity, worker] : p_.workers) {
    p_.transfers.DropPeer(identity);  // its results come again, whole, after it registers anew
  }
  pass.counters.result_bytes_buffered.store(static_cast<uint64_t>(p_.transfers.buffered_bytes()),
                                            std::memory_order_relaxed);
  p_.fleet.ReloadHolds(pass);
}

void ReadOnlyMode::Enter(Pass& pass, const Status& why) {
  const std::string dir = pass.store.data_dir();
  const std::string reason =
      "the scheduler is read-only until its data folder " + dir + " has " +
      Mebibytes(p_.options.data_resume_bytes) +
      " free again (no new leases; results wait on the workers): " + why.message();
  active_ = true;
  {
    std::lock_guard<std::mutex> lock(reason_mu_);
    reason_ = reason;
  }
  Unload(pass);
  // Memory as the store has it: what the failed pass changed is gone. Nothing is written (the
  // leases the store holds stay running there, and wait for their workers to re-attach them).
  if (Status s = p_.jobs.Load(pass, std::nullopt, /*requeue_running=*/false); !s.ok()) {
    spdlog::error(
        "read-only: cannot reload the unfinished tasks ({}); they are loaded when room "
        "is back",
        s.ToString());
  }
  pass.counters.queue_depth.store(p_.table.queue().size(), std::memory_order_relaxed);
  if (p_.options.alerts) {
    p_.options.alerts->Raise(kDataFullAlert, kDataFullAlert, reason, pass.wall_ms);
  }
  spdlog::error("{}", reason);
  next_check_ = pass.now + kDataFolderCheckInterval;
}

void ReadOnlyMode::OnMessage(Pass& pass, const std::string& identity,
                             const protocol::Envelope& env) {
  if (env.type == MessageType::kRegister || env.type == MessageType::kEnrol) {
    // A registration writes (the worker's row, its re-attached leases): not now.
    pass.outbox.Send(identity, protocol::Encode(MessageType::kReject,
                                                protocol::Reject{"the scheduler is read-only: "
                                                                 "its data folder is full",
                                                                 kRetryMs}));
    return;
  }
  WorkerConn* known = p_.fleet.Sender(pass, identity, env.type);
  if (known == nullptr) return;
  switch (env.type) {
    case MessageType::kHeartbeat:
      pass.outbox.Send(identity,
                       protocol::Encode(MessageType::kHeartbeatAck, nlohmann::json::object()));
      return;
    case MessageType::kBlobRequest:
      p_.transfers.OnBlobRequest(pass, p_.boundary, identity, env);  // reads only
      return;
    case MessageType::kGoodbye:
      // Marked offline in the store when space is back (every worker registers anew then).
      p_.transfers.DropPeer(identity);
      p_.workers.Remove(identity);
      return;
    default:
      // Results, progress, hand-backs: not acknowledged, so the worker keeps them and sends
      // them again after it registers anew.
      p_.boundary.noisy().LogAt(pass.now, spdlog::level::info, "read-only: held",
                                "read-only: {} from worker {} is not "
                                "acknowledged; the worker keeps it and sends it again once room "
                                "is back",
                                protocol::MessageTypeName(env.type), known->offer.name);
      return;
  }
}

bool ReadOnlyMode::CheckDataFolder(Pass& pass) {
  if (!active_ || pass.now < next_check_) return false;
  next_check_ = pass.now + kDataFolderCheckInterval;
  const std::string dir = pass.store.data_dir();
  StatusOr<disk_space::Room> space = disk_space::RoomFor(dir);
  if (!space.ok()) {
    p_.boundary.noisy().LogAt(pass.now, spdlog::level::warn, "read-only: room", "read-only: {}",
                              space.status().message());
    return false;
  }
  if (space->read_only || space->free_bytes < p_.options.data_resume_bytes) return false;

  // Space is back: load again the way start-up does -- leases that were running wait for their
  // workers to re-attach them -- in one transaction that must commit before anything is said.
  Status s;
  {
    store::Store::WriteGroup group(pass.store);
    Unload(pass);
    s = pass.store.MarkAllWorkersOffline();
    if (s.ok()) s = p_.jobs.Load(pass, std::nullopt, /*requeue_running=*/true);
    if (s.ok()) s = group.Commit();
  }
  if (!s.ok()) {
    spdlog::error("read-only: {} free on {}, but the scheduler cannot write yet: {}",
                  disk_space::Describe(*space), dir, s.ToString());
    Unload(pass);
    (void)p_.jobs.Load(pass, std::nullopt, /*requeue_running=*/false);
    if (s.code() == StatusCode::kStorageFull) return false;  // checked again in an interval
    spdlog::critical("cannot leave read-only mode: {}; stopping -- restart the scheduler",
                     s.ToString());
    spdlog::shutdown();
    std::_Exit(74);  // EX_IOERR, as for any other commit that fails
  }
  // Every worker registers anew: it re-attaches what it still renders and re-sends the results
  // it kept.
  const size_t workers = p_.workers.size();
  for (const auto& [identity, worker] : p_.workers) {
    pass.outbox.Send(identity,
                     protocol::Encode(MessageType::kUnknownWorker, nlohmann::json::object()));
  }
  p_.workers.Clear();
  active_ = false;
  {
    std::lock_guard<std::mutex> lock(reason_mu_);
    reason_.reset();
  }
  if (p_.options.alerts) p_.options.alerts->Clear(kDataFullAlert);
  pass.counters.queue_depth.store(p_.table.queue().size(), std::memory_order_relaxed);
  const std::string message = "the data folder " + dir + " has room again (" +
                              disk_space::Describe(*space) + "): the scheduler writes again; " +
                              std::to_string(workers) + " worker(s) asked to register anew";
  spdlog::warn("{}", message);
  pass.events.Record(std::nullopt, std::nullopt, std::nullopt, "data_space_back", message);
  return true;
}

}  // namespace tessera::broker
