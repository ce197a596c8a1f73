#include "scheduler/broker/outbox.h"

#include <spdlog/spdlog.h>

#include <zmq_addon.hpp>

#include "shared/wire/protocol.h"

namespace tessera::broker {

Outbox::Committed Outbox::Release() {
  if (router_ != nullptr) {
    for (auto& [identity, frames] : messages_) {
      frames.insert(frames.begin(), zmq::message_t(identity.data(), identity.size()));
      try {
        zmq::send_multipart(*router_, frames, zmq::send_flags::dontwait);
      } catch (const zmq::error_t& e) {
        // EHOSTUNREACH: the peer is gone; liveness will clean it up. A dropped assignment is
        // noticed by heartbeat reconciliation (the worker does not list it) and requeued.
        spdlog::debug("send to worker failed: {}", e.what());
      }
    }
    messages_.clear();
  }
  Committed committed{std::move(after_commit_), std::move(answers_)};
  after_commit_.clear();
  answers_.clear();
  return committed;
}

std::vector<std::function<void(const Status&)>> Outbox::Discard() {
  messages_.clear();
  after_commit_.clear();
  std::vector<std::function<void(const Status&)>> answers = std::move(answers_);
  answers_.clear();
  return answers;
}

bool Outbox::PeerGone(const std::string& identity) {
  if (router_ == nullptr) return false;
  // ROUTER_MANDATORY: a message to a routing identity whose connection closed fails at once
  // with EHOSTUNREACH. A heartbeat acknowledgement is harmless to a worker that is still there.
  std::vector<zmq::message_t> probe =
      protocol::Encode(protocol::MessageType::kHeartbeatAck, nlohmann::json::object());
  probe.insert(probe.begin(), zmq::message_t(identity.data(), identity.size()));
  try {
    (void)zmq::send_multipart(*router_, probe, zmq::send_flags::dontwait);
  } catch (const zmq::error_t& e) {
    return e.num() == EHOSTUNREACH;
  }
  return false;
}

}  // namespace tessera::broker
