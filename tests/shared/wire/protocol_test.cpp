#include "shared/wire/protocol.h"

#include <gtest/gtest.h>

#include <cmath>

#include "shared/base/utf8.h"
#include "shared/wire/piece_transfer.h"

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

TEST(ProtocolTest, RegisterCarriesGpuSharingAndOlderWorkersShareNothing) {
  Register reg;
  reg.name = "vgpu-1";
  reg.slots_per_gpu = 4;
  reg.memory_mb_per_slot = 6000;
  auto frames = Encode(MessageType::kRegister, reg);
  auto env = Decode(frames);
  ASSERT_TRUE(env.ok());
  auto back = env->As<Register>();
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->slots_per_gpu, 4);
  EXPECT_EQ(back->memory_mb_per_slot, 6000);
  // An older worker sends neither: whole GPUs.
  auto old = Encode(MessageType::kRegister, nlohmann::json{{"name", "old"}});
  auto old_env = Decode(old);
  ASSERT_TRUE(old_env.ok());
  auto old_reg = old_env->As<Register>();
  ASSERT_TRUE(old_reg.ok()) << old_reg.status().ToString();
  EXPECT_EQ(old_reg->slots_per_gpu, 0);
  EXPECT_EQ(old_reg->memory_mb_per_slot, 0);
  // Out of range is refused, naming the field.
  const std::vector<std::pair<std::string, int>> bad = {
      {"slots_per_gpu", 1}, {"slots_per_gpu", 33}, {"memory_mb_per_slot", -1}};
  for (const auto& [field, value] : bad) {
    auto bad_frames = Encode(MessageType::kRegister, nlohmann::json{{"name", "x"}, {field, value}});
    auto bad_env = Decode(bad_frames);
    ASSERT_TRUE(bad_env.ok());
    auto refused = bad_env->As<Register>();
    ASSERT_FALSE(refused.ok()) << field << " " << value;
    EXPECT_NE(refused.status().message().find(field + ": "), std::string::npos)
        << refused.status().message();
  }
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

  // With this side's version, so each is refused for what it is meant to show.
  const auto header = [](uint8_t type) {
    const char h[4] = {'T', 'S', static_cast<char>(kVersion), static_cast<char>(type)};
    return zmq::message_t(h, sizeof(h));
  };
  std::vector<zmq::message_t> bad_type;
  bad_type.push_back(header(0x30));
  bad_type.emplace_back("\x80", 1);
  auto t = Decode(bad_type);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("unknown message type"), std::string::npos);

  const auto heartbeat = static_cast<uint8_t>(MessageType::kHeartbeat);
  for (std::string body : {std::string("\xc1\xc1\xc1"), std::string("\x91\x01"),
                           std::string("\x81\xa1k\x01\x00", 5), std::string("\x82\xa1k\x01")}) {
    // Not MessagePack; an array, not a map; a map with a byte after it; a map cut short.
    std::vector<zmq::message_t> garbage;
    garbage.push_back(header(heartbeat));
    garbage.emplace_back(body.data(), body.size());
    auto g = Decode(garbage);
    ASSERT_FALSE(g.ok()) << body.size();
    EXPECT_NE(g.status().message().find("not a MessagePack map"), std::string::npos);
  }

  // A well-formed map with a mistyped field is rejected when read as the typed struct.
  auto frames = Encode(MessageType::kTaskDone, nlohmann::json{{"task_id", "seven"}});
  auto env = Decode(frames);
  ASSERT_TRUE(env.ok());
  EXPECT_FALSE(env->As<TaskDone>().ok());
}

// ---- the boundary checks (protocol::Check, applied by Envelope::As) ---------------------------

template <typename T>
StatusOr<T> RoundTrip(MessageType type, const T& message) {
  auto frames = Encode(type, message);
  auto env = Decode(frames);
  if (!env.ok()) return env.status();
  return env->template As<T>();
}

