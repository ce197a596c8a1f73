// The outbox on its own: nothing a pass queues takes effect before the commit -- messages,
// work after the commit and answers are handed back in that order -- and a pass that rolls back
// sends nothing, its answers told why.

#include "scheduler/broker/outbox.h"

#include <gtest/gtest.h>

#include "shared/wire/protocol.h"

namespace tessera::broker {
namespace {

TEST(OutboxTest, CommittedPassHandsBackItsWorkInOrder) {
  Outbox outbox;
  outbox.Send("w1",
              protocol::Encode(protocol::MessageType::kHeartbeatAck, nlohmann::json::object()));
  std::vector<std::string> ran;
  outbox.AfterCommit([&] { ran.push_back("after"); });
  Status told = Status::Internal("not told");
  outbox.Answer([&](const Status& s) { told = s; });
  ASSERT_EQ(outbox.messages().size(), 1u);
  EXPECT_EQ(outbox.messages()[0].first, "w1");

  Outbox::Committed committed = outbox.Release();
  EXPECT_TRUE(ran.empty());  // the loop runs them
  ASSERT_EQ(committed.after_commit.size(), 1u);
  ASSERT_EQ(committed.answers.size(), 1u);
  committed.after_commit[0]();
  committed.answers[0](Status::Ok());
  EXPECT_EQ(ran, std::vector<std::string>{"after"});
  EXPECT_TRUE(told.ok());
  EXPECT_TRUE(outbox.Release().answers.empty());  // handed back once
}

TEST(OutboxTest, RolledBackPassSendsNothingAndItsAnswersAreToldWhy) {
  Outbox outbox;
  outbox.Send("w1",
              protocol::Encode(protocol::MessageType::kHeartbeatAck, nlohmann::json::object()));
  bool ran = false;
  outbox.AfterCommit([&] { ran = true; });
  Status told;
  outbox.Answer([&](const Status& s) { told = s; });
  auto answers = outbox.Discard();
  EXPECT_TRUE(outbox.messages().empty());
  ASSERT_EQ(answers.size(), 1u);
  answers[0](Status::StorageFull("the data folder is full"));
  EXPECT_EQ(told.code(), StatusCode::kStorageFull);
  EXPECT_TRUE(outbox.Release().after_commit.empty());
  EXPECT_FALSE(ran);
  EXPECT_FALSE(outbox.PeerGone("w1"));  // no socket: nobody is known to be gone
}

}  // namespace
}  // namespace tessera::broker
