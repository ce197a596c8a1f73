// Result acknowledgements on their own: a worker that reads them inside kAssign gets them with
// its next assignment, or alone at the end of the pass when none comes; an older worker gets
// each at once (the outbox holds it until the pass commits either way).

#include "scheduler/broker/result_acks.h"

#include "tests/scheduler/broker/parts_fixture.h"

namespace tessera::broker {
namespace {

class ResultAcksTest : public BrokerPartsTest {};

TEST_F(ResultAcksTest, AcknowledgementsRideTheNextAssignmentOrGoAloneAtTheEndOfThePass) {
  Build();
  WorkerConn& worker = Register("w1", /*slots=*/2);
  worker.acks_in_assign = true;
  ResultAcks& acks = parts_->acks;
  acks.Ack(*pass_, "w1", 2, 1);
  acks.Ack(*pass_, "w1", 3, 2);
  EXPECT_EQ(CountSent("w1", protocol::MessageType::kResultAck), 0);

  SubmitNoop(1);
  parts_->dispatch.Run(*pass_);  // an assignment in this pass carries them
  std::vector<protocol::Assign> assigns = Assignments("w1");
  ASSERT_EQ(assigns.size(), 1u);
  EXPECT_EQ(assigns[0].acks.size(), 2u);
  acks.SendWaiting(*pass_);
  EXPECT_EQ(CountSent("w1", protocol::MessageType::kResultAck), 0);

  ClearOutbox();
  acks.Ack(*pass_, "w1", 4, 1);  // no assignment this pass: it goes alone
  acks.SendWaiting(*pass_);
  EXPECT_EQ(CountSent("w1", protocol::MessageType::kResultAck), 1);
  EXPECT_TRUE(worker.pending_acks.empty());
}

TEST_F(ResultAcksTest, OlderWorkerGetsEachAtOnceAndAGoneConnectionNone) {
  Build();
  Register("older");
  parts_->acks.Ack(*pass_, "older", 1, 1);
  EXPECT_EQ(CountSent("older", protocol::MessageType::kResultAck), 1);
  ClearOutbox();
  parts_->acks.Ack(*pass_, "gone", 4, 1);  // it sends its results again when it is back
  EXPECT_TRUE(outbox_.messages().empty());
}

TEST_F(ResultAcksTest, TaskAcknowledgesEachFinishedCopyOnce) {
  Build();
  Register("w1");
  Register("w2");
  LiveTask task;
  task.task_id = 9;
  task.acks = {{"w1", 1}, {"w2", 2}};
  parts_->acks.AckTask(*pass_, task);
  EXPECT_TRUE(task.acks.empty());
  EXPECT_EQ(CountSent("w1", protocol::MessageType::kResultAck), 1);
  EXPECT_EQ(CountSent("w2", protocol::MessageType::kResultAck), 1);
}

}  // namespace
}  // namespace tessera::broker
