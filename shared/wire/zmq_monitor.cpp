#include "shared/wire/zmq_monitor.h"

#include <cstring>
#include <iterator>
#include <vector>
#include <zmq_addon.hpp>

namespace tessera::zmq_monitor {

std::optional<Event> Next(zmq::socket_t& monitor) {
  while (true) {
    std::vector<zmq::message_t> frames;
    if (!zmq::recv_multipart(monitor, std::back_inserter(frames), zmq::recv_flags::dontwait)) {
      return std::nullopt;
    }
    // Frame 1: a 16-bit event and a 32-bit value, unaligned; frame 2: the endpoint.
    if (frames.empty() || frames[0].size() < 6) continue;
    Event e;
    std::memcpy(&e.event, frames[0].data(), sizeof(e.event));
    std::memcpy(&e.value, frames[0].data<char>() + sizeof(e.event), sizeof(e.value));
    if (frames.size() > 1) e.endpoint = frames[1].to_string();
    return e;
  }
}

}  // namespace tessera::zmq_monitor
