// The scripted worker (fake_worker.h) against the scheduler stand-in of the worker tests
// (tests/worker/fake_scheduler.h): what it registers with, when it beats and what the beats
// list, and how it answers assignments. The farm tests and the benchmarks' fleets rely on it.
#include "tests/support/fake_worker.h"

#include <gtest/gtest.h>

#include <chrono>
#include <optional>

#include "shared/jobs/job_file.h"
#include "tests/worker/fake_scheduler.h"

namespace tessera::testing {
namespace {

using namespace std::chrono_literals;
using protocol::MessageType;
using worker::testing::FakeScheduler;
using worker::testing::Received;

protocol::Assign Task(int64_t id, int first, int last, const std::string& renderer) {
  protocol::Assign a;
  a.task_id = id;
  a.attempt = 2;
  a.frame_start = first;
  a.frame_end = last;
  a.renderer = renderer;
  return a;
}

TEST(FakeWorkerTest, ATestWorkerRegistersAtOnceAndBeatsEveryHundredMilliseconds) {
  FakeScheduler scheduler;
  FakeWorker worker(scheduler.endpoint(), "scripted", {"gpu"}, {"fast"}, {}, /*slots=*/3);
  std::optional<Received> reg = scheduler.WaitFor(MessageType::kRegister, 5s);
  ASSERT_TRUE(reg.has_value());
  const StatusOr<protocol::Register> sent = reg->env.As<protocol::Register>();
  ASSERT_TRUE(sent.ok());
  EXPECT_EQ(sent->name, "scripted");
  EXPECT_EQ(sent->pools, std::vector<std::string>{"gpu"});
  EXPECT_EQ(sent->tags, std::vector<std::string>{"fast"});
  EXPECT_EQ(sent->slots, 3);
  EXPECT_EQ(sent->backends, std::vector<std::string>{"cpu"});

  // A WELCOME does not change a test worker's fixed interval.
  scheduler.Send(reg->identity, MessageType::kWelcome, protocol::Welcome{7, 5000, 5});
  worker.running = {{41, 1}};
  // Beats go out while it waits (for anything: nothing else comes).
  EXPECT_FALSE(worker.WaitFor(MessageType::kAssign, 450ms).has_value());
  EXPECT_TRUE(worker.welcomed());
  int beats = 0;
  while (std::optional<Received> beat = scheduler.WaitFor(MessageType::kHeartbeat, 100ms)) {
    const StatusOr<protocol::Heartbeat> hb = beat->env.As<protocol::Heartbeat>();
    ASSERT_TRUE(hb.ok());
    ASSERT_EQ(hb->running.size(), 1u);
    EXPECT_EQ(hb->running[0].task_id, 41);
    ++beats;
  }
  EXPECT_GE(beats, 2) << "one about every 100 ms over 450 ms";
  EXPECT_LE(beats, 6);
}

TEST(FakeWorkerTest, AFleetWorkerRegistersWhenToldAndBeatsAtTheWelcomesInterval) {
  FakeScheduler scheduler;
  zmq::context_t context;
  FakeWorker worker(context, scheduler.endpoint(), FakeWorker::Registration("fleet-1"));
  EXPECT_FALSE(scheduler.WaitFor(MessageType::kRegister, 200ms).has_value());
  worker.Register();
  std::optional<Received> reg = scheduler.WaitFor(MessageType::kRegister, 5s);
  ASSERT_TRUE(reg.has_value());
  EXPECT_FALSE(worker.BeatIfDue()) << "no beat before the WELCOME";

  const auto sent = FakeWorker::Clock::now();
  scheduler.Send(reg->identity, MessageType::kWelcome, protocol::Welcome{7, 60, 5});
  while (!worker.welcomed() && FakeWorker::Clock::now() < sent + 5s) worker.Poll(sent + 5s);
  ASSERT_TRUE(worker.welcomed());
  EXPECT_EQ(worker.heartbeat_interval(), 60ms);
  EXPECT_GE(worker.next_beat(), sent + 60ms) << "the first beat is one interval after it";
  worker.running = {{5, 1}};
  worker.delivering = {{4, 3}};
  const auto due = worker.next_beat();
  EXPECT_TRUE(worker.BeatIfDue(due));
  EXPECT_EQ(worker.next_beat(), due + 60ms);
  std::optional<Received> beat = scheduler.WaitFor(MessageType::kHeartbeat, 5s);
  ASSERT_TRUE(beat.has_value());
  const StatusOr<protocol::Heartbeat> hb = beat->env.As<protocol::Heartbeat>();
  ASSERT_TRUE(hb.ok());
  ASSERT_EQ(hb->running.size(), 1u);
  EXPECT_EQ(hb->running[0].task_id, 5);
  ASSERT_EQ(hb->delivering.size(), 1u);
  EXPECT_EQ(hb->delivering[0].attempt, 3);

  // Behind by more than an interval: the next beat is an interval from now, not a burst.
  const auto late = worker.next_beat() + 1s;
  EXPECT_TRUE(worker.BeatIfDue(late));
  EXPECT_EQ(worker.next_beat(), late + 60ms);
  EXPECT_FALSE(worker.BeatIfDue(late + 30ms));
}

TEST(FakeWorkerTest, AnswersAssignmentsAsAFinishedOrABusyWorker) {
  FakeScheduler scheduler;
  FakeWorker worker(scheduler.endpoint(), "answers");
  std::optional<Received> reg = scheduler.WaitFor(MessageType::kRegister, 5s);
  ASSERT_TRUE(reg.has_value());

  scheduler.Send(reg->identity, MessageType::kAssign, Task(9, 3, 4, spec::kRendererPathTracer));
  std::optional<protocol::Assign> a = worker.NextAssign(5s);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->task_id, 9);
  worker.CompleteAtOnce(*a);
  for (int frame : {3, 4}) {
    std::optional<Received> result = scheduler.WaitFor(MessageType::kFrameResult, 5s);
    ASSERT_TRUE(result.has_value());
    const StatusOr<protocol::FrameResult> r = result->env.As<protocol::FrameResult>();
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->frame, frame);
    EXPECT_EQ(r->attempt, 2);
    EXPECT_EQ(r->width * r->height * r->channels, 4);
  }
  std::optional<Received> done = scheduler.WaitFor(MessageType::kTaskDone, 5s);
  ASSERT_TRUE(done.has_value());
  EXPECT_EQ(done->env.As<protocol::TaskDone>()->task_id, 9);

  // A noop task has no frames: done at once.
  scheduler.Send(reg->identity, MessageType::kAssign, Task(10, 1, 5, spec::kRendererNoop));
  a = worker.NextAssign(5s);
  ASSERT_TRUE(a.has_value());
  worker.CompleteAtOnce(*a);
  std::optional<Received> next = scheduler.Next(5s);
  while (next && next->env.type == MessageType::kHeartbeat) next = scheduler.Next(5s);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->env.type, MessageType::kTaskDone);

  worker.RefuseBusy(Task(11, 1, 1, spec::kRendererNoop));
  std::optional<Received> refused = scheduler.WaitFor(MessageType::kTaskFailed, 5s);
  ASSERT_TRUE(refused.has_value());
  const StatusOr<protocol::TaskFailed> failed = refused->env.As<protocol::TaskFailed>();
  ASSERT_TRUE(failed.ok());
  EXPECT_EQ(failed->task_id, 11);
  EXPECT_FALSE(failed->charge) << "a busy slot is not the task's fault";
}

}  // namespace
}  // namespace tessera::testing
