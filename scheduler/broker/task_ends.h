#pragma once
// TaskEnds: what workers report about the tasks they run, and how each task ends. Progress
// keeps a lease alive; frames, parts of split frames and files are checked at the boundary and
// handed to the assembler, and counted once written; a task is recorded done when its copy
// reported done and everything it delivered is written (a split frame's last part: once the
// frame is assembled), after which it is retired. Failures end the copy -- by their class (a
// scene error fails the task, out of memory raises the job's memory floor, a licence failure
// waits uncharged) -- and hand-backs end it with a resume point; leases past their job's
// timeouts end charged. Whatever ends the last copy without finishing the task requeues it
// (Leases).
//
// Threads: broker thread only.

#include <cstdint>
#include <string>

#include "scheduler/assembler/assembler.h"
#include "scheduler/broker/boundary.h"
#include "scheduler/broker/broker_options.h"
#include "scheduler/broker/checkpoints.h"
#include "scheduler/broker/feasibility.h"
#include "scheduler/broker/full_outputs.h"
#include "scheduler/broker/lease_table.h"
#include "scheduler/broker/leases.h"
#include "scheduler/broker/pass.h"
#include "scheduler/broker/result_acks.h"
#include "scheduler/broker/task_queue.h"
#include "scheduler/broker/worker_registry.h"
#include "shared/wire/protocol.h"

namespace tessera::broker {

class TaskEnds {
 public:
  struct Parts {
    const BrokerOptions& options;
    LeaseTable& table;
    WorkerRegistry& workers;
    Leases& leases;
    TaskQueue& queue;
    Checkpoints& checkpoints;
    ResultAcks& acks;
    FullOutputs& full_outputs;
    Feasibility& feasibility;
    Boundary& boundary;
  };
  explicit TaskEnds(Parts parts) : p_(parts) {}

  // ---- what workers report (task_ends.cpp, task_results.cpp) ----------------------------------
  void OnProgress(Pass& pass, const std::string& identity, const protocol::Envelope& env);
  // A frame, or a part of a split frame: checked against the task, then written by the
  // assembler (or found where a shared-storage job's worker wrote it).
  void OnFrameResult(Pass& pass, const std::string& identity, const WorkerConn& worker,
                     protocol::Envelope& env);
  // A command task's file (`outputs: files`): as a frame.
  void OnFileResult(Pass& pass, const std::string& identity, const WorkerConn& worker,
                    protocol::Envelope& env);
  void OnTaskDone(Pass& pass, const std::string& identity, const WorkerConn& worker,
                  const protocol::TaskDone& m);
  void OnTaskFailed(Pass& pass, const std::string& identity, const WorkerConn& worker,
                    const protocol::TaskFailed& m);
  // A worker that must leave (a spot interruption) handed its task back, maybe with a
  // checkpoint: the next attempt resumes there, uncharged.
  void OnHandback(Pass& pass, const std::string& identity, const WorkerConn& worker,
                  protocol::Envelope& env);
  // Timer: a lease older than its job's task_timeout, or silent for longer than its
  // progress_timeout, is a charged failure.
  void EndExpired(Pass& pass);

  // ---- what the assembler wrote (task_results.cpp) -------------------------------------------
  void OnWritten(Pass& pass, const assembler::FrameWritten& written);
  void OnWritten(Pass& pass, const assembler::PartStored& stored);
  void OnWritten(Pass& pass, const assembler::FileWritten& written);
  // A split frame's last part is recorded done only once its frame is written.
  void OnWritten(Pass& pass, const assembler::FrameAssembled& assembled);
  // At start-up: frames whose parts were all stored before a restart but never assembled.
  void ResumeAssemblies(Pass& pass);

 private:
  // A frame or a part was written (or not): counted toward the task, or the task retried.
  template <typename Written>
  void OnDelivered(Pass& pass, const Written& written, uint64_t bytes);
  // A shared-storage job's whole frame, written by the worker itself.
  void OnFrameWrittenByWorker(Pass& pass, const std::string& identity, const WorkerConn& worker,
                              LiveTask& task, const protocol::FrameResult& m);
  // A result the worker sent wrongly (a frame or file that breaks the protocol's rules): its
  // worker is charged and the copy ends, failed with "bad <what> result: <problem>".
  void RefuseResult(Pass& pass, LiveTask& task, const std::string& identity,
                    const WorkerConn& worker, int attempt, const char* what,
                    const std::string& problem);
  // What the failure's class leads to (the job's failure_policy): a scene error fails the task
  // at the requeue; out of memory raises the job's memory floor above this worker's (or fails
  // the task when no connected worker has more); a licence failure is uncharged and waits.
  // Returns whether the attempt is still charged.
  bool ApplyFailureClass(Pass& pass, LiveTask& task, const WorkerConn& worker,
                         const std::string& identity, const protocol::TaskFailed& m);
  // Records the task done once its done copy's frames and files are all written.
  void MaybeComplete(Pass& pass, LiveTask& task);
  // The task was recorded done: the straggler baseline and the counters follow.
  void CountDone(Pass& pass, JobInfo& job, const LiveTask& task);
  // Split frames: the frame's last part is done; the assembler merges the parts.
  void AssembleFrame(Pass& pass, LiveTask& task, const JobInfo& job);

  Parts p_;
};

}  // namespace tessera::broker