TEST(ProtocolTest, AssignCarriesTheCheckpointIntervalAndTheResumePoint) {
  Assign a;
  a.task_id = 5;
  a.attempt = 3;
  a.resume_frame = 7;
  a.resume_checkpoint = std::string(64, 'a');
  a.resume_samples = 96;
  a.checkpoint_interval_s = 300;
  StatusOr<Assign> back = RoundTrip(MessageType::kAssign, a);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->resume_frame, 7);
  EXPECT_EQ(back->resume_checkpoint, a.resume_checkpoint);
  EXPECT_EQ(back->resume_samples, 96);
  EXPECT_EQ(back->checkpoint_interval_s, 300);

  // From a scheduler that predates periodic checkpoints: none asked for, nothing to resume.
  auto old = Encode(MessageType::kAssign, nlohmann::json{{"task_id", 5}, {"attempt", 1}});
  auto env = Decode(old);
  ASSERT_TRUE(env.ok());
  StatusOr<Assign> plain = env->As<Assign>();
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_EQ(plain->checkpoint_interval_s, 0);
  EXPECT_EQ(plain->resume_samples, 0);

  a.checkpoint_interval_s = -1;
  StatusOr<Assign> negative = RoundTrip(MessageType::kAssign, a);
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.status().message().find("checkpoint_interval_s"), std::string::npos);
}

TEST(ProtocolTest, CheckpointRoundTripsAndRefusesNegativeSamples) {
  StatusOr<Checkpoint> back = RoundTrip(MessageType::kCheckpoint, Checkpoint{8, 1, 3, 48});
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->task_id, 8);
  EXPECT_EQ(back->attempt, 1);
  EXPECT_EQ(back->frame, 3);
  EXPECT_EQ(back->samples_done, 48);
  EXPECT_STREQ(MessageTypeName(MessageType::kCheckpoint), "CHECKPOINT");
  StatusOr<Checkpoint> bad = RoundTrip(MessageType::kCheckpoint, Checkpoint{8, 1, 3, -4});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("samples_done"), std::string::npos);
}

TEST(ProtocolTest, NamesThatAreNotUtf8AreRefusedNamingTheFieldAndTheByte) {
  Register reg;
  reg.name = "gpu-07";
  reg.tags = {"cuda12", "big\xc3\x28vram"};
  auto refused = RoundTrip(MessageType::kRegister, reg);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(), "REGISTER body: tags[1]: not valid UTF-8 (byte 3)");

  reg.tags = {};
  reg.pools = {"\xff"};
  EXPECT_EQ(RoundTrip(MessageType::kRegister, reg).status().message(),
            "REGISTER body: pools[0]: not valid UTF-8 (byte 0)");
  reg.pools = {"default"};
  reg.name = "w\xed\xa0\x80";  // a surrogate
  EXPECT_EQ(RoundTrip(MessageType::kRegister, reg).status().message(),
            "REGISTER body: name: not valid UTF-8 (byte 1)");
  reg.name = "";
  EXPECT_FALSE(RoundTrip(MessageType::kRegister, reg).ok());
  reg.name = "gpu-07";
  reg.plugins = {{"pov\xc0\xafray", "3.7", "/usr/bin/povray"}};
  EXPECT_EQ(RoundTrip(MessageType::kRegister, reg).status().message(),
            "REGISTER body: plugins[0].name: not valid UTF-8 (byte 3)");
  EXPECT_FALSE(RoundTrip(MessageType::kEnrol, Enrol{"\x80", "key"}).ok());
  Assign assign;
  assign.scene_yaml = "camera: \xff";
  EXPECT_EQ(RoundTrip(MessageType::kAssign, assign).status().message(),
            "ASSIGN body: scene_yaml: not valid UTF-8 (byte 8)");
}

TEST(ProtocolTest, TextAProgramPrintedIsMadeValidAndCut) {
  Register reg;
  reg.name = "gpu-07";
  reg.hostname = "node\xff-7";
  reg.os = std::string(5000, 'o');
  reg.gpus = {{0, "NVIDIA \xc3\x28", 1, 9, 0}};
  auto read = RoundTrip(MessageType::kRegister, reg);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read->hostname, "node\xef\xbf\xbd-7");
  EXPECT_EQ(read->os.size(), kMaxTextBytes);
  EXPECT_EQ(read->gpus[0].name, "NVIDIA \xef\xbf\xbd(");

  // Cut at a character boundary, never inside one.
  TaskFailed failed;
  failed.message = std::string(kMaxMessageTextBytes - 1, 'x') + "\xc3\xa9";
  failed.log = "\xe2\x82\xac" + std::string(kMaxTaskLogBytes, 'l');
  auto f = RoundTrip(MessageType::kTaskFailed, failed);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->message, std::string(kMaxMessageTextBytes - 1, 'x'));
  EXPECT_EQ(f->log, std::string(kMaxTaskLogBytes, 'l')) << "the last 64 KiB of the log";
  // A failure class this scheduler does not know reads as a render failure; a known one stays.
  failed.failure_class = "cosmic_rays";
  EXPECT_EQ(RoundTrip(MessageType::kTaskFailed, failed)->failure_class, kFailureRender);
  failed.failure_class = kFailureStorageFull;
  EXPECT_EQ(RoundTrip(MessageType::kTaskFailed, failed)->failure_class, kFailureStorageFull);
  Heartbeat hb;
  hb.disk_full = "no space left on device \xff";
  EXPECT_TRUE(utf8::IsValid(RoundTrip(MessageType::kHeartbeat, hb)->disk_full));
  Progress p{1, 1, 0.5, "frame \xed\xa0\x80"};
  EXPECT_TRUE(utf8::IsValid(RoundTrip(MessageType::kProgress, p)->message));

  // Whatever was read is safe to serialise as JSON (what the store and the API do).
  EXPECT_NO_THROW((void)nlohmann::json(*read).dump());
}

