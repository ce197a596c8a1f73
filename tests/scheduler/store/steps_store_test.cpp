// Jobs with steps in the store (schema 29): one transaction stores the job and its steps with
// their dependencies as job ids; the job's counters follow its steps' whatever statement changes
// them (the store's trigger), and its state follows its counters; a step canceled after a failed
// one comes back with a retry; deleting the job deletes its steps.

#include <gtest/gtest.h>

#include <string>

#include "scheduler/store/store.h"
#include "shared/jobs/job_steps.h"
#include "tests/scheduler/store/store_fixture.h"

namespace tessera::store {
namespace {

constexpr const char* kJob = R"(
name: shot
frames: 1-4
renderer: noop
steps:
  - {name: sim, chunk_size: 2}
  - {name: render, depends_on: [{step: sim, per_frame: true}]}
  - {name: encode, frames: '1', depends_on: [{step: render}]}
)";

class StepsStoreTest : public StoreFixture {
 protected:
  StepsStoreTest() : StoreFixture("steps-store") {}

  JobRecord SubmitSteps(const std::string& yaml = kJob) {
    StatusOr<spec::PipelineSpec> pipeline = spec::ParsePipelineYaml(yaml);
    EXPECT_TRUE(pipeline.ok()) << pipeline.status().ToString();
    auto folder = [&](int64_t id) -> StatusOr<std::string> {
      return dir_ + "/out/" + std::to_string(id);
    };
    auto job =
        store_->CreatePipeline(*pipeline, yaml, folder,
                               [&](size_t, int64_t id, const std::string&) { return folder(id); });
    EXPECT_TRUE(job.ok()) << job.status().ToString();
    return job.ok() ? *job : JobRecord{};
  }

  JobRecord Job(int64_t id) {
    auto job = store_->GetJob(id);
    EXPECT_TRUE(job.ok()) << job.status().ToString();
    return job.ok() ? *job : JobRecord{};
  }

