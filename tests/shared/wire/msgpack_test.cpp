// The wire codec (shared/wire/msgpack.h): the bytes it writes are MessagePack that nlohmann::json
// reads, it reads what nlohmann::json writes, and bad input is an error naming the field.

#include "shared/wire/msgpack.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

#include "shared/wire/protocol.h"

namespace tessera::msgpack {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

json ParseWithNlohmann(const std::string& bytes) {
  return json::from_msgpack(bytes.begin(), bytes.end(), /*strict=*/true,
                            /*allow_exceptions=*/false);
}

template <typename T>
StatusOr<T> Read(const std::vector<uint8_t>& bytes) {
  Reader r(bytes.data(), bytes.size());
  T v;
  Status s = Unpack(r, v);
  if (!s.ok()) return s;
  if (!r.done()) return Status::InvalidArgument("trailing bytes");
  return v;
}

protocol::Assign SampleAssign() {
  protocol::Assign a;
  a.task_id = 5'000'000'000;  // beyond 32 bits
  a.attempt = 3;
  a.job_id = 77;
  a.frame_start = -40;  // negative, beyond fixint
  a.frame_end = 70000;
  a.scene_yaml = std::string(300, 'y');  // str16
  a.renderer = "povray";
  a.gpus = {0, 3};
  a.part = {0, 0, 128, 64, 16, 32};
  a.scene_name = std::string(40, 's');  // str8
  a.settings = {{"quality", "9"}, {"antialias", "on"}};
  a.timeout_s = 3600;
  a.assets = {{"tex/red.png", std::string(64, 'a')}};
  a.output = {"/mnt/out", "shot.####", {"exr", "png"}, true};
  return a;
}

TEST(MsgpackTest, WhatItWritesNlohmannReadsAndBack) {
  const protocol::Assign a = SampleAssign();
  Writer w;
  Pack(w, a);
  json parsed = ParseWithNlohmann(w.bytes());
  ASSERT_FALSE(parsed.is_discarded());
  EXPECT_EQ(parsed, json(a));  // the same document nlohmann builds from the struct

  // And nlohmann's own bytes for that document read back into the same struct.
  StatusOr<protocol::Assign> back = Read<protocol::Assign>(json::to_msgpack(json(a)));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(json(*back), json(a));
}

TEST(MsgpackTest, IntegersStringsAndContainersAtEveryWidth) {
  const std::vector<int64_t> ints = {
      0,         1,  127, 128, 255,  256,  65535,  65536,  4294967295, 4294967296,
      INT64_MAX, -1, -32, -33, -128, -129, -32768, -32769, INT32_MIN,  int64_t{INT32_MIN} - 1,
      INT64_MIN};
  for (int64_t v : ints) {
    Writer w;
    w.Int(v);
    EXPECT_EQ(ParseWithNlohmann(w.bytes()).get<int64_t>(), v) << v;
    Reader r(w.bytes().data(), w.bytes().size());
    int64_t back = 0;
    ASSERT_TRUE(r.ReadInt(&back).ok()) << v;
    EXPECT_EQ(back, v);
    EXPECT_TRUE(r.done());
  }
  for (size_t n : {size_t{0}, size_t{31}, size_t{32}, size_t{255}, size_t{256}, size_t{70000}}) {
    std::vector<std::string> strings(n < 300 ? n : 20, std::string(n, 'q'));
    Writer w;
    Pack(w, strings);
    EXPECT_EQ(ParseWithNlohmann(w.bytes()), json(strings)) << n;
    auto back = Read<std::vector<std::string>>(json::to_msgpack(json(strings)));
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, strings);
  }
  // Floats: nlohmann writes float32 when exact, float64 otherwise; both read.
  for (double d : {0.5, 0.1, -1e300}) {
    auto back = Read<protocol::Progress>(json::to_msgpack(json{{"fraction", d}}));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(back->fraction, d);
  }
}

TEST(MsgpackTest, MissingFieldsKeepDefaultsAndUnknownOnesAreSkipped) {
  json newer = {{"task_id", 9},
                {"attempt", 2},
                {"from_a_newer_worker", {{"nested", {1, 2, {{"deep", nullptr}}}}, {"bin", 1.5}}}};
  auto done = Read<protocol::TaskDone>(json::to_msgpack(newer));
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_EQ(done->task_id, 9);
  EXPECT_EQ(done->attempt, 2);
  EXPECT_EQ(done->log, "");
  auto part = Read<protocol::FramePart>(json::to_msgpack(json::object()));
  ASSERT_TRUE(part.ok());
  EXPECT_EQ(part->sample_end, -1);
}

