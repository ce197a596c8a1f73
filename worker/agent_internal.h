#pragma once
// Helpers shared by the files that implement worker::Agent (agent*.cpp); not part of its API.

#include <string>
#include <vector>
#include <zmq.hpp>

#include "shared/base/status.h"
#include "shared/wire/protocol.h"

namespace tessera::worker::agent_internal {

// "task 12 attempt 1", for log lines.
std::string RefName(const protocol::TaskRef& ref);

// Decodes `frames` without consuming them: Decode takes the frames' bytes, so it reads a copy
// (a failure is small) and the original can still leave.
StatusOr<protocol::Envelope> DecodeCopy(const std::vector<zmq::message_t>& frames);

}  // namespace tessera::worker::agent_internal
