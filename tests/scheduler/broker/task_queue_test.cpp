// The task queue on its own: a task of a job that depends on another frame by frame waits at
// that job's gate until the frames it needs are done, and is queued then; a task held back by a
// licence failure is queued once its wait is over, by the clock moved by hand.

#include "scheduler/broker/task_queue.h"

#include "tests/scheduler/broker/parts_fixture.h"

namespace tessera::broker {
namespace {

using namespace std::chrono_literals;

class TaskQueueTest : public BrokerPartsTest {};

TEST_F(TaskQueueTest, TaskWaitsAtTheGateUntilTheFramesItNeedsAreDone) {
  Build();
  const int64_t first = SubmitNoop(3);
  spec::JobSpec after;
  after.name = "after";
  after.renderer = spec::kRendererNoop;
  after.frame_start = 1;
  after.frame_end = 3;
  after.frame_depends_on = {first};
  const int64_t second = StoreJob(after);
  const std::vector<int64_t> waiting = TaskIds(second);
  for (const QueueKey& key : parts_->table.queue()) EXPECT_EQ(std::get<1>(key), first);

  // Frame 2 of the first job is done (its store row too, as the task's completion writes).
  const int64_t frame2 = TaskIds(first).at(1);
  Register("w1", /*slots=*/3);
  parts_->dispatch.Run(*pass_);
  protocol::TaskDone done;
  done.task_id = frame2;
  done.attempt = 1;
  parts_->task_ends.OnTaskDone(*pass_, "w1", *parts_->workers.Find("w1"), done);

  // Only the task holding frame 2 of the second job passes the gate.
  ASSERT_EQ(parts_->table.queue().size(), 1u);
  EXPECT_EQ(std::get<3>(*parts_->table.queue().begin()), waiting.at(1));
  const LiveTask& blocked = parts_->table.tasks().at(waiting.at(0));
  EXPECT_TRUE(parts_->queue.WaitsOnFrames(*pass_, blocked, parts_->table.jobs().at(second)));
}

TEST_F(TaskQueueTest, LicenceWaitEndsByTheClock) {
  Build();
  const int64_t job = SubmitNoop(1);
  LiveTask& task = parts_->table.tasks().at(TaskIds(job).at(0));
  parts_->table.queue().clear();
  task.not_before = pass_->now + 30s;
  parts_->queue.Enqueue(*pass_, task);
  EXPECT_TRUE(parts_->table.queue().empty());
  Advance(29s);
  parts_->queue.EnqueueDue(*pass_);
  EXPECT_TRUE(parts_->table.queue().empty());
  Advance(1s);
  parts_->queue.EnqueueDue(*pass_);
  EXPECT_EQ(parts_->table.queue().size(), 1u);
}

}  // namespace
}  // namespace tessera::broker
