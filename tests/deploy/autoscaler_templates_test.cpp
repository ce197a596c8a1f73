// deploy/autoscaler/: the ready-made cloud command templates parse, name a create and a
// terminate command, and use only placeholders the autoscaler or the template's own vars fill;
// the kubernetes template names the worker Deployment of deploy/kubernetes/, whose pods register
// under their own names.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <set>

#include "scheduler/autoscaler/providers.h"
#include "tests/deploy/deploy_files.h"

namespace tessera::deploy_test {
namespace {

// A kubernetes provider block: only the keys the scheduler reads, a provider MakeProvider
// accepts, and a Deployment of that name and namespace in deploy/kubernetes/ whose worker
// registers under its pod's name (the provider matches pods by name prefix and removes them by
// name).
void CheckKubernetesTemplate(const YAML::Node& provider) {
  const std::set<std::string> keys = {"kind",    "deployment", "namespace",
                                      "context", "kubectl",    "timeout_s"};
  autoscaler::ProviderConfig config;
  config.kind = "kubernetes";
  for (const auto& kv : provider) {
    const std::string key = kv.first.as<std::string>();
    EXPECT_EQ(keys.count(key), 1u) << "provider." << key;
    if (key == "deployment") config.deployment = kv.second.as<std::string>();
    if (key == "namespace") config.k8s_namespace = kv.second.as<std::string>();
    if (key == "context") config.kube_context = kv.second.as<std::string>();
    if (key == "kubectl") config.kubectl = kv.second.as<std::string>();
    if (key == "timeout_s") config.timeout_s = kv.second.as<int>();
  }
  auto made = autoscaler::MakeProvider(config);
  ASSERT_TRUE(made.ok()) << made.status().message();
  EXPECT_EQ((*made)->NamePrefix(), config.deployment + "-");

  YAML::Node deployment;
  for (const fs::path& file : FilesIn(kDeploy / "kubernetes", ".yaml")) {
    for (const YAML::Node& doc : LoadAll(ReadFile(file), file.string())) {
      if (Scalar(doc, {"kind"}) == "Deployment" &&
          Scalar(doc, {"metadata", "name"}) == config.deployment &&
          Scalar(doc, {"metadata", "namespace"}) == config.k8s_namespace) {
        deployment = doc;
      }
    }
  }
  ASSERT_TRUE(deployment.IsDefined())
      << "no Deployment " << config.k8s_namespace << "/" << config.deployment;
  const YAML::Node containers = At(deployment, {"spec", "template", "spec", "containers"});
  ASSERT_TRUE(containers.IsSequence() && containers.size() == 1);
  std::string name_from;
  for (const YAML::Node& env : At(containers[0], {"env"})) {
    if (Scalar(env, {"name"}) == "TESSERA_WORKER_NAME") {
      name_from = Scalar(env, {"valueFrom", "fieldRef", "fieldPath"});
    }
  }
  EXPECT_EQ(name_from, "metadata.name");
}

TEST(AutoscalerTemplates, EveryPlaceholderIsFilledAndCommandsAreComplete) {
  const std::set<std::string> tools = {"aws", "aliyun", "tccli"};
  int templates = 0, kubernetes = 0;
  for (const auto& entry : fs::directory_iterator(kRepo / "deploy" / "autoscaler")) {
    if (entry.path().extension() != ".yaml") continue;
    ++templates;
    SCOPED_TRACE(entry.path().string());
    const YAML::Node root = YAML::LoadFile(entry.path().string());
    const YAML::Node provider = root["provider"];
    ASSERT_TRUE(provider.IsMap());
    if (provider["kind"].as<std::string>() == "kubernetes") {
      ++kubernetes;
      CheckKubernetesTemplate(provider);
      continue;
    }
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
    // Its nodes install the worker bundle with a template of deploy/cloud-init/ (installed by
    // package.sh under share/tessera/cloud-init/) and watch their own cloud's spot notices.
    const std::string cloud_init = root["cloud_init"] ? root["cloud_init"].as<std::string>() : "";
    EXPECT_EQ(fs::path(cloud_init).parent_path(), "/usr/local/share/tessera/cloud-init");
    EXPECT_TRUE(fs::exists(kRepo / "deploy" / "cloud-init" / fs::path(cloud_init).filename()))
        << cloud_init;
    const std::string tool = provider["create"][0].as<std::string>();
    EXPECT_EQ(vars["cloud_provider"], tool == "aliyun"  ? "alibaba"
                                      : tool == "tccli" ? "tencent"
                                                        : "aws");
    EXPECT_THAT(vars["package_url"],
                ::testing::MatchesRegex("https://.*/tessera-worker-[0-9.]+-linux-x86_64.tar.gz"));
  }
  EXPECT_EQ(templates, 4);
  EXPECT_EQ(kubernetes, 1);
}

}  // namespace
}  // namespace tessera::deploy_test
