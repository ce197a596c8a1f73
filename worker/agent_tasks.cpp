// The worker agent's render slots (agent.h; the parts are listed in agent.cpp): assignments
// taken or refused, cancels, and the messages each task's runner sends through the outbox.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "worker/agent.h"
#include "worker/agent_internal.h"

namespace tessera::worker {
namespace {

using agent_internal::RefName;
using protocol::MessageType;

}  // namespace

void Agent::HandleAssign(const protocol::Envelope& env) {
  StatusOr<protocol::Assign> a = env.As<protocol::Assign>();
  if (!a.ok()) {
    // Not run: the scheduler sees it missing from the heartbeats and requeues it.
    noisy_.Log(spdlog::level::warn, "malformed", "ignored a malformed ASSIGN: {}",
               a.status().message());
    return;
  }
  for (const protocol::TaskRef& done : a->acks) spool_.Ack(done);
  const protocol::TaskRef ref{a->task_id, a->attempt};
  auto fail = [&](const std::string& message, bool charge = true,
                  const char* failure_class = protocol::kFailureRender) {
    spdlog::info("{} job {}: refused: {}", RefName(ref), a->job_id, message);
    protocol::TaskFailed failed{ref.task_id, ref.attempt, message, charge};
    failed.failure_class = failure_class;
    std::vector<zmq::message_t> frames = protocol::Encode(MessageType::kTaskFailed, failed);
    if (Status s = spool_.Add(ref, frames, /*final=*/true); !s.ok()) {
      spdlog::error("{}: {}; sending it without a spool copy", RefName(ref), s.message());
    }
    SendResult(std::move(frames));
  };
  if (FindSlot(ref) != nullptr) {
    spdlog::debug("{}: repeated ASSIGN ignored, it is already running", RefName(ref));
    return;
  }
  if (draining_) return fail("worker is draining", /*charge=*/false);
  if (!disk_full_.empty()) {
    return fail("this worker's disk is full: " + disk_full_, /*charge=*/false,
                protocol::kFailureStorageFull);
  }
  if (static_cast<int>(slots_.size()) >= options_.slots)
    return fail("worker busy", /*charge=*/false);
  if (a->frame_end < a->frame_start) {
    return fail("invalid frame range " + std::to_string(a->frame_start) + ".." +
                std::to_string(a->frame_end));
  }
  Slot slot;
  RenderSettings render = options_.render;
  render.spool = &spool_;  // the runner spools its results itself, off this thread
  try {
    slot.runner =
        std::make_unique<TaskRunner>(context_, outbox_endpoint_, std::move(*a), std::move(render));
  } catch (const std::exception& e) {  // no thread, no socket: not the task's fault
    return fail(std::string("cannot start the task on this worker: ") + e.what(),
                /*charge=*/false);
  }
  slots_.push_back(std::move(slot));
  running_tasks_.store(static_cast<int>(slots_.size()));
  StartAssets(slots_.back());
}

void Agent::HandleCancel(const protocol::Envelope& env) {
  StatusOr<protocol::Cancel> c = env.As<protocol::Cancel>();
  if (!c.ok()) {
    noisy_.Log(spdlog::level::warn, "malformed", "ignored a malformed CANCEL: {}",
               c.status().message());
    return;
  }
  Slot* slot = FindSlot({c->task_id, c->attempt});
  if (slot == nullptr || slot->cancelled) {
    spdlog::debug("CANCEL for {} ignored: not running here", RefName({c->task_id, c->attempt}));
    return;
  }
  spdlog::info("{}: cancel requested by the scheduler", RefName(slot->runner->ref()));
  slot->cancelled = true;
  slot->runner->Cancel();
}

void Agent::HandleOutbox(std::vector<zmq::message_t>& frames) {
  std::optional<OutboxTag> tag = frames.empty() ? std::nullopt : DecodeOutboxTag(frames[0]);
  TSR_CHECK(tag.has_value());  // the outbox is fed only by our own runners
  auto it = std::find_if(slots_.begin(), slots_.end(),
                         [&](const Slot& s) { return s.runner->ref() == tag->ref; });
  TSR_CHECK(it != slots_.end());
  bool final = false;
  if (!it->cancelled && frames.size() > 1) {
    frames.erase(frames.begin());
    final = IsFinalResult(frames);
    NoteResult(frames);
    SendResult(std::move(frames));  // the runner spooled it
  }
  if (tag->last) {
    // Ended without an outcome (cancelled): results it spooled before are of no use.
    if (!final) spool_.Ack(tag->ref);
    EraseSlot(it);
  }
}

void Agent::EraseSlot(std::vector<Slot>::iterator it) {
  for (const auto& [path, hash] : BlobsOf(it->runner->assign())) cache_.Release(hash);
  slots_.erase(it);  // joins the runner, which only has its socket left to close
  running_tasks_.store(static_cast<int>(slots_.size()));
}

Agent::Slot* Agent::FindSlot(const protocol::TaskRef& ref) {
  for (Slot& slot : slots_) {
    if (slot.runner->ref() == ref) return &slot;
  }
  return nullptr;
}

}  // namespace tessera::worker