  // Runs every task of a step to `to` through the store's transitions.
  void RunStep(int64_t step_id, int64_t worker, TaskState to) {
    auto tasks = store_->ListTasks(step_id);
    ASSERT_TRUE(tasks.ok());
    for (const TaskRecord& t : *tasks) {
      ASSERT_TRUE(store_->StartTask(t.id, t.attempt + 1, worker, step_id).ok());
      Status s = to == TaskState::kDone
                     ? store_->FinishTask(t.id, t.attempt + 1, worker, step_id)
                     : store_->FailTask(t.id, t.attempt + 1, "exit code 1", step_id);
      ASSERT_TRUE(s.ok()) << s.ToString();
    }
  }
};
TSR_STORE_TEST_ON_BOTH_ENGINES(StepsStoreTest);

TEST_P(StepsStoreTest, TheJobsCountersAndStateFollowItsSteps) {
  const JobRecord job = SubmitSteps();
  EXPECT_TRUE(job.has_steps());
  EXPECT_EQ(job.tasks.total, 2 + 4 + 1);
  EXPECT_EQ(job.tasks.queued, 7);
  auto steps = store_->PipelineSteps(job.id);
  ASSERT_TRUE(steps.ok());
  ASSERT_EQ(steps->size(), 3u);
  const JobRecord &sim = (*steps)[0], &render = (*steps)[1], &encode = (*steps)[2];
  EXPECT_EQ(sim.step, "sim");
  EXPECT_EQ(sim.pipeline_id, job.id);
  // Dependencies became the steps' job ids.
  EXPECT_EQ(render.frame_depends_on, std::vector<int64_t>{sim.id});
  EXPECT_TRUE(render.depends_on.empty());
  EXPECT_EQ(encode.depends_on, std::vector<int64_t>{render.id});
  ASSERT_EQ(render.step_depends_on.size(), 1u);
  EXPECT_TRUE(render.step_depends_on[0].per_frame);

  const int64_t w = Worker("w1");
  RunStep(sim.id, w, TaskState::kDone);
  JobRecord now = Job(job.id);
  EXPECT_EQ(now.tasks.done, 2);
  EXPECT_EQ(now.tasks.queued, 5);
  EXPECT_EQ(now.state, JobState::kRunning);
  EXPECT_TRUE(now.started_at_ms.has_value());
  RunStep(render.id, w, TaskState::kDone);
  RunStep(encode.id, w, TaskState::kDone);
  now = Job(job.id);
  EXPECT_EQ(now.tasks.done, 7);
  EXPECT_EQ(now.state, JobState::kDone);
  EXPECT_TRUE(now.finished_at_ms.has_value());

  // A restart's requeue of running tasks moves the steps' counters, never the job's twice.
  const JobRecord second = SubmitSteps();
  auto second_steps = store_->PipelineSteps(second.id);
  const TaskRecord first_task = (*store_->ListTasks((*second_steps)[0].id))[0];
  ASSERT_TRUE(store_->StartTask(first_task.id, 1, w, (*second_steps)[0].id).ok());
  EXPECT_EQ(Job(second.id).tasks.running, 1);
  Reopen();
  ASSERT_TRUE(store_->LoadUnfinishedTasks(std::nullopt, /*requeue_running=*/true).ok());
  now = Job(second.id);
  EXPECT_EQ(now.tasks.running, 0);
  EXPECT_EQ(now.tasks.queued, 7);
}

TEST_P(StepsStoreTest, AFailedStepFailsTheJobAndARetryRevivesTheCanceledSteps) {
  const JobRecord job = SubmitSteps();
  auto steps = *store_->PipelineSteps(job.id);
  const int64_t w = Worker("w1");
  RunStep(steps[0].id, w, TaskState::kFailed);
  // What the broker does next: the steps after it are canceled, with the reason.
  ASSERT_TRUE(store_->CancelJob(steps[1].id, "step sim failed").ok());
  ASSERT_TRUE(store_->CancelJob(steps[2].id, "step sim failed").ok());
  JobRecord now = Job(job.id);
  EXPECT_EQ(now.state, JobState::kFailed);
  EXPECT_EQ(now.tasks.failed, 2);
  EXPECT_EQ(now.tasks.canceled, 5);
  EXPECT_EQ(Job(steps[1].id).error, "step sim failed");

  ASSERT_EQ(*store_->RetryFailedTasks(steps[0].id), 2);
  ASSERT_EQ(*store_->ReviveStep(steps[1].id), 4);
  ASSERT_EQ(*store_->ReviveStep(steps[2].id), 1);
  now = Job(job.id);
  EXPECT_EQ(now.state, JobState::kQueued);
  EXPECT_EQ(now.tasks.queued, 7);
  EXPECT_EQ(Job(steps[1].id).state, JobState::kQueued);
  EXPECT_FALSE(Job(steps[1].id).error.has_value());
  // Only a canceled step is revived.
  EXPECT_EQ(*store_->ReviveStep(steps[1].id), 0);
}

TEST_P(StepsStoreTest, CanceledStepsCancelTheJobAndDeletingItDeletesThem) {
  const JobRecord job = SubmitSteps();
  auto steps = *store_->PipelineSteps(job.id);
  const int64_t w = Worker("w1");
  RunStep(steps[0].id, w, TaskState::kDone);
  ASSERT_TRUE(store_->CancelJob(steps[1].id).ok());
  ASSERT_TRUE(store_->CancelJob(steps[2].id).ok());
  // A step done, the others canceled, none failed: canceled, not done.
  EXPECT_EQ(Job(job.id).state, JobState::kCanceled);
  const Status alone = store_->DeleteJob(steps[0].id);
  EXPECT_EQ(alone.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(alone.message().find("is a step of job " + std::to_string(job.id)), std::string::npos);
  ASSERT_TRUE(store_->DeleteJob(job.id).ok());
  for (const JobRecord& step : steps) {
    EXPECT_EQ(store_->GetJob(step.id).status().code(), StatusCode::kNotFound);
  }
  EXPECT_TRUE(store_->ListTasks(steps[1].id)->empty());
}

}  // namespace
}  // namespace tessera::store
