#pragma once
// Fleet: the workers connected to the broker and what happens to them. A worker registers
// (re-attaching the tasks it still renders) or, on a CURVE farm, first enrols with a join token;
// its heartbeats keep it alive, free the slots of the renders it stopped, and report its GPU
// telemetry and a full disk (each takes work away from it, under an alert); operators drain,
// disable, revoke and readmit it; a worker that leaves or goes silent past the liveness
// deadline is dropped and its leases end. Its registered time is metered into its cost, and
// the API reads the fleet's plugins and GPU use from here.
//
// Files: fleet.cpp (registration, heartbeats, departures, holds, timers), fleet_keys.cpp (who
// may connect: the key ring, join tokens, enrolment, revocation), fleet_health.cpp (GPU
// telemetry, full disks, cost, the API's views).
//
// Threads: broker thread only, except where a method says "any thread".

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "scheduler/broker/boundary.h"
#include "scheduler/broker/broker_options.h"
#include "scheduler/broker/bulk_transfers.h"
#include "scheduler/broker/dispatch.h"
#include "scheduler/broker/feasibility.h"
#include "scheduler/broker/lease_table.h"
#include "scheduler/broker/leases.h"
#include "scheduler/broker/pass.h"
#include "scheduler/broker/worker_registry.h"
#include "scheduler/security/key_ring.h"
#include "scheduler/store/store.h"
#include "shared/wire/protocol.h"

namespace tessera::broker {

// A join token as created: the token itself is shown once and never stored.
struct NewJoinToken {
  std::string token;
  store::JoinTokenRecord record;
};

class Fleet {
 public:
  struct Parts {
    const BrokerOptions& options;
    WorkerRegistry& workers;
    LeaseTable& table;
    Leases& leases;
    Dispatch& dispatch;
    Feasibility& feasibility;
    BulkTransfers& transfers;
    Boundary& boundary;
  };
  explicit Fleet(Parts parts) : p_(parts) {}

  // ---- start-up -----------------------------------------------------------------------------
  // C++ plugins workers offered before a restart (their jobs must still parse), the workers an
  // operator disabled, and on a CURVE farm the keys that may connect.
  Status Load(Pass& pass);
  // The operators' holds as the store has them (memory was reloaded from the store).
  void ReloadHolds(Pass& pass);
  // Who may connect (CURVE farms): thread-safe, shared with the ZAP handler's thread.
  security::KeyRing& keys() { return keys_; }

  // ---- worker messages (fleet.cpp, fleet_keys.cpp) -------------------------------------------
  // `user_id`: who the connection's key belongs to (the ZAP handler's tag; CURVE farms).
  void OnRegister(Pass& pass, const std::string& identity, const protocol::Envelope& env,
                  const std::string& user_id);
  void OnEnrol(Pass& pass, const std::string& identity, const protocol::Envelope& env,
               const std::string& user_id);
  // The registered worker a message came from, heard from now; nullptr (and the sender asked
  // to register again, unless it was saying goodbye) when it is not registered.
  WorkerConn* Sender(Pass& pass, const std::string& identity, protocol::MessageType type);
  // Answered at once; draining, a full disk and GPU readings follow; renders the worker stopped
  // free their slots, and leases it does not hold (a lost assignment) end.
  void OnHeartbeat(Pass& pass, const std::string& identity, WorkerConn& worker,
                   const protocol::Envelope& env);
  // The worker is gone (goodbye, silence, re-registration, revocation): its leases end, lost.
  // `identity` by value: callers pass the key of the map entry this erases.
  void Drop(Pass& pass, std::string identity, const std::string& reason);

  // ---- timers and the end of a pass ----------------------------------------------------------
  // Drops the workers silent past the liveness deadline.
  void DropSilent(Pass& pass);
  // Meters registered time into cost every cost_interval; stores when each worker was last
  // heard from every 5 s.
  void MeterAndTouch(Pass& pass);
  // Writes idle/busy for workers whose state changed during the pass (once per pass, not per
  // lease: a worker that finishes one task and gets the next stays busy).
  void StoreStates(Pass& pass);

  // ---- operators ------------------------------------------------------------------------------
  // Join tokens (fleet_keys.cpp): a new one (ttl_s 0: never expires; max_uses 0: unlimited),
  // and revocation (connections it already admitted may still enrol nothing more). A token made
  // for `worker_name` enrols only that name, and may replace the key it is enrolled with.
  StatusOr<NewJoinToken> CreateJoinToken(Pass& pass, const std::string& note, int64_t ttl_s,
                                         int max_uses, const std::string& worker_name);
  // Any thread.
  StatusOr<store::JoinTokenRecord> RevokeJoinToken(store::Store& store, int64_t token_id);
  // Revoking a worker (any thread) removes its key, so new connections are refused; Revoked
  // (broker thread) then tells a connected worker it is rejected and drops it. Readmitting
  // lets it enrol again with a join token.
  Status RevokeKey(store::Store& store, const std::string& name);
  void Revoked(Pass& pass, const std::string& name);
  // Disabling (kept in the store, so it holds across reconnects and restarts) gives it no new
  // tasks until enabled.
  Status SetDisabled(Pass& pass, const std::string& name, bool disabled);
  // Tells a connected worker to finish its running tasks, take no new ones, then leave; false
  // when no worker of that name is connected.
  bool Drain(Pass& pass, const std::string& name, const std::string& why);

  // ---- the API's views (fleet_health.cpp) ----------------------------------------------------
  // {"workers": [{"id", "name", "plugins": [{"name", "version"}]}]}.
  nlohmann::json Plugins() const;
  // By worker name: {"slots", "slots_used", ..., "health", "health_reason", "gpus": [...]};
  // `history`: each GPU's recent readings too.
  nlohmann::json GpuUse(bool history) const;

 private:
  // Fills keys_ from the store: usable join tokens and enrolled, unrevoked worker keys.
  Status LoadKeyRing(Pass& pass);
  // A heartbeat's GPU readings: kept for the API and /metrics; a GPU whose reading carries a
  // fault takes no new task, and the worker's alert is raised, or cleared once none has one.
  void OnGpuSamples(Pass& pass, WorkerConn& worker,
                    const std::vector<protocol::GpuSample>& samples);
  void ClearGpuFaultAlert(const WorkerConn& worker);
  // A worker's heartbeat (or its leaving, with ""): its full disk raises or clears its alert.
  void SetDiskFull(Pass& pass, WorkerConn& worker, const std::string& disk_full);
  // Adds the workers' registered time since they were last metered to their cost (all of
  // them, or just `only`).
  void MeterCosts(Pass& pass, const std::string* only = nullptr);

  Parts p_;
  security::KeyRing keys_;
  Clock::SteadyTime next_meter_{};
  Clock::SteadyTime next_touch_{};
};

}  // namespace tessera::broker
