// The broker's side of full filesystems. A full disk is an operational event, not the task's
// failure: a frame, part or assembly that cannot be written for want of room is requeued
// uncharged, and every job whose outputs go to that filesystem is held (its tasks stay out of
// the queue; other jobs keep running) under a farm-level alert, until a check every
// storage_check_interval finds room again -- then they resume by themselves. A worker whose
// heartbeat says its own disk is full gets nothing new, under an alert of its own, until its
// heartbeat says the room is back.
//
// Room enough to resume: max(64 MiB, twice the largest frame written for the held jobs), at most
// half the filesystem (a small filesystem can never have more free than it holds).

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <filesystem>

#include "scheduler/broker/broker.h"
#include "shared/base/wall_time.h"

namespace tessera::broker {

using Clock = std::chrono::steady_clock;

namespace {

constexpr uint64_t kMinResumeBytes = uint64_t{64} << 20;

std::string MiB(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return text;
}

std::string OutputsKey(const std::string& folder) { return "outputs_full:" + folder; }

std::string WorkerKey(const std::string& name) { return "worker_disk_full:" + name; }

// How an alert starts: what kind of full.
std::string FullWhy(const StatusOr<disk_space::Room>& room) {
  return room.ok() && room->read_only ? "read-only filesystem: " : "no space left on device: ";
}

}  // namespace

std::string Broker::HeldReason(const JobInfo& job) const {
  if (!job.outputs_held) return "";
  return job.notice.value_or("held: its outputs' filesystem is full");
}

void Broker::HoldOutputs(const std::string& folder, const std::string& why) {
  StatusOr<disk_space::Room> room = options_.room_of(folder);
  const dev_t device = room.ok() ? room->device : 0;
  FullOutputs& full = full_outputs_[device];
  const bool fresh = full.folder.empty();
  if (fresh) full.folder = folder;
  full.next_check = now_ + options_.storage_check_interval;
  const std::string where =
      room.ok() ? disk_space::Describe(*room) : "room unknown: " + room.status().message();
  std::vector<int64_t> held;
  for (auto& [id, job] : leases_.jobs()) {
    if (job.outputs_held) continue;
    StatusOr<disk_space::Room> theirs = options_.room_of(job.output.dir);
    if (!theirs.ok() || theirs->device != device) continue;
    job.outputs_held = true;
    full.jobs.insert(id);
    held.push_back(id);
    leases_.DropQueued(id);
    job.notice = "held: no space left on device for its outputs in " + job.output.dir + " (" +
                 where + "); it resumes by itself once there is room";
    (void)store_.SetJobNotice(id, job.notice);
    RecordEvent(id, std::nullopt, std::nullopt, "outputs_full", *job.notice);
    MarkJobChanged(id);
  }
  const std::string message = FullWhy(room) + full.folder + " (" + where + "); " +
                              std::to_string(full.jobs.size()) +
                              " job(s) whose outputs go there are held until there is room";
  if (options_.alerts && options_.alerts->Raise(OutputsKey(full.folder), "outputs_full", message,
                                                wall_time::NowMs())) {
    spdlog::error("{}", message);
  } else if (!held.empty()) {
    spdlog::warn("no space left on device: {} more job(s) held on {}", held.size(), full.folder);
  }
  spdlog::warn("outputs write failed for want of room: {}", why);
}

bool Broker::OnOutputsFull(const assembler::FrameWritten& written, LiveTask* task) {
  if (written.status.code() != StatusCode::kStorageFull) return false;
  std::string folder;
  if (auto job = leases_.jobs().find(written.job_id); job != leases_.jobs().end())
    folder = job->second.output.dir;
  if (folder.empty() && !written.parts_dir.empty()) {
    folder = std::filesystem::path(written.parts_dir).parent_path().parent_path().string();
  }
  HoldOutputs(folder, written.status.message());
  if (written.kind == assembler::FrameWritten::Kind::kAssembled) {
    // Every part is on disk: only the frame itself waits for room, then it is assembled again.
    StatusOr<store::JobRecord> record = store_.GetJob(written.job_id);
    if (!record.ok()) return true;
    assembler::AssembleJob again;
    again.job_id = written.job_id;
    again.task_id = task ? task->task_id : 0;
    again.attempt = written.attempt;
    again.frame = written.frame;
    again.output = FrameOutputOf(*record);
    again.parts = record->parts_per_frame;
    StatusOr<disk_space::Room> room = options_.room_of(folder);
    full_outputs_[room.ok() ? room->device : 0].assemblies.push_back(std::move(again));
    return true;
  }
  if (task) {
    // Not the task's fault and not the worker's: every copy stops; no retry is counted. The
    // attempt that delivered the frame failed (storage_full), even if its worker reported done.
    EndAttempt(*task, written.attempt, store::AttemptOutcome::kFailed,
               protocol::kFailureStorageFull,
               "cannot write " +
                   (written.kind == assembler::FrameWritten::Kind::kFile
                        ? written.files.front()
                        : "frame " + std::to_string(written.frame)) +
                   ": " + written.status.message(),
               /*charged=*/false);
    CancelAllLeases(*task, "its outputs' filesystem is full");
    Requeue(*task, written.attempt, "outputs full: " + written.status.message(),
            /*count_failure=*/false);
  }
  return true;
}

void Broker::CheckSharedOutputs(int64_t job_id) {
  auto it = leases_.jobs().find(job_id);
  if (it == leases_.jobs().end() || !it->second.output_shared || it->second.outputs_held) return;
  // The worker wrote the frame itself: hold the job when the scheduler sees that folder full
  // too (else it was the worker's own disk, which its heartbeat reports).
  const Status probe = disk_space::ClassifyWriteFailure(
      Status::Internal("a worker could not write the frames of job " + std::to_string(job_id)),
      it->second.output.dir, 0);
  if (probe.code() == StatusCode::kStorageFull) HoldOutputs(it->second.output.dir, probe.message());
}

void Broker::HoldIfOutputsFull(int64_t job_id, JobInfo& job) {
  if (full_outputs_.empty()) return;
  StatusOr<disk_space::Room> room = options_.room_of(job.output.dir);
  if (!room.ok()) return;
  auto full = full_outputs_.find(room->device);
  if (full == full_outputs_.end()) return;
  job.outputs_held = true;
  full->second.jobs.insert(job_id);
  job.notice = "held: no space left on device for its outputs in " + job.output.dir + " (" +
               disk_space::Describe(*room) + "); it resumes by itself once there is room";
  (void)store_.SetJobNotice(job_id, job.notice);
  RecordEvent(job_id, std::nullopt, std::nullopt, "outputs_full", *job.notice);
}

void Broker::CheckStorage(Clock::time_point now) {
  if (!leftover_parts_.empty() && now >= next_leftover_try_) {
    next_leftover_try_ = now + options_.storage_check_interval;
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
  for (auto it = full_outputs_.begin(); it != full_outputs_.end();) {
    FullOutputs& full = it->second;
    if (now < full.next_check) {
      ++it;
      continue;
    }
    full.next_check = now + options_.storage_check_interval;
    uint64_t largest = 0;
    for (int64_t id : full.jobs) {
      if (auto job = leases_.jobs().find(id); job != leases_.jobs().end()) {
        largest = std::max(largest, job->second.largest_output);
      }
    }
    StatusOr<disk_space::Room> room = options_.room_of(full.folder);
    uint64_t wanted = std::max(kMinResumeBytes, 2 * largest);
    if (room.ok() && room->total_bytes > 0) wanted = std::min(wanted, room->total_bytes / 2);
    if (!room.ok() || room->read_only || room->free_bytes < wanted) {
      if (options_.alerts && room.ok()) {
        // The same alert, with the room as it is now.
        options_.alerts->Raise(OutputsKey(full.folder), "outputs_full",
                               FullWhy(room) + full.folder + " (" + disk_space::Describe(*room) +
                                   "); " + std::to_string(full.jobs.size()) +
                                   " job(s) held until " + MiB(wanted) + " is free",
                               wall_time::NowMs());
      }
      ++it;
      continue;
    }
    const std::string message = "space is back on " + full.folder + " (" +
                                disk_space::Describe(*room) +
                                "): " + std::to_string(full.jobs.size()) + " held job(s) resume";
    spdlog::info("{}", message);
    if (options_.alerts) options_.alerts->Clear(OutputsKey(full.folder));
    for (int64_t id : full.jobs) {
      auto job = leases_.jobs().find(id);
      if (job == leases_.jobs().end()) continue;
      job->second.outputs_held = false;
      job->second.notice.reset();
      (void)store_.SetJobNotice(id, std::nullopt);
      RecordEvent(id, std::nullopt, std::nullopt, "outputs_space_back", message);
      UpdateFeasibility(id, job->second);
      EnqueueJob(id);
      MarkJobChanged(id);
    }
    for (assembler::AssembleJob& assemble : full.assemblies) {
      assembler_->Assemble(std::move(assemble));
    }
    it = full_outputs_.erase(it);
  }
}

void Broker::SetWorkerDiskFull(WorkerConn& worker, const std::string& disk_full) {
  if (disk_full == worker.disk_full) return;
  const bool was_full = !worker.disk_full.empty();
  worker.disk_full = disk_full;
  const std::string& name = worker.offer.name;
  if (!disk_full.empty()) {
    const std::string message = "worker " + name + ": " + disk_full + "; it gets no new tasks";
    if (options_.alerts) {
      options_.alerts->Raise(WorkerKey(name), "worker_disk_full", message, wall_time::NowMs());
    }
    if (!was_full) {
      spdlog::warn("{} until it has room again", message);
      RecordEvent(std::nullopt, std::nullopt, worker.offer.id, "worker_disk_full", disk_full);
      if (options_.events) Publish("worker", {{"worker", name}, {"state", "disk_full"}});
    }
    return;
  }
  if (options_.alerts) options_.alerts->Clear(WorkerKey(name));
  spdlog::info("worker {} has room on its disk again: it takes tasks again", name);
  RecordEvent(std::nullopt, std::nullopt, worker.offer.id, "worker_disk_space_back", name);
  if (options_.events) Publish("worker", {{"worker", name}, {"state", "disk_space_back"}});
}

}  // namespace tessera::broker
