#pragma once
// Logging setup shared by the daemons: spdlog to stderr, one line per event, with the component
// name ("scheduler", "worker local-1") in every line; and RateLimitedLog, for the lines a peer
// can make us write at will (malformed messages, refused handshakes, exceptions caught at a
// thread's entry point), so a flood costs a few lines, never the disk.

#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "shared/base/status.h"

namespace tessera::logging {

// level: trace, debug, info, warn, error. Unknown levels are an error naming the value.
Status Init(const std::string& component, const std::string& level);

// At most one line per `interval` for each key (a kind of event: "malformed message",
// "plaintext peer"); the first line after a quiet spell says how many were left out. Every call
// is counted, logged or not. Thread-safe.
//
// Keys are meant to be a small fixed set chosen by the caller. A caller that derives keys from
// what a peer sent is still bounded: past kMaxKeys distinct keys, the new ones share one.
class RateLimitedLog {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr size_t kMaxKeys = 256;
  static constexpr std::chrono::milliseconds kDefaultInterval{10'000};

  explicit RateLimitedLog(std::chrono::milliseconds interval = kDefaultInterval)
      : interval_(interval) {}

  // Whether a line for `key` may be written at `now`. When it may, *suppressed (if given) gets
  // how many lines for this key were left out since the last one written.
  bool Allow(std::string_view key, Clock::time_point now, uint64_t* suppressed = nullptr);
  bool Allow(std::string_view key, uint64_t* suppressed = nullptr) {
    return Allow(key, Clock::now(), suppressed);
  }

  // Logs `fmt` at `level` under `key` if Allow() lets it, with " (N more like this in the last
  // S s)" appended when lines were left out. Returns whether it logged.
  template <typename... Args>
  bool Log(spdlog::level::level_enum level, std::string_view key,
           spdlog::format_string_t<Args...> fmt, Args&&... args) {
    return LogAt(Clock::now(), level, key, fmt, std::forward<Args>(args)...);
  }
  template <typename... Args>
  bool LogAt(Clock::time_point now, spdlog::level::level_enum level, std::string_view key,
             spdlog::format_string_t<Args...> fmt, Args&&... args) {
    uint64_t suppressed = 0;
    if (!Allow(key, now, &suppressed)) return false;
    std::string line = fmt::format(fmt, std::forward<Args>(args)...);
    if (suppressed > 0) line += SuppressedNote(suppressed);
    spdlog::log(level, "{}", line);
    return true;
  }

  // Calls counted under every key (logged or not), and lines written.
  uint64_t calls() const;
  uint64_t lines() const;

 private:
  struct Entry {
    Clock::time_point last{};
    uint64_t suppressed = 0;
    bool logged = false;
  };
  std::string SuppressedNote(uint64_t suppressed) const;

  const std::chrono::milliseconds interval_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Entry> entries_;  // guarded by mu_
  uint64_t calls_ = 0;                              // guarded by mu_
  uint64_t lines_ = 0;                              // guarded by mu_
};

}  // namespace tessera::logging
