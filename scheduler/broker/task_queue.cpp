#include "scheduler/broker/task_queue.h"

#include <spdlog/spdlog.h>

#include <iterator>

#include "scheduler/broker/event_sink.h"
#include "scheduler/store/store.h"

namespace tessera::broker {

void TaskQueue::Enqueue(Pass& pass, const LiveTask& task) {
  const JobInfo& job = table_.jobs()[task.job_id];
  if (job.paused || job.outputs_held || !job.waiting_on.empty() || job.inputs_pending) return;
  if (task.not_before > pass.now) {  // a licence failure's wait: EnqueueDue queues it then
    licence_waits_.emplace(task.not_before, task.task_id);
    return;
  }
  if (WaitsOnFrames(pass, task, job)) {
    for (int64_t dep : job.frame_deps) {
      GateFor(pass, dep).waiters.emplace(task.frame_start, task.task_id);
    }
    return;
  }
  table_.queue().insert(LeaseTable::KeyOf(task, job));
}

void TaskQueue::EnqueueJob(Pass& pass, int64_t job_id) {
  for (const auto& [id, task] : table_.tasks()) {
    // A frame being assembled has all its parts: nothing of it is rendered again.
    if (task.job_id == job_id && !task.running() && !task.assembling) Enqueue(pass, task);
  }
}

FrameGate& TaskQueue::GateFor(Pass& pass, int64_t job_id) {
  if (FrameGate* gate = table_.FindGate(job_id)) return *gate;
  FrameGate& gate = table_.AddGate(job_id);
  // A job that no longer exists holds nothing; one that does holds its frames until done.
  StatusOr<std::vector<std::pair<int, int>>> undone = pass.store.UndoneFrameRanges(job_id);
  if (undone.ok()) {
    for (const auto& [first, last] : *undone) gate.undone[first] = last;
  } else {
    spdlog::error("job {}: cannot read its frames for dependents: {}", job_id,
                  undone.status().ToString());
  }
  return gate;
}

bool TaskQueue::WaitsOnFrames(Pass& pass, const LiveTask& task, const JobInfo& job) {
  for (int64_t dep : job.frame_deps) {
    const std::map<int, int>& undone = GateFor(pass, dep).undone;
    // Ranges are disjoint and keyed by start: only the last one starting at or before our end
    // can reach into our range.
    auto it = undone.upper_bound(task.frame_end);
    if (it != undone.begin() && std::prev(it)->second >= task.frame_start) return true;
  }
  return false;
}

void TaskQueue::OnFramesDone(Pass& pass, int64_t job_id, int first, int last) {
  if (pass.events.enabled()) {
    for (int frame = first; frame <= last; ++frame) {
      pass.events.Publish("frame", {{"job_id", job_id}, {"frame", frame}});
    }
  }
  const std::vector<int64_t> ready = table_.FramesDone(job_id, first, last);
  for (int64_t id : ready) {
    auto task = table_.tasks().find(id);
    if (task != table_.tasks().end() && !task->second.running()) Enqueue(pass, task->second);
  }
}

void TaskQueue::EnqueueDue(Pass& pass) {
  // Tasks whose licence wait is over go back to the queue.
  while (!licence_waits_.empty() && licence_waits_.begin()->first <= pass.now) {
    auto it = table_.tasks().find(licence_waits_.begin()->second);
    licence_waits_.erase(licence_waits_.begin());
    if (it != table_.tasks().end() && !it->second.running() && it->second.not_before <= pass.now) {
      Enqueue(pass, it->second);
    }
  }
  // Interrupted tasks whose worker did not come back in time go back to the queue.
  for (int64_t task_id : table_.ReattachesDue(pass.now)) {
    auto task = table_.tasks().find(task_id);
    if (task != table_.tasks().end() && !task->second.running()) Enqueue(pass, task->second);
  }
}

}  // namespace tessera::broker
