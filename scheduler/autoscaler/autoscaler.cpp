#include "scheduler/autoscaler/autoscaler.h"

#include <sodium.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "scheduler/broker/broker.h"
#include "shared/base/file_io.h"
#include "shared/base/logging.h"
#include "shared/base/wall_time.h"

namespace tessera::autoscaler {

namespace fs = std::filesystem;

namespace {

int64_t ToMs(TimePoint t) { return int64_t{t.time_since_epoch().count()} * 1000; }
TimePoint FromMs(int64_t ms) { return TimePoint(Seconds(ms / 1000)); }

// "[a, b]": a YAML flow list for cloud-init.
std::string FlowList(const std::set<std::string>& items) {
  std::string out = "[";
  for (const std::string& i : items) out += (out.size() > 1 ? ", " : "") + nlohmann::json(i).dump();
  return out + "]";
}

// Standard base64 (cloud APIs that take user data inline want it so).
std::string Base64(const std::string& in) {
  std::string out(sodium_base64_ENCODED_LEN(in.size(), sodium_base64_VARIANT_ORIGINAL), '\0');
  sodium_bin2base64(out.data(), out.size(), reinterpret_cast<const unsigned char*>(in.data()),
                    in.size(), sodium_base64_VARIANT_ORIGINAL);
  out.pop_back();  // the terminating NUL
  return out;
}

}  // namespace

Autoscaler::Autoscaler(store::Store& store, broker::Broker& broker, AutoscalerConfig config,
                       AutoscalerOptions options, const Clock& clock)
    : store_(store),
      broker_(broker),
      config_(std::move(config)),
      options_(std::move(options)),
      clock_(clock) {}

TimePoint Autoscaler::Now() const { return FromMs(clock_.WallMs()); }

Autoscaler::~Autoscaler() { Stop(); }

Status Autoscaler::MakeProviders() {
  for (const GroupConfig& g : config_.groups) {
    StatusOr<std::unique_ptr<Provider>> provider = MakeProvider(g.provider);
    if (!provider.ok()) {
      return provider.status().WithContext("autoscaler.groups." + g.group.name);
    }
    groups_.push_back({g, std::move(provider).value(), {}});
  }
  return Status::Ok();
}

Status Autoscaler::Start(const std::string& broker_endpoint) {
  broker_endpoint_ = broker_endpoint;
  TSR_ASSIGN_OR_RETURN(std::vector<store::AutoscalerNodeRecord> kept, store_.ListAutoscalerNodes());
  {
    std::lock_guard lock(view_mu_);
    for (const store::AutoscalerNodeRecord& r : kept) {
      const Group* group = FindGroup(r.group);
      if (!group) {
        spdlog::warn(
            "autoscaler: node {} belongs to group {}, which is no longer configured; "
            "it is left alone",
            NodeKey(r), r.group);
        continue;
      }
      if (group->config.provider.kind == "local") {
        // Local nodes are this process's children: an earlier scheduler's are gone with it.
        (void)store_.DeleteAutoscalerNode(r.id);
        continue;
      }
      nodes_[r.id] = {r, false};
      if (!r.worker_name.empty()) node_groups_[r.worker_name] = r.group;
    }
  }
  spdlog::info("autoscaler: {} node group(s), {} node(s) kept from before, a tick every {} s",
               groups_.size(), nodes_.size(), config_.interval_s);
  Publish(Plan{}, {}, Now());  // readers see the groups before the first tick
  thread_ = std::thread([this] { Run(); });
  return Status::Ok();
}

void Autoscaler::Stop() {
  {
    std::lock_guard lock(wake_mu_);
    stop_ = true;
  }
  wake_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Autoscaler::Run() {
  std::unique_lock lock(wake_mu_);
  // No exception leaves this thread: a tick that throws is skipped (and logged, at most once a
  // minute), and the next one plans afresh from the farm as it is then.
  logging::RateLimitedLog failed(std::chrono::minutes(1));
  while (!stop_) {
    lock.unlock();
    try {
      Tick();
    } catch (const std::exception& e) {
      failed.Log(spdlog::level::err, "tick", "autoscaler: a tick failed: {}; trying again",
                 e.what());
    } catch (...) {
      failed.Log(spdlog::level::err, "tick", "autoscaler: a tick failed; trying again");
    }
    lock.lock();
    wake_cv_.wait_for(lock, std::chrono::seconds(config_.interval_s), [this] { return stop_; });
  }
}

std::string Autoscaler::NodeKey(const store::AutoscalerNodeRecord& r) {
  return r.worker_name.empty() ? "request-" + std::to_string(r.id) : r.worker_name;
}

Autoscaler::Group* Autoscaler::FindGroup(const std::string& name) {
  for (Group& g : groups_) {
    if (g.config.group.name == name) return &g;
  }
  return nullptr;
}

const NodeGroup* Autoscaler::GroupOf(const std::string& worker_name) const {
  std::string group;
  {
    std::lock_guard lock(view_mu_);
    auto it = node_groups_.find(worker_name);
    if (it != node_groups_.end()) group = it->second;
  }
  for (const Group& g : groups_) {
    const std::string prefix = g.provider ? g.provider->NamePrefix() : "";
    if (g.config.group.name == group ||
        (group.empty() && !prefix.empty() && worker_name.starts_with(prefix))) {
      return &g.config.group;
    }
  }
  return nullptr;
}

void Autoscaler::Tick() {
  StatusOr<broker::CapacityView> view = broker_.Capacity();
  if (!view.ok()) {
    spdlog::error("autoscaler: cannot read the farm: {}", view.status().ToString());
    return;
  }
  const TimePoint now = Now();
  ClaimNamedNodes(*view);
  SettleDepartures(*view, now);
  std::map<std::string, GroupState> states = GroupStates(*view, now);
  std::vector<int64_t> job_of_class;
  const Demand demand = DemandFrom(*view, &job_of_class);
  std::vector<NodeGroup> specs;
  for (const Group& g : groups_) specs.push_back(g.config.group);
  const Plan plan = Decide(specs, states, demand, config_.settings, now);
  std::set<std::string> decisions;
  for (const Decision& d : plan.decisions) {
    const std::string key = std::string(ActionName(d.action)) + "|" + d.group + "|" + d.reason;
    // A decision that only repeats the last tick's (a hold, a forecast) is not news.
    if (!last_decisions_.count(key)) Record(d, now);
    decisions.insert(key);
  }
  last_decisions_ = std::move(decisions);
  Apply(plan, now);
  Publish(plan, job_of_class, now);
}

void Autoscaler::ClaimNamedNodes(const broker::CapacityView& view) {
  std::set<std::string> known;
  for (const auto& [id, node] : nodes_) known.insert(node.record.worker_name);
  for (const broker::CapacityView::WorkerActivity& w : view.workers) {
    if (known.count(w.name)) continue;
    for (Group& g : groups_) {
      const std::string prefix = g.provider->NamePrefix();
      if (prefix.empty() || !w.name.starts_with(prefix)) continue;
      // The oldest request of the group still waiting for its node.
      auto pending = std::find_if(nodes_.begin(), nodes_.end(), [&](const auto& entry) {
        return entry.second.record.group == g.config.group.name &&
               entry.second.record.worker_name.empty();
      });
      if (pending == nodes_.end()) break;
      store::AutoscalerNodeRecord& r = pending->second.record;
      r.worker_name = r.provider_id = w.name;
      if (Status s = store_.UpdateAutoscalerNode(r); !s.ok()) {
        spdlog::error("autoscaler: cannot record node {}: {}", w.name, s.ToString());
      }
      std::lock_guard lock(view_mu_);
      node_groups_[w.name] = g.config.group.name;
      break;
    }
  }
}

void Autoscaler::SettleDepartures(const broker::CapacityView& view, TimePoint now) {
  std::set<std::string> connected;
  for (const broker::CapacityView::WorkerActivity& w : view.workers) connected.insert(w.name);
  std::vector<int64_t> gone;
  for (auto& [id, node] : nodes_) {
    store::AutoscalerNodeRecord& r = node.record;
    const bool here = !r.worker_name.empty() && connected.count(r.worker_name);
    if (here) {
      node.seen = true;
      continue;
    }
    Group* group = FindGroup(r.group);
    if (r.draining) {
      // Scaled in and now gone: switch the machine off (a provider whose termination drains
      // did so when the drain began).
      if (!group->provider->TerminateDrains()) Terminate(*group, node, "it was drained");
      gone.push_back(id);
    } else if (node.seen) {
      node.seen = false;
      if (group->config.group.market == Market::kSpot) {
        BackOff(group->state, config_.settings, now, "a spot reclaim");
        Record({Action::kGiveUp, r.group, -1,
                "spot node " + r.worker_name +
                    " left without being drained (taken back by the "
                    "cloud); " +
                    r.group + " backs off until " + FormatClock(*group->state.backoff_until)},
               now);
        Terminate(*group, node, "it was taken back");
        gone.push_back(id);
      } else {
        // Another kind of node may come back (a restarted worker); until then it is a request
        // again, given up if it does not register within the registration timeout.
        r.requested_at_ms = ToMs(now);
      }
    }
  }
  for (int64_t id : gone) Forget(id);
}

std::map<std::string, GroupState> Autoscaler::GroupStates(const broker::CapacityView& view,
                                                          TimePoint now) {
  std::map<std::string, const broker::CapacityView::WorkerActivity*> by_name;
  for (const auto& w : view.workers) by_name[w.name] = &w;
  std::map<std::string, GroupState> states;
  for (Group& g : groups_) {
    g.state.pending.clear();
    g.state.nodes.clear();
  }
  for (const auto& [id, node] : nodes_) {
    const store::AutoscalerNodeRecord& r = node.record;
    Group* g = FindGroup(r.group);
    auto w = r.worker_name.empty() ? by_name.end() : by_name.find(r.worker_name);
    if (w == by_name.end()) {
      g->state.pending.push_back({NodeKey(r), FromMs(r.requested_at_ms)});
      continue;
    }
    const broker::CapacityView::WorkerActivity& a = *w->second;
    Node policy_node;
    policy_node.id = NodeKey(r);
    if (r.draining || a.draining) {
      policy_node.state = NodeState::kDraining;
    } else if (a.busy) {
      policy_node.state = NodeState::kBusy;
      if (a.busy_for_seconds) {
        policy_node.busy_until = now + Seconds(static_cast<int64_t>(*a.busy_for_seconds));
      }
    } else {
      policy_node.state = NodeState::kIdle;
      policy_node.idle_since = now - Seconds(static_cast<int64_t>(a.idle_seconds));
    }
    g->state.nodes.push_back(std::move(policy_node));
  }
  for (Group& g : groups_) states[g.config.group.name] = g.state;
  return states;
}

Demand Autoscaler::DemandFrom(const broker::CapacityView& view,
                              std::vector<int64_t>* job_of_class) const {
  Demand demand;
  for (const broker::CapacityView::JobDemand& j : view.jobs) {
    DemandClass c;
    c.name = "job " + std::to_string(j.job_id) + " (" + j.name + ")";
    c.tasks_waiting = j.waiting;
    c.tasks_running = j.running;
    c.pools = j.pools;
    c.tags = j.tags;
    c.gpus = j.resources.gpus;
    c.min_gpu_memory_mib = j.resources.gpu_memory_mb;
    c.gpu_share = j.resources.gpu_share;
    c.seconds_per_task = j.seconds_per_task;
    c.interruptible = j.interruptible;
    if (j.deadline_ms) c.deadline = Deadline{FromMs(*j.deadline_ms), j.waiting + j.running};
    demand.classes.push_back(std::move(c));
    job_of_class->push_back(j.job_id);
  }
  return demand;
}

void Autoscaler::Apply(const Plan& plan, TimePoint now) {
  std::map<std::string, int64_t> id_of;  // policy key -> request id
  for (const auto& [id, node] : nodes_) id_of[NodeKey(node.record)] = id;
  for (const GroupPlan& p : plan.groups) {
    Group* group = FindGroup(p.group);
    if (p.backoff_until) {
      group->state.backoff_until = p.backoff_until;
      group->state.backoff_cause = p.backoff_cause;
    }
    for (const std::string& key : p.give_up) {
      auto it = id_of.find(key);
      if (it == id_of.end()) continue;
      Terminate(*group, nodes_.at(it->second), "it never registered");
      Forget(it->second);
    }
    for (const std::string& key : p.drain) {
      auto it = id_of.find(key);
      if (it == id_of.end()) continue;
      Requested& node = nodes_.at(it->second);
      if (node.record.draining) continue;
      node.record.draining = true;
      if (Status s = store_.UpdateAutoscalerNode(node.record); !s.ok()) {
        spdlog::error("autoscaler: cannot record node {}: {}", key, s.ToString());
      }
      if (group->provider->TerminateDrains()) {
        Terminate(*group, node, "scaled in");
      } else if (Status s = broker_.DrainWorker(node.record.worker_name,
                                                "scaled in by the "
                                                "autoscaler");
                 !s.ok()) {
        spdlog::warn("autoscaler: cannot drain {}: {}", key, s.message());
      }
    }
    if (p.add > 0) RequestNodes(*group, p.add, now);
  }
}

void Autoscaler::RequestNodes(Group& group, int count, TimePoint now) {
  const std::string& name = group.config.group.name;
  for (int i = 0; i < count; ++i) {
    store::AutoscalerNodeRecord r;
    r.group = name;
    r.requested_at_ms = ToMs(now);
    StatusOr<int64_t> id = store_.AddAutoscalerNode(r);
    if (!id.ok()) {
      spdlog::error("autoscaler: cannot record a node request: {}", id.status().ToString());
      return;
    }
    r.id = *id;
    const bool names_itself = !group.provider->NamePrefix().empty();
    const std::string worker_name = names_itself ? "" : name + "-" + std::to_string(r.id);
    StatusOr<NodeRequest> request = MakeRequest(group, worker_name);
    StatusOr<std::string> created =
        request.ok() ? group.provider->Create(*request) : StatusOr<std::string>(request.status());
    if (!created.ok()) {
      (void)store_.DeleteAutoscalerNode(r.id);
      BackOff(group.state, config_.settings, now, "a provider error");
      Record({Action::kHold, name, 0,
              "could not start a node in " + name + ": " + created.status().message() +
                  "; backed off until " + FormatClock(*group.state.backoff_until)},
             now);
      return;
    }
    r.worker_name = worker_name;
    r.provider_id = *created;
    if (Status s = store_.UpdateAutoscalerNode(r); !s.ok()) {
      spdlog::error("autoscaler: cannot record node {}: {}", worker_name, s.ToString());
    }
    nodes_[r.id] = {r, false};
    if (!worker_name.empty()) {
      std::lock_guard lock(view_mu_);
      node_groups_[worker_name] = name;
    }
    spdlog::info("autoscaler: requested node {} in {} (provider id {})", NodeKey(r), name,
                 r.provider_id.empty() ? "to come" : r.provider_id);
  }
  group.state.last_scale_out = now;
}

StatusOr<NodeRequest> Autoscaler::MakeRequest(const Group& group, const std::string& name) {
  const NodeGroup& spec = group.config.group;
  NodeRequest request;
  request.group = spec.name;
  request.worker_name = name;
  request.pools.assign(spec.pools.begin(), spec.pools.end());
  request.tags.assign(spec.tags.begin(), spec.tags.end());
  request.vars = group.config.vars;
  request.vars["instance_type"] = spec.instance_type;
  const std::string address =
      config_.scheduler_address.empty() ? broker_endpoint_ : config_.scheduler_address;
  request.vars["scheduler"] = address;
  request.vars["public_key"] = broker_.public_key_hex();
  std::string join_token;
  if (broker_.secure()) {
    // One use, and only as long as a node may take to register.
    const int64_t ttl = config_.settings.registration_timeout.count() + 600;
    TSR_ASSIGN_OR_RETURN(broker::NewJoinToken token,
                         broker_.CreateJoinToken("autoscaler node " + name, ttl, 1, name));
    join_token = token.token;
  }
  request.vars["join_token"] = join_token;
  if (group.config.cloud_init.empty()) return request;
  StatusOr<std::string> read = file_io::ReadAll(group.config.cloud_init);
  if (!read.ok()) {
    return read.status().WithContext("autoscaler.groups." + spec.name + ".cloud_init");
  }
  std::string text = std::move(read).value();
  const auto package = group.config.vars.find("package_url");
  const auto cloud = group.config.vars.find("cloud_provider");
  const std::map<std::string, std::string> values = {
      {"TESSERA_SCHEDULER_ADDRESS", address},
      {"TESSERA_SCHEDULER_PUBLIC_KEY", broker_.public_key_hex()},
      {"TESSERA_JOIN_TOKEN", join_token},
      {"TESSERA_WORKER_NAME", name},
      {"TESSERA_POOLS", FlowList(spec.pools)},
      {"TESSERA_TAGS", FlowList(spec.tags)},
      {"TESSERA_PACKAGE_URL", package == group.config.vars.end() ? "" : package->second},
      {"TESSERA_CLOUD_PROVIDER", cloud == group.config.vars.end() ? "none" : cloud->second}};
  for (const auto& [key, value] : values) {
    const std::string placeholder = "${" + key + "}";
    for (size_t at = text.find(placeholder); at != std::string::npos;
         at = text.find(placeholder, at + value.size())) {
      text.replace(at, placeholder.size(), value);
    }
  }
  // It holds a join token: readable by the scheduler's user only.
  const fs::path dir = fs::path(options_.data_dir) / "autoscaler";
  std::error_code ec;
  fs::create_directories(dir, ec);
  const std::string path =
      (dir /
       ((name.empty() ? spec.name + "-" + std::to_string(Now().time_since_epoch().count()) : name) +
        ".user-data"))
          .string();
  TSR_RETURN_IF_ERROR(file_io::WriteAtomically(path, {text}, 0600));
  request.vars["user_data"] = path;
  request.vars["user_data_base64"] = Base64(text);
  return request;
}

void Autoscaler::Terminate(Group& group, Requested& node, const std::string& why) {
  const store::AutoscalerNodeRecord& r = node.record;
  // A provider that names its nodes takes an empty id as "one node that has not registered"
  // (kubernetes: one replica fewer; its ReplicaSet removes a pending pod first).
  if (r.provider_id.empty() && group.provider->NamePrefix().empty()) {
    spdlog::warn("autoscaler: node {} in {} has no provider id; {} must remove it", NodeKey(r),
                 r.group, group.config.provider.kind);
    return;
  }
  if (Status s = group.provider->Terminate(r.provider_id); !s.ok()) {
    spdlog::warn("autoscaler: terminating node {} ({}): {}", NodeKey(r), r.provider_id,
                 s.message());
  } else {
    spdlog::info("autoscaler: terminated node {} ({}): {}", NodeKey(r), r.provider_id, why);
  }
}

void Autoscaler::Forget(int64_t node_id) {
  auto it = nodes_.find(node_id);
  if (it == nodes_.end()) return;
  if (Status s = store_.DeleteAutoscalerNode(node_id); !s.ok()) {
    spdlog::error("autoscaler: cannot forget node {}: {}", NodeKey(it->second.record),
                  s.ToString());
  }
  nodes_.erase(it);
}

void Autoscaler::Record(const Decision& d, TimePoint now) {
  const std::string message = std::string(ActionName(d.action)) + ": " + d.reason;
  spdlog::info("autoscaler: {}", message);
  (void)store_.AddEvent(std::nullopt, std::nullopt, std::nullopt, "autoscaler", message);
  if (options_.events) {
    options_.events->Publish("notice", {{"event", "autoscaler"},
                                        {"message", message},
                                        {"action", ActionName(d.action)},
                                        {"group", d.group},
                                        {"nodes", d.nodes}});
  }
  std::lock_guard lock(view_mu_);
  decisions_.push_back({now, d});
  if (decisions_.size() > kDecisionsKept) decisions_.pop_front();
}

void Autoscaler::Publish(const Plan& plan, const std::vector<int64_t>& job_of_class,
                         TimePoint now) {
  const auto iso = [](TimePoint t) { return wall_time::IsoTime(ToMs(t)); };
  nlohmann::json groups = nlohmann::json::array();
  double cost_per_hour = 0;
  for (const Group& g : groups_) {
    const NodeGroup& spec = g.config.group;
    nlohmann::json nodes = nlohmann::json::array();
    int running = 0, planned = 0;  // planned: what the plan left after carrying it out
    for (const auto& [id, node] : nodes_) {
      if (node.record.group != spec.name) continue;
      planned += !node.record.draining;
      std::string state = "requested";
      for (const Node& n : g.state.nodes) {
        if (n.id != NodeKey(node.record)) continue;
        state = n.state == NodeState::kBusy   ? "busy"
                : n.state == NodeState::kIdle ? "idle"
                                              : "draining";
      }
      if (node.record.draining) state = "draining";
      if (state != "requested") ++running;
      nodes.push_back({{"name", NodeKey(node.record)},
                       {"provider_id", node.record.provider_id},
                       {"state", state},
                       {"requested_at", wall_time::IsoTime(node.record.requested_at_ms)}});
    }
    cost_per_hour += running * spec.price_per_hour;
    nlohmann::json group = {{"name", spec.name},
                            {"provider", g.config.provider.kind},
                            {"instance_type", spec.instance_type},
                            {"market", MarketName(spec.market)},
                            {"price_per_hour", spec.price_per_hour},
                            {"gpus",
                             {{"count", spec.gpus.count},
                              {"model", spec.gpus.model},
                              {"memory_mib", spec.gpus.memory_mib}}},
                            {"min_nodes", spec.min_nodes},
                            {"max_nodes", spec.max_nodes},
                            {"pools", spec.pools},
                            {"tags", spec.tags},
                            {"nodes", std::move(nodes)},
                            {"planned_nodes", planned},
                            {"backoff_until", nullptr},
                            {"backoff_cause", nullptr}};
    if (g.state.backoff_until && *g.state.backoff_until > now) {
      group["backoff_until"] = iso(*g.state.backoff_until);
      group["backoff_cause"] = g.state.backoff_cause;
    }
    groups.push_back(std::move(group));
  }
  std::map<int64_t, nlohmann::json> forecasts;
  nlohmann::json forecast_list = nlohmann::json::array();
  for (const DeadlineForecast& f : plan.forecasts) {
    // Forecasts name their demand class; classes are one per job, in job_of_class order.
    int64_t job_id = 0;
    for (size_t i = 0; i < job_of_class.size(); ++i) {
      if (f.demand.starts_with("job " + std::to_string(job_of_class[i]) + " ")) {
        job_id = job_of_class[i];
      }
    }
    nlohmann::json j = {{"job_id", job_id},
                        {"deadline", iso(f.deadline)},
                        {"finish", f.finish ? nlohmann::json(iso(*f.finish)) : nullptr},
                        {"met", f.met()}};
    forecasts[job_id] = j;
    forecast_list.push_back(std::move(j));
  }
  std::lock_guard lock(view_mu_);
  nlohmann::json decisions = nlohmann::json::array();
  for (auto it = decisions_.rbegin(); it != decisions_.rend(); ++it) {
    decisions.push_back({{"at", iso(it->at)},
                         {"action", ActionName(it->decision.action)},
                         {"group", it->decision.group},
                         {"nodes", it->decision.nodes},
                         {"reason", it->decision.reason}});
  }
  const Settings& s = config_.settings;
  described_ = {{"enabled", true},
                {"updated_at", iso(now)},
                {"cost_per_hour", cost_per_hour},
                {"planned_cost_per_hour", plan.cost_per_hour},
                {"budget_per_hour", s.budget_per_hour},
                {"settings",
                 {{"interval_s", config_.interval_s},
                  {"horizon_s", s.horizon.count()},
                  {"scale_in_grace_s", s.scale_in_grace.count()},
                  {"cooldown_s", s.cooldown.count()},
                  {"registration_timeout_s", s.registration_timeout.count()},
                  {"spot_backoff_s", s.spot_backoff.count()}}},
                {"groups", std::move(groups)},
                {"forecasts", std::move(forecast_list)},
                {"decisions", std::move(decisions)}};
  forecasts_ = std::move(forecasts);
}

nlohmann::json Autoscaler::Describe() const {
  std::lock_guard lock(view_mu_);
  if (described_.empty()) return {{"enabled", true}, {"groups", nlohmann::json::array()}};
  return described_;
}

std::optional<nlohmann::json> Autoscaler::ForecastFor(int64_t job_id) const {
  std::lock_guard lock(view_mu_);
  auto it = forecasts_.find(job_id);
  if (it == forecasts_.end()) return std::nullopt;
  return it->second;
}

}  // namespace tessera::autoscaler
