// Jobs on their own, with a clock moved by hand: after a restart, a task that was running waits
// for its worker to re-attach it until the liveness deadline passes, then is queued; pausing a
// job takes its tasks out of the queue and resuming puts them back; a new priority reorders the
// queue; requeueing a finished job's failed tasks loads them again; a submitted job is held as
// its submission stored it, never read back from the store.

#include "scheduler/broker/jobs.h"

#include "tests/scheduler/broker/parts_fixture.h"

namespace tessera::broker {
namespace {

using namespace std::chrono_literals;

class JobsTest : public BrokerPartsTest {};

TEST_F(JobsTest, InterruptedTaskWaitsForItsWorkerUntilTheLivenessDeadline) {
  options_.heartbeat_ms = 1000;
  options_.liveness = 5;
  Build();
  Register("w1");
  const auto [job, task_id] = DispatchOneNoopTask();

  Build();  // a restart: memory from the store
  ASSERT_TRUE(parts_->jobs.Load(*pass_, std::nullopt, /*requeue_running=*/true).ok());
  ASSERT_EQ(parts_->table.tasks().count(task_id), 1u);
  EXPECT_TRUE(parts_->table.queue().empty());
  Advance(4999ms);
  parts_->queue.EnqueueDue(*pass_);
  EXPECT_TRUE(parts_->table.queue().empty());
  Advance(1ms);  // its worker did not come back in time
  parts_->queue.EnqueueDue(*pass_);
  EXPECT_EQ(parts_->table.queue().size(), 1u);
}

TEST_F(JobsTest, ASubmittedJobIsHeldAsItsSubmissionStoredItWithoutReadingItBack) {
  Build();
  spec::JobSpec spec;
  spec.name = "noop";
  spec.renderer = spec::kRendererNoop;
  spec.frame_start = 1;
  spec.frame_end = 3;
  spec.priority = 50;
  const SubmittedJob submitted = StoreSubmission(spec);
  ASSERT_EQ(submitted.tasks.size(), 3u);
  // The store's row changes behind the broker's back: a read-back would see it paused, at 90.
  ASSERT_TRUE(store_->SetJobPaused(submitted.id, true).ok());
  ASSERT_TRUE(store_->SetJobPriority(submitted.id, 90).ok());

  parts_->jobs.Submitted(*pass_, submitted);
  ASSERT_EQ(parts_->table.jobs().count(submitted.id), 1u);
  EXPECT_FALSE(parts_->table.jobs().at(submitted.id).paused);
  EXPECT_EQ(parts_->table.jobs().at(submitted.id).priority, 50);
  EXPECT_EQ(parts_->table.queue().size(), 3u);
  std::vector<int64_t> stored_ids;
  for (const store::TaskRecord& t : submitted.tasks) stored_ids.push_back(t.id);
  EXPECT_EQ(TaskIds(submitted.id), stored_ids);

  // Handed over twice (start-up loaded it first): held once.
  parts_->jobs.Submitted(*pass_, submitted);
  EXPECT_EQ(parts_->table.queue().size(), 3u);
  EXPECT_EQ(parts_->table.jobs().at(submitted.id).unfinished, 3);
}

TEST_F(JobsTest, ASubmittedJobWithStepsHoldsEachStepAndItsDependencies) {
  Build();
  const std::string yaml = R"(
name: shot
frames: 1-2
renderer: noop
steps:
  - {name: render}
  - {name: encode, frames: '1', depends_on: [{step: render}]}
)";
  StatusOr<spec::PipelineSpec> pipeline = spec::ParsePipelineYaml(yaml);
  ASSERT_TRUE(pipeline.ok()) << pipeline.status().ToString();
  auto folder = [&](int64_t id) -> StatusOr<std::string> {
    return dir_ + "/out/" + std::to_string(id);
  };
  store::CreatedRows created;
  auto stored = store_->CreatePipeline(
      *pipeline, yaml, folder, [&](size_t, int64_t id, const std::string&) { return folder(id); },
      nullptr, &created);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  ASSERT_EQ(created.steps.size(), 2u);
  ASSERT_EQ(created.tasks.size(), 3u);
  const int64_t render = created.steps[0].id, encode = created.steps[1].id;
  EXPECT_EQ(created.steps[1].depends_on, std::vector<int64_t>{render});
  SubmittedJob submitted;
  submitted.id = stored->id;
  for (const store::JobRecord& step : created.steps) submitted.scenes[step.id] = "";
  submitted.jobs = created.steps;
  submitted.tasks = created.tasks;

  parts_->jobs.Submitted(*pass_, submitted);
  ASSERT_EQ(parts_->table.jobs().size(), 2u);
  EXPECT_TRUE(parts_->table.jobs().at(render).waiting_on.empty());
  EXPECT_EQ(parts_->table.jobs().at(encode).waiting_on, std::set<int64_t>{render});
  EXPECT_EQ(TaskIds(render).size(), 2u);
  EXPECT_EQ(TaskIds(encode).size(), 1u);
  EXPECT_EQ(parts_->table.queue().size(), 2u) << "the encode step waits for the render step";
}

TEST_F(JobsTest, PausedJobLeavesTheQueueAndResumingPutsItBack) {
  Build();
  const int64_t job = SubmitNoop(3);
  EXPECT_EQ(parts_->table.queue().size(), 3u);
  ASSERT_TRUE(parts_->jobs.SetPaused(*pass_, job, true).ok());
  EXPECT_TRUE(parts_->table.queue().empty());
  EXPECT_TRUE(Job(job).paused);
  Register("w1");
  parts_->dispatch.Run(*pass_);
  EXPECT_TRUE(Assignments("w1").empty());
  ASSERT_TRUE(parts_->jobs.SetPaused(*pass_, job, false).ok());
  EXPECT_EQ(parts_->table.queue().size(), 3u);
  EXPECT_FALSE(Job(job).paused);
}

TEST_F(JobsTest, NewPriorityReordersTheQueue) {
  Build();
  const int64_t first = SubmitNoop(1);
  const int64_t second = SubmitNoop(1);
  EXPECT_EQ(std::get<1>(*parts_->table.queue().begin()), first);
  ASSERT_TRUE(parts_->jobs.SetPriority(*pass_, second, 80).ok());
  EXPECT_EQ(std::get<1>(*parts_->table.queue().begin()), second);
  EXPECT_EQ(Job(second).priority, 80);
  EXPECT_EQ(parts_->table.queue().size(), 2u);
}

TEST_F(JobsTest, RequeuedFailedTasksAreLoadedAgain) {
  Build();
  Register("w1");
  const int64_t job = SubmitNoop(1, /*task_timeout_s=*/0, /*retries=*/0);
  const int64_t task_id = TaskIds(job).at(0);
  parts_->dispatch.Run(*pass_);
  parts_->leases.End(*pass_, parts_->table.tasks().at(task_id), "w1",
                     {store::AttemptOutcome::kFailed, "render", "crashed", /*charged=*/true},
                     /*cancel=*/false);
  parts_->steps.OnJobsFinished(*pass_);
  ASSERT_EQ(Job(job).state, store::JobState::kFailed);
  EXPECT_TRUE(parts_->table.tasks().empty());

  StatusOr<int> moved = parts_->jobs.RequeueFinished(*pass_, job, std::nullopt);
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  EXPECT_EQ(*moved, 1);
  EXPECT_EQ(parts_->table.tasks().count(task_id), 1u);
  EXPECT_EQ(parts_->table.queue().size(), 1u);
}

}  // namespace
}  // namespace tessera::broker
