#pragma once
// WorkerRegistry: the workers connected to the broker, by routing identity -- who they are and
// what they offer, whether they are still alive (when each was last heard from, and which have
// been silent past the liveness deadline), the operator's and the workers' own holds (draining,
// disabled, a full disk), what their registered time costs, and the bookkeeping of their slots
// and GPUs as leases come and go.
//
// It decides and records; it neither sends nor writes: the broker tells workers and the store
// what follows. Time is an argument (`now`), never read here, so liveness and metering are
// tested with a clock moved by hand (tests/scheduler/broker/worker_registry_test.cpp).
//
// Threads: owned by the broker's poll loop; broker thread only.

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "scheduler/broker/broker_options.h"
#include "scheduler/broker/gpu_board.h"
#include "scheduler/broker/slot_claims.h"
#include "scheduler/policy/policy.h"
#include "scheduler/store/store.h"
#include "shared/wire/protocol.h"

namespace tessera::broker {

struct WorkerConn {
  policy::WorkerOffer offer;  // id, name, pools, tags, hardware
  int slots = 1;
  SlotClaims claims;        // what its leases (and stopping renders) hold: cores, RAM, GPUs
  GpuBoard gpu_board;       // what its GPU telemetry says; faults are copied into offer
  std::set<int64_t> tasks;  // current leases
  // Cancelled leases whose render may still be stopping (task -> attempt). They keep their
  // slot and their GPU claims until a heartbeat no longer lists them, so the worker is never sent
  // more than it can hold.
  std::map<int64_t, int> stopping;
  bool draining = false;  // finishing its tasks before it leaves: nothing new for it
  // The scheduler told it to drain (DrainWorker): carried over when it registers again, so a
  // drain sent while its connection was being replaced is not lost.
  bool drain_requested = false;
  bool disabled = false;  // an operator's hold: nothing new for it
  // Its heartbeat says a disk it writes is full (what and where): nothing new for it.
  std::string disk_full;
  // It reads acknowledgements inside kAssign (protocol::kFeatureAcksInAssign): this pass's
  // wait here for its next assignment, and go alone at the end of the pass if none comes.
  bool acks_in_assign = false;
  std::vector<protocol::TaskRef> pending_acks;
  // Its leases and the renders still stopping, each holding a slot.
  int used_slots() const { return static_cast<int>(tasks.size() + stopping.size()); }
  int free_slots() const {
    return draining || disabled || !disk_full.empty() ? 0 : slots - used_slots();
  }
  std::chrono::steady_clock::time_point last_heard;
  store::WorkerState stored_state = store::WorkerState::kIdle;  // as last written
  std::chrono::steady_clock::time_point idle_since;  // its last task ended (or it registered)
  // Cost: its price, and up to when its registered time has been added to its cost.
  WorkerPrice price;
  std::chrono::steady_clock::time_point metered_until;
};

class WorkerRegistry {
 public:
  using Clock = std::chrono::steady_clock;
  using Map = std::unordered_map<std::string, WorkerConn>;

  // A worker silent for longer than `liveness_deadline` (the heartbeat interval times the
  // heartbeats it may miss) is dead.
  explicit WorkerRegistry(std::chrono::milliseconds liveness_deadline)
      : deadline_(liveness_deadline) {}

  // ---- connections ------------------------------------------------------------------------
  // A worker that registered at `now`: heard from, idle and metered from then, and disabled
  // when an operator disabled its name.
  WorkerConn& Add(const std::string& identity, WorkerConn conn, Clock::time_point now);
  void Remove(const std::string& identity) { workers_.erase(identity); }
  void Clear() { workers_.clear(); }
  WorkerConn* Find(const std::string& identity);
  const WorkerConn* Find(const std::string& identity) const;
  // The connection of the worker named `name`, or end().
  Map::iterator FindByName(const std::string& name);
  Map::iterator begin() { return workers_.begin(); }
  Map::iterator end() { return workers_.end(); }
  Map::const_iterator begin() const { return workers_.begin(); }
  Map::const_iterator end() const { return workers_.end(); }
  size_t size() const { return workers_.size(); }
  bool empty() const { return workers_.empty(); }

  // ---- liveness ---------------------------------------------------------------------------
  // A message came from `identity` at `now`: marks it heard from then, and returns its registered
  // connection, or nullptr when it is not registered.
  WorkerConn* MarkHeard(const std::string& identity, Clock::time_point now);
  // The workers silent past the liveness deadline at `now`.
  std::vector<std::string> Silent(Clock::time_point now) const;
  // How long `worker` still counts as alive without another message (its connection holds its
  // name until then), or nullopt when it is already past the deadline at `now`.
  std::optional<std::chrono::milliseconds> AliveFor(const WorkerConn& worker,
                                                    Clock::time_point now) const;
  // When each worker was last heard from, as (worker id, wall-clock ms), given that `now` is
  // `wall_now_ms` on the wall clock.
  std::vector<std::pair<int64_t, int64_t>> LastSeen(Clock::time_point now,
                                                    int64_t wall_now_ms) const;

  // ---- holds ------------------------------------------------------------------------------
  // The names an operator disabled (as the store has them): connected workers follow.
  void SetDisabledNames(std::set<std::string> names);
  // An operator's hold on `name`, kept for when it connects; a connected worker follows now.
  void SetDisabled(const std::string& name, bool disabled);
  // Told to drain: it takes nothing new, and is told again if it registers anew. The
  // connection, or end() when no worker of that name is connected.
  Map::iterator RequestDrain(const std::string& name);
  // Its heartbeat says it is draining: true when that is news.
  static bool MarkDraining(WorkerConn& worker);

  // ---- cost -------------------------------------------------------------------------------
  // Adds the registered time up to `now` of every worker (or just the one on `only`) to what
  // it has been metered for: the cost of each that has a price, as (worker id, cost).
  std::vector<std::pair<int64_t, double>> Meter(Clock::time_point now,
                                                const std::string* only = nullptr);

  // ---- slots and GPUs ---------------------------------------------------------------------
  // A lease (task_id, attempt) on the worker, taking what `need` asks of `gpus` (as
  // policy::PickGpus chose them).
  static void Book(WorkerConn& worker, int64_t task_id, int attempt, const spec::ResourceSpec& need,
                   const std::vector<int>& gpus);
  // That lease ended at `now`: its slot is free, and its GPU claims unless it is still stopping.
  static void Release(WorkerConn& worker, int64_t task_id, int attempt, Clock::time_point now);
  // The worker was told to stop attempt `attempt` of `task_id`: its slot and GPU claims stay
  // taken until its heartbeat no longer lists it.
  static void MarkStopping(WorkerConn& worker, int64_t task_id, int attempt);
  // A heartbeat listing what the worker runs: stopped tasks free their slots and GPUs.
  static void FreeStopped(WorkerConn& worker, const std::vector<protocol::TaskRef>& running);
  // Every worker holds nothing (memory was reloaded from the store).
  void ForgetLeases();
  // Workers whose idle/busy state differs from what the store has: each with its new state,
  // which is taken as stored.
  std::vector<std::pair<const WorkerConn*, store::WorkerState>> TakeStateChanges();

 private:
  std::chrono::milliseconds deadline_;
  Map workers_;                           // by routing identity
  std::set<std::string> disabled_names_;  // an operator's holds, by name
};

}  // namespace tessera::broker
