// The assembler on a clock it is given: the busy time it meters for /metrics is read from that
// clock, so a clock that stands still meters none and one moved by hand meters exactly what it
// was moved.

#include "scheduler/assembler/assembler.h"

#include <gtest/gtest.h>

#include <chrono>

#include "shared/base/clock.h"

namespace tessera::assembler {
namespace {

using namespace std::chrono_literals;

// A hand-moved clock that the code under test moves itself: every steady reading first moves it
// by `step`, so a piece of work between two readings lasts exactly `step`.
class SteppingClock final : public Clock {
 public:
  explicit SteppingClock(std::chrono::milliseconds step) : step_(step) {}
  SteadyTime Steady() const override {
    clock_.Advance(step_);
    return clock_.Steady();
  }
  int64_t WallMs() const override { return clock_.WallMs(); }

 private:
  std::chrono::milliseconds step_;
  mutable ManualClock clock_;
};

// Work that needs no files: gathering no inputs.
void GatherNothing(Assembler& assembler, int times) {
  for (int i = 0; i < times; ++i) {
    InputsJob job;
    job.job_id = i + 1;
    assembler.GatherInputs(job);
  }
  assembler.WaitIdle();
}

TEST(AssemblerTest, BusyTimeIsReadFromTheClockItIsGiven) {
  ManualClock still;
  Assembler on_still(
      1, [](Result) {}, still);
  GatherNothing(on_still, 3);
  EXPECT_EQ(on_still.counters().busy_seconds, 0.0) << "no time passed on its clock";

  SteppingClock stepping(1500ms);
  Assembler on_stepping(
      1, [](Result) {}, stepping);
  GatherNothing(on_stepping, 2);
  EXPECT_DOUBLE_EQ(on_stepping.counters().busy_seconds, 3.0) << "1.5 s for each piece of work";
}

}  // namespace
}  // namespace tessera::assembler
