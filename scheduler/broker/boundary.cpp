#include "scheduler/broker/boundary.h"

#include <spdlog/spdlog.h>

#include "scheduler/broker/event_sink.h"
#include "scheduler/broker/outbox.h"
#include "scheduler/broker/worker_registry.h"
#include "shared/wire/protocol.h"
#include "shared/wire/zmq_monitor.h"

namespace tessera::broker {

void Boundary::Caught(const Pass& pass, const char* what, const char* error) {
  noisy_.LogAt(pass.now, spdlog::level::err, std::string("caught:") + what,
               "exception while handling {}: {}; it was dropped and the scheduler goes on", what,
               error);
  // Counted once logged: whoever sees the count (/metrics, a test) finds the line too.
  counters_.errors_caught.fetch_add(1, std::memory_order_relaxed);
}

void Boundary::DropMessage(const Pass& pass, const std::string& identity, const std::string& why) {
  counters_.messages_dropped.fetch_add(1, std::memory_order_relaxed);
  const WorkerConn* worker = const_cast<WorkerRegistry&>(workers_).Find(identity);
  noisy_.LogAt(
      pass.now, spdlog::level::warn, "dropped message", "dropped a message from {}: {}",
      worker != nullptr ? "worker " + worker->offer.name : std::string("an unregistered peer"),
      why);
}

void Boundary::Stale(const Pass& pass, const char* what, int64_t task_id, int attempt) {
  // A late message now and then is normal; a peer sending them in a loop writes a line per
  // interval.
  noisy_.LogAt(pass.now, spdlog::level::info, std::string("stale:") + what,
               "ignoring {} for task {} attempt {}: not a current lease", what, task_id, attempt);
}

void Boundary::RefuseName(Pass& pass, const std::string& identity, const std::string& name,
                          const char* event, const std::string& reason, int retry_after_ms) {
  counters_.names_refused.fetch_add(1, std::memory_order_relaxed);
  // Logged and recorded at most once per interval per name: a peer retrying in a loop (or an
  // attacker) writes a line, not the disk full.
  if (noisy_.LogAt(pass.now, spdlog::level::warn, std::string(event) + ":" + name, "{}: {}", event,
                   reason)) {
    pass.events.Record(std::nullopt, std::nullopt, std::nullopt, event, reason);
    if (pass.events.enabled()) {
      pass.events.Publish("worker", {{"worker", name}, {"state", "refused"}, {"reason", reason}});
    }
  }
  pass.outbox.Send(identity, protocol::Encode(protocol::MessageType::kReject,
                                              protocol::Reject{reason, retry_after_ms}));
}

void Boundary::DrainHandshakeEvents(const Pass& pass, zmq::socket_t& monitor) {
  for (int i = 0; i < 1000; ++i) {
    std::optional<zmq_monitor::Event> next = zmq_monitor::Next(monitor);
    if (!next) return;
    const auto& [event, value, endpoint] = *next;
    counters_.handshakes_refused.fetch_add(1, std::memory_order_relaxed);
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
    noisy_.LogAt(pass.now, spdlog::level::warn, std::string("refused:") + key,
                 "refused a connection on {}: {} (event 0x{:x}, code 0x{:x})", endpoint, why, event,
                 value);
  }
}

}  // namespace tessera::broker
