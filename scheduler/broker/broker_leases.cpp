// The broker's lease side: the life of each running copy of a task -- frame results and their
// writes, done and failed reports, cancels, heartbeat reconciliation, charging workers and
// requeueing. Starting leases and backups is in broker_dispatch.cpp; job operations in
// broker_jobs.cpp; what is decided by time (fencing, expiry, backups) in lease_table.cpp.

#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cstring>
#include <filesystem>
#include <utility>

#include "scheduler/broker/broker.h"

namespace tessera::broker {

using protocol::MessageType;
using Clock = std::chrono::steady_clock;

LiveTask* Broker::FindLease(const std::string& identity, int64_t task_id, int attempt,
                            const char* what) {
  if (LiveTask* task = leases_.FindLease(identity, task_id, attempt)) return task;
  // A late message now and then is normal; a peer sending them in a loop writes a line per
  // interval.
  noisy_.Log(spdlog::level::info, std::string("stale:") + what,
             "ignoring {} for task {} attempt {}: not a current lease", what, task_id, attempt);
  return nullptr;
}

void Broker::OnFrameResult(const std::string& identity, WorkerConn& worker,
                           protocol::Envelope& env) {
  auto m = env.As<protocol::FrameResult>();
  if (!m.ok()) return DropMessage(identity, m.status().message());
  LiveTask* task = FindLease(identity, m->task_id, m->attempt, "frame result");
  if (!task) return;
  const JobInfo& job = leases_.jobs()[task->job_id];
  // A part of a split frame is an exact accumulation (the path tracer's, or a C++ plugin's that
  // splits samples; checked by the assembler against the task's part); a whole frame is
  // width x height x channels floats. A tile from another plugin is float pixels like a frame.
  const bool part = !task->part.whole();
  if (m->encoding == protocol::kEncodingWritten)
    return OnFrameWrittenByWorker(identity, worker, *task, *m);
  const bool exact = part && job.exact_parts;
  const size_t expected =
      static_cast<size_t>(std::max(0, m->width)) * static_cast<size_t>(std::max(0, m->height)) *
      static_cast<size_t>(std::max(0, m->channels)) * (exact ? sizeof(int64_t) : sizeof(float));
  std::string problem;
  if (!job.produces_frames) {
    problem = "renderer " + job.renderer + " sends no frames";
  } else if (m->frame < task->frame_start || m->frame > task->frame_end) {
    problem = "frame " + std::to_string(m->frame) + " is not part of the task";
  } else if (m->width <= 0 || m->height <= 0 || m->width > options_.max_image_side ||
             m->height > options_.max_image_side || m->channels < 1 ||
             m->channels > protocol::kMaxChannels ||
             (!m->channel_names.empty() &&
              m->channel_names.size() != static_cast<size_t>(m->channels))) {
    problem = "image size " + std::to_string(m->width) + "x" + std::to_string(m->height) + "x" +
              std::to_string(m->channels) + " is out of range";
  } else if (m->encoding != (exact ? protocol::kEncodingAccumulation : "")) {
    problem = "encoding '" + m->encoding + "' is not what " +
              (exact ? "a part of a split frame" : "this renderer's image") + " is sent as";
  } else if (exact ? env.payload.size() < expected : env.payload.size() != expected) {
    problem = "payload is " + std::to_string(env.payload.size()) + " bytes, expected " +
              (exact ? "at least " : "") + std::to_string(expected);
  } else if (part && !exact &&
             (m->width != task->part.x1 - task->part.x0 ||
              m->height != task->part.y1 - task->part.y0)) {
    problem = "tile is " + std::to_string(m->width) + "x" + std::to_string(m->height) +
              ", not the size of the region it was assigned";
  } else if (task->frames_written.count(m->frame) || task->frames_in_flight.count(m->frame)) {
    return;  // duplicate delivery, or the other copy delivered this frame first
  }
  if (!problem.empty()) return RefuseResult(*task, identity, worker, m->attempt, "frame", problem);
  task->frames_in_flight[m->frame] = m->attempt;
  task->LeaseOn(identity)->last_progress = now_;
  spdlog::debug("task {} attempt {}: frame {} received from {} ({:.2f} s on {})", task->task_id,
                m->attempt, m->frame, worker.offer.name, m->render_seconds, m->backend);
  // The payload's shape as an image (whole frames, and plugin renderers' tiles); the pixels
  // themselves are copied out of the payload on an assembler thread, not here.
  auto float_image = [&] {
    image::ImageBuffer image;
    image.width = m->width;
    image.height = m->height;
    image.channels = m->channels;
    image.channel_names = m->channel_names;
    return image;
  };
  if (part) {
    assembler::PartJob out;
    out.job_id = task->job_id;
    out.task_id = task->task_id;
    out.attempt = m->attempt;
    out.frame = m->frame;
    out.parts_dir = assembler::PartsDir(job.output.dir, m->frame);
    out.assigned = task->part;
    if (!exact) out.pixels = float_image();  // else the payload is the accumulation
    out.accept_bad_pixels = task->accept_bad_pixels;
    assembler_->SubmitPart(std::move(out), std::move(env.payload));
    return;
  }
  assembler::FrameJob out;
  out.job_id = task->job_id;
  out.task_id = task->task_id;
  out.attempt = m->attempt;
  out.frame = m->frame;
  out.output = job.output;
  out.image = float_image();
  out.accept_bad_pixels = task->accept_bad_pixels;
  assembler_->Submit(std::move(out), std::move(env.payload));
}

void Broker::RefuseResult(LiveTask& task, const std::string& identity, const WorkerConn& worker,
                          int attempt, const char* what, const std::string& problem) {
  spdlog::warn("task {} attempt {}: bad {} result from {}: {}", task.task_id, attempt, what,
               worker.offer.name, problem);
  ChargeWorker(task, worker);
  EndLease(task, identity,
           {store::AttemptOutcome::kFailed, store::kFailureBadResult,
            std::string("bad ") + what + " result: " + problem, /*charged=*/true},
           /*cancel=*/true);
}

void Broker::OnFrameWrittenByWorker(const std::string& identity, WorkerConn& worker, LiveTask& task,
                                    const protocol::FrameResult& m) {
  const JobInfo& job = leases_.jobs()[task.job_id];
  std::string problem;
  if (!job.output_shared || !task.part.whole()) {
    problem = "the worker wrote the frame itself, but this job's frames come to the scheduler";
  } else if (m.frame < task.frame_start || m.frame > task.frame_end) {
    problem = "frame " + std::to_string(m.frame) + " is not part of the task";
  } else if (task.frames_written.count(m.frame) || task.frames_in_flight.count(m.frame)) {
    return;  // duplicate delivery, or the other copy delivered this frame first
  }
  if (!problem.empty()) return RefuseResult(task, identity, worker, m.attempt, "frame", problem);
  task.LeaseOn(identity)->last_progress = now_;
  // The files must be there as the scheduler sees the shared storage: a worker whose path_map
  // is wrong wrote them somewhere else.
  assembler::FrameWritten written;
  written.job_id = task.job_id;
  written.task_id = task.task_id;
  written.attempt = m.attempt;
  written.frame = m.frame;
  for (const std::string& format : job.output.formats) {
    const std::string path =
        job.output.dir + "/" + spec::OutputFileName(job.output.pattern, m.frame, format);
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) {
      written.status =
          Status::NotFound("worker " + worker.offer.name + " reported writing " + path +
                           ", but it is not there on the scheduler's side of "
                           "the shared storage (check the worker's path_map)");
      break;
    }
    written.files.push_back(path);
  }
  spdlog::debug("task {} attempt {}: frame {} written to shared storage by {}", task.task_id,
                m.attempt, m.frame, worker.offer.name);
  task.frames_in_flight[m.frame] = m.attempt;
  OnFrameWritten(written);
}

