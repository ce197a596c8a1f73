// TaskEnds' results: frames, parts of split frames and files as workers send them -- checked at
// the boundary (a result that breaks the protocol's rules charges its worker and ends the
// copy), handed to the assembler (or found where a shared-storage job's worker wrote them) --
// and the assembler's answers, which count toward the task, retry it, hold full outputs, or
// complete a split frame.

#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <filesystem>

#include "scheduler/broker/event_sink.h"
#include "scheduler/broker/task_ends.h"
#include "scheduler/store/store.h"
#include "shared/jobs/job_file.h"

namespace tessera::broker {

void TaskEnds::OnFrameResult(Pass& pass, const std::string& identity, const WorkerConn& worker,
                             protocol::Envelope& env) {
  auto m = env.As<protocol::FrameResult>();
  if (!m.ok()) return p_.boundary.DropMessage(pass, identity, m.status().message());
  LiveTask* task = p_.leases.Find(pass, identity, m->task_id, m->attempt, "frame result");
  if (!task) return;
  const JobInfo& job = p_.table.jobs()[task->job_id];
  // A part of a split frame is an exact accumulation (the path tracer's, or a C++ plugin's that
  // splits samples; checked by the assembler against the task's part); a whole frame is
  // width x height x channels floats. A tile from another plugin is float pixels like a frame.
  const bool part = !task->part.whole();
  if (m->encoding == protocol::kEncodingWritten) {
    return OnFrameWrittenByWorker(pass, identity, worker, *task, *m);
  }
  const bool exact = part && job.exact_parts;
  const size_t expected =
      static_cast<size_t>(std::max(0, m->width)) * static_cast<size_t>(std::max(0, m->height)) *
      static_cast<size_t>(std::max(0, m->channels)) * (exact ? sizeof(int64_t) : sizeof(float));
  const int max_side = p_.options.max_image_side;
  std::string problem;
  if (!job.produces_frames) {
    problem = "renderer " + job.renderer + " sends no frames";
  } else if (m->frame < task->frame_start || m->frame > task->frame_end) {
    problem = "frame " + std::to_string(m->frame) + " is not part of the task";
  } else if (m->width <= 0 || m->height <= 0 || m->width > max_side || m->height > max_side ||
             m->channels < 1 || m->channels > protocol::kMaxChannels ||
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
  if (!problem.empty()) {
    return RefuseResult(pass, *task, identity, worker, m->attempt, "frame", problem);
  }
  task->frames_in_flight[m->frame] = m->attempt;
  task->LeaseOn(identity)->last_progress = pass.now;
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
    pass.assembler->SubmitPart(std::move(out), std::move(env.payload));
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
  pass.assembler->Submit(std::move(out), std::move(env.payload));
}

void TaskEnds::RefuseResult(Pass& pass, LiveTask& task, const std::string& identity,
                            const WorkerConn& worker, int attempt, const char* what,
                            const std::string& problem) {
  spdlog::warn("task {} attempt {}: bad {} result from {}: {}", task.task_id, attempt, what,
               worker.offer.name, problem);
  p_.leases.ChargeWorker(pass, task, worker);
  p_.leases.End(pass, task, identity,
                {store::AttemptOutcome::kFailed, store::kFailureBadResult,
                 std::string("bad ") + what + " result: " + problem, /*charged=*/true},
                /*cancel=*/true);
}

void TaskEnds::OnFrameWrittenByWorker(Pass& pass, const std::string& identity,
                                      const WorkerConn& worker, LiveTask& task,
                                      const protocol::FrameResult& m) {
  const JobInfo& job = p_.table.jobs()[task.job_id];
  std::string problem;
  if (!job.output_shared || !task.part.whole()) {
    problem = "the worker wrote the frame itself, but this job's frames come to the scheduler";
  } else if (m.frame < task.frame_start || m.frame > task.frame_end) {
    problem = "frame " + std::to_string(m.frame) + " is not part of the task";
  } else if (task.frames_written.count(m.frame) || task.frames_in_flight.count(m.frame)) {
    return;  // duplicate delivery, or the other copy delivered this frame first
  }
  if (!problem.empty()) {
    return RefuseResult(pass, task, identity, worker, m.attempt, "frame", problem);
  }
  task.LeaseOn(identity)->last_progress = pass.now;
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
  OnWritten(pass, written);
}

void TaskEnds::OnWritten(Pass& pass, const assembler::FrameWritten& written) {
  OnDelivered(pass, written, written.bytes);
}

void TaskEnds::OnWritten(Pass& pass, const assembler::PartStored& stored) {
  OnDelivered(pass, stored, /*bytes=*/0);
}

template <typename Written>
void TaskEnds::OnDelivered(Pass& pass, const Written& written, uint64_t bytes) {
  auto it = p_.table.tasks().find(written.task_id);
  if (it == p_.table.tasks().end()) return;
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
    p_.leases.EndAttempt(pass, task, written.attempt, store::AttemptOutcome::kFailed,
                         store::kFailureBadPixels, written.status.message(), /*charged=*/true);
    p_.leases.CancelAll(
        pass, task, "another copy's frame " + std::to_string(written.frame) + " had bad pixels");
    p_.leases.Requeue(pass, task, written.attempt, "bad pixels: " + written.status.message(),
                      /*count_failure=*/true);
    return;
  }
  if (p_.full_outputs.OnWriteFailed(pass, task, written.attempt,
                                    "frame " + std::to_string(written.frame), written.status)) {
    return;
  }
  JobInfo& job = p_.table.jobs()[task.job_id];
  if (!written.flag.empty()) {
    const std::string message = "frame " + std::to_string(written.frame) + " of task " +
                                std::to_string(task.task_id) + " kept with " + written.flag;
    spdlog::warn("job {}: {}", task.job_id, message);
    pass.events.Record(task.job_id, task.task_id, std::nullopt, "frame_flagged", message);
    (void)pass.store.SetFrameFlag(task.job_id, written.frame, written.flag);
    job.flagged_frames.insert(written.frame);
  } else if (written.status.ok() && job.flagged_frames.erase(written.frame)) {
    // Rendered again, and clean this time.
    (void)pass.store.ClearFrameFlag(task.job_id, written.frame);
  }
  if (!written.status.ok()) {
    spdlog::error("job {} task {}: cannot write frame {}: {}", task.job_id, task.task_id,
                  written.frame, written.status.ToString());
    // Not the workers' fault: every copy stops and the task is retried (charged). The attempt
    // that delivered the frame failed, even if its worker already reported it done.
    p_.leases.EndAttempt(
        pass, task, written.attempt, store::AttemptOutcome::kFailed, store::kFailureOutputWrite,
        "cannot write frame " + std::to_string(written.frame) + ": " + written.status.message(),
        /*charged=*/true);
    p_.leases.CancelAll(
        pass, task, "the task's frame " + std::to_string(written.frame) + " could not be written");
    p_.leases.Requeue(pass, task, written.attempt,
                      "output write failed: " + written.status.message(),
                      /*count_failure=*/true);
    return;
  }
  task.frames_written.insert(written.frame);
  job.largest_output = std::max(job.largest_output, bytes);
  MaybeComplete(pass, task);
}

void TaskEnds::OnWritten(Pass& pass, const assembler::FrameAssembled& assembled) {
  auto it = p_.table.tasks().find(assembled.task_id);
  // Asked for in a pass that was rolled back (the data folder was full): its task came back
  // from the store, its last part comes again and is assembled then; this one counts for
  // nothing, and its parts stay.
  if (assembled.task_id != 0 && it != p_.table.tasks().end() && !it->second.assembling) return;
  LiveTask* task = it != p_.table.tasks().end() && it->second.assembling ? &it->second : nullptr;
  // Assembled again once there is space.
  if (p_.full_outputs.OnAssemblyFailed(pass, assembled, task)) return;
  if (!assembled.status.ok()) {
    // Every part was checked when it arrived, so this is the farm's disk or a part damaged on
    // it: the last part's task fails with the reason (the parts stay on disk for a look;
    // re-rendering the frame tries again).
    const std::string message = "frame " + std::to_string(assembled.frame) +
                                " could not be assembled: " + assembled.status.message();
    spdlog::error("job {}: {}", assembled.job_id, message);
    pass.events.Record(assembled.job_id, std::nullopt, std::nullopt, "frame_failed", message);
    if (task) {
      p_.leases.EndAttempt(pass, *task, task->done_attempt, store::AttemptOutcome::kFailed,
                           store::kFailureOutputWrite, message, /*charged=*/true);
      if (Status s = pass.store.FailTask(task->task_id, task->done_attempt, message, task->job_id);
          !s.ok()) {
        spdlog::error("task {}: {}", task->task_id, s.ToString());
      }
      p_.table.FrameEnded(task->job_id, task->frame_start);
      p_.leases.Retire(pass, task->task_id);
    }
    return;
  }
  if (auto job = p_.table.jobs().find(assembled.job_id); job != p_.table.jobs().end()) {
    job->second.largest_output = std::max(job->second.largest_output, assembled.bytes);
  }
  if (task) {
    if (Status s = pass.store.FinishTask(task->task_id, task->done_attempt, task->done_worker_id,
                                         task->job_id);
        !s.ok()) {
      spdlog::error("task {}: cannot record completion: {}", task->task_id, s.ToString());
      return;
    }
    CountDone(pass, p_.table.jobs()[task->job_id], *task);
    p_.table.FrameEnded(task->job_id, task->frame_start);
    p_.leases.Retire(pass, task->task_id);
  }
  spdlog::debug("job {}: frame {} assembled", assembled.job_id, assembled.frame);
  p_.queue.OnFramesDone(pass, assembled.job_id, assembled.frame, assembled.frame);
  // The frame is written and its last part recorded: the parts go once that is committed.
  p_.full_outputs.RemovePartsAfterCommit(pass, assembled.parts_dir);
}

void TaskEnds::ResumeAssemblies(Pass& pass) {
  StatusOr<std::vector<store::JobRecord>> jobs = pass.store.ListJobs(std::nullopt, 1000000);
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
      if (p_.table.PartsPending(job.id, frame)) continue;  // parts still being rendered
      spdlog::info("job {}: assembling frame {}, whose parts were stored before a restart", job.id,
                   frame);
      assembler::AssembleJob assemble;
      assemble.job_id = job.id;
      assemble.frame = frame;
      assemble.output = FrameOutputOf(job);
      assemble.parts = job.parts_per_frame;
      pass.assembler->Assemble(std::move(assemble));
    }
  }
}

