#pragma once
// ReadOnlyMode: the broker while its data folder (SQLite's filesystem) is full.
//
// Memory never disagrees with the database. A pass whose commit fails for want of space is
// rolled back, and its effects in memory go with it: the loop discards what the pass queued for
// workers and other threads, and Enter() reloads the tasks, jobs, leases and queue from the
// store as it is (without writing to it). Then, until the data folder has space again:
//   - no leases: nothing is dispatched, no timer that writes runs (liveness, timeouts, costs);
//   - heartbeats are acknowledged, so workers stay connected and keep rendering;
//   - results (frames, done, failed, hand-backs) are not acknowledged: the workers keep them in
//     their spools and send them again after they register anew;
//   - registrations are answered "try again in 5 s";
//   - the data_full alert says why, and the API answers every write with 507 (Reason).
// Every kDataFolderCheckInterval the data folder's free space is checked; once it is back the
// broker reloads from the store the way start-up does (interrupted leases wait for their
// workers), clears the alert and asks every worker to register again.
//
// Threads: broker thread only, except Reason (any thread).

#include <chrono>
#include <mutex>
#include <optional>
#include <string>

#include "scheduler/broker/boundary.h"
#include "scheduler/broker/broker_options.h"
#include "scheduler/broker/bulk_transfers.h"
#include "scheduler/broker/fleet.h"
#include "scheduler/broker/jobs.h"
#include "scheduler/broker/lease_table.h"
#include "scheduler/broker/pass.h"
#include "scheduler/broker/result_acks.h"
#include "scheduler/broker/running_counts.h"
#include "scheduler/broker/worker_registry.h"
#include "shared/wire/protocol.h"

namespace tessera::broker {

class ReadOnlyMode {
 public:
  static constexpr std::chrono::seconds kDataFolderCheckInterval{2};
  static constexpr int kRetryMs = 5000;  // registrations: "try again in 5 s"

  struct Parts {
    const BrokerOptions& options;
    LeaseTable& table;
    WorkerRegistry& workers;
    RunningCounts& running;
    ResultAcks& acks;
    BulkTransfers& transfers;
    Jobs& jobs;
    Fleet& fleet;
    Boundary& boundary;
  };
  explicit ReadOnlyMode(Parts parts) : p_(parts) {}

  // Broker thread.
  bool active() const { return active_; }
  // Why the scheduler is read-only, or nullopt while it writes. Any thread.
  std::optional<std::string> Reason() const;
  // When the next check of the data folder is due.
  Clock::SteadyTime next_check() const { return next_check_; }

  // The pass's commit failed for want of space on the data folder (the loop has discarded the
  // pass): memory is reloaded from the store (without writing), the data_full alert is raised.
  void Enter(Pass& pass, const Status& why);
  // A worker message while read-only (see above). Writes nothing.
  void OnMessage(Pass& pass, const std::string& identity, const protocol::Envelope& env);
  // Every kDataFolderCheckInterval: with data_resume_bytes free again, reloads memory from the
  // store the way start-up does (in a write group that must commit), asks every worker to
  // register again (they re-attach their tasks and re-send their spooled results) and leaves
  // read-only mode. True when it left.
  bool CheckDataFolder(Pass& pass);

 private:
  // Forgets every task, job, lease and queue entry held in memory (the workers stay connected,
  // holding nothing).
  void Unload(Pass& pass);

  Parts p_;
  bool active_ = false;
  Clock::SteadyTime next_check_{};
  mutable std::mutex reason_mu_;
  std::optional<std::string> reason_;  // guarded by reason_mu_
};

}  // namespace tessera::broker