void Broker::OnFrameWritten(const assembler::FrameWritten& written) {
  if (written.kind == assembler::FrameWritten::Kind::kAssembled) {
    OnFrameAssembled(written);
    return;
  }
  if (written.kind == assembler::FrameWritten::Kind::kFile) {
    OnFileWritten(written);
    return;
  }
  if (written.kind == assembler::FrameWritten::Kind::kInputs) {
    OnInputFramesGathered(written);
    return;
  }
  auto it = leases_.tasks().find(written.task_id);
  if (it == leases_.tasks().end()) return;
  LiveTask& task = it->second;
  auto flight = task.frames_in_flight.find(written.frame);
  // Only the write this run of the task is waiting for counts (not one from before a requeue).
  if (flight == task.frames_in_flight.end() || flight->second != written.attempt) return;
  task.frames_in_flight.erase(flight);
  if (written.bad_pixels) {
    // Output validation: sent back once (charged); the next attempt's pixels are written even
    // if they are still bad, and the frame is flagged on the job instead.
    spdlog::warn("job {} task {}: {}; rendering it again", task.job_id, task.task_id,
                 written.status.message());
    task.accept_bad_pixels = true;
    EndAttempt(task, written.attempt, store::AttemptOutcome::kFailed, store::kFailureBadPixels,
               written.status.message(), /*charged=*/true);
    CancelAllLeases(task,
                    "another copy's frame " + std::to_string(written.frame) + " had bad pixels");
    Requeue(task, written.attempt, "bad pixels: " + written.status.message(),
            /*count_failure=*/true);
    return;
  }
  if (OnOutputsFull(written, &task)) return;
  JobInfo& job = leases_.jobs()[task.job_id];
  if (!written.flag.empty()) {
    const std::string message = "frame " + std::to_string(written.frame) + " of task " +
                                std::to_string(task.task_id) + " kept with " + written.flag;
    spdlog::warn("job {}: {}", task.job_id, message);
    RecordEvent(task.job_id, task.task_id, std::nullopt, "frame_flagged", message);
    (void)store_.SetFrameFlag(task.job_id, written.frame, written.flag);
    job.flagged_frames.insert(written.frame);
  } else if (written.status.ok() && job.flagged_frames.erase(written.frame)) {
    // Rendered again, and clean this time.
    (void)store_.ClearFrameFlag(task.job_id, written.frame);
  }
  if (!written.status.ok()) {
    spdlog::error("job {} task {}: cannot write frame {}: {}", task.job_id, task.task_id,
                  written.frame, written.status.ToString());
    // Not the workers' fault: every copy stops and the task is retried (charged). The attempt
    // that delivered the frame failed, even if its worker already reported it done.
    EndAttempt(
        task, written.attempt, store::AttemptOutcome::kFailed, store::kFailureOutputWrite,
        "cannot write frame " + std::to_string(written.frame) + ": " + written.status.message(),
        /*charged=*/true);
    CancelAllLeases(task,
                    "the task's frame " + std::to_string(written.frame) + " could not be written");
    Requeue(task, written.attempt, "output write failed: " + written.status.message(),
            /*count_failure=*/true);
    return;
  }
  task.frames_written.insert(written.frame);
  job.largest_output = std::max(job.largest_output, written.bytes);
  MaybeComplete(task);
}

