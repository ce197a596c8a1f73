#include "scheduler/broker/full_outputs.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>

#include "scheduler/broker/event_sink.h"
#include "scheduler/broker/outbox.h"
#include "scheduler/events/farm_alerts.h"
#include "scheduler/store/store.h"
#include "shared/base/disk_space.h"

namespace tessera::broker {

namespace {

constexpr uint64_t kMinResumeBytes = uint64_t{64} << 20;

std::string MiB(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return text;
}

std::string AlertKey(const std::string& folder) { return "outputs_full:" + folder; }

// How an alert starts: what kind of full.
std::string FullWhy(const StatusOr<disk_space::Room>& space) {
  return space.ok() && space->read_only ? "read-only filesystem: " : "no space left on device: ";
}

}  // namespace

void FullOutputs::Hold(Pass& pass, const std::string& folder, const std::string& why) {
  StatusOr<disk_space::Room> space = p_.options.free_space_of(folder);
  const dev_t device = space.ok() ? space->device : 0;
  Full& full = full_[device];
  const bool fresh = full.folder.empty();
  if (fresh) full.folder = folder;
  full.next_check = pass.now + p_.options.storage_check_interval;
  const std::string where =
      space.ok() ? disk_space::Describe(*space) : "room unknown: " + space.status().message();
  std::vector<int64_t> held;
  for (auto& [id, job] : p_.table.jobs()) {
    if (job.outputs_held) continue;
    StatusOr<disk_space::Room> theirs = p_.options.free_space_of(job.output.dir);
    if (!theirs.ok() || theirs->device != device) continue;
    job.outputs_held = true;
    full.jobs.insert(id);
    held.push_back(id);
    p_.table.DropQueued(id);
    job.notice = "held: no space left on device for its outputs in " + job.output.dir + " (" +
                 where + "); it resumes by itself once there is room";
    (void)pass.store.SetJobNotice(id, job.notice);
    pass.events.Record(id, std::nullopt, std::nullopt, "outputs_full", *job.notice);
    pass.events.JobChanged(id);
  }
  const std::string message = FullWhy(space) + full.folder + " (" + where + "); " +
                              std::to_string(full.jobs.size()) +
                              " job(s) whose outputs go there are held until there is room";
  if (p_.options.alerts &&
      p_.options.alerts->Raise(AlertKey(full.folder), "outputs_full", message, pass.wall_ms)) {
    spdlog::error("{}", message);
  } else if (!held.empty()) {
    spdlog::warn("no space left on device: {} more job(s) held on {}", held.size(), full.folder);
  }
  spdlog::warn("outputs write failed for want of room: {}", why);
}

bool FullOutputs::OnWriteFailed(Pass& pass, LiveTask& task, int attempt, const std::string& what,
                                const Status& status) {
  if (status.code() != StatusCode::kStorageFull) return false;
  Hold(pass, p_.table.jobs()[task.job_id].output.dir, status.message());
  // Not the task's fault and not the worker's: every copy stops; no retry is counted. The
  // attempt that delivered the output failed (storage_full), even if its worker reported done.
  p_.leases.EndAttempt(pass, task, attempt, store::AttemptOutcome::kFailed,
                       protocol::kFailureStorageFull,
                       "cannot write " + what + ": " + status.message(), /*charged=*/false);
  p_.leases.CancelAll(pass, task, "its outputs' filesystem is full");
  p_.leases.Requeue(pass, task, attempt, "outputs full: " + status.message(),
                    /*count_failure=*/false);
  return true;
}

bool FullOutputs::OnAssemblyFailed(Pass& pass, const assembler::FrameAssembled& assembled,
                                   LiveTask* task) {
  if (assembled.status.code() != StatusCode::kStorageFull) return false;
  std::string folder;
  if (auto job = p_.table.jobs().find(assembled.job_id); job != p_.table.jobs().end()) {
    folder = job->second.output.dir;
  }
  if (folder.empty() && !assembled.parts_dir.empty()) {
    folder = std::filesystem::path(assembled.parts_dir).parent_path().parent_path().string();
  }
  Hold(pass, folder, assembled.status.message());
  // Every part is on disk: only the frame itself waits for space, then it is assembled again.
  StatusOr<store::JobRecord> record = pass.store.GetJob(assembled.job_id);
  if (!record.ok()) return true;
  assembler::AssembleJob again;
  again.job_id = assembled.job_id;
  again.task_id = task ? task->task_id : 0;
  again.attempt = assembled.attempt;
  again.frame = assembled.frame;
  again.output = FrameOutputOf(*record);
  again.parts = record->parts_per_frame;
  StatusOr<disk_space::Room> space = p_.options.free_space_of(folder);
  full_[space.ok() ? space->device : 0].assemblies.push_back(std::move(again));
  return true;
}

void FullOutputs::CheckShared(Pass& pass, int64_t job_id) {
  auto it = p_.table.jobs().find(job_id);
  if (it == p_.table.jobs().end() || !it->second.output_shared || it->second.outputs_held) return;
  // The worker wrote the frame itself: hold the job when the scheduler sees that folder full
  // too (else it was the worker's own disk, which its heartbeat reports).
  const Status probe = disk_space::ClassifyWriteFailure(
      Status::Internal("a worker could not write the frames of job " + std::to_string(job_id)),
      it->second.output.dir, 0);
  if (probe.code() == StatusCode::kStorageFull) Hold(pass, it->second.output.dir, probe.message());
}

void FullOutputs::HoldIfFull(Pass& pass, int64_t job_id, JobInfo& job) {
  if (full_.empty()) return;
  StatusOr<disk_space::Room> space = p_.options.free_space_of(job.output.dir);
  if (!space.ok()) return;
  auto full = full_.find(space->device);
  if (full == full_.end()) return;
  job.outputs_held = true;
  full->second.jobs.insert(job_id);
  job.notice = "held: no space left on device for its outputs in " + job.output.dir + " (" +
               disk_space::Describe(*space) + "); it resumes by itself once there is room";
  (void)pass.store.SetJobNotice(job_id, job.notice);
  pass.events.Record(job_id, std::nullopt, std::nullopt, "outputs_full", *job.notice);
}

void FullOutputs::Check(Pass& pass) {
  if (!leftover_parts_.empty() && pass.now >= next_leftover_try_) {
    next_leftover_try_ = pass.now + p_.options.storage_check_interval;
    std::vector<std::filesystem::path> still;
    for (const std::filesystem::path& dir : leftover_parts_) {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
      if (ec) {
        still.push_back(dir);
        continue;
      }
      std::filesystem::remove(dir.parent_path(), ec);  // only when no other frame's parts wait
    }
    leftover_parts_ = std::move(still);
  }
  for (auto it = full_.begin(); it != full_.end();) {
    Full& full = it->second;
    if (pass.now < full.next_check) {
      ++it;
      continue;
    }
    full.next_check = pass.now + p_.options.storage_check_interval;
    uint64_t largest = 0;
    for (int64_t id : full.jobs) {
      if (auto job = p_.table.jobs().find(id); job != p_.table.jobs().end()) {
        largest = std::max(largest, job->second.largest_output);
      }
    }
    StatusOr<disk_space::Room> space = p_.options.free_space_of(full.folder);
    uint64_t wanted = std::max(kMinResumeBytes, 2 * largest);
    if (space.ok() && space->total_bytes > 0) wanted = std::min(wanted, space->total_bytes / 2);
    if (!space.ok() || space->read_only || space->free_bytes < wanted) {
      if (p_.options.alerts && space.ok()) {
        // The same alert, with the free space as it is now.
        p_.options.alerts->Raise(
            AlertKey(full.folder), "outputs_full",
            FullWhy(space) + full.folder + " (" + disk_space::Describe(*space) + "); " +
                std::to_string(full.jobs.size()) + " job(s) held until " + MiB(wanted) + " is free",
            pass.wall_ms);
      }
      ++it;
      continue;
    }
    const std::string message = "space is back on " + full.folder + " (" +
                                disk_space::Describe(*space) +
                                "): " + std::to_string(full.jobs.size()) + " held job(s) resume";
    spdlog::info("{}", message);
    if (p_.options.alerts) p_.options.alerts->Clear(AlertKey(full.folder));
    for (int64_t id : full.jobs) {
      auto job = p_.table.jobs().find(id);
      if (job == p_.table.jobs().end()) continue;
      job->second.outputs_held = false;
      job->second.notice.reset();
      (void)pass.store.SetJobNotice(id, std::nullopt);
      pass.events.Record(id, std::nullopt, std::nullopt, "outputs_space_back", message);
      p_.feasibility.Update(pass, id, job->second);
      p_.queue.EnqueueJob(pass, id);
      pass.events.JobChanged(id);
    }
    for (assembler::AssembleJob& assemble : full.assemblies) {
      if (pass.assembler != nullptr) pass.assembler->Assemble(std::move(assemble));
    }
    it = full_.erase(it);
  }
}

void FullOutputs::RemovePartsAfterCommit(Pass& pass, const std::filesystem::path& parts_dir) {
  pass.outbox.AfterCommit([this, dir = parts_dir] {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    // A filesystem gone read-only (or full) keeps them for now: removed once it takes writes.
    if (ec) return leftover_parts_.push_back(dir);
    std::filesystem::remove(dir.parent_path(), ec);  // only when no other frame's parts wait
  });
}

}  // namespace tessera::broker
