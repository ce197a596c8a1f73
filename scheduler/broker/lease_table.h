#pragma once
// LeaseTable: the unfinished tasks the broker holds in memory, the jobs they belong to, and
// everything that decides when a task runs and when a running copy ends -- the ready queue, the
// leases (one running copy of a task on one worker; two while a straggler's backup runs) and
// their fencing by attempt, task and progress timeouts, which stragglers get a backup copy,
// leases a worker no longer holds, deadlines for workers to re-attach their tasks after a
// restart, frame-on-frame gates and the parts of split frames still to come.
//
// It decides and records; it neither sends nor writes: the broker ends, requeues and starts
// leases (Leases, Dispatch, TaskEnds: store, messages, events) on what it answers. Time is an
// argument (`now`), never read here, so expiry, fencing and backups are tested with a clock moved
// by hand (tests/scheduler/broker/lease_table_test.cpp).
//
// Threads: owned by the broker's poll loop; broker thread only.

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "scheduler/assembler/assembler.h"
#include "scheduler/policy/policy.h"
#include "shared/wire/protocol.h"

namespace tessera::store {
struct JobRecord;
}

namespace tessera::broker {

// Where and how a stored job's frames are written.
assembler::FrameOutput FrameOutputOf(const store::JobRecord& job);

struct JobInfo {
  int priority = 50;
  int max_retries = 3;
  bool produces_frames = true;  // false: tasks only report done (noop)
  bool returns_files = false;   // tasks send files (kFileResult) before they report done
  std::string renderer;
  assembler::FrameOutput output;
  int parts_per_frame = 1;  // tasks that make one frame (tiles x sample parts)
  std::shared_ptr<const std::string> scene_yaml;
  std::string scene_name;                       // renderer plugins: the scene's file name
  std::map<std::string, std::string> settings;  // renderer plugins: resolved settings
  std::shared_ptr<const std::map<std::string, std::string>> assets;  // path -> blob SHA-256
  bool output_shared = false;  // workers write whole frames into output.dir themselves
  // Parts of split frames come as exact accumulations (the path tracer, or a C++ plugin that
  // splits samples), not float pixels.
  bool exact_parts = false;
  bool paused = false;  // its queued tasks stay out of the queue until resumed
  int task_timeout_s = 0;
  int progress_timeout_s = 0;
  int checkpoint_interval_s = 0;  // its running tasks' periodic checkpoints; 0: none
  int blocklist_after = 3;
  int fail_after_workers = 0;
  bool interruptible = true;  // capacity planning (CapacityView)
  std::optional<int64_t> deadline_ms;
  std::string name;
  std::string project, user;                  // fair share
  policy::JobNeeds needs;                     // pools, tags, limits, resources, blocklist
  std::map<int64_t, int> failures_by_worker;  // charged failures of this job, by worker id
  int running = 0;                            // leases held now (fair share)
  int64_t dispatched = 0;                     // leases handed out since it was loaded
  int64_t unfinished = 0;                     // its tasks in tasks_
  std::set<int64_t> waiting_on;               // job dependencies not done; tasks wait
  std::vector<int64_t> frame_deps;            // frame-on-frame dependencies (job ids)
  spec::FailurePolicy failure_policy;         // what each failure class leads to
  std::optional<int64_t> pipeline_id;         // a step: its job (shared/jobs/job_steps.h)
  std::string step;                           // and its name
  // A step taking another step's frames (plugin.yaml input_frames): that step's job id, and
  // whether its frames are still to be stored as this step's assets; its tasks wait meanwhile
  // (Steps).
  int64_t input_frames_from = 0;
  // An OpenJD step of a job bundle: the steps before it (all it depends on, directly or not),
  // whose returned files come into its sessions' output folders ({session folder, the name
  // they returned under}), and the step whose assets are the bundle's attached files.
  std::vector<int64_t> input_files_from;
  std::vector<std::pair<std::string, std::string>> session_outputs;
  int64_t attachments_from = 0;
  bool inputs_pending = false;
  bool inputs_gathering = false;      // with the assembler now
  std::optional<std::string> notice;  // as last written to the store
  std::set<int> flagged_frames;       // kept with bad pixels (store: frame_flags)
  int64_t tasks_done = 0;             // since loaded, for the straggler baseline
  double done_seconds = 0;            // their total render time
  // Its outputs' filesystem is full (FullOutputs): its tasks stay out of the queue.
  bool outputs_held = false;
  uint64_t largest_output = 0;  // bytes of the largest frame written for it since loaded
};

// One running copy of a task on one worker. A task has one, or two while a backup copy of a
// straggler runs beside the original (the first to deliver wins; the other is cancelled).
struct Lease {
  int attempt = 0;        // the fencing token of this copy
  std::string worker;     // routing identity of the holder
  std::vector<int> gpus;  // the holder's GPUs pinned to this copy
  std::chrono::steady_clock::time_point leased_at;
  std::chrono::steady_clock::time_point last_progress;  // lease start, progress or a frame
};

struct LiveTask {
  int64_t task_id = 0;
  int64_t job_id = 0;
  int index = 0;
  int frame_start = 0, frame_end = 0;
  int attempt = 0;  // the highest attempt started (0: never leased)
  int failures = 0;
  std::set<int64_t> failed_on;  // workers a charged failure happened on
  std::vector<Lease> leases;    // running copies
  std::set<int> frames_written;
  std::map<int, int> frames_in_flight;  // frame -> attempt: with the assembler, not written
  // Files (a command task's `outputs: files`) by their name, as frames above.
  std::set<std::string> files_written;
  std::map<std::string, int> files_in_flight;
  int done_files = 0;              // how many files the copy that reported done sent
  protocol::FramePart part;        // of each of its frames (default: whole frames)
  bool assembling = false;         // its frame's last part: the frame is being written
  bool accept_bad_pixels = false;  // sent back once for bad pixels: keep, and flag, now
  // Set by a failure whose class leaves no retry (a scene error, out of memory with no bigger
  // worker): the next requeue fails the task with this reason instead.
  std::string fail_now;
  // A licence failure: not queued again before this (TaskQueue::EnqueueDue queues it then).
  std::chrono::steady_clock::time_point not_before{};
  int done_attempt = 0;        // the copy that reported kTaskDone (0: none yet)
  int64_t done_worker_id = 0;  // and the worker it ran on
  double done_seconds = 0;     // how long that copy ran
  // Copies whose final report (done, failed) arrived: each gets a kResultAck once the
  // outcome is durable, so the worker can drop its spooled results. (identity, attempt)
  std::vector<std::pair<std::string, int>> acks;
  // A handed-back attempt, or a lost one that sent periodic checkpoints: the next one starts
  // at resume_frame, from the checkpoint if there is one (0 / empty: from the start).
  int resume_frame = 0;
  std::string checkpoint_hash;  // the checkpoint's blob; empty: none
  int checkpoint_samples = 0;   // samples it holds
  int checkpoint_attempt = 0;   // the attempt that sent it

