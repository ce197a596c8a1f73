// TaskEnds: progress, done, failed (by failure class), hand-backs, timeouts, and completion.
// The results themselves (frames, parts, files) and the assembler's answers are in
// task_results.cpp.

#include "scheduler/broker/task_ends.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "scheduler/broker/broker_counters.h"
#include "scheduler/broker/event_sink.h"
#include "scheduler/store/store.h"
#include "shared/base/utf8.h"

namespace tessera::broker {

void TaskEnds::OnProgress(Pass& pass, const std::string& identity, const protocol::Envelope& env) {
  auto m = env.As<protocol::Progress>();
  if (!m.ok()) return p_.boundary.DropMessage(pass, identity, m.status().message());
  LiveTask* task = p_.leases.Find(pass, identity, m->task_id, m->attempt, "progress");
  if (!task) return;
  task->LeaseOn(identity)->last_progress = pass.now;
  pass.events.JobChanged(task->job_id);
  (void)pass.store.SetTaskProgress(m->task_id, m->attempt, std::clamp(m->fraction, 0.0, 1.0),
                                   utf8::Truncate(m->message, protocol::kMaxStatusLineBytes));
}

void TaskEnds::OnTaskDone(Pass& pass, const std::string& identity, const WorkerConn& worker,
                          const protocol::TaskDone& m) {
  LiveTask* task = p_.leases.Find(pass, identity, m.task_id, m.attempt, "task done");
  if (!task) {
    p_.acks.Ack(pass, identity, m.task_id, m.attempt);  // stale or already recorded
    return;
  }
  // The attempt stays running until its frames are written: done is recorded with the task's.
  p_.leases.SaveLog(pass, *task, m.attempt, worker, m.log);
  task->acks.emplace_back(identity, m.attempt);
  task->done_attempt = m.attempt;
  task->done_files = m.files;
  task->done_worker_id = worker.offer.id;
  task->done_seconds =
      std::chrono::duration<double>(pass.now - task->LeaseOn(identity)->leased_at).count();
  p_.leases.Release(pass, *task, identity);
  MaybeComplete(pass, *task);
}

void TaskEnds::OnTaskFailed(Pass& pass, const std::string& identity, const WorkerConn& worker,
                            const protocol::TaskFailed& m) {
  LiveTask* task = p_.leases.Find(pass, identity, m.task_id, m.attempt, "task failure");
  // Acknowledged after this pass commits what the failure changed (or at once when stale).
  p_.acks.Ack(pass, identity, m.task_id, m.attempt);
  if (!task) return;
  spdlog::warn("job {} task {} attempt {} failed on {} ({}): {}", task->job_id, task->task_id,
               m.attempt, worker.offer.name, m.failure_class, m.message);
  p_.leases.SaveLog(pass, *task, m.attempt, worker, m.log);
  // A full disk is nobody's fault: the worker's own is reported by its heartbeat (and it gets
  // nothing new meanwhile); shared outputs the scheduler sees full hold their jobs.
  const bool storage_full = m.failure_class == protocol::kFailureStorageFull;
  const bool charge =
      m.charge && !storage_full && ApplyFailureClass(pass, *task, worker, identity, m);
  if (charge) p_.leases.ChargeWorker(pass, *task, worker);
  // A worker that had no free slot returns the task: nothing failed.
  const bool returned = !m.charge && m.failure_class == protocol::kFailureNoSlot;
  const int64_t job_id = task->job_id;
  p_.leases.End(pass, *task, identity,
                {returned ? store::AttemptOutcome::kHandedBack : store::AttemptOutcome::kFailed,
                 returned ? "" : m.failure_class, m.message, charge},
                /*cancel=*/false);
  if (storage_full) p_.full_outputs.CheckShared(pass, job_id);
}

bool TaskEnds::ApplyFailureClass(Pass& pass, LiveTask& task, const WorkerConn& worker,
                                 const std::string& identity, const protocol::TaskFailed& m) {
  pass.counters.CountFailure(m.failure_class);
  JobInfo& job = p_.table.jobs()[task.job_id];
  const spec::FailurePolicy& policy = job.failure_policy;
  if (m.failure_class == protocol::kFailureSceneError && policy.scene_error == "fail") {
    task.fail_now = "scene error: retrying cannot help";
  } else if (m.failure_class == protocol::kFailureLicense) {
    // Nobody's fault: back to the queue uncharged, after the job's wait.
    task.not_before = pass.now + std::chrono::seconds(policy.license_wait_s);
    spdlog::info("job {} task {}: no licence on {}; queued again in {} s", task.job_id,
                 task.task_id, worker.offer.name, policy.license_wait_s);
    return false;
  } else if (m.failure_class == protocol::kFailureOutOfMemory && policy.out_of_memory == "bigger") {
    // Only workers with more memory than this one run the job's tasks from now on (GPU memory
    // for a task on GPUs, RAM otherwise); none connected: the task fails.
    const Lease* lease = task.LeaseOn(identity);
    spec::ResourceSpec& need = job.needs.resources;
    std::string what;
    if (lease != nullptr && !lease->gpus.empty() &&
        lease->gpus[0] < static_cast<int>(worker.offer.gpus.size())) {
      const int64_t had = worker.offer.gpus[lease->gpus[0]].memory_mb;
      need.gpu_memory_mb = std::max(need.gpu_memory_mb, had + 1);
      what = std::to_string(had) + " MB of GPU memory";
    } else {
      need.ram_mb = std::max(need.ram_mb, worker.offer.ram_mb + 1);
      what = std::to_string(worker.offer.ram_mb) + " MB of RAM";
    }
    const bool bigger = std::any_of(p_.workers.begin(), p_.workers.end(), [&](const auto& w) {
      return policy::CouldEverRun(job.needs, w.second.offer);
    });
    spdlog::warn("job {} task {}: out of memory on {} ({}); {}", task.job_id, task.task_id,
                 worker.offer.name, what,
                 bigger ? "its tasks now go to workers with more" : "no connected worker has more");
    if (!bigger) {
      task.fail_now =
          "out of memory on " + worker.offer.name + " (" + what + "); no connected worker has more";
    }
    p_.feasibility.Update(pass, task.job_id, job);
  }
  return true;
}

void TaskEnds::OnHandback(Pass& pass, const std::string& identity, const WorkerConn& worker,
                          protocol::Envelope& env) {
  auto m = env.As<protocol::Handback>();
  if (!m.ok()) return p_.boundary.DropMessage(pass, identity, m.status().message());
  LiveTask* task = p_.leases.Find(pass, identity, m->task_id, m->attempt, "hand-back");
  if (!task) {
    p_.acks.Ack(pass, identity, m->task_id, m->attempt);
    return;
  }
  p_.leases.SaveLog(pass, *task, m->attempt, worker, std::move(m->log));
  const int frame = std::clamp(m->frame, task->frame_start, task->frame_end);
  if (env.payload.size() > 0) {
    p_.checkpoints.Clear(*task);
    if (std::string problem =
            p_.checkpoints.Keep(*task, m->attempt, frame, m->samples_done, env.payload);
        !problem.empty()) {
      spdlog::warn("task {}: checkpoint from {} not kept ({}); frame {} restarts", task->task_id,
                   worker.offer.name, problem, frame);
    }
  } else if (task->checkpoint_hash.empty() || task->resume_frame != frame) {
    // Without a checkpoint: a periodic one of the same frame is still the best resume point.
    p_.checkpoints.Clear(*task);
  }
  task->resume_frame = frame;
  spdlog::info("job {} task {} attempt {} handed back by {} at frame {}{} ({})", task->job_id,
               task->task_id, m->attempt, worker.offer.name, frame,
               task->checkpoint_hash.empty()
                   ? ""
                   : ", checkpoint after " + std::to_string(m->samples_done) + " samples",
               m->reason);
  pass.events.Record(task->job_id, task->task_id, worker.offer.id, "task_handed_back", m->reason);
  task->acks.emplace_back(identity, m->attempt);
  p_.leases.EndAttempt(pass, *task, m->attempt, store::AttemptOutcome::kHandedBack, "",
                       "handed back by " + worker.offer.name + ": " + m->reason,
                       /*charged=*/false);
  p_.leases.Release(pass, *task, identity);
  if (task->running()) {
    // A backup copy runs on; this copy just ends (not charged).
    (void)pass.store.EndCopy(task->task_id, m->attempt, /*count_failure=*/false);
    p_.acks.AckTask(pass, *task);
    return;
  }
  p_.leases.Requeue(pass, *task, m->attempt,
                    "handed back by " + worker.offer.name + ": " + m->reason,
                    /*count_failure=*/false, /*handed_back=*/true);
}

void TaskEnds::EndExpired(Pass& pass) {
  for (const LeaseTable::Expiry& e : p_.table.Expired(pass.now)) {
    LiveTask& task = p_.table.tasks().at(e.task_id);
    const WorkerConn* worker = p_.workers.Find(e.identity);
    spdlog::warn("job {} task {} on {}: {}", task.job_id, e.task_id,
                 worker ? worker->offer.name : "?", e.why);
    if (worker) p_.leases.ChargeWorker(pass, task, *worker);
    p_.leases.End(pass, task, e.identity,
                  {store::AttemptOutcome::kFailed, protocol::kFailureTimeout, e.why,
                   /*charged=*/true},
                  /*cancel=*/true);
  }
}

void TaskEnds::MaybeComplete(Pass& pass, LiveTask& task) {
  if (task.done_attempt == 0 || !task.frames_in_flight.empty() || !task.files_in_flight.empty()) {
    return;
  }
  JobInfo& job = p_.table.jobs()[task.job_id];
  const size_t frames =
      job.produces_frames ? static_cast<size_t>(task.frame_end - task.frame_start + 1) : 0;
  const int attempt = task.done_attempt;
  // Files have no count of their own (patterns match what the run made): the copy says how many
  // it sent, and a file another copy delivered first counts too.
  const bool files_missing = task.files_written.size() < static_cast<size_t>(task.done_files);
  if (task.frames_written.size() != frames || files_missing) {
    const std::string reason =
        files_missing
            ? "worker reported done after " + std::to_string(task.done_files) + " files but " +
                  std::to_string(task.files_written.size()) + " arrived"
            : "worker reported done but delivered " + std::to_string(task.frames_written.size()) +
                  " of " + std::to_string(frames) + " frames";
    task.done_attempt = 0;
    p_.leases.EndAttempt(pass, task, attempt, store::AttemptOutcome::kFailed,
                         store::kFailureIncomplete, reason, /*charged=*/true);
    if (task.running()) {  // the other copy may still deliver them
      spdlog::warn("task {} attempt {}: {}; its other copy runs on", task.task_id, attempt, reason);
      ++task.failures;
      (void)pass.store.EndCopy(task.task_id, attempt, /*count_failure=*/true);
      p_.acks.AckTask(pass, task);
    } else {
      p_.leases.Requeue(pass, task, attempt, reason, /*count_failure=*/true);
    }
    return;
  }
  // The first copy to deliver wins; a backup still running lost the race.
  p_.leases.CancelAll(pass, task, "another copy finished the task first");
  if (job.parts_per_frame > 1 && p_.table.IsLastPart(task)) {
    // Recorded done only once its frame is written (OnWritten(FrameAssembled)): the job is never
    // done before its frames are on disk, and a restart before then renders this part again.
    AssembleFrame(pass, task, job);
    return;
  }
  if (Status s = pass.store.FinishTask(task.task_id, attempt, task.done_worker_id, task.job_id);
      !s.ok()) {
    spdlog::error("task {}: cannot record completion: {}", task.task_id, s.ToString());
    return;
  }
  CountDone(pass, job, task);
  if (job.parts_per_frame > 1) {
    p_.table.PartDone(task.job_id, task.frame_start);  // not the last: IsLastPart said so
    p_.leases.Retire(pass, task.task_id);
    return;
  }
  spdlog::debug("job {} task {} (frames {}-{}) done, attempt {}", task.job_id, task.task_id,
                task.frame_start, task.frame_end, attempt);
  p_.queue.OnFramesDone(pass, task.job_id, task.frame_start, task.frame_end);
  p_.leases.Retire(pass, task.task_id);
}

void TaskEnds::CountDone(Pass& pass, JobInfo& job, const LiveTask& task) {
  pass.events.JobChanged(task.job_id);
  ++job.tasks_done;
  job.done_seconds += task.done_seconds;
  pass.counters.CountDone(task.done_seconds);
}

void TaskEnds::AssembleFrame(Pass& pass, LiveTask& task, const JobInfo& job) {
  task.assembling = true;
  assembler::AssembleJob assemble;
  assemble.job_id = task.job_id;
  assemble.task_id = task.task_id;
  assemble.attempt = task.done_attempt;
  assemble.frame = task.frame_start;
  assemble.output = job.output;
  assemble.parts = job.parts_per_frame;
  pass.assembler->Assemble(std::move(assemble));
}

}  // namespace tessera::broker
