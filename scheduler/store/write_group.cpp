// The group commit (Store::WriteGroup): writes recorded during a broker pass, applied in one
// transaction when the group commits or when its thread needs the writer.

#include "scheduler/store/database.h"

namespace tessera::store {

bool Database::Record(RecordedWrite write) {
  if (!InGroup()) return false;
  group_writes_.push_back(std::move(write));
  return true;
}

void Database::BeginGroup() { group_thread_.store(std::this_thread::get_id()); }

void Database::EnterGroupTransaction() {
  if (!group_tx_) {
    group_lock_ = std::unique_lock<std::recursive_mutex>(write_mu_);
    group_tx_.emplace(*writer_);
    if (!group_tx_->begin_status().ok() && group_error_.ok()) {
      group_error_ = group_tx_->begin_status();
    }
  }
  if (!group_writes_.empty() && group_error_.ok()) group_error_ = applier_->Apply(group_writes_);
}

Status Database::CommitGroup() {
  if (!group_tx_ && group_writes_.empty()) return Status::Ok();  // nothing was written
  EnterGroupTransaction();
  Status s = group_error_.ok() ? group_tx_->Commit() : group_error_;
  applier_->Settle(s.ok());
  group_tx_.reset();
  group_lock_.unlock();
  group_error_ = Status::Ok();
  return s;
}

void Database::EndGroup() {
  if (group_lock_.owns_lock()) applier_->Settle(false);
  group_tx_.reset();  // rolls back a transaction Commit() did not reach
  if (group_lock_.owns_lock()) group_lock_.unlock();
  group_writes_.clear();
  group_error_ = Status::Ok();
  group_thread_.store(std::thread::id());
}

}  // namespace tessera::store
