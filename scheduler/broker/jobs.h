#pragma once
// Jobs: the jobs and unfinished tasks the broker holds in memory, loaded from the store -- at
// start-up, when a job is submitted, after its tasks are retried or re-rendered, after read-only
// mode -- with what each job says about how its tasks run; and the operations on a job other
// threads ask for: its priority, pausing it, retrying or re-rendering its finished tasks.
// (Cancelling a job is the steps' part: it cancels the steps after it too.)
//
// Threads: broker thread only.

#include <cstdint>
#include <optional>
#include <utility>

#include "scheduler/broker/broker_options.h"
#include "scheduler/broker/feasibility.h"
#include "scheduler/broker/full_outputs.h"
#include "scheduler/broker/lease_table.h"
#include "scheduler/broker/pass.h"
#include "scheduler/broker/steps.h"
#include "scheduler/broker/task_queue.h"

namespace tessera::broker {

class Jobs {
 public:
  struct Parts {
    const BrokerOptions& options;
    LeaseTable& table;
    TaskQueue& queue;
    Steps& steps;
    FullOutputs& full_outputs;
    Feasibility& feasibility;
  };
  explicit Jobs(Parts parts) : p_(parts) {}

  // A job was committed to the store: its tasks are loaded and queued.
  void Submitted(Pass& pass, int64_t job_id);
  // Loads the unfinished tasks of one job (or of every job) and their jobs, and queues them;
  // `requeue_running` as in Store::LoadUnfinishedTasks. Tasks that were running when the
  // scheduler stopped wait for their workers to re-attach them (for a liveness deadline).
  Status Load(Pass& pass, std::optional<int64_t> job_id, bool requeue_running);
  // The store changes first (durably), then the queue follows; a job with steps: each step.
  Status SetPriority(Pass& pass, int64_t job_id, int priority);
  Status SetPaused(Pass& pass, int64_t job_id, bool paused);
  // Retry failed tasks (no frames) or re-render the finished tasks holding frames [first, last].
  // Returns how many tasks went back to the queue.
  StatusOr<int> RequeueFinished(Pass& pass, int64_t job_id,
                                std::optional<std::pair<int, int>> frames);

 private:
  // Loads the job (settings, dependencies, blocklist, inputs) unless it is loaded already.
  Status LoadJob(Pass& pass, int64_t job_id);
  // Load() for a job whose tasks changed, logging what it could not read.
  void Reload(Pass& pass, int64_t job_id);

  Parts p_;
};

}  // namespace tessera::broker
