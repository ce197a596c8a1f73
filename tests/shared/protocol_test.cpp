#include "shared/protocol.h"

#include <gtest/gtest.h>

namespace tessera::protocol {
namespace {

TEST(ProtocolTest, RoundTripsTypedMessagesWithPayload) {
  FrameResult r{12, 3, 7, 2, 1, 4, 0.5, "cpu", {}};
  std::vector<float> pixels(8, 0.25f);
  auto frames = Encode(MessageType::kFrameResult, r,
                       zmq::message_t(pixels.data(), pixels.size() * sizeof(float)));
  ASSERT_EQ(frames.size(), 3u);
  auto env = Decode(frames);
  ASSERT_TRUE(env.ok()) << env.status().ToString();
  EXPECT_EQ(env->type, MessageType::kFrameResult);
  auto back = env->As<FrameResult>();
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->task_id, 12);
  EXPECT_EQ(back->attempt, 3);
  EXPECT_EQ(back->frame, 7);
  EXPECT_EQ(back->backend, "cpu");
  ASSERT_EQ(env->payload.size(), pixels.size() * sizeof(float));
  EXPECT_EQ(static_cast<const float*>(env->payload.data())[5], 0.25f);
}

TEST(ProtocolTest, RegisterCarriesCapabilities) {
  Register reg;
  reg.name = "gpu-07";
  reg.cpu_cores = 32;
  reg.gpus = {{0, "NVIDIA H200", 143771, 9, 0}};
  reg.backends = {"cpu", "cuda"};
  auto frames = Encode(MessageType::kRegister, reg);
  auto env = Decode(frames);
  ASSERT_TRUE(env.ok());
  auto back = env->As<Register>();
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->name, "gpu-07");
  ASSERT_EQ(back->gpus.size(), 1u);
  EXPECT_EQ(back->gpus[0].compute_major, 9);
  EXPECT_EQ(back->backends[1], "cuda");
}

TEST(ProtocolTest, RegisterCarriesMachineAndCloudFacts) {
  Register reg;
  reg.name = "spot-3";
  reg.os = "Debian GNU/Linux 12 (bookworm), Linux 6.1.0-18-amd64 x86_64";
  reg.cpu_model = "AMD EPYC 7R32";
  reg.cloud = {"aws", "us-east-1", "us-east-1a", "g5.xlarge", "spot"};
  reg.gpus = {{0, "NVIDIA A10G", 22731, 8, 6, "12.4", "12.2"}};
  auto frames = Encode(MessageType::kRegister, reg);
  auto env = Decode(frames);
  ASSERT_TRUE(env.ok());
  auto back = env->As<Register>();
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->os, reg.os);
  EXPECT_EQ(back->cpu_model, "AMD EPYC 7R32");
  EXPECT_EQ(back->cloud.provider, "aws");
  EXPECT_EQ(back->cloud.region, "us-east-1");
  EXPECT_EQ(back->cloud.zone, "us-east-1a");
  EXPECT_EQ(back->cloud.instance_type, "g5.xlarge");
  EXPECT_EQ(back->cloud.lifecycle, "spot");
  ASSERT_EQ(back->gpus.size(), 1u);
  EXPECT_EQ(back->gpus[0].driver_version, "12.4");
  EXPECT_EQ(back->gpus[0].runtime_version, "12.2");

  // An older worker sends none of these: they take their defaults.
  auto old = Encode(MessageType::kRegister,
                    nlohmann::json{{"name", "old"}, {"gpus", {{{"index", 0}, {"name", "T4"}}}}});
  auto old_env = Decode(old);
  ASSERT_TRUE(old_env.ok());
  auto old_reg = old_env->As<Register>();
  ASSERT_TRUE(old_reg.ok()) << old_reg.status().ToString();
  EXPECT_EQ(old_reg->os, "");
  EXPECT_EQ(old_reg->cloud.provider, "");
  EXPECT_EQ(old_reg->gpus.at(0).driver_version, "");
}

TEST(ProtocolTest, RejectsMalformedMessagesWithoutThrowing) {
  std::vector<zmq::message_t> one;
  one.emplace_back("TS", 2);
  EXPECT_FALSE(Decode(one).ok());

  std::vector<zmq::message_t> bad_magic;
  bad_magic.emplace_back("XX\x01\x02", 4);
  bad_magic.emplace_back("\x80", 1);
  EXPECT_FALSE(Decode(bad_magic).ok());

  std::vector<zmq::message_t> bad_version;
  bad_version.emplace_back("TS\x09\x02", 4);
  bad_version.emplace_back("\x80", 1);
  auto v = Decode(bad_version);
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("version"), std::string::npos);

  std::vector<zmq::message_t> bad_type;
  bad_type.emplace_back("TS\x01\x30", 4);
  bad_type.emplace_back("\x80", 1);
  EXPECT_FALSE(Decode(bad_type).ok());

  std::vector<zmq::message_t> garbage_body;
  garbage_body.emplace_back("TS\x01\x02", 4);
  garbage_body.emplace_back("\xc1\xc1\xc1", 3);
  EXPECT_FALSE(Decode(garbage_body).ok());

  // A well-formed map with a mistyped field is rejected when read as the typed struct.
  auto frames = Encode(MessageType::kTaskDone, nlohmann::json{{"task_id", "seven"}});
  auto env = Decode(frames);
  ASSERT_TRUE(env.ok());
  EXPECT_FALSE(env->As<TaskDone>().ok());
}

}  // namespace
}  // namespace tessera::protocol
