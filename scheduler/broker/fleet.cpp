// Fleet: registration, heartbeats, departures, operators' holds and the timers. Who may connect
// is in fleet_keys.cpp; GPU telemetry, full disks, cost and the API's views in fleet_health.cpp.

#include "scheduler/broker/fleet.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "scheduler/broker/event_sink.h"
#include "scheduler/broker/outbox.h"
#include "shared/plugins/plugin_catalog.h"

namespace tessera::broker {

using protocol::MessageType;

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

Status Fleet::Load(Pass& pass) {
  // C++ plugins workers offered before a restart: their jobs must still parse.
  TSR_ASSIGN_OR_RETURN(std::vector<protocol::PluginOffer> natives, pass.store.NativePlugins());
  for (const protocol::PluginOffer& offer : natives) {
    if (Status s = AdoptNativePlugin(offer); !s.ok()) {
      spdlog::warn("renderer plugin {}: {}", offer.name, s.message());
    }
  }
  // Workers an operator disabled stay disabled when they come back.
  TSR_ASSIGN_OR_RETURN(std::vector<store::WorkerRecord> known, pass.store.ListWorkers());
  std::set<std::string> disabled;
  for (const store::WorkerRecord& w : known) {
    if (w.disabled) disabled.insert(w.name);
  }
  p_.workers.SetDisabledNames(std::move(disabled));
  next_touch_ = pass.now + std::chrono::seconds(5);
  return p_.options.curve ? LoadKeyRing(pass) : Status::Ok();
}

void Fleet::ReloadHolds(Pass& pass) {
  // An operator's hold as the store has it (a rolled-back request may have changed it here).
  if (StatusOr<std::vector<store::WorkerRecord>> known = pass.store.ListWorkers(); known.ok()) {
    std::set<std::string> disabled;
    for (const store::WorkerRecord& w : *known) {
      if (w.disabled) disabled.insert(w.name);
    }
    p_.workers.SetDisabledNames(std::move(disabled));
  }
}

void Fleet::OnRegister(Pass& pass, const std::string& identity, const protocol::Envelope& env,
                       const std::string& user_id) {
  // Every string is valid UTF-8 from here on, every list within its limit (protocol::Check).
  auto reg = env.As<protocol::Register>();
  if (reg.ok() && p_.options.curve) {
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
    p_.boundary.DropMessage(pass, identity, reg.status().message());
    pass.outbox.Send(
        identity, protocol::Encode(MessageType::kReject, protocol::Reject{reg.status().message()}));
    return;
  }
  bool drain_requested = false;
  if (auto old = p_.workers.FindByName(reg->name); old != p_.workers.end()) {
    // A name belongs to its live connection: another peer (another connection: another routing
    // identity) is refused until that connection is gone -- closed, or silent past the liveness
    // deadline. The worker itself reconnecting has closed its old connection, so it gets in at
    // once, or after the deadline when the close has not reached us yet.
    const std::optional<std::chrono::milliseconds> left =
        p_.workers.AliveFor(old->second, pass.now);
    if (old->first != identity && left && !pass.outbox.PeerGone(old->first)) {
      return p_.boundary.RefuseName(
          pass, identity, reg->name, "registration_refused",
          "worker " + reg->name +
              " is connected from another peer; a name is held by its live "
              "connection (try again once that one has gone)",
          static_cast<int>(left->count()) + p_.options.heartbeat_ms);
    }
    // The same worker coming back (new connection or restart): its old leases are void.
    drain_requested = old->second.drain_requested;
    Drop(pass, old->first, "worker re-registered");
  }
  StatusOr<int64_t> id = pass.store.UpsertWorker(*reg);
  if (!id.ok()) {
    spdlog::error("cannot record worker {}: {}", reg->name, id.status().ToString());
    pass.outbox.Send(identity, protocol::Encode(MessageType::kReject,
                                                protocol::Reject{"scheduler storage error"}));
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
      if (Status s = pass.store.SaveNativePlugin(p); !s.ok()) {
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
  if (p_.options.price_of) {
    conn.price = p_.options.price_of(reg->name, reg->cloud);
    (void)pass.store.SetWorkerPrice(*id, conn.price.node_group, conn.price.per_hour);
  }
  WorkerConn& worker = p_.workers.Add(identity, std::move(conn), pass.now);
  for (const protocol::TaskRef& ref : reg->delivering) {
    p_.dispatch.Reattach(pass, identity, worker, ref, /*delivering=*/true);
  }
  for (const protocol::TaskRef& ref : reg->running) {
    p_.dispatch.Reattach(pass, identity, worker, ref, /*delivering=*/false);
  }
  p_.feasibility.UpdateAll(pass);
  pass.events.Record(std::nullopt, std::nullopt, *id, "worker_registered", reg->hostname);
  std::string backends;
  for (const std::string& b : reg->backends) backends += (backends.empty() ? "" : ",") + b;
  spdlog::info("worker {} (id {}, {} cores, {} GPUs, backends {}) registered", reg->name, *id,
               reg->cpu_cores, reg->gpus.size(), backends);
  pass.outbox.Send(identity, protocol::Encode(MessageType::kWelcome,
                                              protocol::Welcome{*id, p_.options.heartbeat_ms,
                                                                p_.options.liveness}));
  if (drain_requested) {
    // Told to drain on its previous connection, which may never have delivered it.
    worker.draining = worker.drain_requested = true;
    if (!reg->draining) {
      pass.outbox.Send(identity, protocol::Encode(MessageType::kDrain, nlohmann::json::object()));
      spdlog::info("worker {} told to drain again: it registered anew while draining", reg->name);
    }
  }
}

WorkerConn* Fleet::Sender(Pass& pass, const std::string& identity, MessageType type) {
  WorkerConn* worker = p_.workers.MarkHeard(identity, pass.now);
  if (worker == nullptr && type != MessageType::kGoodbye) {
    // Not welcomed (or declared dead): ask it to register again.
    pass.outbox.Send(identity,
                     protocol::Encode(MessageType::kUnknownWorker, nlohmann::json::object()));
  }
  return worker;
}

void Fleet::OnHeartbeat(Pass& pass, const std::string& identity, WorkerConn& worker,
                        const protocol::Envelope& env) {
  pass.outbox.Send(identity,
                   protocol::Encode(MessageType::kHeartbeatAck, nlohmann::json::object()));
  auto beat = env.As<protocol::Heartbeat>();
  if (!beat.ok()) return p_.boundary.DropMessage(pass, identity, beat.status().message());
  if (beat->draining && WorkerRegistry::MarkDraining(worker)) {
    spdlog::info("worker {} is draining: it finishes its tasks and takes no new ones",
                 worker.offer.name);
  }
  SetDiskFull(pass, worker, beat->disk_full);
  if (!beat->gpu_samples.empty()) OnGpuSamples(pass, worker, beat->gpu_samples);
  WorkerRegistry::FreeStopped(worker, beat->running);
  // An assignment may cross a heartbeat already on its way, hence the grace period.
  const std::vector<int64_t> lost =
      p_.table.NotHeld(identity, worker.tasks, *beat, pass.now,
                       std::chrono::milliseconds(2 * p_.options.heartbeat_ms));
  for (int64_t task_id : lost) {
    p_.leases.End(pass, p_.table.tasks().at(task_id), identity,
                  {store::AttemptOutcome::kLost, "",
                   "worker " + worker.offer.name + " does not hold the lease (assignment lost)",
                   /*charged=*/false},
                  /*cancel=*/false);
  }
}

void Fleet::Drop(Pass& pass, std::string identity, const std::string& reason) {
  WorkerConn* found = p_.workers.Find(identity);
  if (found == nullptr) return;
  WorkerConn& worker = *found;
  const std::string name = worker.offer.name;
  const int64_t worker_id = worker.offer.id;
  std::vector<int64_t> held(worker.tasks.begin(), worker.tasks.end());
  SetDiskFull(pass, worker, "");  // its alerts go with it
  ClearGpuFaultAlert(worker);
  MeterCosts(pass, &identity);
  for (int64_t task_id : held) {
    auto it = p_.table.tasks().find(task_id);
    if (it == p_.table.tasks().end()) continue;
    p_.leases.End(pass, it->second, identity,
                  {store::AttemptOutcome::kLost, "", "worker " + name + " lost: " + reason,
                   /*charged=*/false},
                  /*cancel=*/false);
  }
  p_.workers.Remove(identity);
  p_.transfers.DropPeer(identity);
  (void)pass.store.SetWorkerState(worker_id, store::WorkerState::kOffline);
  pass.events.Record(std::nullopt, std::nullopt, worker_id, "worker_lost", reason);
  spdlog::warn("worker {} (id {}) removed: {}; {} task(s) requeued", name, worker_id, reason,
               held.size());
  p_.feasibility.UpdateAll(pass);
}

void Fleet::DropSilent(Pass& pass) {
  for (const std::string& identity : p_.workers.Silent(pass.now)) {
    Drop(pass, identity, "missed heartbeats");
  }
}

void Fleet::MeterAndTouch(Pass& pass) {
  if (pass.now >= next_meter_) {
    MeterCosts(pass);
    next_meter_ = pass.now + p_.options.cost_interval;
  }
  if (pass.now >= next_touch_) {
    (void)pass.store.TouchWorkers(p_.workers.LastSeen(pass.now, pass.wall_ms));
    next_touch_ = pass.now + std::chrono::seconds(5);
  }
}

void Fleet::StoreStates(Pass& pass) {
  for (const auto& [worker, state] : p_.workers.TakeStateChanges()) {
    (void)pass.store.SetWorkerState(worker->offer.id, state);
    if (pass.events.enabled()) {
      pass.events.Publish(
          "worker", {{"worker", worker->offer.name}, {"state", store::WorkerStateName(state)}});
    }
  }
}

Status Fleet::SetDisabled(Pass& pass, const std::string& name, bool disabled) {
  TSR_RETURN_IF_ERROR(pass.store.SetWorkerDisabled(name, disabled));
  p_.workers.SetDisabled(name, disabled);
  pass.events.Record(std::nullopt, std::nullopt, std::nullopt,
                     disabled ? "worker_disabled" : "worker_enabled", name);
  spdlog::info("worker {} {}", name, disabled ? "disabled: no new tasks until enabled" : "enabled");
  return Status::Ok();
}

bool Fleet::Drain(Pass& pass, const std::string& name, const std::string& why) {
  auto it = p_.workers.RequestDrain(name);
  if (it == p_.workers.end()) return false;
  pass.outbox.Send(it->first, protocol::Encode(MessageType::kDrain, nlohmann::json::object()));
  pass.events.Record(std::nullopt, std::nullopt, it->second.offer.id, "worker_draining", why);
  spdlog::info("worker {} told to drain: {}", name, why);
  return true;
}

}  // namespace tessera::broker
