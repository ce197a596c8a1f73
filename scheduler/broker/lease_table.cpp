#include "scheduler/broker/lease_table.h"

#include <algorithm>
#include <climits>

#include "scheduler/store/store.h"
#include "shared/jobs/job_file.h"

namespace tessera::broker {

assembler::FrameOutput FrameOutputOf(const store::JobRecord& job) {
  return {job.output_dir, job.output_pattern, job.output_formats, job.exr_float};
}

bool LeaseTable::Remove(int64_t task_id) {
  auto it = tasks_.find(task_id);
  if (it == tasks_.end()) return false;
  const int64_t job_id = it->second.job_id;
  tasks_.erase(it);
  if (--jobs_[job_id].unfinished > 0) return false;
  jobs_.erase(job_id);
  return true;
}

void LeaseTable::Clear() {
  tasks_.clear();
  jobs_.clear();
  queue_.clear();
  gates_.clear();
  parts_left_.clear();
  reattach_.clear();
}

void LeaseTable::DropQueued(int64_t job_id) {
  const int priority = jobs_[job_id].priority;
  auto first = queue_.lower_bound({-priority, job_id, INT_MIN, INT64_MIN});
  auto last = queue_.upper_bound({-priority, job_id, INT_MAX, INT64_MAX});
  queue_.erase(first, last);
}

bool LeaseTable::HasQueued(int64_t job_id, int priority) const {
  auto queued = queue_.lower_bound({-priority, job_id, INT_MIN, INT64_MIN});
  return queued != queue_.end() && std::get<1>(*queued) == job_id;
}

void LeaseTable::AddLease(LiveTask& task, const std::string& identity, int attempt,
                          std::vector<int> gpus, Clock::time_point now) {
  Lease lease;
  lease.attempt = attempt;
  lease.worker = identity;
  lease.gpus = std::move(gpus);
  lease.leased_at = lease.last_progress = now;
  task.leases.push_back(std::move(lease));
}

LiveTask* LeaseTable::FindLease(const std::string& identity, int64_t task_id, int attempt) {
  auto it = tasks_.find(task_id);
  if (it == tasks_.end()) return nullptr;
  const Lease* lease = it->second.LeaseOn(identity);
  return lease && lease->attempt == attempt ? &it->second : nullptr;
}

std::vector<LeaseTable::Expiry> LeaseTable::Expired(Clock::time_point now) const {
  std::vector<Expiry> expired;
  for (const auto& [task_id, task] : tasks_) {
    if (task.leases.empty()) continue;
    auto job = jobs_.find(task.job_id);
    if (job == jobs_.end()) continue;
    const int task_timeout_s = job->second.task_timeout_s;
    const int progress_timeout_s = job->second.progress_timeout_s;
    for (const Lease& lease : task.leases) {
      if (task_timeout_s > 0 && now - lease.leased_at > std::chrono::seconds(task_timeout_s)) {
        expired.push_back(
            {task_id, lease.worker, "timed out after " + std::to_string(task_timeout_s) + " s"});
      } else if (progress_timeout_s > 0 &&
                 now - lease.last_progress > std::chrono::seconds(progress_timeout_s)) {
        expired.push_back({task_id, lease.worker,
                           "no progress for " + std::to_string(progress_timeout_s) + " s"});
      }
    }
  }
  return expired;
}

std::vector<int64_t> LeaseTable::NotHeld(const std::string& identity,
                                         const std::set<int64_t>& leased,
                                         const protocol::Heartbeat& beat, Clock::time_point now,
                                         Clock::duration grace) const {
  const auto listed = [](const std::vector<protocol::TaskRef>& refs, int64_t task_id, int attempt) {
    return std::any_of(refs.begin(), refs.end(), [&](const protocol::TaskRef& r) {
      return r.task_id == task_id && r.attempt == attempt;
    });
  };
  std::vector<int64_t> lost;
  for (int64_t task_id : leased) {
    const Lease* lease = tasks_.at(task_id).LeaseOn(identity);
    if (lease && !listed(beat.running, task_id, lease->attempt) &&
        !listed(beat.delivering, task_id, lease->attempt) && now - lease->leased_at > grace) {
      lost.push_back(task_id);
    }
  }
  return lost;
}

std::vector<LeaseTable::Straggler> LeaseTable::Stragglers(Clock::time_point now, double factor,
                                                          double min_seconds) const {
  std::vector<Straggler> stragglers;
  if (factor <= 0) return stragglers;
  for (const auto& [task_id, task] : tasks_) {
    if (task.leases.size() != 1) continue;
    auto found = jobs_.find(task.job_id);
    if (found == jobs_.end()) continue;
    const JobInfo& job = found->second;
    if (job.tasks_done == 0) continue;
    // Only near the end of a job: none of its tasks is still waiting in the queue.
    if (HasQueued(task.job_id, job.priority)) continue;
    const double seconds =
        std::chrono::duration<double>(now - task.leases.front().leased_at).count();
    const double mean = job.done_seconds / static_cast<double>(job.tasks_done);
    if (seconds >= min_seconds && seconds > factor * mean) {
      stragglers.push_back({seconds, task_id});
    }
  }
  std::sort(stragglers.begin(), stragglers.end(),
            [](const Straggler& a, const Straggler& b) { return a.seconds > b.seconds; });
  return stragglers;
}

std::vector<int64_t> LeaseTable::ReattachesDue(Clock::time_point now) {
  std::vector<int64_t> due;
  for (auto it = reattach_.begin(); it != reattach_.end();) {
    if (now < it->second) {
      ++it;
      continue;
    }
    due.push_back(it->first);
    it = reattach_.erase(it);
  }
  return due;
}

FrameGate* LeaseTable::FindGate(int64_t job_id) {
  auto it = gates_.find(job_id);
  return it == gates_.end() ? nullptr : &it->second;
}

std::vector<int64_t> LeaseTable::FramesDone(int64_t job_id, int frame_start, int frame_end) {
  std::vector<int64_t> ready;
  FrameGate* gate = FindGate(job_id);
  if (gate == nullptr) return ready;
  gate->undone.erase(frame_start);
  // Waiters are keyed by their first frame; a waiter overlapping [frame_start, frame_end] starts
  // at most a chunk before it.
  auto first = gate->waiters.lower_bound(frame_start - spec::kMaxChunkSize);
  auto last = gate->waiters.upper_bound(frame_end);
  for (auto it = first; it != last;) {
    auto task = tasks_.find(it->second);
    if (task == tasks_.end() || task->second.frame_end < frame_start) {
      it = task == tasks_.end() ? gate->waiters.erase(it) : std::next(it);
      continue;
    }
    ready.push_back(it->second);
    it = gate->waiters.erase(it);
  }
  return ready;
}

void LeaseTable::DropUnusedGates() {
  for (auto it = gates_.begin(); it != gates_.end();) {
    const bool used = std::any_of(jobs_.begin(), jobs_.end(), [&](const auto& j) {
      const auto& deps = j.second.frame_deps;
      return std::find(deps.begin(), deps.end(), it->first) != deps.end();
    });
    it = used ? std::next(it) : gates_.erase(it);
  }
}

bool LeaseTable::IsLastPart(const LiveTask& task) const {
  auto left = parts_left_.find({task.job_id, task.frame_start});
  return left == parts_left_.end() || left->second <= 1;
}

}  // namespace tessera::broker