void Broker::OnTaskDone(const std::string& identity, WorkerConn& worker,
                        const protocol::TaskDone& m) {
  LiveTask* task = FindLease(identity, m.task_id, m.attempt, "task done");
  if (!task) {
    Ack(identity, m.task_id, m.attempt);  // stale or already recorded: nothing to keep
    return;
  }
  // The attempt stays running until its frames are written: done is recorded with the task's.
  SaveLog(*task, m.attempt, worker, m.log);
  task->acks.emplace_back(identity, m.attempt);
  task->done_attempt = m.attempt;
  task->done_files = m.files;
  task->done_worker_id = worker.offer.id;
  task->done_seconds =
      std::chrono::duration<double>(now_ - task->LeaseOn(identity)->leased_at).count();
  ReleaseLease(*task, identity);
  MaybeComplete(*task);
}

void Broker::MaybeComplete(LiveTask& task) {
  if (task.done_attempt == 0 || !task.frames_in_flight.empty() || !task.files_in_flight.empty()) {
    return;
  }
  JobInfo& job = leases_.jobs()[task.job_id];
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
    EndAttempt(task, attempt, store::AttemptOutcome::kFailed, store::kFailureIncomplete, reason,
               /*charged=*/true);
    if (task.running()) {  // the other copy may still deliver them
      spdlog::warn("task {} attempt {}: {}; its other copy runs on", task.task_id, attempt, reason);
      ++task.failures;
      (void)store_.EndCopy(task.task_id, attempt, /*count_failure=*/true);
      SendAcks(task);
    } else {
      Requeue(task, attempt, reason, /*count_failure=*/true);
    }
    return;
  }
  // The first copy to deliver wins; a backup still running lost the race.
  CancelAllLeases(task, "another copy finished the task first");
  if (job.parts_per_frame > 1 && leases_.IsLastPart(task)) {
    // Recorded done only once its frame is written (OnFrameAssembled): the job is never done
    // before its frames are on disk, and a restart before then renders this part again.
    AssembleFrame(task, job);
    return;
  }
  if (Status s = store_.FinishTask(task.task_id, attempt, task.done_worker_id, task.job_id);
      !s.ok()) {
    spdlog::error("task {}: cannot record completion: {}", task.task_id, s.ToString());
    return;
  }
  CountDone(job, task);
  if (job.parts_per_frame > 1) {
    leases_.PartDone(task.job_id, task.frame_start);  // not the last: IsLastPart said so
    Forget(task.task_id);
    return;
  }
  spdlog::debug("job {} task {} (frames {}-{}) done, attempt {}", task.job_id, task.task_id,
                task.frame_start, task.frame_end, attempt);
  OnFramesDone(task.job_id, task.frame_start, task.frame_end);
  Forget(task.task_id);
}

