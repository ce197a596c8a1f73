#pragma once
// Reading a ZeroMQ socket monitor (zmq_socket_monitor): both daemons watch their socket's
// handshake failures, which ZeroMQ reports nowhere else (a plaintext peer at a CURVE socket, a
// wrong server key, a refused client key).

#include <cstdint>
#include <optional>
#include <string>
#include <zmq.hpp>

namespace tessera::zmq_monitor {

// One monitor event: what happened (ZMQ_EVENT_*), its value (an errno, or a ZMTP protocol
// error code for ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL) and the endpoint it concerns.
struct Event {
  uint16_t event = 0;
  uint32_t value = 0;
  std::string endpoint;
};

// The next event waiting on `monitor` (the PAIR socket connected to the monitor's endpoint),
// without blocking; nullopt when none is waiting. A malformed event is skipped.
std::optional<Event> Next(zmq::socket_t& monitor);

}  // namespace tessera::zmq_monitor
