// The broker's boundary: its counters, and what it does with what it cannot take -- dropped
// messages, refused peers and names, caught exceptions -- each counted and logged with a rate
// limit, so a peer misbehaving in a loop costs a line per interval, not the disk.

#include <spdlog/spdlog.h>

#include <zmq_addon.hpp>

#include "scheduler/broker/broker.h"
#include "shared/wire/zmq_monitor.h"

namespace tessera::broker {

using protocol::MessageType;

Broker::Counters Broker::counters() const {
  Counters c;
  c.tasks_dispatched = dispatched_.load(std::memory_order_relaxed);
  c.tasks_completed = completed_.load(std::memory_order_relaxed);
  c.render_seconds = static_cast<double>(render_ns_.load(std::memory_order_relaxed)) / 1e9;
  c.queue_depth = queue_depth_.load(std::memory_order_relaxed);
  c.blob_bytes_served = blob_bytes_served_.load(std::memory_order_relaxed);
  c.checkpoints_kept = checkpoints_kept_.load(std::memory_order_relaxed);
  c.result_bytes_buffered = result_bytes_buffered_.load(std::memory_order_relaxed);
  c.messages_dropped = messages_dropped_.load(std::memory_order_relaxed);
  c.handshakes_refused = handshakes_refused_.load(std::memory_order_relaxed);
  c.names_refused = names_refused_.load(std::memory_order_relaxed);
  c.errors_caught = errors_caught_.load(std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> failures(failures_mu_);
    c.failures_by_class = failures_by_class_;
  }
  std::lock_guard<std::mutex> lock(assembler_mu_);
  if (assembler_) c.assembler = assembler_->counters();
  c.errors_caught += c.assembler.errors_caught;
  return c;
}

void Broker::OnCaught(const char* what, const char* error) {
  noisy_.Log(spdlog::level::err, std::string("caught:") + what,
             "exception while handling {}: {}; it was dropped and the scheduler goes on", what,
             error);
  // Counted once logged: whoever sees the count (/metrics, a test) finds the line too.
  errors_caught_.fetch_add(1, std::memory_order_relaxed);
}

void Broker::DropMessage(const std::string& identity, const std::string& why) {
  messages_dropped_.fetch_add(1, std::memory_order_relaxed);
  const WorkerConn* worker = workers_.Find(identity);
  noisy_.Log(
      spdlog::level::warn, "dropped message", "dropped a message from {}: {}",
      worker != nullptr ? "worker " + worker->offer.name : std::string("an unregistered peer"),
      why);
}

bool Broker::PeerGone(const std::string& identity) {
  // ROUTER_MANDATORY: a message to a routing identity whose connection closed fails at once
  // with EHOSTUNREACH. A heartbeat acknowledgement is harmless to a worker that is still there.
  std::vector<zmq::message_t> probe =
      protocol::Encode(MessageType::kHeartbeatAck, nlohmann::json::object());
  probe.insert(probe.begin(), zmq::message_t(identity.data(), identity.size()));
  try {
    (void)zmq::send_multipart(*router_, probe, zmq::send_flags::dontwait);
  } catch (const zmq::error_t& e) {
    return e.num() == EHOSTUNREACH;
  }
  return false;
}

void Broker::RefuseName(const std::string& identity, const std::string& name, const char* event,
                        const std::string& reason, int retry_after_ms) {
  names_refused_.fetch_add(1, std::memory_order_relaxed);
  // Logged and recorded at most once per interval per name: a peer retrying in a loop (or an
  // attacker) writes a line, not the disk full.
  if (noisy_.Log(spdlog::level::warn, std::string(event) + ":" + name, "{}: {}", event, reason)) {
    RecordEvent(std::nullopt, std::nullopt, std::nullopt, event, reason);
    if (options_.events) {
      Publish("worker", {{"worker", name}, {"state", "refused"}, {"reason", reason}});
    }
  }
  Send(identity, protocol::Encode(MessageType::kReject, protocol::Reject{reason, retry_after_ms}));
}

void Broker::DrainMonitor() {
  for (int i = 0; i < 1000; ++i) {
    std::optional<zmq_monitor::Event> next = zmq_monitor::Next(*monitor_);
    if (!next) return;
    const auto& [event, value, endpoint] = *next;
    handshakes_refused_.fetch_add(1, std::memory_order_relaxed);
    // A refused key is logged by the ZAP handler, which knows the peer's address.
    if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) continue;
    const bool mismatch = event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL &&
                          value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH;
    const char* why = "the peer broke the ZeroMQ handshake (not a Tessera worker?)";
    const char* key = "protocol";
    if (options_.curve && (mismatch || event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL)) {
      // A plaintext peer is seen either way: as the mismatch, or hanging up first.
      key = "no curve";
      why =
          "the peer does not speak CURVE or hung up during the handshake (a plaintext "
          "client, a worker without scheduler.public_key, a port scan)";
    } else if (mismatch) {
      key = "curve";
      why =
          "the peer speaks CURVE, but this scheduler runs without it (broker.security: "
          "insecure)";
    } else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) {
      key = "hung up";
      why = "the peer hung up during the handshake";
    } else if (value == ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC) {
      key = "cryptographic";
      why =
          "its CURVE handshake does not decrypt: the peer has the wrong server key (check "
          "the worker's scheduler.public_key against tessera-scheduler --print-public-key)";
    }
    noisy_.Log(spdlog::level::warn, std::string("refused:") + key,
               "refused a connection on {}: {} (event 0x{:x}, code 0x{:x})", endpoint, why, event,
               value);
  }
}
}  // namespace tessera::broker
