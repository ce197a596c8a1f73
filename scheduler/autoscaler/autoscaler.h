#pragma once
// The autoscaler: the mechanism around the pure decision policy (decider.h). Every tick it reads
// the farm from the broker (the work it would dispatch now, what each worker is doing), works
// out which registered workers are its nodes, asks Decide for a plan, and carries it out with
// the node groups' providers (providers.h): requests nodes, drains idle ones and terminates them
// once they have left, gives up on requests that never registered, backs off spot groups the
// cloud took nodes back from or could not supply. Every decision is stored as an event (kind
// "autoscaler") and published live; Describe() answers GET /api/v1/autoscaler.
//
// Node requests are kept in the store (autoscaler_nodes), so a restarted scheduler still knows
// the machines it pays for. A node is named `<group>-<request id>`; its worker registers under
// that name, which is how a registration is matched to its request (a provider that names nodes
// itself, kubernetes, is matched by its NamePrefix instead).
//
// Time is an input: every tick reads the wall time from the Clock the autoscaler was given (a
// test moves a ManualClock past a cool-down, an idle grace or a registration timeout and calls
// Tick()); only the pause between the thread's ticks is real time.
//
// Threads: Tick runs on the autoscaler's own thread (provider commands may take a minute);
// Describe and GroupOf are safe from any thread and never wait for a tick.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "scheduler/autoscaler/autoscaler_config.h"
#include "scheduler/broker/capacity_view.h"
#include "scheduler/events/event_bus.h"
#include "scheduler/store/store.h"
#include "shared/base/clock.h"

namespace tessera::broker {
class Broker;
}

namespace tessera::autoscaler {

struct AutoscalerOptions {
  std::string data_dir;  // rendered user data goes to <data_dir>/autoscaler/
  events::EventBus* events = nullptr;
};

class Autoscaler {
 public:
  // `clock` outlives the autoscaler.
  Autoscaler(store::Store& store, broker::Broker& broker, AutoscalerConfig config,
             AutoscalerOptions options, const Clock& clock);
  ~Autoscaler();  // Stop()s
  Autoscaler(const Autoscaler&) = delete;
  Autoscaler& operator=(const Autoscaler&) = delete;

  // Makes the node groups' providers (before the broker starts: GroupOf prices workers from
  // their first registration).
  Status MakeProviders();
  // Loads the node requests kept in the store and starts the thread; `broker_endpoint` (as
  // bound, with its real port) is what local nodes connect to.
  Status Start(const std::string& broker_endpoint);
  // Stops the thread. Nodes keep running: they are the farm's, not the process's (the local
  // provider's workers are the exception: they drain and leave with the scheduler).
  void Stop();
  // One pass: read, decide, act. The thread calls it every interval_s.
  void Tick();

  // GET /api/v1/autoscaler: groups with their nodes, cost per hour, back-offs, the deadline
  // forecasts and the latest decisions.
  nlohmann::json Describe() const;
  // The deadline forecast for a job ("finish" may be null: nothing can run it); nullopt when it
  // has no deadline or no tick has seen it yet.
  std::optional<nlohmann::json> ForecastFor(int64_t job_id) const;
  // The node group `worker_name` belongs to (a node it requested, or one a provider names with
  // the group's prefix), for the worker's price.
  const NodeGroup* GroupOf(const std::string& worker_name) const;

 private:
  struct Group {
    GroupConfig config;
    std::unique_ptr<Provider> provider;
    GroupState state;  // pending/nodes are rebuilt every tick; the rest is kept
  };
  struct Requested {  // a node it asked a provider for
    store::AutoscalerNodeRecord record;
    bool seen = false;  // its worker registered since this process started
  };
  struct LoggedDecision {
    TimePoint at;
    Decision decision;
  };

  void Run();
  // The clock's wall time, in the policy's whole seconds: the one place the autoscaler reads it.
  TimePoint Now() const;
  // The key the policy knows a node by: its worker's name, or "request-<id>" before it has one.
  static std::string NodeKey(const store::AutoscalerNodeRecord& r);
  // Claims new workers of provider-named groups for their pending requests.
  void ClaimNamedNodes(const broker::CapacityView& view);
  // Nodes that left: drained ones are terminated and forgotten; a spot node that vanished was
  // taken back (the group backs off); others wait to come back like a new request.
  void SettleDepartures(const broker::CapacityView& view, TimePoint now);
  std::map<std::string, GroupState> GroupStates(const broker::CapacityView& view, TimePoint now);
  Demand DemandFrom(const broker::CapacityView& view, std::vector<int64_t>* job_of_class) const;
  void Apply(const Plan& plan, TimePoint now);
  void RequestNodes(Group& group, int count, TimePoint now);
  // Fills the template values for a new node (rendering its user data); creates its join token.
  StatusOr<NodeRequest> MakeRequest(const Group& group, const std::string& name);
  void Terminate(Group& group, Requested& node, const std::string& why);
  void Record(const Decision& decision, TimePoint now);
  void Forget(int64_t node_id);
  void Publish(const Plan& plan, const std::vector<int64_t>& job_of_class, TimePoint now);
  Group* FindGroup(const std::string& name);

  store::Store& store_;
  broker::Broker& broker_;
  const AutoscalerConfig config_;
  AutoscalerOptions options_;
  const Clock& clock_;
  std::string broker_endpoint_;

  // The autoscaler thread only.
  std::vector<Group> groups_;
  std::map<int64_t, Requested> nodes_;    // by request id
  std::set<std::string> last_decisions_;  // the previous tick's, so repeats are not re-logged

  std::thread thread_;
  std::mutex wake_mu_;
  std::condition_variable wake_cv_;
  bool stop_ = false;  // guarded by wake_mu_

  // What readers see, replaced at the end of every tick (and GroupOf's names when they change).
  mutable std::mutex view_mu_;
  nlohmann::json described_ = nlohmann::json::object();
  std::map<int64_t, nlohmann::json> forecasts_;     // by job id
  std::map<std::string, std::string> node_groups_;  // worker name -> group
  std::deque<LoggedDecision> decisions_;            // newest last, at most kDecisionsKept
  static constexpr size_t kDecisionsKept = 200;
};

}  // namespace tessera::autoscaler