TEST(ProtocolTest, ListsBeyondTheirLimitAreRefused) {
  Register reg;
  reg.name = "gpu-07";
  reg.tags.assign(kMaxListEntries, "t");
  EXPECT_TRUE(RoundTrip(MessageType::kRegister, reg).ok());
  reg.tags.push_back("one-too-many");
  EXPECT_EQ(RoundTrip(MessageType::kRegister, reg).status().message(),
            "REGISTER body: tags: at most 64 entries (got 65)");
  reg.tags = {std::string(kMaxNameBytes + 1, 't')};
  EXPECT_EQ(RoundTrip(MessageType::kRegister, reg).status().message(),
            "REGISTER body: tags[0]: at most 128 bytes (got 129)");
  reg.tags = {};
  reg.plugins.assign(kMaxPlugins + 1, PluginOffer{"p"});
  EXPECT_FALSE(RoundTrip(MessageType::kRegister, reg).ok());
  Heartbeat beat;
  beat.running.assign(kMaxTaskRefs + 1, TaskRef{1, 1});
  EXPECT_EQ(RoundTrip(MessageType::kHeartbeat, beat).status().message(),
            "HEARTBEAT body: running: at most 4096 entries (got 4097)");
}

TEST(ProtocolTest, GpuReadingsTravelInHeartbeatsAndImpossibleFiguresBecomeUnknown) {
  Heartbeat beat;
  GpuSample s;
  s.index = 1;
  s.utilization_pct = 87;
  s.memory_used_mb = 40000;
  s.memory_total_mb = 81559;
  s.temperature_c = 71;
  s.power_w = 612.25;
  s.sm_clock_mhz = 1980;
  s.memory_clock_mhz = 2619;
  s.ecc_uncorrected = 0;
  s.last_xid = 13;
  s.fault = "Xid 79: GPU has fallen off the bus";
  beat.gpu_samples = {s};
  auto read = RoundTrip(MessageType::kHeartbeat, beat);
  ASSERT_TRUE(read.ok()) << read.status().message();
  ASSERT_EQ(read->gpu_samples.size(), 1u);
  const GpuSample& r = read->gpu_samples[0];
  EXPECT_EQ(r.index, 1);
  EXPECT_EQ(r.utilization_pct, 87);
  EXPECT_EQ(r.memory_used_mb, 40000);
  EXPECT_EQ(r.memory_total_mb, 81559);
  EXPECT_EQ(r.temperature_c, 71);
  EXPECT_DOUBLE_EQ(r.power_w, 612.25);
  EXPECT_EQ(r.sm_clock_mhz, 1980);
  EXPECT_EQ(r.memory_clock_mhz, 2619);
  EXPECT_EQ(r.ecc_uncorrected, 0);
  EXPECT_EQ(r.last_xid, 13);
  EXPECT_EQ(r.fault, s.fault);

  // A hostile or broken worker: figures no GPU has read as "not known", the fault is made valid
  // text, and too many samples or an index out of range refuse the heartbeat.
  s.utilization_pct = 250;
  s.temperature_c = -40;
  s.power_w = std::nan("");
  s.memory_used_mb = int64_t{1} << 40;
  s.last_xid = -3;
  s.fault = std::string(kMaxTextBytes + 10, 'x') + "\xff";
  beat.gpu_samples = {s};
  read = RoundTrip(MessageType::kHeartbeat, beat);
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_EQ(read->gpu_samples[0].utilization_pct, -1);
  EXPECT_EQ(read->gpu_samples[0].temperature_c, -1);
  EXPECT_EQ(read->gpu_samples[0].power_w, -1);
  EXPECT_EQ(read->gpu_samples[0].memory_used_mb, -1);
  EXPECT_EQ(read->gpu_samples[0].last_xid, 0);
  EXPECT_LE(read->gpu_samples[0].fault.size(), kMaxTextBytes);
  EXPECT_TRUE(utf8::IsValid(read->gpu_samples[0].fault));
  beat.gpu_samples.assign(kMaxListEntries + 1, GpuSample{});
  EXPECT_EQ(RoundTrip(MessageType::kHeartbeat, beat).status().message(),
            "HEARTBEAT body: gpu_samples: at most 64 entries (got 65)");
  s = GpuSample{};
  s.index = 64;
  beat.gpu_samples = {s};
  EXPECT_EQ(RoundTrip(MessageType::kHeartbeat, beat).status().message(),
            "HEARTBEAT body: gpu_samples: index 64 is out of range");
}

