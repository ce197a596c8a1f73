#pragma once
// Wall-clock time as the farm stores and shows it: Unix milliseconds in the store and on the
// wire, ISO 8601 in UTC with milliseconds in the API, UTC days for cost. (Durations and timers
// use std::chrono::steady_clock, never these.)

#include <cstdint>
#include <string>
#include <string_view>

#include "shared/base/status.h"

namespace tessera::wall_time {

// Now, as Unix milliseconds.
int64_t NowMs();

// "2026-12-03T09:00:00.123Z": milliseconds matter on a farm (tasks start and finish many times
// a second).
std::string IsoTime(int64_t unix_ms);

// "2026-12-03": the UTC day `unix_ms` falls on (cost is summed per day).
std::string UtcDay(int64_t unix_ms);

// An ISO 8601 time with its offset ("2026-12-03T09:00:00Z", "2026-12-03T17:00+08:00"; seconds
// optional) as Unix ms. The offset is required: a farm spans time zones.
StatusOr<int64_t> ParseIsoTime(std::string_view text);

}  // namespace tessera::wall_time