TEST(MsgpackTest, BadFieldsAreNamedWithTheirPath) {
  auto mistyped = Read<protocol::Assign>(json::to_msgpack({{"part", {{"x0", "left"}}}}));
  ASSERT_FALSE(mistyped.ok());
  EXPECT_THAT(mistyped.status().message(), HasSubstr("part.x0: expected an integer"));

  auto range = Read<protocol::Assign>(json::to_msgpack({{"attempt", int64_t{1} << 40}}));
  ASSERT_FALSE(range.ok());
  EXPECT_THAT(range.status().message(), HasSubstr("attempt: 1099511627776 is out of range"));

  auto in_array = Read<protocol::Heartbeat>(
      json::to_msgpack({{"running", {{{"task_id", 1}}, {{"task_id", true}}}}}));
  ASSERT_FALSE(in_array.ok());
  EXPECT_THAT(in_array.status().message(), HasSubstr("running[1].task_id: expected an integer"));

  auto negative = Read<protocol::Piece>(json::to_msgpack({{"transfer", -5}}));
  ASSERT_FALSE(negative.ok());
  EXPECT_THAT(negative.status().message(), HasSubstr("transfer: -5 is out of range"));

  auto not_bool = Read<protocol::TaskFailed>(json::to_msgpack({{"charge", 1}}));
  ASSERT_FALSE(not_bool.ok());
  EXPECT_THAT(not_bool.status().message(), HasSubstr("charge: expected a boolean"));
}

TEST(MsgpackTest, MalformedBytesNeverReadOutOfBounds) {
  Writer w;
  Pack(w, SampleAssign());
  const std::string& whole = w.bytes();
  // Every truncation is an error (never a crash, never a partial success).
  for (size_t n = 0; n < whole.size(); ++n) {
    Reader r(whole.data(), n);
    EXPECT_FALSE(r.Skip().ok() && r.done()) << n;
    Reader typed(whole.data(), n);
    protocol::Assign a;
    EXPECT_FALSE(Unpack(typed, a).ok() && typed.done()) << n;
  }
  // A container that claims more entries than there are bytes is refused before any reserve.
  const uint8_t liar[] = {0xdd, 0xff, 0xff, 0xff, 0xff, 0x01};
  Reader r(liar, sizeof(liar));
  uint32_t count = 0;
  EXPECT_FALSE(r.ReadArrayHeader(&count).ok());
  // Nesting deeper than kMaxDepth is refused (no unbounded recursion).
  std::string deep(1000, '\x91');
  deep += '\x00';
  Reader d(deep.data(), deep.size());
  Status s = d.Skip();
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("too deep"));
  // 0xc1 is never used in MessagePack.
  const uint8_t never[] = {0xc1};
  Reader n(never, 1);
  EXPECT_FALSE(n.Skip().ok());
}

// Whatever arrives, decoding answers with a message or an error: random bytes, and valid
// messages with random bytes changed.
TEST(MsgpackTest, RandomBytesAreRefusedOrReadNeverCrash) {
  std::mt19937 rng(1234);
  Writer w;
  protocol::Register reg;
  reg.name = "w";
  reg.gpus = {protocol::GpuInfo{0, "H200", 143771, 9, 0, "12.4", "12.4"}};
  reg.running = {{1, 2}, {3, 4}};
  reg.plugins = {protocol::PluginOffer{"povray", "3.7", "/usr/bin/povray"}};
  Pack(w, reg);
  const std::string valid = w.bytes();
  int decoded = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string bytes;
    if (i % 2 == 0) {
      bytes.resize(rng() % 64);
      for (char& c : bytes) c = static_cast<char>(rng());
    } else {
      bytes = valid;
      for (int k = 0; k < 3; ++k) bytes[rng() % bytes.size()] = static_cast<char>(rng());
    }
    std::vector<zmq::message_t> frames;
    const char header[4] = {'T', 'S', static_cast<char>(protocol::kVersion),
                            static_cast<char>(protocol::MessageType::kRegister)};
    frames.emplace_back(header, sizeof(header));
    frames.emplace_back(bytes.data(), bytes.size());
    StatusOr<protocol::Envelope> env = protocol::Decode(frames);
    if (!env.ok()) continue;
    decoded += env->As<protocol::Register>().ok();
    (void)env->As<protocol::Assign>();
    (void)env->As<protocol::Heartbeat>();
  }
  EXPECT_GT(decoded, 0) << "some changed bytes still make a valid registration";
}

}  // namespace
}  // namespace tessera::msgpack
