#include "scheduler/broker/worker_registry.h"

#include <algorithm>

namespace tessera::broker {

WorkerConn& WorkerRegistry::Add(const std::string& identity, WorkerConn conn,
                                Clock::time_point now) {
  conn.disabled = disabled_names_.count(conn.offer.name) > 0;
  conn.last_heard = now;
  conn.idle_since = conn.metered_until = now;
  return workers_[identity] = std::move(conn);
}

WorkerConn* WorkerRegistry::Find(const std::string& identity) {
  auto it = workers_.find(identity);
  return it == workers_.end() ? nullptr : &it->second;
}

const WorkerConn* WorkerRegistry::Find(const std::string& identity) const {
  auto it = workers_.find(identity);
  return it == workers_.end() ? nullptr : &it->second;
}

WorkerRegistry::Map::iterator WorkerRegistry::FindByName(const std::string& name) {
  return std::find_if(workers_.begin(), workers_.end(),
                      [&](const auto& entry) { return entry.second.offer.name == name; });
}

WorkerConn* WorkerRegistry::MarkHeard(const std::string& identity, Clock::time_point now) {
  WorkerConn* worker = Find(identity);
  if (worker) worker->last_heard = now;
  return worker;
}

std::vector<std::string> WorkerRegistry::Silent(Clock::time_point now) const {
  std::vector<std::string> silent;
  for (const auto& [identity, worker] : workers_) {
    if (now - worker.last_heard > deadline_) silent.push_back(identity);
  }
  return silent;
}

std::optional<std::chrono::milliseconds> WorkerRegistry::AliveFor(const WorkerConn& worker,
                                                                  Clock::time_point now) const {
  const auto silent = now - worker.last_heard;
  if (silent > deadline_) return std::nullopt;
  return std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - silent);
}

std::vector<std::pair<int64_t, int64_t>> WorkerRegistry::LastSeen(Clock::time_point now,
                                                                  int64_t wall_now_ms) const {
  std::vector<std::pair<int64_t, int64_t>> seen;
  seen.reserve(workers_.size());
  for (const auto& [identity, worker] : workers_) {
    auto age = std::chrono::duration_cast<std::chrono::milliseconds>(now - worker.last_heard);
    seen.emplace_back(worker.offer.id, wall_now_ms - age.count());
  }
  return seen;
}

void WorkerRegistry::SetDisabledNames(std::set<std::string> names) {
  disabled_names_ = std::move(names);
  for (auto& [identity, worker] : workers_) {
    worker.disabled = disabled_names_.count(worker.offer.name) > 0;
  }
}

void WorkerRegistry::SetDisabled(const std::string& name, bool disabled) {
  if (disabled) {
    disabled_names_.insert(name);
  } else {
    disabled_names_.erase(name);
  }
  if (auto it = FindByName(name); it != workers_.end()) it->second.disabled = disabled;
}

WorkerRegistry::Map::iterator WorkerRegistry::RequestDrain(const std::string& name) {
  auto it = FindByName(name);
  if (it != workers_.end()) it->second.draining = it->second.drain_requested = true;
  return it;
}

bool WorkerRegistry::MarkDraining(WorkerConn& worker) {
  if (worker.draining) return false;
  worker.draining = true;
  return true;
}

std::vector<std::pair<int64_t, double>> WorkerRegistry::Meter(Clock::time_point now,
                                                              const std::string* only) {
  std::vector<std::pair<int64_t, double>> costs;
  const auto meter = [&](WorkerConn& worker) {
    const double hours = std::chrono::duration<double>(now - worker.metered_until).count() / 3600;
    worker.metered_until = now;
    if (worker.price.per_hour > 0) {
      costs.emplace_back(worker.offer.id, worker.price.per_hour * hours);
    }
  };
  if (only) {
    // One worker leaving: a lookup, so a mass disconnect stays linear.
    if (WorkerConn* worker = Find(*only)) meter(*worker);
  } else {
    for (auto& [identity, worker] : workers_) meter(worker);
  }
  return costs;
}

void WorkerRegistry::Book(WorkerConn& worker, int64_t task_id, int attempt,
                          const spec::ResourceSpec& need, const std::vector<int>& gpus) {
  worker.tasks.insert(task_id);
  worker.claims.Take(task_id, attempt, need, worker.offer, gpus);
}

void WorkerRegistry::Release(WorkerConn& worker, int64_t task_id, int attempt,
                             Clock::time_point now) {
  worker.tasks.erase(task_id);
  if (worker.tasks.empty()) worker.idle_since = now;
  // A stopping lease keeps its GPU claims until the worker confirms it has stopped.
  auto stopping = worker.stopping.find(task_id);
  if (stopping == worker.stopping.end() || stopping->second != attempt) {
    worker.claims.Release(task_id, attempt);
  }
}

void WorkerRegistry::MarkStopping(WorkerConn& worker, int64_t task_id, int attempt) {
  worker.stopping[task_id] = attempt;
}

void WorkerRegistry::FreeStopped(WorkerConn& worker,
                                 const std::vector<protocol::TaskRef>& running) {
  for (auto it = worker.stopping.begin(); it != worker.stopping.end();) {
    const int64_t task_id = it->first;
    if (std::any_of(running.begin(), running.end(),
                    [&](const protocol::TaskRef& r) { return r.task_id == task_id; })) {
      ++it;
    } else {
      worker.claims.Release(it->first, it->second);
      it = worker.stopping.erase(it);
    }
  }
}

void WorkerRegistry::ForgetLeases() {
  for (auto& [identity, worker] : workers_) {
    worker.tasks.clear();
    worker.stopping.clear();
    worker.claims.Reset(worker.offer.gpus.size());
    worker.pending_acks.clear();
  }
}

std::vector<std::pair<const WorkerConn*, store::WorkerState>> WorkerRegistry::TakeStateChanges() {
  std::vector<std::pair<const WorkerConn*, store::WorkerState>> changed;
  for (auto& [identity, worker] : workers_) {
    const auto state = worker.tasks.empty() && worker.stopping.empty() ? store::WorkerState::kIdle
                                                                       : store::WorkerState::kBusy;
    if (state != worker.stored_state) {
      worker.stored_state = state;
      changed.emplace_back(&worker, state);
    }
  }
  return changed;
}

}  // namespace tessera::broker
