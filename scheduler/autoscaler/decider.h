#pragma once
// The autoscaler's decision policy: how many nodes each node group should have, given the queue.
// Pure, after the scheduling policy (scheduler/policy/policy.h): no I/O, no threads, no clock
// reads -- `now` is an argument -- and no state kept between calls; the daemon side (providers
// that start and stop machines, config, the event log) owns the mechanism, records what it did
// in `GroupState`, and asks again on its next tick. Every rule is therefore unit-tested directly
// and a day of submissions can be simulated in milliseconds (tests/scheduler/).
//
// The rules, in the order Decide applies them:
//  1. A requested node that has not registered within the registration timeout is given up (to be
//     terminated); a spot group that failed that way is backed off.
//  2. Every group is held at its min nodes; reserved groups are always-on capacity (held at min,
//     which must equal max), used first.
//  3. Deadline demand comes first, earliest deadline first: it is forecast with the nodes there
//     are (idle ones now, busy ones when their task should end, requested ones when booted);
//     when the forecast misses the deadline, nodes are added until it meets it with a margin.
//  4. Other demand is sized in work: tasks x seconds per task (a running task half done), spread
//     over a horizon (default 15 min); never more nodes than tasks, never above max. Only groups
//     whose pools, tags and GPUs satisfy a demand class serve it. Groups are used in order --
//     reserved, then spot for work that tolerates interruption (never for work that does not),
//     then the rest, each cheapest per task-slot-hour (per GPU-hour for one-GPU tasks) first --
//     a group's existing nodes (booting ones included: nothing is requested twice) before new
//     ones, so pricier nodes take only work cheaper ones cannot. A backed-off spot group gets no
//     new nodes, and on-demand covers.
//  5. The farm budget per hour is never passed by adding. When it holds back a cheaper group,
//     nodes of pricier groups doing work the cheaper one could do are drained (a busy one
//     finishes its task first) to pay for it; a deadline the cap would make miss may take the
//     budget of nodes doing work without a deadline the same way.
//  6. Scale-in is deliberately slow, which is what keeps the autoscaler from flapping: only nodes
//     idle for the grace period, never a busy one, never below min, never within the cooldown
//     after the group's last scale-out, and only down to the wanted nodes plus a hysteresis
//     margin. Scale-out is never delayed: waiting work matters more than a node's idle minutes.
//  7. Over budget (the cap was lowered): requested nodes are given up, then idle and busy nodes
//     drained, most expensive first, down to min.
// Each rule that acts, or that holds something back, leaves a `Decision` with its reason.

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace tessera::autoscaler {

using Seconds = std::chrono::seconds;
using TimePoint = std::chrono::sys_seconds;

enum class Market { kSpot, kOnDemand, kReserved };
const char* MarketName(Market market);  // "spot", "on-demand", "reserved"

struct GpuSpec {
  int count = 0;  // per node
  std::string model;
  int64_t memory_mib = 0;  // per GPU
  // Its workers share each GPU (worker.gpu_sharing: shared) this many ways (1: whole GPUs), and
  // give each slot this much memory (0: what a task asks for).
  int slots_per_gpu = 1;
  int64_t memory_mib_per_slot = 0;
};

// A set of identical machines one provider starts and stops.
struct NodeGroup {
  std::string name;
  std::string provider;  // the provider kind that starts its machines ("local", "cli", ...)
  std::string instance_type;
  GpuSpec gpus;
  int slots = 0;  // tasks a node runs at once, like the worker's `slots`: 0 = one per GPU, else 1
  double price_per_hour = 0;  // per node, in the farm's currency
  Market market = Market::kOnDemand;
  int min_nodes = 0;
  int max_nodes = 0;
  std::set<std::string> pools, tags;  // what its workers register with
  std::optional<Seconds> boot_time;   // request -> registered; unset: Settings::default_boot_time
};

// Tasks left for a deadline (waiting and running), and the time they must be done by.
struct Deadline {
  TimePoint at;
  int64_t tasks_left = 0;
};

// Tasks that share their needs (typically one job's), as the policy sees the queue. Only tasks
// the scheduler would dispatch now belong here: a task held back by a project cap or a
// dependency is not demand, or the nodes added for it would idle.
struct DemandClass {
  std::string name;  // for reasons and forecasts, e.g. "job 42 (shot010)"
  int64_t tasks_waiting = 0;
  int64_t tasks_running = 0;       // on the groups' nodes; half of each is assumed left to run
  std::vector<std::string> pools;  // empty: any pool, else any one of them
  std::vector<std::string> tags;   // all required
  int gpus = 0;                    // per task
  int64_t min_gpu_memory_mib = 0;  // per GPU
  double gpu_share = 0;            // (0, 1]: part of one GPU (resources.gpu_share); 0: whole GPUs
  double seconds_per_task = 0;     // measured mean or an estimate; <= 0: default_task_seconds
  bool interruptible = true;       // may run on spot
  std::optional<Deadline> deadline;
};
struct Demand {
  std::vector<DemandClass> classes;  // in dispatch priority order (ties are served in this order)
};

enum class NodeState { kIdle, kBusy, kDraining };
struct Node {  // registered
  std::string id;
  NodeState state = NodeState::kIdle;
  TimePoint idle_since{};               // when kIdle: since its last task ended (or it registered)
  std::optional<TimePoint> busy_until;  // when kBusy: when its task should end, if known
};
struct PendingNode {  // requested, not registered yet
  std::string id;
  TimePoint requested_at{};
};

// What the daemon knows about one group's machines; it updates this as it applies plans.
struct GroupState {
  std::vector<PendingNode> pending;
  std::vector<Node> nodes;
  std::optional<TimePoint> last_scale_out;  // set to `now` when a plan's add > 0 is applied
  std::optional<TimePoint> backoff_until;   // spot: no new nodes before then
  std::string backoff_cause;                // "a provider error", "a spot reclaim"
};

struct Settings {
  double budget_per_hour = 0;             // the whole farm; 0: no cap
  Seconds horizon{15 * 60};               // waiting work should be done within it
  Seconds scale_in_grace{5 * 60};         // idle this long before removal
  Seconds cooldown{10 * 60};              // no scale-in this soon after a scale-out
  double scale_in_hysteresis = 0.2;       // keep wanted x (1 + this) when scaling in
  Seconds registration_timeout{10 * 60};  // a request not registered by then: gone
  Seconds spot_backoff{15 * 60};          // after a spot reclaim or provider error
  Seconds default_boot_time{3 * 60};      // for groups without an estimate
  double default_task_seconds = 300;      // for demand without a measurement
  double deadline_margin = 0.1;  // deadline work aims to be done this share of the time left early
};

// Marks a spot failure (a reclaim, or a provider that cannot supply the capacity): no new nodes
// in the group until now + settings.spot_backoff.
void BackOff(GroupState& state, const Settings& settings, TimePoint now, std::string cause);

enum class Action {
  kScaleOut,       // nodes to request (or the min floor)
  kScaleIn,        // nodes to drain (idle ones end at once)
  kGiveUp,         // requests that never registered
  kHold,           // something wanted but held back: budget, max, cooldown, back-off
  kDeadline,       // a deadline forecast that needed capacity, or that will be missed
  kUnschedulable,  // demand no group could ever run ("never", not "not now")
};
const char* ActionName(Action action);

struct Decision {
  Action action = Action::kHold;
  std::string group;  // "" for farm-wide decisions
  int nodes = 0;      // the change it makes: +added, -drained or given up
  std::string reason;
};

struct GroupPlan {
  std::string group;
  int add = 0;                             // nodes to request now
  std::vector<std::string> drain;          // stop dispatching; terminate once idle (idle: now)
  std::vector<std::string> give_up;        // pending requests to terminate
  std::optional<TimePoint> backoff_until;  // set: store it with backoff_cause in GroupState
  std::string backoff_cause;
  int nodes_after = 0;  // registered (not draining) + pending after the plan is applied
};

struct DeadlineForecast {
  std::string demand;
  TimePoint deadline;
  std::optional<TimePoint> before;  // with the capacity there was; nullopt: none could run it
  std::optional<TimePoint> finish;  // with the plan applied
  bool met() const { return finish && *finish <= deadline; }
};

struct Plan {
  std::vector<GroupPlan> groups;  // one per group, in the order given
  std::vector<DeadlineForecast> forecasts;
  std::vector<Decision> decisions;
  double cost_per_hour = 0;  // every node after the plan (draining ones until they end)

  const GroupPlan* Find(const std::string& group) const;
};

// The plan for this tick. `states` is keyed by group name (a group with no entry has no nodes).
// Assumes WhyInvalid(groups, settings) is empty.
Plan Decide(const std::vector<NodeGroup>& groups, const std::map<std::string, GroupState>& states,
            const Demand& demand, const Settings& settings, TimePoint now);

// Why these groups and settings cannot be used ("" when they can); the config loader turns it
// into Status::InvalidArgument.
std::string WhyInvalid(const std::vector<NodeGroup>& groups, const Settings& settings);

// "10:42 UTC": how reasons show times.
std::string FormatClock(TimePoint t);

}  // namespace tessera::autoscaler
