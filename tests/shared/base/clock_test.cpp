#include "shared/base/clock.h"

#include <gtest/gtest.h>

#include <chrono>

namespace tessera {
namespace {

using namespace std::chrono_literals;

TEST(ClockTest, AManualClockMovesOnlyWhenToldAndBothReadingsTogether) {
  ManualClock clock(1'000'000);
  const auto start = clock.Steady();
  EXPECT_EQ(clock.WallMs(), 1'000'000);
  EXPECT_EQ(clock.Steady(), start);
  clock.Advance(1500ms);
  EXPECT_EQ(clock.Steady() - start, 1500ms);
  EXPECT_EQ(clock.WallMs(), 1'001'500);
  // A stepped wall clock leaves steady time alone.
  clock.StepWallMs(-60'000);
  EXPECT_EQ(clock.WallMs(), 941'500);
  EXPECT_EQ(clock.Steady() - start, 1500ms);
  // Far enough from its epoch to subtract a day.
  EXPECT_GT((clock.Steady() - 24h).time_since_epoch().count(), 0);
}

TEST(ClockTest, TheRealClockMovesForward) {
  const Clock& clock = Clock::Real();
  const auto steady = clock.Steady();
  const int64_t wall = clock.WallMs();
  EXPECT_GT(wall, 1'700'000'000'000);  // after 2023
  EXPECT_GE(clock.Steady(), steady);
  EXPECT_GE(clock.WallMs(), wall);
}

}  // namespace
}  // namespace tessera