void Broker::CountDone(JobInfo& job, const LiveTask& task) {
  MarkJobChanged(task.job_id);
  ++job.tasks_done;
  job.done_seconds += task.done_seconds;
  completed_.fetch_add(1, std::memory_order_relaxed);
  render_ns_.fetch_add(static_cast<uint64_t>(task.done_seconds * 1e9), std::memory_order_relaxed);
}

void Broker::AssembleFrame(LiveTask& task, const JobInfo& job) {
  task.assembling = true;
  assembler::AssembleJob assemble;
  assemble.job_id = task.job_id;
  assemble.task_id = task.task_id;
  assemble.attempt = task.done_attempt;
  assemble.frame = task.frame_start;
  assemble.output = job.output;
  assemble.parts = job.parts_per_frame;
  assembler_->Assemble(std::move(assemble));
}

void Broker::OnFrameAssembled(const assembler::FrameWritten& written) {
  auto it = leases_.tasks().find(written.task_id);
  // Asked for in a pass that was rolled back (the data folder was full): its task came back
  // from the store, its last part comes again and is assembled then; this one counts for
  // nothing, and its parts stay.
  if (written.task_id != 0 && it != leases_.tasks().end() && !it->second.assembling) return;
  LiveTask* task = it != leases_.tasks().end() && it->second.assembling ? &it->second : nullptr;
  if (OnOutputsFull(written, task)) return;  // assembled again once there is room
  if (!written.status.ok()) {
    // Every part was checked when it arrived, so this is the farm's disk or a part damaged on
    // it: the last part's task fails with the reason (the parts stay on disk for a look;
    // re-rendering the frame tries again).
    const std::string message = "frame " + std::to_string(written.frame) +
                                " could not be assembled: " + written.status.message();
    spdlog::error("job {}: {}", written.job_id, message);
    RecordEvent(written.job_id, std::nullopt, std::nullopt, "frame_failed", message);
    if (task) {
      EndAttempt(*task, task->done_attempt, store::AttemptOutcome::kFailed,
                 store::kFailureOutputWrite, message, /*charged=*/true);
      if (Status s = store_.FailTask(task->task_id, task->done_attempt, message, task->job_id);
          !s.ok()) {
        spdlog::error("task {}: {}", task->task_id, s.ToString());
      }
      leases_.FrameEnded(task->job_id, task->frame_start);
      Forget(task->task_id);
    }
    return;
  }
  if (auto job = leases_.jobs().find(written.job_id); job != leases_.jobs().end()) {
    job->second.largest_output = std::max(job->second.largest_output, written.bytes);
  }
  if (task) {
    if (Status s = store_.FinishTask(task->task_id, task->done_attempt, task->done_worker_id,
                                     task->job_id);
        !s.ok()) {
      spdlog::error("task {}: cannot record completion: {}", task->task_id, s.ToString());
      return;
    }
    CountDone(leases_.jobs()[task->job_id], *task);
    leases_.FrameEnded(task->job_id, task->frame_start);
    Forget(task->task_id);
  }
  spdlog::debug("job {}: frame {} assembled", written.job_id, written.frame);
  OnFramesDone(written.job_id, written.frame, written.frame);
  // The frame is written and its last part recorded: the parts go once that is committed.
  after_commit_.push_back([this, dir = std::filesystem::path(written.parts_dir)] {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    // A filesystem gone read-only (or full) keeps them for now: removed once it takes writes.
    if (ec) return leftover_parts_.push_back(dir);
    std::filesystem::remove(dir.parent_path(), ec);  // only when no other frame's parts wait
  });
}