// ---- files (`outputs: files`) --------------------------------------------------------------

void TaskEnds::OnFileResult(Pass& pass, const std::string& identity, const WorkerConn& worker,
                            protocol::Envelope& env) {
  auto m = env.As<protocol::FileResult>();
  if (!m.ok()) return p_.boundary.DropMessage(pass, identity, m.status().message());
  LiveTask* task = p_.leases.Find(pass, identity, m->task_id, m->attempt, "file result");
  if (!task) return;
  const JobInfo& job = p_.table.jobs()[task->job_id];
  const bool written_there = m->encoding == protocol::kEncodingWritten;
  std::string problem;
  if (!job.returns_files) {
    problem = "renderer " + job.renderer + " returns no files for this job";
  } else if (Status name = spec::ValidateAssetPath(m->name, "name"); !name.ok()) {
    problem = name.message();
  } else if (m->encoding != "" && !written_there) {
    problem = "encoding '" + m->encoding + "' is not how a file is sent";
  } else if (written_there != job.output_shared) {
    problem = written_there ? "the worker wrote the file itself, but this job's files come to the "
                              "scheduler"
                            : "this job's files go to shared storage, not to the scheduler";
  } else if (!written_there && env.payload.size() != static_cast<size_t>(m->size)) {
    problem = "payload is " + std::to_string(env.payload.size()) + " bytes, expected " +
              std::to_string(m->size);
  } else if (task->files_written.count(m->name) || task->files_in_flight.count(m->name)) {
    return;  // duplicate delivery, or the other copy delivered this file first
  } else if (task->files_written.size() + task->files_in_flight.size() >=
             static_cast<size_t>(protocol::kMaxOutputFiles)) {
    problem = "more than " + std::to_string(protocol::kMaxOutputFiles) + " files";
  }
  if (!problem.empty()) {
    return RefuseResult(pass, *task, identity, worker, m->attempt, "file", problem);
  }
  task->files_in_flight[m->name] = m->attempt;
  task->LeaseOn(identity)->last_progress = pass.now;
  spdlog::debug("task {} attempt {}: file {} ({} bytes) from {}", task->task_id, m->attempt,
                m->name, m->size, worker.offer.name);
  if (!written_there) {
    pass.assembler->SubmitFile({task->job_id, task->task_id, m->attempt, job.output.dir, m->name},
                               std::move(env.payload));
    return;
  }
  // The file must be there as the scheduler sees the shared storage: a worker whose path_map is
  // wrong wrote it somewhere else.
  assembler::FileWritten written;
  written.job_id = task->job_id;
  written.task_id = task->task_id;
  written.attempt = m->attempt;
  written.name = m->name;
  const std::filesystem::path path = std::filesystem::path(job.output.dir) / m->name;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(std::filesystem::symlink_status(path, ec))) {
    written.status =
        Status::NotFound("worker " + worker.offer.name + " reported writing " + path.string() +
                         ", but it is not there on the scheduler's side of the "
                         "shared storage (check the worker's path_map)");
  }
  OnWritten(pass, written);
}

