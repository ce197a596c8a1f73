#pragma once
// TaskQueue: when an unfinished task may join the ready queue, and putting it there once it may.
// Not while its job is paused, held for full outputs, waiting on a job it depends on or on its
// inputs; not while frames of a job it depends on frame by frame are undone (the frame gates:
// it waits at the gate and is queued when those frames are done); not before a licence
// failure's wait is over; and a task that was running when the scheduler stopped, not before
// its worker had time to re-attach it.
//
// Threads: broker thread only.

#include <cstdint>
#include <map>

#include "scheduler/broker/lease_table.h"
#include "scheduler/broker/pass.h"

namespace tessera::broker {

class TaskQueue {
 public:
  explicit TaskQueue(LeaseTable& table) : table_(table) {}

  // Queues the task unless something holds it (then whatever releases it queues it).
  void Enqueue(Pass& pass, const LiveTask& task);
  // Queues the job's tasks that are neither running nor being assembled.
  void EnqueueJob(Pass& pass, int64_t job_id);
  // Whether the task still waits on an undone frame of a job it depends on frame by frame.
  bool WaitsOnFrames(Pass& pass, const LiveTask& task, const JobInfo& job);
  // Frames [first, last] of the job are done: published as "frame" events, and the tasks
  // waiting at its gate for them are queued.
  void OnFramesDone(Pass& pass, int64_t job_id, int first, int last);
  // Timer: tasks whose licence wait is over, and interrupted tasks whose worker did not
  // re-attach them in time, are queued.
  void EnqueueDue(Pass& pass);

 private:
  // The gate of a depended-on job, built from the store on first use.
  FrameGate& GateFor(Pass& pass, int64_t job_id);

  LeaseTable& table_;
  // Tasks held back by a licence failure until then (LiveTask::not_before).
  std::multimap<Clock::SteadyTime, int64_t> licence_waits_;
};

}  // namespace tessera::broker