void Broker::ResumeAssemblies() {
  StatusOr<std::vector<store::JobRecord>> jobs = store_.ListJobs(std::nullopt, 1000000);
  if (!jobs.ok()) {
    spdlog::error("cannot list jobs to resume frame assembly: {}", jobs.status().ToString());
    return;
  }
  for (const store::JobRecord& job : *jobs) {
    if (job.parts_per_frame <= 1 || job.state == store::JobState::kCanceled) continue;
    std::error_code ec;
    const auto root = std::filesystem::path(job.output_dir) / ".parts";
    for (const auto& entry : std::filesystem::directory_iterator(root, ec)) {
      int frame = 0;
      const std::string name = entry.path().filename().string();
      const char* end = name.data() + name.size();
      if (std::from_chars(name.data(), end, frame).ptr != end) continue;
      if (leases_.PartsPending(job.id, frame)) continue;  // parts still being rendered
      spdlog::info("job {}: assembling frame {}, whose parts were stored before a restart", job.id,
                   frame);
      assembler::AssembleJob assemble;
      assemble.job_id = job.id;
      assemble.frame = frame;
      assemble.output = FrameOutputOf(job);
      assemble.parts = job.parts_per_frame;
      assembler_->Assemble(std::move(assemble));
    }
  }
}

void Broker::Forget(int64_t task_id) {
  auto it = leases_.tasks().find(task_id);
  if (it == leases_.tasks().end()) return;
  SendAcks(it->second);  // its outcome is recorded in this pass
  ClearResume(it->second);
  const int64_t job_id = it->second.job_id;
  if (leases_.Remove(task_id)) {
    spdlog::info("job {} has no unfinished tasks left", job_id);
    OnJobFinished(job_id);
  }
}

