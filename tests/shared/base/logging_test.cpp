#include "shared/base/logging.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>

#include <sstream>

namespace tessera::logging {
namespace {

using Clock = RateLimitedLog::Clock;
using namespace std::chrono_literals;

TEST(RateLimitedLogTest, OneLinePerIntervalPerKeyThenSaysHowManyWereLeftOut) {
  RateLimitedLog log(10s);
  const Clock::time_point t0 = Clock::now();
  uint64_t suppressed = 99;
  ASSERT_TRUE(log.Allow("malformed", t0, &suppressed));
  EXPECT_EQ(suppressed, 0u);
  for (int i = 0; i < 1000; ++i) EXPECT_FALSE(log.Allow("malformed", t0 + 5s));
  // Another kind of line has its own allowance.
  EXPECT_TRUE(log.Allow("plaintext", t0 + 5s));
  EXPECT_FALSE(log.Allow("malformed", t0 + 9999ms));
  ASSERT_TRUE(log.Allow("malformed", t0 + 10s, &suppressed));
  EXPECT_EQ(suppressed, 1001u);
  EXPECT_EQ(log.calls(), 1004u);
  EXPECT_EQ(log.lines(), 3u);
}

TEST(RateLimitedLogTest, KeysAPeerChoosesCannotGrowItWithoutBound) {
  RateLimitedLog log(10s);
  const Clock::time_point t0 = Clock::now();
  for (size_t i = 0; i < RateLimitedLog::kMaxKeys; ++i) {
    ASSERT_TRUE(log.Allow("key-" + std::to_string(i), t0));
  }
  // Every key past the limit shares one allowance while the known ones are recent.
  EXPECT_TRUE(log.Allow("new-1", t0 + 1s));
  EXPECT_FALSE(log.Allow("new-2", t0 + 1s));
  EXPECT_FALSE(log.Allow("new-3", t0 + 2s));
  // Once they have been quiet for an interval, they make room.
  EXPECT_TRUE(log.Allow("new-4", t0 + 11s));
  EXPECT_TRUE(log.Allow("new-5", t0 + 11s));
}

TEST(RateLimitedLogTest, LogWritesTheLineWithTheCountOfThoseLeftOut) {
  std::ostringstream out;
  auto previous = spdlog::default_logger();
  auto logger = std::make_shared<spdlog::logger>(
      "test", std::make_shared<spdlog::sinks::ostream_sink_mt>(out));
  logger->set_pattern("%v");
  spdlog::set_default_logger(logger);
  RateLimitedLog log(10s);
  const Clock::time_point t0 = Clock::now();
  EXPECT_TRUE(log.LogAt(t0, spdlog::level::warn, "k", "dropped {} from {}", "a message", "peer"));
  EXPECT_FALSE(log.LogAt(t0 + 1s, spdlog::level::warn, "k", "dropped {}", 2));
  EXPECT_FALSE(log.LogAt(t0 + 2s, spdlog::level::warn, "k", "dropped {}", 3));
  EXPECT_TRUE(log.LogAt(t0 + 10s, spdlog::level::warn, "k", "dropped {}", 4));
  spdlog::set_default_logger(previous);
  EXPECT_EQ(out.str(),
            "dropped a message from peer\n"
            "dropped 4 (2 more like this since the last such line; at most one every 10 s)\n");
}

}  // namespace
}  // namespace tessera::logging
