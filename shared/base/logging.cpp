#include "shared/base/logging.h"

#include <spdlog/sinks/stdout_sinks.h>

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

namespace {
// Where keys go once kMaxKeys distinct ones are known.
constexpr std::string_view kOverflowKey = "(other)";
}  // namespace

bool RateLimitedLog::Allow(std::string_view key, Clock::time_point now, uint64_t* suppressed) {
  std::lock_guard<std::mutex> lock(mu_);
  ++calls_;
  auto it = entries_.find(std::string(key));
  if (it == entries_.end()) {
    if (entries_.size() >= kMaxKeys) {
      // Forget keys quiet for a whole interval (their counts were reported or are stale).
      std::erase_if(entries_, [&](const auto& e) {
        return e.second.suppressed == 0 && now - e.second.last >= interval_;
      });
    }
    if (entries_.size() >= kMaxKeys) key = kOverflowKey;
    it = entries_.try_emplace(std::string(key)).first;
  }
  Entry& e = it->second;
  if (e.logged && now - e.last < interval_) {
    ++e.suppressed;
    return false;
  }
  if (suppressed) *suppressed = e.suppressed;
  e.suppressed = 0;
  e.last = now;
  e.logged = true;
  ++lines_;
  return true;
}

uint64_t RateLimitedLog::calls() const {
  std::lock_guard<std::mutex> lock(mu_);
  return calls_;
}

uint64_t RateLimitedLog::lines() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lines_;
}

std::string RateLimitedLog::SuppressedNote(uint64_t suppressed) const {
  return fmt::format(" ({} more like this since the last such line; at most one every {:g} s)",
                     suppressed, static_cast<double>(interval_.count()) / 1000.0);
}

}  // namespace tessera::logging
