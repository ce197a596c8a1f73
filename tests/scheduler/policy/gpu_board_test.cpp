// GpuBoard on its own: what the workers' GPU telemetry leaves on the scheduler -- the latest
// reading and a bounded history per GPU, the faults that change (and only then report a
// change), samples of GPUs a worker does not have ignored.

#include "scheduler/broker/gpu_board.h"

#include <gtest/gtest.h>

namespace tessera::broker {
namespace {

protocol::GpuSample Reading(int index, int util, const std::string& fault = "") {
  protocol::GpuSample s;
  s.index = index;
  s.utilization_pct = util;
  s.memory_used_mb = 100 * util;
  s.memory_total_mb = 24576;
  s.temperature_c = 60;
  s.power_w = 250.5;
  s.fault = fault;
  return s;
}

TEST(GpuBoardTest, KeepsTheLatestReadingAndABoundedHistory) {
  GpuBoard board;
  EXPECT_EQ(board.Latest(0), nullptr);
  EXPECT_EQ(board.View(0, true)["telemetry"], nullptr);
  for (int i = 0; i < static_cast<int>(GpuBoard::kHistory) + 10; ++i) {
    EXPECT_FALSE(board.Record({Reading(0, i % 100), Reading(1, 50)}, 2, 1000 + i));
  }
  ASSERT_NE(board.Latest(0), nullptr);
  EXPECT_EQ(board.Latest(0)->utilization_pct, (GpuBoard::kHistory + 9) % 100);
  const nlohmann::json view = board.View(0, true);
  EXPECT_EQ(view["fault"], "");
  EXPECT_EQ(view["telemetry"]["utilization_pct"], (GpuBoard::kHistory + 9) % 100);
  EXPECT_EQ(view["telemetry"]["power_w"], 250.5);
  EXPECT_EQ(view["telemetry"]["at_ms"], 1000 + GpuBoard::kHistory + 9);
  EXPECT_FALSE(view["telemetry"].contains("sm_clock_mhz")) << "not reported: left out";
  ASSERT_EQ(view["history"]["t"].size(), GpuBoard::kHistory) << "the oldest points dropped";
  EXPECT_EQ(view["history"]["t"][0], 1010);
  EXPECT_EQ(view["history"]["utilization_pct"].size(), GpuBoard::kHistory);
  EXPECT_FALSE(board.View(0, false).contains("history"));
}

TEST(GpuBoardTest, FaultsComeAndGoAndOnlyChangesAreReported) {
  GpuBoard board;
  EXPECT_FALSE(board.Record({Reading(0, 10), Reading(1, 10)}, 2, 1));
  EXPECT_TRUE(
      board.Record({Reading(0, 10), Reading(1, 0, "Xid 79: GPU has fallen off the bus")}, 2, 2));
  EXPECT_EQ(board.faults(),
            (std::map<int, std::string>{{1, "Xid 79: GPU has fallen off the bus"}}));
  EXPECT_EQ(board.FaultSummary(), "GPU 1: Xid 79: GPU has fallen off the bus");
  EXPECT_EQ(board.View(1, false)["fault"], "Xid 79: GPU has fallen off the bus");
  EXPECT_FALSE(
      board.Record({Reading(0, 10), Reading(1, 0, "Xid 79: GPU has fallen off the bus")}, 2, 3))
      << "the same fault again is no news";
  EXPECT_TRUE(
      board.Record({Reading(0, 10, "3 uncorrected ECC error(s)"), Reading(1, 0, "Xid 79")}, 2, 4));
  EXPECT_EQ(board.FaultSummary(), "GPU 0: 3 uncorrected ECC error(s); GPU 1: Xid 79");
  EXPECT_TRUE(board.Record({Reading(0, 10), Reading(1, 10)}, 2, 5));
  EXPECT_TRUE(board.faults().empty());
  EXPECT_EQ(board.FaultSummary(), "");
}

TEST(GpuBoardTest, SamplesOfGpusTheWorkerDoesNotHaveAreIgnored) {
  GpuBoard board;
  EXPECT_FALSE(board.Record({Reading(5, 10, "Xid 79"), Reading(-1, 10, "Xid 79")}, 2, 1));
  EXPECT_TRUE(board.faults().empty());
  EXPECT_EQ(board.Latest(5), nullptr);
  EXPECT_EQ(board.View(5, true)["telemetry"], nullptr);
}

}  // namespace
}  // namespace tessera::broker