  bool running() const { return !leases.empty(); }
  const Lease* LeaseOn(const std::string& identity) const {
    for (const Lease& l : leases) {
      if (l.worker == identity) return &l;
    }
    return nullptr;
  }
  Lease* LeaseOn(const std::string& identity) {
    return const_cast<Lease*>(std::as_const(*this).LeaseOn(identity));
  }
};

// Frame-on-frame dependencies (the frame gates): the frame ranges of a depended-on job's tasks
// that are not done (start -> end; disjoint), and the dependent tasks waiting on them (by
// frame_start).
struct FrameGate {
  std::map<int, int> undone;
  std::multimap<int, int64_t> waiters;
};

// Queue order: higher priority first, then older job, then frame order.
using QueueKey = std::tuple<int, int64_t, int, int64_t>;  // (-priority, job, index, task)

class LeaseTable {
 public:
  using Clock = std::chrono::steady_clock;

  // ---- tasks and jobs ---------------------------------------------------------------------
  // Unfinished tasks by id, and the jobs that have some (by id).
  std::unordered_map<int64_t, LiveTask>& tasks() { return tasks_; }
  const std::unordered_map<int64_t, LiveTask>& tasks() const { return tasks_; }
  std::unordered_map<int64_t, JobInfo>& jobs() { return jobs_; }
  const std::unordered_map<int64_t, JobInfo>& jobs() const { return jobs_; }
  // Drops a finished task; true when that was its job's last unfinished one (the job is
  // dropped too).
  bool Remove(int64_t task_id);
  // Forgets every task, job, lease, queue entry, gate and deadline.
  void Clear();

  // ---- the ready queue --------------------------------------------------------------------
  std::set<QueueKey>& queue() { return queue_; }
  const std::set<QueueKey>& queue() const { return queue_; }
  static QueueKey KeyOf(const LiveTask& task, const JobInfo& job) {
    return {-job.priority, task.job_id, task.index, task.task_id};
  }
  // Every queued task of the job leaves the queue.
  void DropQueued(int64_t job_id);
  // Whether a task of the job (at its priority) waits in the queue.
  bool HasQueued(int64_t job_id, int priority) const;

