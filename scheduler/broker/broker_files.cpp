// The files a command task returns (`outputs: files`, protocol::FileResult): checked at the
// boundary, written into the job's output folder by the assembler (or found where the worker put
// them on shared storage), and counted like frames before the task is recorded done.
#include <spdlog/spdlog.h>

#include <filesystem>

#include "scheduler/broker/broker.h"
#include "shared/jobs/job_file.h"

namespace tessera::broker {

void Broker::OnFileResult(const std::string& identity, WorkerConn& worker,
                          protocol::Envelope& env) {
  auto m = env.As<protocol::FileResult>();
  if (!m.ok()) return DropMessage(identity, m.status().message());
  LiveTask* task = FindLease(identity, m->task_id, m->attempt, "file result");
  if (!task) return;
  const JobInfo& job = leases_.jobs()[task->job_id];
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
  if (!problem.empty()) return RefuseResult(*task, identity, worker, m->attempt, "file", problem);
  task->files_in_flight[m->name] = m->attempt;
  task->LeaseOn(identity)->last_progress = now_;
  spdlog::debug("task {} attempt {}: file {} ({} bytes) from {}", task->task_id, m->attempt,
                m->name, m->size, worker.offer.name);
  if (!written_there) {
    assembler_->SubmitFile({task->job_id, task->task_id, m->attempt, job.output.dir, m->name},
                           std::move(env.payload));
    return;
  }
  // The file must be there as the scheduler sees the shared storage: a worker whose path_map is
  // wrong wrote it somewhere else.
  assembler::FrameWritten written;
  written.kind = assembler::FrameWritten::Kind::kFile;
  written.job_id = task->job_id;
  written.task_id = task->task_id;
  written.attempt = m->attempt;
  written.files = {m->name};
  const std::filesystem::path path = std::filesystem::path(job.output.dir) / m->name;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(std::filesystem::symlink_status(path, ec))) {
    written.status =
        Status::NotFound("worker " + worker.offer.name + " reported writing " + path.string() +
                         ", but it is not there on the scheduler's side of the "
                         "shared storage (check the worker's path_map)");
  }
  OnFileWritten(written);
}

void Broker::OnFileWritten(const assembler::FrameWritten& written) {
  auto it = leases_.tasks().find(written.task_id);
  if (it == leases_.tasks().end() || written.files.size() != 1) return;
  LiveTask& task = it->second;
  const std::string& name = written.files.front();
  auto flight = task.files_in_flight.find(name);
  // Only the write this run of the task is waiting for counts (not one from before a requeue).
  if (flight == task.files_in_flight.end() || flight->second != written.attempt) return;
  task.files_in_flight.erase(flight);
  if (OnOutputsFull(written, &task)) return;
  if (!written.status.ok()) {
    spdlog::error("job {} task {}: cannot write file {}: {}", task.job_id, task.task_id, name,
                  written.status.ToString());
    // As for a frame: not the worker's fault; every copy stops and the task is retried.
    EndAttempt(task, written.attempt, store::AttemptOutcome::kFailed, store::kFailureOutputWrite,
               "cannot write " + name + ": " + written.status.message(), /*charged=*/true);
    CancelAllLeases(task, "the task's file " + name + " could not be written");
    Requeue(task, written.attempt, "output write failed: " + written.status.message(),
            /*count_failure=*/true);
    return;
  }
  task.files_written.insert(name);
  MaybeComplete(task);
}

}  // namespace tessera::broker
