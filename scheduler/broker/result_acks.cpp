#include "scheduler/broker/result_acks.h"

#include "scheduler/broker/outbox.h"
#include "shared/wire/protocol.h"

namespace tessera::broker {

using protocol::MessageType;

void ResultAcks::Ack(Pass& pass, const std::string& identity, int64_t task_id, int attempt) {
  WorkerConn* worker = workers_.Find(identity);
  if (worker == nullptr) {
    // That connection is gone; the worker re-sends after it reconnects and gets the
    // acknowledgement then.
    return;
  }
  if (worker->acks_in_assign) {
    if (worker->pending_acks.empty()) waiting_.push_back(identity);
    worker->pending_acks.push_back({task_id, attempt});
  } else {
    pass.outbox.Send(
        identity, protocol::Encode(MessageType::kResultAck, protocol::ResultAck{task_id, attempt}));
  }
}

void ResultAcks::AckTask(Pass& pass, LiveTask& task) {
  for (const auto& [identity, attempt] : task.acks) Ack(pass, identity, task.task_id, attempt);
  task.acks.clear();
}

void ResultAcks::SendWaiting(Pass& pass) {
  for (const std::string& identity : waiting_) {
    WorkerConn* worker = workers_.Find(identity);
    if (worker == nullptr) continue;  // gone: it re-sends its results when it is back
    for (const protocol::TaskRef& ref : worker->pending_acks) {
      pass.outbox.Send(identity, protocol::Encode(MessageType::kResultAck,
                                                  protocol::ResultAck{ref.task_id, ref.attempt}));
    }
    worker->pending_acks.clear();  // (empty if an assignment took them)
  }
  waiting_.clear();
}

}  // namespace tessera::broker