TEST(ProtocolTest, ARejectMayOnlyMeanNotNow) {
  auto r = RoundTrip(MessageType::kReject, Reject{"busy name", 1500});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->retry_after_ms, 1500);
  // An older scheduler's REJECT (no retry_after_ms) is for good.
  auto frames = Encode(MessageType::kReject, nlohmann::json{{"reason", "revoked"}});
  auto old = Decode(frames)->As<Reject>();
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(old->retry_after_ms, 0);
}

// ---- transfer in pieces ----------------------------------------------------------------------

std::vector<zmq::message_t> BigResult(size_t bytes) {
  std::string payload(bytes, '\0');
  for (size_t i = 0; i < bytes; ++i) payload[i] = static_cast<char>(i * 31 + 7);
  FrameResult r;
  r.task_id = 9;
  r.attempt = 2;
  r.frame = 5;
  return Encode(MessageType::kFrameResult, r, zmq::message_t(payload.data(), payload.size()));
}

// Delivers every piece `sender` offers to `receiver`, acking each, until the message is whole.
std::optional<std::vector<zmq::message_t>> Deliver(PieceSender& sender, PieceReceiver& receiver,
                                                   int* max_in_flight) {
  std::optional<std::vector<zmq::message_t>> whole;
  std::vector<std::vector<zmq::message_t>> wire;
  const auto now = std::chrono::steady_clock::now();
  for (int round = 0; round < 1000 && sender.active(); ++round) {
    sender.Pump(
        [&](std::vector<zmq::message_t>& f) {
          wire.push_back(std::move(f));
          return true;
        },
        now);
    *max_in_flight = std::max(*max_in_flight, static_cast<int>(wire.size()));
    if (wire.empty()) break;
    std::vector<zmq::message_t> frames = std::move(wire.front());
    wire.erase(wire.begin());
    StatusOr<Envelope> env = Decode(frames);
    EXPECT_TRUE(env.ok()) << env.status().message();
    PieceReceiver::Outcome out =
        receiver.Add("peer", *env->As<Piece>(), std::move(env->payload), std::move(env->extra));
    if (out.message) whole = std::move(out.message);
    EXPECT_EQ(sender.OnAck(out.ack, now), std::nullopt);
  }
  return whole;
}

TEST(PieceTransferTest, LargeMessageArrivesWholeWithABoundedWindow) {
  std::vector<zmq::message_t> original = BigResult(3 * kPieceBytes + 12345);
  ASSERT_TRUE(PieceSender::NeedsPieces(original));
  EXPECT_FALSE(PieceSender::NeedsPieces(BigResult(kPieceBytes)));
  const std::string payload = original[2].to_string();
  PieceSender sender;
  sender.Start(std::move(original));
  PieceReceiver receiver(int64_t{1} << 30);
  int max_in_flight = 0;
  std::optional<std::vector<zmq::message_t>> whole = Deliver(sender, receiver, &max_in_flight);
  ASSERT_TRUE(whole.has_value());
  EXPECT_FALSE(sender.active());
  EXPECT_LE(max_in_flight, kPieceWindow);
  EXPECT_EQ(receiver.buffered_bytes(), 0);
  StatusOr<Envelope> env = Decode(*whole);
  ASSERT_TRUE(env.ok()) << env.status().message();
  EXPECT_EQ(env->type, MessageType::kFrameResult);
  EXPECT_EQ(env->As<FrameResult>()->frame, 5);
  EXPECT_EQ(env->payload.to_string(), payload);
}

