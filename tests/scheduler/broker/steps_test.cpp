// Steps on their own: a job that finishes releases the jobs waiting on it (once the loop hands
// it over: Pass::finished_jobs); cancelling a job stops its running tasks and forgets it; a job
// whose step fails cancels the steps after it.

#include "scheduler/broker/steps.h"

#include "shared/jobs/job_steps.h"
#include "tests/scheduler/broker/parts_fixture.h"

namespace tessera::broker {
namespace {

using namespace std::chrono_literals;

class StepsTest : public BrokerPartsTest {
 protected:
  void Done(const std::string& identity, int64_t task_id) {
    protocol::TaskDone done;
    done.task_id = task_id;
    done.attempt = parts_->table.tasks().at(task_id).attempt;
    parts_->task_ends.OnTaskDone(*pass_, identity, *parts_->workers.Find(identity), done);
  }
};

TEST_F(StepsTest, FinishedJobReleasesTheJobsWaitingOnIt) {
  Build();
  Register("w1");
  const int64_t first = SubmitNoop(1);
  spec::JobSpec after;
  after.name = "after";
  after.renderer = spec::kRendererNoop;
  after.frame_start = after.frame_end = 1;
  after.depends_on = {first};
  const int64_t second = StoreJob(after);
  EXPECT_EQ(parts_->table.queue().size(), 1u);  // only the first job's task

  parts_->dispatch.Run(*pass_);
  Done("w1", TaskIds(first).at(0));
  EXPECT_TRUE(parts_->table.queue().empty());  // not until the loop settles the finished job
  EXPECT_EQ(pass_->finished_jobs, std::vector<int64_t>{first});
  parts_->steps.OnJobsFinished(*pass_);
  EXPECT_TRUE(pass_->finished_jobs.empty());
  ASSERT_EQ(parts_->table.queue().size(), 1u);
  EXPECT_EQ(std::get<1>(*parts_->table.queue().begin()), second);
}

TEST_F(StepsTest, CancelledJobStopsItsRunningTasksAndLeavesMemory) {
  Build();
  Register("w1", /*slots=*/2);
  const int64_t job = SubmitNoop(3);
  parts_->dispatch.Run(*pass_);
  ClearOutbox();

  StatusOr<int> stopped = parts_->steps.Cancel(*pass_, job, "");
  ASSERT_TRUE(stopped.ok()) << stopped.status().ToString();
  EXPECT_EQ(*stopped, 2);
  EXPECT_EQ(CountSent("w1", protocol::MessageType::kCancel), 2);
  EXPECT_TRUE(parts_->table.tasks().empty());
  EXPECT_TRUE(parts_->table.queue().empty());
  EXPECT_EQ(parts_->table.jobs().count(job), 0u);
  EXPECT_EQ(Job(job).state, store::JobState::kCanceled);
}

TEST_F(StepsTest, FailedStepCancelsTheStepsAfterIt) {
  Build();
  Register("w1");
  const std::string yaml = R"(
name: shot
frames: 1
renderer: noop
max_retries: 0
steps:
  - {name: render}
  - {name: encode, depends_on: [{step: render}]}
)";
  StatusOr<spec::PipelineSpec> pipeline = spec::ParsePipelineYaml(yaml);
  ASSERT_TRUE(pipeline.ok()) << pipeline.status().ToString();
  auto folder = [&](int64_t id) -> StatusOr<std::string> {
    return dir_ + "/out/" + std::to_string(id);
  };
  auto stored = store_->CreatePipeline(
      *pipeline, yaml, folder, [&](size_t, int64_t id, const std::string&) { return folder(id); });
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  parts_->jobs.Submitted(*pass_, stored->id);
  parts_->dispatch.Run(*pass_);
  ASSERT_EQ(parts_->table.jobs().size(), 2u);

  // The render step's only task fails for good.
  int64_t render_task = 0;
  for (const auto& [id, task] : parts_->table.tasks()) {
    if (task.running()) render_task = id;
  }
  ASSERT_NE(render_task, 0);
  protocol::TaskFailed failed;
  failed.task_id = render_task;
  failed.attempt = 1;
  failed.failure_class = "render";
  failed.message = "segfault";
  failed.charge = true;
  parts_->task_ends.OnTaskFailed(*pass_, "w1", *parts_->workers.Find("w1"), failed);
  parts_->steps.OnJobsFinished(*pass_);
  EXPECT_TRUE(parts_->table.jobs().empty());  // the encode step was canceled
  EXPECT_EQ(Job(stored->id).state, store::JobState::kFailed);
}

}  // namespace
}  // namespace tessera::broker