  // ---- leases and fencing -----------------------------------------------------------------
  // Books a running copy of the task on `identity`, started (and last progressing) at `now`.
  static void AddLease(LiveTask& task, const std::string& identity, int attempt,
                       std::vector<int> gpus, Clock::time_point now);
  // The task whose running copy on `identity` has `attempt`, or nullptr: a message about any
  // other copy (an older attempt, a copy that was ended or cancelled, a finished task) is stale
  // and changes nothing.
  LiveTask* FindLease(const std::string& identity, int64_t task_id, int attempt);

  // ---- timeouts ---------------------------------------------------------------------------
  struct Expiry {
    int64_t task_id = 0;
    std::string identity;  // the copy's holder
    std::string why;
  };
  // Copies older than their job's task_timeout_s, or silent for longer than its
  // progress_timeout_s, at `now`.
  std::vector<Expiry> Expired(Clock::time_point now) const;
  // Of the tasks leased to `identity`, those whose copy its heartbeat neither lists as running
  // nor as delivering, once older than `grace` (an assignment may cross a heartbeat on its
  // way): the assignment was lost.
  std::vector<int64_t> NotHeld(const std::string& identity, const std::set<int64_t>& leased,
                               const protocol::Heartbeat& beat, Clock::time_point now,
                               Clock::duration grace) const;

  // ---- straggler backups ------------------------------------------------------------------
  struct Straggler {
    double seconds = 0;  // how long its one copy has run
    int64_t task_id = 0;
  };
  // Tasks that deserve a backup copy at `now`, slowest first: one copy running for at least
  // `min_seconds` and more than `factor` times its job's mean task time, in a job with a done
  // task and nothing left in the queue.
  std::vector<Straggler> Stragglers(Clock::time_point now, double factor, double min_seconds) const;

  // ---- re-attaching after a restart -------------------------------------------------------
  // A task that was running when the scheduler stopped stays out of the queue until its worker
  // re-attaches it or `deadline` passes.
  void AwaitReattach(int64_t task_id, Clock::time_point deadline) { reattach_[task_id] = deadline; }
  void Reattached(int64_t task_id) { reattach_.erase(task_id); }
  // The tasks whose deadline has passed at `now` (no longer awaited): back to the queue.
  std::vector<int64_t> ReattachesDue(Clock::time_point now);

  // ---- frame-on-frame gates ---------------------------------------------------------------
  // The gate of a depended-on job, or nullptr when none was built yet.
  FrameGate* FindGate(int64_t job_id);
  FrameGate& AddGate(int64_t job_id) { return gates_[job_id]; }
  // Frames [frame_start, frame_end] of the job are done: the waiting tasks whose frames they
  // were (in the order they waited), which may be queued now.
  std::vector<int64_t> FramesDone(int64_t job_id, int frame_start, int frame_end);
  // Drops the gates of jobs no loaded job depends on any more.
  void DropUnusedGates();

  // ---- split frames -----------------------------------------------------------------------
  // A part task of the job's `frame` was loaded, or done (not the frame's last).
  void AddPart(int64_t job_id, int frame) { ++parts_left_[{job_id, frame}]; }
  void PartDone(int64_t job_id, int frame) { --parts_left_[{job_id, frame}]; }
  // The frame was assembled (or failed for good): nothing of it is awaited.
  void FrameEnded(int64_t job_id, int frame) { parts_left_.erase({job_id, frame}); }
  // Whether the task is its frame's last part not yet done.
  bool IsLastPart(const LiveTask& task) const;
  // Whether parts of the frame are still being rendered.
  bool PartsPending(int64_t job_id, int frame) const { return parts_left_.count({job_id, frame}); }

 private:
  std::unordered_map<int64_t, LiveTask> tasks_;  // unfinished tasks by id
  std::unordered_map<int64_t, JobInfo> jobs_;    // jobs with unfinished tasks
  std::set<QueueKey> queue_;
  std::unordered_map<int64_t, FrameGate> gates_;  // by depended-on job id
  // Split frames not yet assembled: (job, frame) -> its part tasks not yet done.
  std::map<std::pair<int64_t, int>, int> parts_left_;
  // Tasks that were running when the scheduler stopped, held out of the queue until their
  // worker re-attaches them or the deadline passes.
  std::map<int64_t, Clock::time_point> reattach_;
};

}  // namespace tessera::broker
