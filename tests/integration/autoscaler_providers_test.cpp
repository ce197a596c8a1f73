// The autoscaler's providers with real processes: local worker processes that register with a
// real scheduler under the names asked for and drain when stopped; and a cloud command-line tool
// (a fake one, a shell script that records its argv) driven through argv templates, where values
// are whole arguments that are never interpreted.

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "scheduler/autoscaler/providers.h"
#include "tests/support/farm.h"

namespace tessera::testing {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

TEST(AutoscalerProviders, LocalWorkersRegisterUnderTheirNamesAndDrainWhenStopped) {
  LocalFarm farm("as-local");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  autoscaler::ProviderConfig config;
  config.kind = "local";
  config.worker_binary = Bin("tessera-worker");
  config.worker_args = {"--backend", "cpu", "--threads", "1"};
  config.log_dir = farm.dir() + "/autoscaler";
  auto provider = autoscaler::MakeProvider(config);
  ASSERT_TRUE(provider.ok()) << provider.status().ToString();

  std::vector<std::string> ids;
  for (const std::string name : {"spot-1", "spot-2"}) {
    autoscaler::NodeRequest request;
    request.group = "spot";
    request.worker_name = name;
    request.pools = {"gpu"};
    request.tags = {"a100"};
    request.vars = {{"scheduler", farm.broker_endpoint()}};
    auto id = (*provider)->Create(request);
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    ids.push_back(*id);
  }
  ASSERT_TRUE(farm.WaitForWorkers(2, 20s));
  for (const std::string name : {"spot-1", "spot-2"}) {
    nlohmann::json w = farm.Get("/api/v1/workers/" + name)["worker"];
    EXPECT_EQ(w["pools"], nlohmann::json::array({"gpu"})) << w.dump();
    // Its node group's tag, and the CPU architecture every worker carries.
    ASSERT_FALSE(w["tags"].empty()) << w.dump();
    EXPECT_EQ(w["tags"][0], "a100") << w.dump();
  }
  // Stopping drains: the idle worker leaves at once and the scheduler sees it go.
  ASSERT_TRUE((*provider)->Terminate(ids[0]).ok());
  EXPECT_TRUE(WaitFor(
      [&] { return farm.Get("/api/v1/workers/spot-1")["worker"].value("state", "") == "offline"; },
      20s));
  EXPECT_EQ(farm.Get("/api/v1/workers/spot-2")["worker"]["state"], "idle");
  EXPECT_FALSE((*provider)->Terminate("999999").ok());
  EXPECT_TRUE(fs::exists(config.log_dir + "/spot-2.log"));
}

TEST(AutoscalerProviders, CloudCommandGetsItsArgvVerbatimAndNoShellEverRuns) {
  const std::string dir = MakeTempDir("tessera-as-command");
  // The fake cloud CLI: writes each argument on its own line, prints an instance id.
  const std::string cli = dir + "/fake-cloud";
  WriteFile(cli, "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done >> \"" + dir +
                     "/argv.log\"\necho 'Launching...'\necho i-0abc123\n");
  ::chmod(cli.c_str(), 0755);
  autoscaler::ProviderConfig config;
  config.kind = "command";
  config.create = {cli,          "run-instances", "--instance-type", "{instance_type}",
                   "--tag-name", "Name={name}",   "--user-data",     "file://{user_data}",
                   "--group",    "{group}"};
  config.terminate = {cli, "terminate-instances", "--ids", "{id}"};
  auto provider = autoscaler::MakeProvider(config);
  ASSERT_TRUE(provider.ok()) << provider.status().ToString();

  autoscaler::NodeRequest request;
  request.group = "spot-a100";
  request.worker_name = "spot-a100-7";
  // Hostile values stay single arguments: nothing is expanded or run.
  request.vars = {{"instance_type", "p4d.24xlarge; touch " + dir + "/pwned"},
                  {"user_data", dir + "/$(touch " + dir + "/pwned2)"}};
  auto id = (*provider)->Create(request);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_EQ(*id, "i-0abc123");
  ASSERT_TRUE((*provider)->Terminate(*id).ok());
  EXPECT_EQ(ReadFile(dir + "/argv.log"),
            "run-instances\n--instance-type\np4d.24xlarge; touch " + dir +
                "/pwned\n--tag-name\nName=spot-a100-7\n--user-data\nfile://" + dir + "/$(touch " +
                dir + "/pwned2)\n--group\nspot-a100\nterminate-instances\n--ids\ni-0abc123\n");
  EXPECT_FALSE(fs::exists(dir + "/pwned"));
  EXPECT_FALSE(fs::exists(dir + "/pwned2"));

  // A failing tool and a template with an unknown placeholder are clear errors.
  config.create = {"/bin/false"};
  auto failing = autoscaler::MakeProvider(config);
  ASSERT_TRUE(failing.ok());
  auto refused = (*failing)->Create(request);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("exit 1"), std::string::npos)
      << refused.status().message();
  EXPECT_EQ(*autoscaler::Substitute("Tags=[{{Key=Name,Value={name}}}]", {{"name", "n-1"}}),
            "Tags=[{Key=Name,Value=n-1}]");
  EXPECT_EQ(autoscaler::Substitute("--zone={zone}", {{"region", "x"}}).status().message(),
            "'--zone={zone}': no value for {zone} (known: region)");
  config.kind = "ec2";
  EXPECT_FALSE(autoscaler::MakeProvider(config).ok());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tessera::testing
