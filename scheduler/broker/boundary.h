#pragma once
// Boundary: what the broker does with what it cannot take -- worker messages dropped (malformed
// or refused), peers refused at the CURVE handshake, names refused to a second connection,
// exceptions caught in the poll loop, late messages about leases that have ended. Each is
// counted (BrokerCounters) and logged with a rate limit per kind, so a peer misbehaving in a
// loop costs a line per interval, not the disk.
//
// Threads: broker thread only.

#include <cstdint>
#include <string>
#include <zmq.hpp>

#include "scheduler/broker/broker_counters.h"
#include "scheduler/broker/broker_options.h"
#include "scheduler/broker/pass.h"
#include "shared/base/logging.h"

namespace tessera::broker {

class WorkerRegistry;

class Boundary {
 public:
  Boundary(const BrokerOptions& options, const WorkerRegistry& workers, BrokerCounters& counters)
      : options_(options),
        workers_(workers),
        counters_(counters),
        noisy_(options.noisy_log_interval) {}

  // An exception left `what`: it was dropped and the broker goes on serving.
  void Caught(const Pass& pass, const char* what, const char* error);
  // A worker message dropped at the boundary.
  void DropMessage(const Pass& pass, const std::string& identity, const std::string& why);
  // A message about a copy that is no longer a lease (an older attempt, a copy that was ended or
  // cancelled, a finished task): stale, it changes nothing.
  void Stale(const Pass& pass, const char* what, int64_t task_id, int attempt);
  // A registration or enrolment refused for the name it asked for: logged and recorded as an
  // event (both rate-limited per name), counted, and the peer told why.
  void RefuseName(Pass& pass, const std::string& identity, const std::string& name,
                  const char* event, const std::string& reason, int retry_after_ms);
  // The ROUTER's handshake failures (refused peers), read from its monitor socket.
  void DrainHandshakeEvents(const Pass& pass, zmq::socket_t& monitor);
  // Lines a peer can cause at will, for the parts: at most one per key per interval.
  logging::RateLimitedLog& noisy() { return noisy_; }

 private:
  const BrokerOptions& options_;
  const WorkerRegistry& workers_;
  BrokerCounters& counters_;
  logging::RateLimitedLog noisy_;
};

}  // namespace tessera::broker
