#pragma once
// How the broker is set up (scheduler/main.cpp fills it from the scheduler's config; tests and
// benchmarks from their own). A header of its own, so that what only configures the broker or
// reads its limits does not pull in the broker.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "scheduler/policy/policy.h"
#include "shared/base/disk_space.h"
#include "shared/base/logging.h"
#include "shared/base/status.h"
#include "shared/wire/curve_keys.h"

namespace tessera::blobs {
class BlobStore;
}
namespace tessera::events {
class EventBus;
class FarmAlerts;
}  // namespace tessera::events

namespace tessera::broker {

// A worker's price, as BrokerOptions::price_of answers.
struct WorkerPrice {
  std::string node_group;  // "" for none
  double per_hour = 0;
};

struct BrokerOptions {
  std::string bind_endpoint = "tcp://127.0.0.1:8471";  // port 0 or '*' picks a free port
  int heartbeat_ms = 1000;
  int liveness = 5;  // missed heartbeats before a worker is declared dead
  int assembler_threads = 2;
  int max_image_side = 16384;         // frame results larger than this are rejected
  std::map<std::string, int> limits;  // named counted limits: name -> tasks allowed at once
  std::map<std::string, policy::ProjectShare> projects;  // fair-share weights and caps
  // Straggler backups: once a job has no queued tasks left, a running task that has taken
  // backup_factor x the job's mean task time (and at least backup_min_seconds) gets a backup
  // copy on an idle worker. 0 turns backups off.
  double backup_factor = 1.5;
  double backup_min_seconds = 60;
  // CURVE: the scheduler's key pair. Without it the ROUTER speaks plain TCP and admits every
  // peer (local farms on loopback only: the config refuses it anywhere else). With it, only the
  // keys the KeyRing (loaded from the store at Start) admits get in.
  std::optional<curve::KeyPair> curve;
  // Job assets, and handed-back checkpoints waiting for the task's next attempt, served to
  // workers that lack them (none: asset requests get an error, checkpoints are not kept).
  blobs::BlobStore* blobs = nullptr;
  // Where the broker tells the API's live readers what changed (none: it does not). Events go
  // out after the pass that caused them commits.
  events::EventBus* events = nullptr;
  // Farm-level alerts the broker raises and clears (a full outputs filesystem); none: it keeps
  // no alerts.
  events::FarmAlerts* alerts = nullptr;
  // Full output filesystems: a write of a job's outputs that failed for want of free space
  // holds every job whose outputs go to that filesystem (not charged to the task) until a check,
  // this often, finds free space again. `free_space_of` asks a path's filesystem (tests give a
  // fake one).
  std::chrono::milliseconds storage_check_interval{3000};
  std::function<StatusOr<disk_space::Room>(const std::string& path)> free_space_of =
      disk_space::RoomFor;
  // Cost: what a worker costs per hour, from its name and machine (its autoscaler node group's
  // price, or its instance type's); unset: workers cost nothing. Registered time is added to
  // each worker's cost and the day's every cost_interval.
  std::function<WorkerPrice(const std::string& name, const protocol::CloudInfo& cloud)> price_of;
  std::chrono::milliseconds cost_interval{10'000};
  // Lines a peer can cause at will (malformed messages, refused handshakes and registrations,
  // exceptions caught in the poll loop): at most one per kind per interval, with a count of the
  // ones left out. Every one is counted (Counters).
  std::chrono::milliseconds noisy_log_interval = logging::RateLimitedLog::kDefaultInterval;
  // Read-only mode (the data folder full): the free space it needs again before the broker
  // writes again.
  uint64_t data_resume_bytes = uint64_t{16} << 20;
};

}  // namespace tessera::broker