void TaskEnds::OnWritten(Pass& pass, const assembler::FileWritten& written) {
  auto it = p_.table.tasks().find(written.task_id);
  if (it == p_.table.tasks().end()) return;
  LiveTask& task = it->second;
  const std::string& name = written.name;
  auto flight = task.files_in_flight.find(name);
  // Only the write this run of the task is waiting for counts (not one from before a requeue).
  if (flight == task.files_in_flight.end() || flight->second != written.attempt) return;
  task.files_in_flight.erase(flight);
  if (p_.full_outputs.OnWriteFailed(pass, task, written.attempt, name, written.status)) return;
  if (!written.status.ok()) {
    spdlog::error("job {} task {}: cannot write file {}: {}", task.job_id, task.task_id, name,
                  written.status.ToString());
    // As for a frame: not the worker's fault; every copy stops and the task is retried.
    p_.leases.EndAttempt(pass, task, written.attempt, store::AttemptOutcome::kFailed,
                         store::kFailureOutputWrite,
                         "cannot write " + name + ": " + written.status.message(),
                         /*charged=*/true);
    p_.leases.CancelAll(pass, task, "the task's file " + name + " could not be written");
    p_.leases.Requeue(pass, task, written.attempt,
                      "output write failed: " + written.status.message(),
                      /*count_failure=*/true);
    return;
  }
  task.files_written.insert(name);
  MaybeComplete(pass, task);
}

}  // namespace tessera::broker
