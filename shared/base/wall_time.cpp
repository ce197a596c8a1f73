#include "shared/base/wall_time.h"

#include <chrono>
#include <cstdio>
#include <ctime>

namespace tessera::wall_time {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string IsoTime(int64_t unix_ms) {
  std::time_t secs = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[40];
  size_t n = std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof(buf) - n, ".%03dZ", static_cast<int>(unix_ms % 1000));
  return buf;
}

std::string UtcDay(int64_t unix_ms) {
  const std::time_t t = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[16];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d", &tm);
  return buf;
}

StatusOr<int64_t> ParseIsoTime(std::string_view text) {
  const std::string t(text);
  const auto bad = [&] {
    return Status::InvalidArgument("'" + t +
                                   "' is not an ISO 8601 time with an offset, like "
                                   "2026-12-03T09:00:00Z or 2026-12-03T17:00+08:00");
  };
  std::tm tm{};
  int consumed = 0;
  if (std::sscanf(t.c_str(), "%4d-%2d-%2d%*1[Tt ]%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &tm.tm_hour, &tm.tm_min, &consumed) != 5) {
    return bad();
  }
  size_t pos = static_cast<size_t>(consumed);
  if (pos < t.size() && t[pos] == ':') {
    int sec_len = 0;
    if (std::sscanf(t.c_str() + pos, ":%2d%n", &tm.tm_sec, &sec_len) != 1) return bad();
    pos += static_cast<size_t>(sec_len);
  }
  int64_t offset_s = 0;
  if (pos < t.size() && (t[pos] == 'Z' || t[pos] == 'z')) {
    ++pos;
  } else if (pos < t.size() && (t[pos] == '+' || t[pos] == '-')) {
    int hh = 0, mm = 0, len = 0;
    if (std::sscanf(t.c_str() + pos + 1, "%2d:%2d%n", &hh, &mm, &len) != 2 || hh > 23 || mm > 59) {
      return bad();
    }
    offset_s = (t[pos] == '+' ? 1 : -1) * (hh * 3600 + mm * 60);
    pos += 1 + static_cast<size_t>(len);
  } else {
    return bad();
  }
  if (pos != t.size() || tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31 ||
      tm.tm_hour > 23 || tm.tm_min > 59 || tm.tm_sec > 60 || tm.tm_year < 1970) {
    return bad();
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return (static_cast<int64_t>(::timegm(&tm)) - offset_s) * 1000;
}

}  // namespace tessera::wall_time