void Broker::OnTaskFailed(const std::string& identity, WorkerConn& worker,
                          const protocol::TaskFailed& m) {
  LiveTask* task = FindLease(identity, m.task_id, m.attempt, "task failure");
  // Acknowledged after this pass commits what the failure changed (or at once when stale).
  Ack(identity, m.task_id, m.attempt);
  if (!task) return;
  spdlog::warn("job {} task {} attempt {} failed on {} ({}): {}", task->job_id, task->task_id,
               m.attempt, worker.offer.name, m.failure_class, m.message);
  SaveLog(*task, m.attempt, worker, m.log);
  // A full disk is nobody's fault: the worker's own is reported by its heartbeat (and it gets
  // nothing new meanwhile); shared outputs the scheduler sees full hold their jobs.
  const bool storage_full = m.failure_class == protocol::kFailureStorageFull;
  const bool charge = m.charge && !storage_full && ApplyFailureClass(*task, worker, identity, m);
  if (charge) ChargeWorker(*task, worker);
  // A worker that had no free slot returns the task: nothing failed.
  const bool returned = !m.charge && m.failure_class == protocol::kFailureNoSlot;
  const int64_t job_id = task->job_id;
  EndLease(*task, identity,
           {returned ? store::AttemptOutcome::kHandedBack : store::AttemptOutcome::kFailed,
            returned ? "" : m.failure_class, m.message, charge},
           /*cancel=*/false);
  if (storage_full) CheckSharedOutputs(job_id);
}

bool Broker::ApplyFailureClass(LiveTask& task, const WorkerConn& worker,
                               const std::string& identity, const protocol::TaskFailed& m) {
  {
    std::lock_guard<std::mutex> lock(failures_mu_);
    ++failures_by_class_[m.failure_class];
  }
  JobInfo& job = leases_.jobs()[task.job_id];
  const spec::FailurePolicy& policy = job.failure_policy;
  if (m.failure_class == protocol::kFailureSceneError && policy.scene_error == "fail") {
    task.fail_now = "scene error: retrying cannot help";
  } else if (m.failure_class == protocol::kFailureLicense) {
    // Nobody's fault: back to the queue uncharged, after the job's wait.
    task.not_before = now_ + std::chrono::seconds(policy.license_wait_s);
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
    const bool bigger = std::any_of(workers_.begin(), workers_.end(), [&](const auto& w) {
      return policy::CouldEverRun(job.needs, w.second.offer);
    });
    spdlog::warn("job {} task {}: out of memory on {} ({}); {}", task.job_id, task.task_id,
                 worker.offer.name, what,
                 bigger ? "its tasks now go to workers with more" : "no connected worker has more");
    if (!bigger) {
      task.fail_now =
          "out of memory on " + worker.offer.name + " (" + what + "); no connected worker has more";
    }
    UpdateFeasibility(task.job_id, job);
  }
  return true;
}

void Broker::EndAttempt(const LiveTask& task, int attempt, store::AttemptOutcome outcome,
                        const std::string& failure_class, const std::string& message,
                        bool charged) {
  if (attempt <= 0) return;
  // At debug: the caller has logged the event that ended it.
  spdlog::debug("job {} task {} attempt {}: {}{}{}", task.job_id, task.task_id, attempt,
                store::AttemptOutcomeName(outcome),
                failure_class.empty() ? "" : " (" + failure_class + ")",
                message.empty() ? "" : ": " + message);
  if (Status s = store_.EndAttempt(task.task_id, attempt, task.job_id,
                                   {outcome, failure_class, message, charged});
      !s.ok()) {
    spdlog::error("task {} attempt {}: cannot record its outcome: {}", task.task_id, attempt,
                  s.ToString());
  }
}

