// deploy/autoscaler/: the ready-made cloud command templates parse, name a create and a
// terminate command, and use only placeholders the autoscaler or the template's own vars fill.

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <set>

#include "scheduler/autoscaler/providers.h"
#include "tests/deploy/deploy_files.h"

namespace tessera::deploy_test {
namespace {

TEST(AutoscalerTemplates, EveryPlaceholderIsFilledAndCommandsAreComplete) {
  const std::set<std::string> tools = {"aws", "aliyun", "tccli"};
  int templates = 0;
  for (const auto& entry : fs::directory_iterator(kRepo / "deploy" / "autoscaler")) {
    if (entry.path().extension() != ".yaml") continue;
    ++templates;
    SCOPED_TRACE(entry.path().string());
    const YAML::Node root = YAML::LoadFile(entry.path().string());
    const YAML::Node provider = root["provider"];
    ASSERT_TRUE(provider.IsMap());
    EXPECT_EQ(provider["kind"].as<std::string>(), "command");
    // What the autoscaler supplies, plus the template's own vars.
    std::map<std::string, std::string> vars = {{"name", "spot-1"},
                                               {"group", "spot"},
                                               {"user_data", "/tmp/ud"},
                                               {"user_data_base64", "I2Nsb3VkLWNvbmZpZwo="},
                                               {"id", "i-1"}};
    for (const auto& kv : root["vars"])
      vars[kv.first.as<std::string>()] = kv.second.as<std::string>();
    for (const char* command : {"create", "terminate"}) {
      const YAML::Node argv = provider[command];
      ASSERT_TRUE(argv.IsSequence() && argv.size() >= 2) << command;
      EXPECT_EQ(tools.count(argv[0].as<std::string>()), 1u) << argv[0].as<std::string>();
      for (const auto& arg : argv) {
        auto filled = autoscaler::Substitute(arg.as<std::string>(), vars);
        EXPECT_TRUE(filled.ok()) << command << ": " << filled.status().message();
      }
    }
    // The worker must register under the name the autoscaler waits for, and terminate must
    // take the id create printed.
    std::string create, terminate;
    for (const auto& a : provider["create"]) create += a.as<std::string>() + " ";
    for (const auto& a : provider["terminate"]) terminate += a.as<std::string>() + " ";
    EXPECT_NE(create.find("{name}"), std::string::npos);
    EXPECT_NE(create.find("{user_data"), std::string::npos);
    EXPECT_NE(terminate.find("{id}"), std::string::npos);
  }
  EXPECT_EQ(templates, 3);
}

}  // namespace
}  // namespace tessera::deploy_test
