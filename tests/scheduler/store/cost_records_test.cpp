// Cost goes to the UTC day of the store's clock: a task that ends a second before midnight counts
// on that day, one a second after on the next, and the summary's "today" moves with the clock.

#include <gtest/gtest.h>

#include <chrono>

#include "tests/scheduler/store/store_fixture.h"

namespace tessera::store {
namespace {

using namespace std::chrono_literals;

constexpr int64_t kLastSecondOfSept21 = 1'790'035'199'000;  // 2026-09-21T23:59:59Z

class CostRecordsTest : public StoreFixture {
 protected:
  CostRecordsTest() : StoreFixture("cost-records") {
    clock_.StepWallMs(kLastSecondOfSept21 - clock_.WallMs());
  }
};
TSR_STORE_TEST_ON_BOTH_ENGINES(CostRecordsTest);

TEST_P(CostRecordsTest, CostGoesToTheUtcDayOfTheClockAcrossMidnight) {
  const JobRecord job = Submit(2);
  const int64_t worker = Worker("w1");
  auto tasks = store_->ListTasks(job.id);
  ASSERT_TRUE(tasks.ok() && tasks->size() == 2u);
  CostRecords& costs = *store_;

  ASSERT_TRUE(costs.AddTaskCost(tasks->at(0).id, job.id, 30, 0.25).ok());
  ASSERT_TRUE(costs.AccrueWorkerCosts({{worker, 1.5}}).ok());
  auto summary = store_->Summary();
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_DOUBLE_EQ(summary->gpu_seconds_today, 30);
  EXPECT_DOUBLE_EQ(summary->cost_today, 1.5);

  clock_.Advance(2s);  // 00:00:01 the next day
  ASSERT_TRUE(costs.AddTaskCost(tasks->at(1).id, job.id, 12, 0.1).ok());
  ASSERT_TRUE(costs.AccrueWorkerCosts({{worker, 0.5}}).ok());

  auto days = costs.CostDays(7);
  ASSERT_TRUE(days.ok()) << days.status().ToString();
  ASSERT_EQ(days->size(), 2u);
  EXPECT_EQ(days->at(0).day, "2026-09-21");
  EXPECT_DOUBLE_EQ(days->at(0).gpu_seconds, 30);
  EXPECT_DOUBLE_EQ(days->at(0).cost, 1.5);
  EXPECT_EQ(days->at(1).day, "2026-09-22");
  EXPECT_DOUBLE_EQ(days->at(1).gpu_seconds, 12);
  EXPECT_DOUBLE_EQ(days->at(1).cost, 0.5);
  summary = store_->Summary();
  EXPECT_DOUBLE_EQ(summary->gpu_seconds_today, 12) << "today is the clock's day";
  EXPECT_DOUBLE_EQ(summary->cost_today, 0.5);
  // The job and its tasks keep their totals whatever the day.
  EXPECT_DOUBLE_EQ(store_->GetJob(job.id)->gpu_seconds, 42);

  // A week later, the last day is the clock's: the two days fall out of a one-day window.
  clock_.Advance(24h * 7);
  EXPECT_TRUE(costs.CostDays(1)->empty());
  EXPECT_EQ(costs.CostDays(8)->size(), 1u) << "the 22nd is 7 days back; the 21st is 8";
}

}  // namespace
}  // namespace tessera::store