void Broker::SaveLog(const LiveTask& task, int attempt, const WorkerConn& worker, std::string log) {
  if (log.empty()) return;  // noop tasks say nothing: the attempt's row stays as it is
  if (log.size() > protocol::kMaxTaskLogBytes)
    log.erase(0, log.size() - protocol::kMaxTaskLogBytes);
  store::TaskLogRecord record;
  record.task_id = task.task_id;
  record.attempt = attempt;
  record.job_id = task.job_id;
  record.worker_id = worker.offer.id;
  record.log = std::move(log);
  if (Status s = store_.SaveTaskLog(record); !s.ok()) {
    spdlog::warn("task {} attempt {}: cannot keep its log: {}", task.task_id, attempt, s.message());
  }
}

void Broker::ReleaseLease(LiveTask& task, const std::string& identity) {
  auto lease = std::find_if(task.leases.begin(), task.leases.end(),
                            [&](const Lease& l) { return l.worker == identity; });
  if (lease == task.leases.end()) return;
  CountRunning(leases_.jobs()[task.job_id], -1);
  MarkJobChanged(task.job_id);
  if (WorkerConn* worker = workers_.Find(identity)) {
    ChargeLease(task, *lease, *worker);
    WorkerRegistry::Release(*worker, task.task_id, lease->attempt, now_);
  }
  task.leases.erase(lease);
}

void Broker::ChargeLease(const LiveTask& task, const Lease& lease, const WorkerConn& worker) {
  // A share of a GPU counts its part.
  const double gpus = worker.claims.GpusHeld(task.task_id, lease.attempt, worker.offer,
                                             static_cast<double>(lease.gpus.size()));
  if (gpus == 0 && worker.price.per_hour <= 0) return;  // nothing to count: no write
  const double seconds = std::chrono::duration<double>(now_ - lease.leased_at).count();
  // Its share of the worker: its GPUs of the worker's, or one slot of a worker without GPUs.
  const double share = worker.offer.gpus.empty()
                           ? 1.0 / worker.slots
                           : gpus / static_cast<double>(worker.offer.gpus.size());
  const double cost = worker.price.per_hour * seconds / 3600 * share;
  if (Status s = store_.AddTaskCost(task.task_id, task.job_id, gpus * seconds, cost); !s.ok()) {
    spdlog::error("task {}: cannot record its cost: {}", task.task_id, s.ToString());
  }
}

void Broker::CancelLease(LiveTask& task, const std::string& identity) {
  Lease* lease = task.LeaseOn(identity);
  if (!lease) return;
  Send(identity,
       protocol::Encode(MessageType::kCancel, protocol::Cancel{task.task_id, lease->attempt}));
  if (WorkerConn* worker = workers_.Find(identity)) {
    WorkerRegistry::MarkStopping(*worker, task.task_id, lease->attempt);
  }
  ReleaseLease(task, identity);
}

void Broker::CancelAllLeases(LiveTask& task, const std::string& why) {
  while (!task.leases.empty()) {
    const std::string holder = task.leases.back().worker;  // CancelLease erases the lease
    EndAttempt(task, task.leases.back().attempt, store::AttemptOutcome::kCanceled, "", why,
               /*charged=*/false);
    CancelLease(task, holder);
  }
}

void Broker::EndLease(LiveTask& task, const std::string& identity, const store::AttemptEnd& end,
                      bool cancel) {
  Lease* lease = task.LeaseOn(identity);
  if (!lease) return;
  const int attempt = lease->attempt;
  const std::string& reason = end.message;
  const bool count_failure = end.charged;
  EndAttempt(task, attempt, end.outcome, end.failure_class, end.message, end.charged);
  if (cancel) {
    CancelLease(task, identity);
  } else {
    ReleaseLease(task, identity);
  }
  if (task.running() || task.done_attempt != 0) {
    // The other copy runs on (or has already delivered): only this one ends.
    spdlog::info("job {} task {} attempt {} dropped ({}); its other copy runs on", task.job_id,
                 task.task_id, attempt, reason);
    if (count_failure) ++task.failures;
    if (Status s = store_.EndCopy(task.task_id, attempt, count_failure); !s.ok()) {
      spdlog::error("task {}: cannot drop attempt {}: {}", task.task_id, attempt, s.ToString());
    }
    return;
  }
  Requeue(task, attempt, reason, count_failure);
}

