#include "scheduler/config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

namespace tessera::scheduler {
namespace {

char* kNoEnv[] = {nullptr};

// Each test runs in a process of its own, in parallel with the others: a file of its own.
StatusOr<SchedulerConfig> LoadText(const std::string& yaml) {
  std::string path =
      ::testing::TempDir() + "/scheduler-config-" + std::to_string(::getpid()) + ".yaml";
  std::ofstream(path) << yaml;
  return LoadSchedulerConfig(path, kNoEnv);
}

TEST(SchedulerConfigTest, ExampleConfigParsesToTheDefaults) {
  auto cfg =
      LoadSchedulerConfig(std::string(TSR_SOURCE_DIR) + "/deploy/examples/scheduler.yaml", kNoEnv);
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  SchedulerConfig defaults;
  EXPECT_EQ(cfg->api_listen, defaults.api_listen);
  EXPECT_EQ(cfg->broker_listen, defaults.broker_listen);
  EXPECT_EQ(cfg->heartbeat_ms, defaults.heartbeat_ms);
  EXPECT_TRUE(cfg->limits.empty());
  EXPECT_TRUE(ValidateSchedulerConfig(*cfg).ok());
}

TEST(SchedulerConfigTest, LimitsAndEnvironmentOverrides) {
  std::string env_var = "TESSERA_BROKER_LIVENESS=9";
  char* env[] = {env_var.data(), nullptr};
  std::string path = ::testing::TempDir() + "/scheduler-limits.yaml";
  std::ofstream(path) << "limits:\n  blender: 20\n  nuke: 2\n";
  auto cfg = LoadSchedulerConfig(path, env);
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  EXPECT_EQ(cfg->limits.at("blender"), 20);
  EXPECT_EQ(cfg->limits.at("nuke"), 2);
  EXPECT_EQ(cfg->liveness, 9);
}

TEST(SchedulerConfigTest, BadValuesNameTheirField) {
  EXPECT_EQ(LoadText("limits:\n  blender: lots\n").status().message().rfind("limits.blender", 0),
            0u);
  EXPECT_EQ(LoadText("limits:\n  blender: -1\n").status().message().rfind("limits.blender", 0), 0u);
  EXPECT_EQ(
      LoadText("broker:\n  hartbeat_ms: 5\n").status().message().rfind("broker.hartbeat_ms", 0),
      0u);
  auto cfg = LoadText("broker:\n  heartbeat_ms: 1\n");
  ASSERT_TRUE(cfg.ok());
  EXPECT_EQ(ValidateSchedulerConfig(*cfg).message().rfind("broker.heartbeat_ms", 0), 0u);
  cfg = LoadText("storage:\n  synchronous: sometimes\n");
  ASSERT_TRUE(cfg.ok());
  EXPECT_EQ(ValidateSchedulerConfig(*cfg).message().rfind("storage.synchronous", 0), 0u);
}

TEST(SchedulerConfigTest, DataFolderFloorIsReadAndChecked) {
  EXPECT_EQ(SchedulerConfig().min_free_mb, 256);
  auto cfg = LoadText("storage:\n  min_free_mb: 1024\n");
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  EXPECT_EQ(cfg->min_free_mb, 1024);
  EXPECT_TRUE(ValidateSchedulerConfig(*cfg).ok());
  cfg = LoadText("storage:\n  min_free_mb: 0\n");  // no floor
  ASSERT_TRUE(cfg.ok());
  EXPECT_TRUE(ValidateSchedulerConfig(*cfg).ok());
  // From the environment, like its neighbours.
  std::string env_var = "TESSERA_STORAGE_MIN_FREE_MB=64";
  char* env[] = {env_var.data(), nullptr};
  const std::string path =
      ::testing::TempDir() + "/scheduler-floor-" + std::to_string(::getpid()) + ".yaml";
  std::ofstream(path) << "storage:\n  min_free_mb: 512\n";
  cfg = LoadSchedulerConfig(path, env);
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  EXPECT_EQ(cfg->min_free_mb, 64);
  // Bad values name the field.
  EXPECT_EQ(LoadText("storage:\n  min_free_mb: lots\n")
                .status()
                .message()
                .rfind("storage.min_free_mb", 0),
            0u);
  EXPECT_EQ(
      LoadText("storage:\n  min_free_mb: 1.5\n").status().message().rfind("storage.min_free_mb", 0),
      0u);
  cfg = LoadText("storage:\n  min_free_mb: -1\n");
  ASSERT_TRUE(cfg.ok());
  EXPECT_EQ(ValidateSchedulerConfig(*cfg).message().rfind("storage.min_free_mb", 0), 0u)
      << ValidateSchedulerConfig(*cfg).message();
}

TEST(SchedulerConfigTest, ApiAuthAndTlsSettingsAreChecked) {
  auto cfg = LoadText("api:\n  listen: 127.0.0.1:8470\n  auth: none\n");
  ASSERT_TRUE(cfg.ok());
  EXPECT_TRUE(ValidateSchedulerConfig(*cfg).ok());
  // An API without tokens only on loopback: anyone on the network could run the farm.
  cfg = LoadText("api:\n  listen: 0.0.0.0:8470\n  auth: none\n");
  ASSERT_TRUE(cfg.ok());
  EXPECT_EQ(ValidateSchedulerConfig(*cfg).message().rfind("api.auth: none is only allowed", 0), 0u)
      << ValidateSchedulerConfig(*cfg).message();
  cfg = LoadText("api:\n  auth: maybe\n");
  ASSERT_TRUE(cfg.ok());
  EXPECT_EQ(ValidateSchedulerConfig(*cfg).message().rfind("api.auth", 0), 0u);
  cfg = LoadText("api:\n  tls_cert_file: /etc/tessera/api.crt\n");
  ASSERT_TRUE(cfg.ok());
  EXPECT_EQ(ValidateSchedulerConfig(*cfg).message().rfind("api.tls_key_file: required", 0), 0u);
  EXPECT_EQ(SchedulerConfig().api_auth, "token");  // tokens unless configured otherwise
}

}  // namespace
}  // namespace tessera::scheduler
