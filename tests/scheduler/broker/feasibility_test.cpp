// Feasibility on its own: a job no connected worker could ever run gets a notice (stored, and an
// event), cleared once a worker that can run it connects; with no worker connected there is no
// notice (nothing to say yet).

#include "scheduler/broker/feasibility.h"

#include "tests/scheduler/broker/parts_fixture.h"

namespace tessera::broker {
namespace {

class FeasibilityTest : public BrokerPartsTest {};

TEST_F(FeasibilityTest, NoticeWhileNoConnectedWorkerCanRunTheJob) {
  Build();
  spec::JobSpec spec;
  spec.name = "gpu";
  spec.renderer = spec::kRendererNoop;
  spec.frame_start = spec.frame_end = 1;
  spec.pools = {"gpu"};
  const int64_t job = StoreJob(spec);
  EXPECT_FALSE(Job(job).notice.has_value());  // no worker yet: nothing to say

  Register("cpu1");  // serves the default pool only
  std::optional<std::string> notice = Job(job).notice;
  ASSERT_TRUE(notice.has_value());
  EXPECT_NE(notice->find("no connected worker can run this job"), std::string::npos);
  EXPECT_EQ(parts_->table.jobs().at(job).notice, notice);

  protocol::Register reg;
  reg.name = "gpu1";
  reg.pools = {"gpu"};
  parts_->fleet.OnRegister(*pass_, "gpu1", Message(protocol::MessageType::kRegister, reg), "");
  EXPECT_FALSE(Job(job).notice.has_value());
  EXPECT_FALSE(parts_->table.jobs().at(job).notice.has_value());
}

}  // namespace
}  // namespace tessera::broker