void Broker::OnHeartbeat(const std::string& identity, WorkerConn& worker,
                         const protocol::Heartbeat& beat) {
  WorkerRegistry::FreeStopped(worker, beat.running);
  // An assignment may cross a heartbeat already on its way, hence the grace period.
  const std::vector<int64_t> lost = leases_.NotHeld(
      identity, worker.tasks, beat, now_, std::chrono::milliseconds(2 * options_.heartbeat_ms));
  for (int64_t task_id : lost) {
    EndLease(leases_.tasks().at(task_id), identity,
             {store::AttemptOutcome::kLost, "",
              "worker " + worker.offer.name + " does not hold the lease (assignment lost)",
              /*charged=*/false},
             /*cancel=*/false);
  }
}

void Broker::ChargeWorker(LiveTask& task, const WorkerConn& worker) {
  JobInfo& job = leases_.jobs()[task.job_id];
  const int64_t worker_id = worker.offer.id;
  task.failed_on.insert(worker_id);
  if (Status s = store_.RecordWorkerFailure(task.job_id, task.task_id, worker_id); !s.ok()) {
    spdlog::error("job {}: cannot record a failure on worker {}: {}", task.job_id,
                  worker.offer.name, s.ToString());
  }
  int failures = ++job.failures_by_worker[worker_id];
  if (job.blocklist_after > 0 && failures >= job.blocklist_after &&
      job.needs.blocklist.insert(worker_id).second) {
    spdlog::warn("job {}: worker {} blocklisted after {} failures", task.job_id, worker.offer.name,
                 failures);
    RecordEvent(task.job_id, task.task_id, worker_id, "worker_blocklisted",
                worker.offer.name + " failed " + std::to_string(failures) + " tasks");
    UpdateFeasibility(task.job_id, job);
  }
}

void Broker::Requeue(LiveTask& task, int attempt, const std::string& reason, bool count_failure,
                     bool handed_back) {
  const JobInfo& job = leases_.jobs()[task.job_id];
  MarkJobChanged(task.job_id);
  if (count_failure) ++task.failures;
  std::string fatal = std::exchange(task.fail_now, "");
  if (!fatal.empty()) {
    // A failure whose class leaves no retry (ApplyFailureClass).
  } else if (count_failure && task.failures > job.max_retries) {
    fatal = "failed " + std::to_string(task.failures) + " times";
  } else if (count_failure && job.fail_after_workers > 0 &&
             static_cast<int>(task.failed_on.size()) >= job.fail_after_workers) {
    fatal = "failed on " + std::to_string(task.failed_on.size()) + " different workers";
  }
  if (!fatal.empty()) {
    Status s = store_.FailTask(task.task_id, attempt, reason + " (" + fatal + ")", task.job_id);
    if (!s.ok()) spdlog::error("task {}: cannot record failure: {}", task.task_id, s.ToString());
    spdlog::error("job {} task {} failed permanently ({}): {}", task.job_id, task.task_id, fatal,
                  reason);
    Forget(task.task_id);
    return;
  }
  Status s = store_.RequeueTask(task.task_id, attempt, reason, count_failure, task.job_id);
  if (!s.ok()) spdlog::error("task {}: cannot requeue: {}", task.task_id, s.ToString());
  spdlog::info("job {} task {} requeued ({}): {}", task.job_id, task.task_id,
               count_failure ? "failure " + std::to_string(task.failures) : "not charged", reason);
  task.done_attempt = 0;
  SendAcks(task);
  if (!handed_back && !ResumesFromCheckpoint(task, count_failure)) {
    // A new attempt renders every frame again.
    ClearResume(task);
    task.frames_written.clear();
    task.frames_in_flight.clear();
  }
  Enqueue(task);
}

}  // namespace tessera::broker
