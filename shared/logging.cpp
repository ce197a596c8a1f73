#include "shared/logging.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace tessera::logging {

Status Init(const std::string& component, const std::string& level) {
  spdlog::level::level_enum lvl = spdlog::level::from_str(level);
  if (lvl == spdlog::level::off && level != "off") {
    return Status::InvalidArgument("log level '" + level +
                                   "' is not one of trace, debug, info, warn, error, off");
  }
  auto logger = spdlog::stderr_logger_mt("tessera");
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%L%$ [" + component + "] %v");
  logger->set_level(lvl);
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
  return Status::Ok();
}

}  // namespace tessera::logging
