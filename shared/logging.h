#pragma once
// Logging setup shared by the daemons: spdlog to stderr, one line per event, with the component
// name ("scheduler", "worker local-1") in every line.

#include <string>

#include "shared/status.h"

namespace tessera::logging {

// level: trace, debug, info, warn, error. Unknown levels are an error naming the value.
Status Init(const std::string& component, const std::string& level);

}  // namespace tessera::logging
