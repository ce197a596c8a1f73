// The autoscaler daemon in process, on a clock the test moves by hand: a real store and broker
// (loopback, no workers), a `command` node group whose nodes never register, and Tick() called
// directly. What the policy decides from time -- a request given up once it has waited the
// registration timeout -- happens when the clock says so, without waiting for it.

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>

#include "scheduler/autoscaler/autoscaler.h"
#include "scheduler/broker/broker.h"
#include "scheduler/store/store.h"
#include "shared/base/clock.h"
#include "shared/base/wall_time.h"
#include "shared/jobs/job_file.h"

namespace tessera::autoscaler {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

class AutoscalerDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/autoscaler-daemon-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto store = store::Store::Open(dir_ + "/data", clock_);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(*store);
    broker::BrokerOptions options;
    options.bind_endpoint = "tcp://127.0.0.1:0";
    options.assembler_threads = 1;
    broker_ = std::make_unique<broker::Broker>(*store_, options, clock_);
    auto endpoint = broker_->Start();
    ASSERT_TRUE(endpoint.ok()) << endpoint.status().ToString();

    // Three noop tasks waiting: demand for one node of the group.
    auto spec = spec::ParseJobYaml("name: n\nrenderer: noop\nframes: 1-3\n");
    ASSERT_TRUE(spec.ok()) << spec.status().ToString();
    auto job = store_->CreateJob(*spec, "name: n\n", [&](int64_t id) -> StatusOr<std::string> {
      return dir_ + "/out/" + std::to_string(id);
    });
    ASSERT_TRUE(job.ok()) << job.status().ToString();
    broker_->JobSubmitted(job->id);

    // A cloud whose `create` prints an instance id and whose `terminate` leaves a file behind.
    auto config = ParseAutoscalerConfig(YAML::Load(
        "registration_timeout_s: 60\n"
        "default_boot_time_s: 30\n"
        "groups:\n"
        "  - name: cloud\n"
        "    max_nodes: 1\n"
        "    price_per_hour: 1\n"
        "    provider: {kind: command, create: [echo, 'i-{name}'], terminate: [touch, '" +
        dir_ + "/terminated-{id}']}\n"));
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    scaler_ = std::make_unique<Autoscaler>(*store_, *broker_, *config,
                                           AutoscalerOptions{.data_dir = dir_ + "/data"}, clock_);
    ASSERT_TRUE(scaler_->MakeProviders().ok());
  }
  void TearDown() override {
    scaler_.reset();
    broker_.reset();
    store_.reset();
    fs::remove_all(dir_);
  }

  // The nodes of group "cloud" as GET /api/v1/autoscaler shows them.
  nlohmann::json Nodes() { return scaler_->Describe()["groups"][0]["nodes"]; }

  std::string dir_;
  ManualClock clock_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<broker::Broker> broker_;
  std::unique_ptr<Autoscaler> scaler_;
};

// The wall time the autoscaler works in: whole seconds of the clock.
std::string IsoSeconds(const Clock& clock) {
  return wall_time::IsoTime(clock.WallMs() / 1000 * 1000);
}

TEST_F(AutoscalerDaemonTest, ARequestIsGivenUpOnceTheClockPassesTheRegistrationTimeout) {
  scaler_->Tick();
  ASSERT_EQ(Nodes().size(), 1u) << scaler_->Describe().dump();
  EXPECT_EQ(Nodes()[0]["name"], "cloud-1");
  EXPECT_EQ(Nodes()[0]["state"], "requested");
  EXPECT_EQ(Nodes()[0]["requested_at"], IsoSeconds(clock_)) << "stamped with the clock";
  EXPECT_EQ(scaler_->Describe()["updated_at"], IsoSeconds(clock_));
  auto kept = store_->ListAutoscalerNodes();
  ASSERT_TRUE(kept.ok() && kept->size() == 1u);
  EXPECT_EQ(kept->at(0).requested_at_ms, clock_.WallMs() / 1000 * 1000);

  clock_.Advance(59s);
  scaler_->Tick();
  ASSERT_EQ(Nodes().size(), 1u) << "59 s of 60: still waiting for it";
  EXPECT_FALSE(fs::exists(dir_ + "/terminated-i-cloud-1"));

  clock_.Advance(1s);
  scaler_->Tick();
  EXPECT_TRUE(fs::exists(dir_ + "/terminated-i-cloud-1")) << scaler_->Describe().dump();
  for (const auto& node : Nodes()) EXPECT_NE(node["name"], "cloud-1") << "forgotten";
  bool gave_up = false;
  const nlohmann::json described = scaler_->Describe();  // kept: the loop reads into it
  for (const auto& d : described["decisions"]) {
    if (d["action"] == "give-up") {
      gave_up = true;
      EXPECT_EQ(d["at"], IsoSeconds(clock_));
    }
  }
  EXPECT_TRUE(gave_up) << described.dump();
}

}  // namespace
}  // namespace tessera::autoscaler
