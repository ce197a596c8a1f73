#pragma once
// FullOutputs: the output filesystems that ran out of free space. A full disk is an operational
// event, not the task's failure: a frame, part, file or assembly that cannot be written for
// want of space is requeued uncharged (an assembly is kept, to be done again), and every job
// whose outputs go to that filesystem is held -- its tasks stay out of the queue, other jobs
// keep running -- under a farm-level alert, until a check every storage_check_interval finds
// space again: then they resume by themselves. It also keeps the parts folders of assembled
// frames that could not be removed yet (a read-only filesystem), tried again at each check.
//
// Space enough to resume: max(64 MiB, twice the largest frame written for the held jobs), at
// most half the filesystem (a small filesystem can never have more free than it holds).
//
// Threads: broker thread only.

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "scheduler/assembler/assembler.h"
#include "scheduler/broker/broker_options.h"
#include "scheduler/broker/feasibility.h"
#include "scheduler/broker/lease_table.h"
#include "scheduler/broker/leases.h"
#include "scheduler/broker/pass.h"
#include "scheduler/broker/task_queue.h"

namespace tessera::broker {

class FullOutputs {
 public:
  struct Parts {
    const BrokerOptions& options;
    LeaseTable& table;
    Leases& leases;
    TaskQueue& queue;
    Feasibility& feasibility;
  };
  explicit FullOutputs(Parts parts) : p_(parts) {}

  // A write of the task's outputs (`what`: "frame 3", a file's name) failed with `status`: when
  // for want of space (true), every job on that filesystem is held and the task requeued
  // uncharged; otherwise (false) nothing happens here.
  bool OnWriteFailed(Pass& pass, LiveTask& task, int attempt, const std::string& what,
                     const Status& status);
  // The same for a split frame's assembly: every part is on disk, so only the frame waits for
  // space, then it is assembled again. `task`: its last part, when still loaded.
  bool OnAssemblyFailed(Pass& pass, const assembler::FrameAssembled& assembled, LiveTask* task);
  // A worker reported a failure of class storage_full for a shared-outputs job: held like above
  // when the scheduler sees that job's output filesystem full too.
  void CheckShared(Pass& pass, int64_t job_id);
  // Holds a job just loaded when its outputs go to a filesystem that is full.
  void HoldIfFull(Pass& pass, int64_t job_id, JobInfo& job);
  // Every storage_check_interval: releases the jobs of a filesystem that has space again, and
  // retries removing parts folders left over.
  void Check(Pass& pass);
  // A frame was assembled and its last part recorded: its parts folder goes once that commits
  // (kept and retried at each check when it cannot be removed yet).
  void RemovePartsAfterCommit(Pass& pass, const std::filesystem::path& parts_dir);

 private:
  // Holds every loaded job whose outputs share the filesystem of `folder` (raises the alert).
  void Hold(Pass& pass, const std::string& folder, const std::string& why);

  // A filesystem that took no more of the outputs, with the jobs it holds.
  struct Full {
    std::string folder;  // the output folder whose write failed: the alert's key
    std::set<int64_t> jobs;
    std::vector<assembler::AssembleJob> assemblies;  // frames to assemble once there is space
    Clock::SteadyTime next_check;
  };
  Parts p_;
  std::map<dev_t, Full> full_;  // by device
  std::vector<std::filesystem::path> leftover_parts_;
  Clock::SteadyTime next_leftover_try_{};
};

}  // namespace tessera::broker
