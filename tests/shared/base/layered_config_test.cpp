#include "shared/base/layered_config.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "shared/base/yaml_util.h"

namespace tessera {
namespace {

TEST(ConfigTest, EnvironmentOverridesFileValues) {
  std::string path = ::testing::TempDir() + "/cfg.yaml";
  std::ofstream(path) << "broker:\n  heartbeat_ms: 1000\n  liveness: 5\n";
  std::string a = "TESSERA_BROKER_HEARTBEAT_MS=250", b = "TESSERA_SERVER=http://x", c = "HOME=/";
  char* env[] = {a.data(), b.data(), c.data(), nullptr};
  auto node = config::LoadLayered(path, {"broker", "log"}, env);
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  EXPECT_EQ((*node)["broker"]["heartbeat_ms"].as<std::string>(), "250");
  EXPECT_EQ((*node)["broker"]["liveness"].as<int>(), 5);
  EXPECT_FALSE((*node)["server"].IsDefined()) << "only the named sections take overrides";
}

TEST(ConfigTest, MissingExplicitFileIsAnError) {
  char* env[] = {nullptr};
  auto node = config::LoadLayered("/nonexistent/tessera.yaml", {"log"}, env);
  ASSERT_FALSE(node.ok());
  EXPECT_NE(node.status().message().find("/nonexistent/tessera.yaml"), std::string::npos);
}

TEST(ConfigTest, ParsesHostPort) {
  std::string host;
  int port = 0;
  ASSERT_TRUE(config::ParseHostPort("127.0.0.1:8470", "api.listen", &host, &port).ok());
  EXPECT_EQ(host, "127.0.0.1");
  EXPECT_EQ(port, 8470);
  ASSERT_TRUE(config::ParseHostPort("[::1]:0", "api.listen", &host, &port).ok());
  EXPECT_EQ(host, "::1");
  auto bad = config::ParseHostPort("localhost:99999", "api.listen", &host, &port);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.message().rfind("api.listen", 0), 0u);
  EXPECT_FALSE(config::ParseHostPort("nohost", "api.listen", &host, &port).ok());
}

TEST(YamlUtilTest, MapReaderReportsPathsOfBadFields) {
  auto root = yaml::Parse("a:\n  b: [1, 2]\n  c: x\n", "doc");
  ASSERT_TRUE(root.ok());
  yaml::MapReader top(*root, "");
  yaml::MapReader a(top.Child("a"), "a");
  int c = 0;
  std::vector<int> b;
  a.Optional("b", &b).Optional("c", &c);
  Status s = a.Finish();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "a.c: expected an integer, got 'x'");
  EXPECT_EQ(b, (std::vector<int>{1, 2}));

  yaml::MapReader unknown(*root, "");
  EXPECT_EQ(unknown.Finish().message().rfind("a: unknown field", 0), 0u);

  auto missing = yaml::Parse("x: 1\n", "doc");
  yaml::MapReader m(*missing, "");
  int y = 0;
  int x = 0;
  m.Required("y", &y).Optional("x", &x);
  EXPECT_EQ(m.Finish().message(), "y: required field is missing");
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {
TEST(YamlUtilTest, DuplicateKeysAreErrors) {
  auto root = yaml::Parse("a: 1\nb: 2\na: 3\n", "doc");
  ASSERT_TRUE(root.ok());
  yaml::MapReader r(*root, "top");
  int a = 0, b = 0;
  r.Optional("a", &a).Optional("b", &b);
  EXPECT_EQ(r.Finish().message(), "top.a: field is given more than once");
}
}  // namespace
}  // namespace tessera
