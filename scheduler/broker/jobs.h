#pragma once
// Jobs: the jobs and unfinished tasks the broker holds in memory -- taken from the submission
// when a job is submitted (nothing just written is read back), loaded from the store at
// start-up, after its tasks are retried or re-rendered, after read-only mode and for a job the
// broker was told of by id only -- with what each job says about how its tasks run; and the
// operations on a job other threads ask for: its priority, pausing it, retrying or re-rendering its
// finished tasks. (Cancelling a job is the steps' part: it cancels the steps after it too.)
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
#include "scheduler/broker/submitted_job.h"
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

  // A job was committed to the store: its tasks are queued from what the submission stored.
  void Submitted(Pass& pass, const SubmittedJob& submitted);
  // The same for a job known by its id only (stored by a tool or a test, not a submission the
  // broker was handed): its tasks and job are read from the store.
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
  // Holds the job `record` (its scene, the failures counted per worker, its flagged frames):
  // what it needs to run its tasks. `steps`: its job's steps when the caller has them.
  using Failures = std::vector<std::pair<int64_t, int>>;
  Status HoldJob(Pass& pass, store::JobRecord record, const std::string& scene,
                 const Failures& failures, const std::map<int, std::string>& flags,
                 const std::vector<store::JobRecord>* steps);
  // Holds one unfinished task of a held job: queued, or awaiting its worker when interrupted.
  void HoldTask(Pass& pass, const store::TaskRecord& t);
  // Load() for a job whose tasks changed, logging what it could not read.
  void Reload(Pass& pass, int64_t job_id);

  Parts p_;
};

}  // namespace tessera::broker
