#include "scheduler/scheduler_config.h"

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
  EXPECT_TRUE(cfg->openjd.environments.empty());
  EXPECT_TRUE(cfg->openjd.path_mapping.empty());
  EXPECT_EQ(cfg->openjd.environment_timeout_s, defaults.openjd.environment_timeout_s);
  EXPECT_TRUE(ValidateSchedulerConfig(*cfg).ok());
}

TEST(SchedulerConfigTest, OpenJdEnvironmentTemplatesAreReadAndCheckedAtStart) {
  const std::string dir = ::testing::TempDir();
  const std::string env = dir + "/farm-env-" + std::to_string(::getpid()) + ".yaml";
  std::ofstream(env) << "specificationVersion: environment-2023-09\nenvironment:\n  name: Conda\n"
                        "  variables: {X: \"1\"}\n";
  StatusOr<SchedulerConfig> cfg = LoadText(
      "openjd:\n  environments: [{file: " + env +
      ", pools: [gpu]}]\n  path_mapping: [{source_path_format: WINDOWS, source_path: 'P:\\', "
      "destination_path: /mnt/p}]\n  environment_timeout_s: 60\n");
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  ASSERT_EQ(cfg->openjd.environments.size(), 1u);
  EXPECT_EQ(cfg->openjd.environments[0].name, "Conda");
  EXPECT_EQ(cfg->openjd.EnvironmentsFor({"gpu"}).size(), 1u);
  EXPECT_TRUE(cfg->openjd.EnvironmentsFor({"cpu"}).empty());
  ASSERT_EQ(cfg->openjd.path_mapping.size(), 1u);
  EXPECT_EQ(cfg->openjd.path_mapping[0].source_path, "P:\\");
  EXPECT_EQ(cfg->openjd.environment_timeout_s, 60);
  // A template that is bad, missing, or not an environment template stops the scheduler,
  // naming the file and the field.
  std::ofstream(env) << "specificationVersion: environment-2023-09\nenvironment:\n  name: X\n"
                        "  variables: {X: \"{{Param.Nope}}\"}\n";
  cfg = LoadText("openjd:\n  environments: [{file: " + env + "}]\n");
  EXPECT_EQ(cfg.status().message(),
            "openjd.environments[0].file: " + env +
                ": environment.variables.X: {{Param.Nope}}: no job parameter named 'Nope'");
  cfg = LoadText("openjd:\n  environments: [{file: /nonexistent.yaml}]\n");
  EXPECT_EQ(cfg.status().message(), "openjd.environments[0].file: cannot read '/nonexistent.yaml'");
  std::ofstream(env) << "name: x\nrenderer: noop\nframes: 1\n";
  cfg = LoadText("openjd:\n  environments: [{file: " + env + "}]\n");
  EXPECT_EQ(cfg.status().message(),
            "openjd.environments[0].file: " + env +
                " is not an OpenJD environment template (specificationVersion: "
                "environment-2023-09)");
  cfg = LoadText("openjd:\n  environment_timeout_s: -1\n");
  EXPECT_EQ(cfg.status().message(), "openjd.environment_timeout_s: must be 0..604800 seconds");
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

// A variable in a section's TESSERA_<SECTION>_ namespace that is no field of it stops the daemon
// (a typo is not ignored), and the error names the variable, since no file holds the field.
TEST(SchedulerConfigTest, AStrayEnvironmentVariableIsNamedInTheError) {
  std::string stray = "TESSERA_OPENJD_CONFORMANCE=/srv/suite", fine = "TESSERA_BROKER_LIVENESS=9";
  char* env[] = {fine.data(), stray.data(), nullptr};
  auto cfg = LoadSchedulerConfig("", env);
  ASSERT_FALSE(cfg.ok());
  EXPECT_EQ(cfg.status().message().rfind(
                "openjd.conformance (set by $TESSERA_OPENJD_CONFORMANCE): unknown field", 0),
            0u)
      << cfg.status().message();
  // A bad value from the environment is named the same way; one from the file is not.
  std::string bad = "TESSERA_BROKER_LIVENESS=often";
  char* bad_env[] = {bad.data(), nullptr};
  cfg = LoadSchedulerConfig("", bad_env);
  ASSERT_FALSE(cfg.ok());
  EXPECT_EQ(cfg.status().message().rfind("broker.liveness (set by $TESSERA_BROKER_LIVENESS):", 0),
            0u)
      << cfg.status().message();
  EXPECT_EQ(
      LoadText("broker:\n  liveness: often\n").status().message().rfind("broker.liveness:", 0), 0u);
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

TEST(SchedulerConfigTest, WebhookReceiversAreCheckedNamingTheField) {
  auto cfg = LoadText(
      "notifications:\n  - url: https://hooks.example.com/t?token=abc\n"
      "    events: [job_done, job_failed]\n    secret: s3cret\n");
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  ASSERT_EQ(cfg->notifications.size(), 1u);
  EXPECT_EQ(cfg->notifications[0].secret, "s3cret");
  EXPECT_EQ(cfg->notifications[0].events, (std::vector<std::string>{"job_done", "job_failed"}));
  // Logs and metrics name a receiver without its query string (it may hold a token).
  EXPECT_EQ(events::ReceiverLabel(cfg->notifications[0].url), "https://hooks.example.com/t");

  for (auto [yaml, error] : {
           std::pair{"notifications:\n  - {url: ftp://x/y, events: [job_done]}\n",
                     "notifications[0].url: expected http://HOST[:PORT]/PATH or https://..., "
                     "got 'ftp://x/y'"},
           std::pair{"notifications:\n  - {url: 'http://u:p@x/y', events: [job_done]}\n",
                     "notifications[0].url: expected http://HOST[:PORT]/PATH or https://..., "
                     "got 'http://u:p@x/y'"},
           std::pair{"notifications:\n  - {url: http://x/y, events: [job_dun]}\n",
                     "notifications[0].events[0]: 'job_dun' is not an event (job_submitted, "},
           std::pair{"notifications:\n  - {url: http://x/y, events: []}\n",
                     "notifications[0].events: list at least one event"},
           std::pair{"notifications:\n  - {url: http://x/y}\n",
                     "notifications[0].events: required field is missing"},
           std::pair{"notifications:\n  - {url: http://x/y, events: [job_done]}\n"
                     "  - {url: http://x/y, events: [job_failed]}\n",
                     "notifications[1].url: another receiver has that URL"},
           std::pair{"notifications:\n  - {url: http://x/y, events: [job_done], secret: a,\n"
                     "     secret_file: /etc/passwd}\n",
                     "notifications[0]: give secret or secret_file, not both"},
           std::pair{"notifications:\n  - {url: http://x/y, events: [job_done], timeout_ms: 5}\n",
                     "notifications[0].timeout_ms: must be in [100, 600000]"},
           std::pair{"notifications: {url: http://x/y}\n",
                     "notifications: expected a list of {url, events, secret | secret_file}"},
       }) {
    auto bad = LoadText(yaml);
    ASSERT_FALSE(bad.ok()) << yaml;
    EXPECT_EQ(bad.status().message().substr(0, std::string(error).size()), error) << yaml;
  }
}

TEST(SchedulerConfigTest, WebhookBodiesAreSignedWithHmacSha256) {
  // RFC 4231, test case 2.
  EXPECT_EQ(events::SignBody("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

}  // namespace
}  // namespace tessera::scheduler