TEST(PieceTransferTest, LargeCheckpointArrivesWholeInPieces) {
  // A periodic checkpoint is an accumulation as large as a frame result: it travels in pieces.
  std::string accumulation(2 * kPieceBytes + 777, '\0');
  for (size_t i = 0; i < accumulation.size(); ++i) accumulation[i] = static_cast<char>(i * 31);
  std::vector<zmq::message_t> original =
      Encode(MessageType::kCheckpoint, Checkpoint{41, 2, 9, 640},
             zmq::message_t(accumulation.data(), accumulation.size()));
  ASSERT_TRUE(PieceSender::NeedsPieces(original));
  PieceSender sender;
  sender.Start(std::move(original));
  PieceReceiver receiver(int64_t{1} << 30);
  int max_in_flight = 0;
  std::optional<std::vector<zmq::message_t>> whole = Deliver(sender, receiver, &max_in_flight);
  ASSERT_TRUE(whole.has_value());
  StatusOr<Envelope> env = Decode(*whole);
  ASSERT_TRUE(env.ok()) << env.status().message();
  EXPECT_EQ(env->type, MessageType::kCheckpoint);
  StatusOr<Checkpoint> m = env->As<Checkpoint>();
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->task_id, 41);
  EXPECT_EQ(m->attempt, 2);
  EXPECT_EQ(m->frame, 9);
  EXPECT_EQ(m->samples_done, 640);
  EXPECT_EQ(env->payload.to_string(), accumulation);
}

TEST(PieceTransferTest, ReceiverRefusesOversizeAndRestartsWhatItLost) {
  PieceReceiver receiver(4 * kPieceBytes);
  std::string piece(1000, 'x');
  // Above the result limit: refused for good.
  auto out =
      receiver.Add("a", Piece{1, 0, kMaxResultBytes + 1}, zmq::message_t(piece.data(), 1000), {});
  EXPECT_NE(out.ack.error.find("result limit"), std::string::npos) << out.ack.error;
  // A piece of a transfer it does not hold: start again.
  out = receiver.Add("a", Piece{2, 5000, 10000}, zmq::message_t(piece.data(), 1000), {});
  EXPECT_TRUE(out.ack.error.empty());
  EXPECT_GT(out.ack.retry_after_ms, 0);
  // Memory budget: a second large transfer waits while the first is buffered.
  out = receiver.Add("a", Piece{3, 0, 3 * kPieceBytes}, zmq::message_t(piece.data(), 1000), {});
  EXPECT_EQ(out.ack.received, 1000);
  out = receiver.Add("b", Piece{1, 0, 2 * kPieceBytes}, zmq::message_t(piece.data(), 1000), {});
  EXPECT_GT(out.ack.retry_after_ms, 0);
  EXPECT_EQ(receiver.buffered_bytes(), 3 * kPieceBytes);
  receiver.Forget("a");  // peer a left
  EXPECT_EQ(receiver.buffered_bytes(), 0);
  out = receiver.Add("b", Piece{2, 0, 2 * kPieceBytes}, zmq::message_t(piece.data(), 1000), {});
  EXPECT_EQ(out.ack.received, 1000);
}

TEST(PieceTransferTest, SenderStartsAgainUnderANewIdWhenAskedToRetry) {
  PieceSender sender;
  sender.Start(BigResult(2 * kPieceBytes + 1));
  std::vector<Piece> sent;
  auto capture = [&](std::vector<zmq::message_t>& f) {
    sent.push_back(*Decode(f)->As<Piece>());
    return true;
  };
  const auto now = std::chrono::steady_clock::now();
  sender.Pump(capture, now);
  ASSERT_EQ(sent.size(), 3u);
  EXPECT_EQ(sender.OnAck(PieceAck{sent[0].transfer, 0, 50, ""}, now), std::nullopt);
  sent.clear();
  sender.Pump(capture, now);  // waiting out the retry delay
  EXPECT_TRUE(sent.empty());
  sender.Pump(capture, now + std::chrono::milliseconds(60));
  ASSERT_EQ(sent.size(), 3u);
  EXPECT_EQ(sent[0].offset, 0);
  EXPECT_NE(sent[0].transfer, 1u);  // pieces of the old one still in flight are told apart
  // A refusal ends the transfer with the receiver's reason.
  EXPECT_EQ(sender.OnAck(PieceAck{sent[0].transfer, 0, 0, "too big"}, now), "too big");
  EXPECT_FALSE(sender.active());
}

}  // namespace
}  // namespace tessera::protocol
