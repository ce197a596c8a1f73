#pragma once
// Steps: what job dependencies and jobs with steps (shared/jobs/job_steps.h) add to the life of
// the queue. Each step is a job of its own, waiting on the steps it depends on through the job
// dependencies every job has (depends_on: the whole job; frame_depends_on: frame by frame, the
// TaskQueue's gates). Here: a job that finished releases the jobs waiting on it -- or, failed or
// canceled, cancels the steps after it, so the job ends instead of waiting forever; cancelling
// a job cancels its steps; an operation on a job with steps applies to each step; and a step
// taking other steps' files as its inputs (plugin.yaml input_frames, e.g. an encode; an OpenJD
// step of a job bundle taking what the steps before it returned) gets them stored as its assets
// by the assembler before its tasks may run.
//
// Threads: broker thread only.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "scheduler/assembler/assembler.h"
#include "scheduler/broker/broker_options.h"
#include "scheduler/broker/checkpoints.h"
#include "scheduler/broker/lease_table.h"
#include "scheduler/broker/leases.h"
#include "scheduler/broker/pass.h"
#include "scheduler/broker/task_queue.h"
#include "scheduler/store/store.h"

namespace tessera::broker {

class Steps {
 public:
  struct Parts {
    const BrokerOptions& options;
    LeaseTable& table;
    Leases& leases;
    TaskQueue& queue;
    Checkpoints& checkpoints;
  };
  explicit Steps(Parts parts) : p_(parts) {}

  // Cancels a job (a job with steps: each unfinished step, then the job) and tells the workers
  // running its tasks to stop; `reason` is recorded as its error. Returns the leases stopped.
  StatusOr<int> Cancel(Pass& pass, int64_t job_id, const std::string& reason);
  // Applies an operation to the job, and to each of its steps when it has steps (a finished
  // step refuses it; that is no error here).
  Status ForEachStep(Pass& pass, int64_t job_id, const std::function<Status(int64_t)>& apply);
  // The jobs that left memory in this pass (Pass::finished_jobs): done, the jobs waiting on
  // them are released; failed or canceled, the steps after them are canceled.
  void OnJobsFinished(Pass& pass);
  // At start-up: steps left waiting on a step that failed before a crash are canceled.
  void CancelStepsOfEndedSteps(Pass& pass);
  // A job being loaded: finds the steps whose files it takes as inputs (JobInfo::inputs_pending
  // while they are to be gathered). `steps`: its job's steps when the caller has them (a
  // submission does), else they are read from the store.
  void FindInputs(Pass& pass, const store::JobRecord& record, JobInfo& job,
                  const std::vector<store::JobRecord>* steps = nullptr);
  // Hands the job's inputs to the assembler, to be stored in the blob store.
  void GatherInputs(Pass& pass, int64_t job_id, JobInfo& job);
  // The assembler stored them (or could not): they become the job's assets and its tasks are
  // queued (or the step fails, with the reason on it and its job).
  void OnInputsGathered(Pass& pass, const assembler::InputsGathered& gathered);

 private:
  // A step ended failed or canceled: the unfinished steps depending on it are canceled (and
  // theirs after them), the job's error says which step failed.
  void CancelStepsAfter(Pass& pass, const store::JobRecord& ended);
  // An OpenJD step of a job bundle: the steps before it, whose returned files come into its
  // sessions' output folders.
  void FindReturnedFiles(Pass& pass, const store::JobRecord& record, JobInfo& job,
                         const std::vector<store::JobRecord>* steps);
  // The steps of the job with steps `record` is one of: `given`, or read from the store.
  StatusOr<std::vector<store::JobRecord>> StepsOf(Pass& pass, const store::JobRecord& record,
                                                  const std::vector<store::JobRecord>* given);
  void GatherReturnedFiles(Pass& pass, int64_t job_id, JobInfo& job);
  // Answered like a failed gathering, in a later pass: the callers iterate the jobs that ending
  // this one would change.
  void GatheringFailed(Pass& pass, int64_t job_id, Status why);

  Parts p_;
};

}  // namespace tessera::broker
