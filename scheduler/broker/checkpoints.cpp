#include "scheduler/broker/checkpoints.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "scheduler/blobs/blob_store.h"
#include "scheduler/broker/broker_counters.h"
#include "shared/images/accumulation.h"
#include "shared/plugins/plugin_catalog.h"

namespace tessera::broker {

namespace {

// Why a path tracer's checkpoint cannot resume the task's part of `frame` ("" = it can).
std::string CheckPathTracerCheckpoint(const zmq::message_t& payload, int frame, int samples,
                                      const protocol::FramePart& part) {
  StatusOr<accumulation::RenderedImage> checkpoint =
      accumulation::ParseAccumulation(std::string_view(payload.data<char>(), payload.size()));
  if (!checkpoint.ok()) return checkpoint.status().message();
  if (checkpoint->frame != frame || checkpoint->sample_begin != part.sample_begin ||
      (!part.whole_region() &&
       (checkpoint->x0 != part.x0 || checkpoint->y0 != part.y0 ||
        checkpoint->width != part.x1 - part.x0 || checkpoint->height != part.y1 - part.y0))) {
    return "it is not of the task's frame, region and samples";
  }
  if (samples > 0 && checkpoint->sample_count != samples) {
    return "it holds " + std::to_string(checkpoint->sample_count) + " samples, not the " +
           std::to_string(samples) + " its message says";
  }
  return "";
}

}  // namespace

std::string Checkpoints::Keep(LiveTask& task, int attempt, int frame, int samples,
                              const zmq::message_t& payload) {
  const JobInfo& job = table_.jobs()[task.job_id];
  if (!job.produces_frames) return "the job renders no frames";
  if (frame < task.frame_start || frame > task.frame_end) {
    return "frame " + std::to_string(frame) + " is not the task's";
  }
  // Checked before it is kept: a checkpoint of another frame, region or sample range would make
  // the resumed frame wrong. Other C++ plugins' checkpoints are their own format, which they
  // check when resuming.
  if (auto renderer = plugin::FindRenderer(job.renderer);
      renderer && renderer->accumulation_checkpoints) {
    if (std::string problem = CheckPathTracerCheckpoint(payload, frame, samples, task.part);
        !problem.empty()) {
      return problem;
    }
  }
  if (blobs_ == nullptr) return "this scheduler keeps no blobs";
  // Kept as a blob: the next attempt's worker fetches it in pieces, like an asset.
  StatusOr<std::string> hash = blobs_->Put(std::string_view(payload.data<char>(), payload.size()));
  if (!hash.ok()) return hash.status().message();
  if (!task.checkpoint_hash.empty() && task.checkpoint_hash != *hash) {
    blobs_->Remove(task.checkpoint_hash);
  }
  task.checkpoint_hash = *hash;
  task.checkpoint_samples = samples;
  task.checkpoint_attempt = attempt;
  task.resume_frame = frame;
  return "";
}

void Checkpoints::OnCheckpoint(Pass& pass, const std::string& identity, const WorkerConn& worker,
                               protocol::Envelope& env) {
  auto m = env.As<protocol::Checkpoint>();
  if (!m.ok()) return boundary_.DropMessage(pass, identity, m.status().message());
  // Fencing: only the task's current attempt on this worker may set its resume point; a copy
  // that was declared lost, or an older attempt's late message, is refused here.
  LiveTask* task = table_.FindLease(identity, m->task_id, m->attempt);
  if (!task) return boundary_.Stale(pass, "checkpoint", m->task_id, m->attempt);
  if (env.payload.size() == 0) {
    return boundary_.DropMessage(pass, identity, "CHECKPOINT without a checkpoint");
  }
  // A backup copy that is behind the checkpoint kept does not replace it.
  if (!task->checkpoint_hash.empty() &&
      (m->frame < task->resume_frame ||
       (m->frame == task->resume_frame && m->samples_done <= task->checkpoint_samples))) {
    spdlog::debug("task {}: checkpoint from {} (frame {}, {} samples) is behind the one kept",
                  task->task_id, worker.offer.name, m->frame, m->samples_done);
    return;
  }
  if (std::string problem = Keep(*task, m->attempt, m->frame, m->samples_done, env.payload);
      !problem.empty()) {
    boundary_.noisy().LogAt(pass.now, spdlog::level::warn, "checkpoint refused",
                            "task {}: checkpoint from {} not kept: {}", task->task_id,
                            worker.offer.name, problem);
    return;
  }
  pass.counters.checkpoints_kept.fetch_add(1, std::memory_order_relaxed);
  spdlog::info("job {} task {} attempt {}: checkpoint of frame {} after {} samples from {}",
               task->job_id, task->task_id, m->attempt, m->frame, m->samples_done,
               worker.offer.name);
}

void Checkpoints::Clear(LiveTask& task) {
  if (!task.checkpoint_hash.empty() && blobs_ != nullptr) blobs_->Remove(task.checkpoint_hash);
  task.checkpoint_hash.clear();
  task.checkpoint_samples = 0;
  task.checkpoint_attempt = 0;
  task.resume_frame = 0;
}

bool Checkpoints::Resumes(const LiveTask& task, bool count_failure) {
  // A render failure (or a timeout) starts over: the checkpoint may be part of the problem.
  return !count_failure && !task.checkpoint_hash.empty();
}

}  // namespace tessera::broker
