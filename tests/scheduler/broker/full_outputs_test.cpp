// FullOutputs on their own, with a clock moved by hand and a fake filesystem: a write that
// fails for want of space holds every job writing to that filesystem (its task requeued,
// uncharged), a job loaded meanwhile is held too, and the check releases them only once the
// interval has passed and the space is back.

#include "scheduler/broker/full_outputs.h"

#include "tests/scheduler/broker/parts_fixture.h"

namespace tessera::broker {
namespace {

using namespace std::chrono_literals;

class FullOutputsTest : public BrokerPartsTest {
 protected:
  // Every output folder is on one filesystem with `free_bytes_` free.
  void SetUp() override {
    BrokerPartsTest::SetUp();
    options_.storage_check_interval = 3000ms;
    options_.free_space_of = [this](const std::string&) -> StatusOr<disk_space::Room> {
      disk_space::Room space;
      space.device = 7;
      space.total_bytes = uint64_t{1} << 40;
      space.free_bytes = free_bytes_;
      return space;
    };
  }
  uint64_t free_bytes_ = 0;
};

TEST_F(FullOutputsTest, FullFilesystemHoldsItsJobsUntilTheCheckAfterTheIntervalFindsSpace) {
  Build();
  Register("w1");
  const int64_t job = SubmitNoop(2);
  const int64_t task_id = TaskIds(job).at(0);
  parts_->dispatch.Run(*pass_);
  LiveTask& task = parts_->table.tasks().at(task_id);

  ASSERT_TRUE(parts_->full_outputs.OnWriteFailed(*pass_, task, 1, "frame 1",
                                                 Status::StorageFull("no space left on device")));
  const JobInfo& info = parts_->table.jobs().at(job);
  EXPECT_TRUE(info.outputs_held);
  ASSERT_TRUE(info.notice.has_value());
  EXPECT_EQ(Job(job).notice, info.notice);
  EXPECT_TRUE(parts_->table.queue().empty());  // nothing of the job is queued while held
  EXPECT_EQ(task.failures, 0);                 // not the task's fault
  EXPECT_EQ(Task(task_id).state, store::TaskState::kQueued);
  // A job loaded while the filesystem is full is held at once.
  const int64_t later = SubmitNoop(1);
  EXPECT_TRUE(parts_->table.jobs().at(later).outputs_held);

  free_bytes_ = uint64_t{1} << 30;  // space is back, but the check is not due yet
  Advance(2999ms);
  parts_->full_outputs.Check(*pass_);
  EXPECT_TRUE(parts_->table.jobs().at(job).outputs_held);
  Advance(1ms);
  parts_->full_outputs.Check(*pass_);
  EXPECT_FALSE(parts_->table.jobs().at(job).outputs_held);
  EXPECT_FALSE(parts_->table.jobs().at(later).outputs_held);
  EXPECT_FALSE(Job(job).notice.has_value());
  EXPECT_EQ(parts_->table.queue().size(), 3u);  // both jobs' tasks are queued again
}

TEST_F(FullOutputsTest, FilesystemStillFullIsCheckedAgainAfterAnotherInterval) {
  Build();
  Register("w1");
  const int64_t job = SubmitNoop(1);
  parts_->dispatch.Run(*pass_);
  LiveTask& task = parts_->table.tasks().at(TaskIds(job).at(0));
  ASSERT_TRUE(parts_->full_outputs.OnWriteFailed(*pass_, task, 1, "frame 1",
                                                 Status::StorageFull("no space left on device")));
  free_bytes_ = 1 << 20;  // 1 MiB: under the 64 MiB it takes to resume
  Advance(3s);
  parts_->full_outputs.Check(*pass_);
  EXPECT_TRUE(parts_->table.jobs().at(job).outputs_held);
  free_bytes_ = uint64_t{1} << 30;
  Advance(2s);  // the next check is 3 s after the last one
  parts_->full_outputs.Check(*pass_);
  EXPECT_TRUE(parts_->table.jobs().at(job).outputs_held);
  Advance(1s);
  parts_->full_outputs.Check(*pass_);
  EXPECT_FALSE(parts_->table.jobs().at(job).outputs_held);
}

TEST_F(FullOutputsTest, OtherWriteFailuresAreNotItsBusiness) {
  Build();
  Register("w1");
  const int64_t job = SubmitNoop(1);
  parts_->dispatch.Run(*pass_);
  LiveTask& task = parts_->table.tasks().at(TaskIds(job).at(0));
  EXPECT_FALSE(parts_->full_outputs.OnWriteFailed(*pass_, task, 1, "frame 1",
                                                  Status::Internal("a bad sector")));
  EXPECT_FALSE(parts_->table.jobs().at(job).outputs_held);
  EXPECT_TRUE(task.running());
}

}  // namespace
}  // namespace tessera::broker
