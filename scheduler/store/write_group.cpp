// The group commit (Store::WriteGroup): writes recorded during a broker pass, applied in one
// transaction when the group commits or when its thread needs the writer.

#include <spdlog/spdlog.h>

#include <unordered_map>

#include "scheduler/store/store.h"

namespace tessera::store {

// ---- group commit ------------------------------------------------------------------------------

Status Store::ApplyDeferred(std::vector<Deferred>& ops) {
  std::unordered_map<int64_t, CountDeltas> counts;
  for (const Deferred& op : ops) {
    Status s;
    switch (op.kind) {
      case Deferred::Kind::kTransition:
        s = TransitionTask(op.id, op.attempt, op.to, op.message, op.count_failure, op.worker_id,
                           op.job_id, /*reattach=*/false, &counts, op.gpus);
        break;
      case Deferred::Kind::kAttemptEnd:
        s = CloseAttempt(op.id, op.attempt, op.job_id,
                         AttemptEnd{op.outcome, op.failure_class, op.message, op.count_failure});
        break;
      case Deferred::Kind::kWorkerState:
        s = WriteWorkerState(op.id, op.worker_state);
        break;
      case Deferred::Kind::kProgress:
        s = WriteTaskProgress(op.id, op.attempt, op.progress, op.message);
        break;
    }
    if (s.code() == StatusCode::kFailedPrecondition || s.code() == StatusCode::kNotFound) {
      spdlog::error("store: a recorded write was refused and skipped: {}", s.ToString());
    } else if (!s.ok()) {
      return s;
    }
  }
  ops.clear();
  for (const auto& [job_id, delta] : counts) TSR_RETURN_IF_ERROR(ApplyCounts(job_id, delta));
  return Status::Ok();
}

bool Store::Defer(Deferred op) {
  if (!InGroup()) return false;
  group_ops_.push_back(std::move(op));
  return true;
}

void Store::BeginGroup() { group_thread_.store(std::this_thread::get_id()); }

void Store::EnterGroupTransaction() {
  if (!group_tx_) {
    group_lock_ = std::unique_lock<std::recursive_mutex>(write_mu_);
    group_tx_.emplace(*writer_);
    if (!group_tx_->begin_status().ok() && group_error_.ok()) {
      group_error_ = group_tx_->begin_status();
    }
  }
  if (!group_ops_.empty() && group_error_.ok()) group_error_ = ApplyDeferred(group_ops_);
}

Status Store::CommitGroup() {
  if (!group_tx_ && group_ops_.empty()) return Status::Ok();  // nothing was written
  EnterGroupTransaction();
  Status s = group_error_.ok() ? group_tx_->Commit() : group_error_;
  SettleAttemptCounts(s.ok());
  group_tx_.reset();
  group_lock_.unlock();
  group_error_ = Status::Ok();
  return s;
}

void Store::EndGroup() {
  if (group_lock_.owns_lock()) SettleAttemptCounts(false);
  group_tx_.reset();  // rolls back a transaction Commit() did not reach
  if (group_lock_.owns_lock()) group_lock_.unlock();
  group_ops_.clear();
  group_error_ = Status::Ok();
  group_thread_.store(std::thread::id());
}

}  // namespace tessera::store
