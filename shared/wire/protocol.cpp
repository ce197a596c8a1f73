#include "shared/wire/protocol.h"

#include <cstring>

#include "shared/base/utf8.h"

namespace tessera::protocol {

const char* MessageTypeName(MessageType type) {
  switch (type) {
    case MessageType::kRegister:
      return "REGISTER";
    case MessageType::kHeartbeat:
      return "HEARTBEAT";
    case MessageType::kProgress:
      return "PROGRESS";
    case MessageType::kFrameResult:
      return "FRAME_RESULT";
    case MessageType::kTaskDone:
      return "TASK_DONE";
    case MessageType::kTaskFailed:
      return "TASK_FAILED";
    case MessageType::kGoodbye:
      return "GOODBYE";
    case MessageType::kEnrol:
      return "ENROL";
    case MessageType::kHandback:
      return "HANDBACK";
    case MessageType::kPiece:
      return "PIECE";
    case MessageType::kBlobRequest:
      return "BLOB_REQUEST";
    case MessageType::kCheckpoint:
      return "CHECKPOINT";
    case MessageType::kFileResult:
      return "FILE_RESULT";
    case MessageType::kWelcome:
      return "WELCOME";
    case MessageType::kReject:
      return "REJECT";
    case MessageType::kHeartbeatAck:
      return "HEARTBEAT_ACK";
    case MessageType::kAssign:
      return "ASSIGN";
    case MessageType::kCancel:
      return "CANCEL";
    case MessageType::kUnknownWorker:
      return "UNKNOWN_WORKER";
    case MessageType::kEnrolled:
      return "ENROLLED";
    case MessageType::kResultAck:
      return "RESULT_ACK";
    case MessageType::kDrain:
      return "DRAIN";
    case MessageType::kPieceAck:
      return "PIECE_ACK";
    case MessageType::kBlobData:
      return "BLOB_DATA";
  }
  return "UNKNOWN_TYPE";
}

namespace {
bool IsKnownType(uint8_t t) {
  return (t >= static_cast<uint8_t>(MessageType::kRegister) &&
          t <= static_cast<uint8_t>(MessageType::kFileResult)) ||
         (t >= static_cast<uint8_t>(MessageType::kWelcome) &&
          t <= static_cast<uint8_t>(MessageType::kBlobData));
}
}  // namespace

std::vector<zmq::message_t> EncodeFrames(MessageType type, std::string_view body,
                                         zmq::message_t payload) {
  std::vector<zmq::message_t> frames;
  frames.reserve(3);
  const char header[4] = {'T', 'S', static_cast<char>(kVersion), static_cast<char>(type)};
  frames.emplace_back(header, sizeof(header));
  frames.emplace_back(body.data(), body.size());
  if (payload.size() > 0) frames.push_back(std::move(payload));
  return frames;
}

std::vector<zmq::message_t> Encode(MessageType type, const nlohmann::json& body,
                                   zmq::message_t payload) {
  std::vector<uint8_t> packed = nlohmann::json::to_msgpack(body);
  return EncodeFrames(type,
                      std::string_view(reinterpret_cast<const char*>(packed.data()), packed.size()),
                      std::move(payload));
}

nlohmann::json Envelope::Json() const {
  const auto* b = static_cast<const uint8_t*>(body.data());
  return nlohmann::json::from_msgpack(b, b + body.size(), /*strict=*/true,
                                      /*allow_exceptions=*/false);
}

StatusOr<Envelope> Decode(std::vector<zmq::message_t>& frames, size_t first) {
  // 2 or 3 frames; the last piece of a message sent in pieces carries 2 more (the original header
  // and body).
  if (frames.size() < first + 2 || frames.size() > first + 5 || frames.size() == first + 4) {
    return Status::InvalidArgument("message has " + std::to_string(frames.size() - first) +
                                   " frames, expected 2 or 3");
  }
  const zmq::message_t& header = frames[first];
  if (header.size() != 4) return Status::InvalidArgument("header frame must be 4 bytes");
  const auto* h = static_cast<const uint8_t*>(header.data());
  if (h[0] != 'T' || h[1] != 'S') return Status::InvalidArgument("not a Tessera message");
  if (h[2] != kVersion) {
    return Status::InvalidArgument("protocol version " + std::to_string(h[2]) +
                                   " is not supported (this side speaks " +
                                   std::to_string(kVersion) + ")");
  }
  if (!IsKnownType(h[3])) {
    return Status::InvalidArgument("unknown message type " + std::to_string(h[3]));
  }
  Envelope env;
  env.type = static_cast<MessageType>(h[3]);
  if (frames.size() == first + 5 && env.type != MessageType::kPiece) {
    return Status::InvalidArgument(std::string(MessageTypeName(env.type)) +
                                   ": message has 5 frames, expected 2 or 3");
  }
  // Walked once here, so a malformed body is refused on arrival and every As<T>() reads
  // within bounds.
  msgpack::Reader check(frames[first + 1].data(), frames[first + 1].size());
  if (!check.at_map() || !check.Skip().ok() || !check.done()) {
    return Status::InvalidArgument(std::string(MessageTypeName(env.type)) +
                                   ": body is not a MessagePack map");
  }
  env.body = std::move(frames[first + 1]);
  if (frames.size() >= first + 3) env.payload = std::move(frames[first + 2]);
  for (size_t i = first + 3; i < frames.size(); ++i) env.extra.push_back(std::move(frames[i]));
  return env;
}

}  // namespace tessera::protocol

// ---- the boundary checks --------------------------------------------------------------------

namespace tessera::protocol {
namespace {

// An identifier: refused unless valid UTF-8 of at most `max` bytes.
Status Name(const std::string& text, const std::string& field, size_t max = kMaxNameBytes) {
  TSR_RETURN_IF_ERROR(utf8::Check(text, field));
  if (text.size() > max) {
    return Status::InvalidArgument(field + ": at most " + std::to_string(max) + " bytes (got " +
                                   std::to_string(text.size()) + ")");
  }
  return Status::Ok();
}

Status Names(const std::vector<std::string>& list, const std::string& field,
             size_t max_entries = kMaxListEntries) {
  if (list.size() > max_entries) {
    return Status::InvalidArgument(field + ": at most " + std::to_string(max_entries) +
                                   " entries (got " + std::to_string(list.size()) + ")");
  }
  for (size_t i = 0; i < list.size(); ++i) {
    TSR_RETURN_IF_ERROR(Name(list[i], field + "[" + std::to_string(i) + "]"));
  }
  return Status::Ok();
}

template <typename T>
Status Count(const std::vector<T>& list, const std::string& field, size_t max_entries) {
  if (list.size() <= max_entries) return Status::Ok();
  return Status::InvalidArgument(field + ": at most " + std::to_string(max_entries) +
                                 " entries (got " + std::to_string(list.size()) + ")");
}

// Cuts `text` to at most `max` bytes without splitting a character.
void CutTo(std::string& text, size_t max) {
  if (text.size() <= max) return;
  size_t cut = max;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  text.resize(cut);
}

// Free text: made valid, then cut.
void Text(std::string& text, size_t max = kMaxTextBytes) {
  utf8::SanitizeInPlace(text);
  CutTo(text, max);
}

// A log: made valid, and only its last kMaxTaskLogBytes kept (what the scheduler keeps anyway).
void Log(std::string& log) {
  utf8::SanitizeInPlace(log);
  if (log.size() <= kMaxTaskLogBytes) return;
  size_t from = log.size() - kMaxTaskLogBytes;
  while (from < log.size() && (static_cast<unsigned char>(log[from]) & 0xC0) == 0x80) ++from;
  log.erase(0, from);
}

Status Gpus(std::vector<GpuInfo>& gpus) {
  TSR_RETURN_IF_ERROR(Count(gpus, "gpus", kMaxListEntries));
  for (GpuInfo& g : gpus) {
    Text(g.name);
    Text(g.driver_version);
    Text(g.runtime_version);
    Text(g.pci_bus_id);
  }
  return Status::Ok();
}

// A reading is shown and graphed, never trusted for placement beyond its fault: figures out of
// any real GPU's range become "not known" rather than refusing the heartbeat that carries them.
void Sample(GpuSample& g) {
  auto bound = [](auto& v, auto hi) {
    if (v < 0 || v > hi) v = -1;
  };
  bound(g.utilization_pct, 100);
  bound(g.memory_used_mb, int64_t{1} << 30);
  bound(g.memory_total_mb, int64_t{1} << 30);
  bound(g.temperature_c, 300);
  bound(g.sm_clock_mhz, 100000);
  bound(g.memory_clock_mhz, 100000);
  bound(g.ecc_uncorrected, int64_t{1} << 50);
  if (!(g.power_w >= 0 && g.power_w <= 100000)) g.power_w = -1;  // NaN too
  if (g.last_xid < 0) g.last_xid = 0;
  Text(g.fault);
}

}  // namespace

Status Check(Register& m) {
  TSR_RETURN_IF_ERROR(Name(m.name, "name"));
  if (m.name.empty()) return Status::InvalidArgument("name: must be 1..128 bytes");
  Text(m.hostname);
  Text(m.version);
  Text(m.os);
  Text(m.cpu_model);
  for (std::string* s : {&m.cloud.provider, &m.cloud.region, &m.cloud.zone, &m.cloud.instance_type,
                         &m.cloud.lifecycle}) {
    Text(*s);
  }
  TSR_RETURN_IF_ERROR(Gpus(m.gpus));
  if (m.slots_per_gpu != 0 && (m.slots_per_gpu < 2 || m.slots_per_gpu > kMaxSlotsPerGpu)) {
    return Status::InvalidArgument("slots_per_gpu: must be 0 (whole GPUs) or 2.." +
                                   std::to_string(kMaxSlotsPerGpu));
  }
  if (m.memory_mb_per_slot < 0) return Status::InvalidArgument("memory_mb_per_slot: must be >= 0");
  TSR_RETURN_IF_ERROR(Names(m.backends, "backends"));
  TSR_RETURN_IF_ERROR(Names(m.pools, "pools"));
  TSR_RETURN_IF_ERROR(Names(m.tags, "tags"));
  TSR_RETURN_IF_ERROR(Names(m.features, "features"));
  TSR_RETURN_IF_ERROR(Count(m.running, "running", kMaxTaskRefs));
  TSR_RETURN_IF_ERROR(Count(m.delivering, "delivering", kMaxTaskRefs));
  TSR_RETURN_IF_ERROR(Count(m.plugins, "plugins", kMaxPlugins));
  for (size_t i = 0; i < m.plugins.size(); ++i) {
    PluginOffer& p = m.plugins[i];
    const std::string at = "plugins[" + std::to_string(i) + "]";
    TSR_RETURN_IF_ERROR(Name(p.name, at + ".name"));
    TSR_RETURN_IF_ERROR(Names(p.capabilities, at + ".capabilities"));
    TSR_RETURN_IF_ERROR(Name(p.declaration, at + ".declaration", kMaxDeclarationBytes));
    Text(p.version);
    Text(p.executable);
    Text(p.description);
  }
  return Status::Ok();
}

Status Check(Enrol& m) {
  TSR_RETURN_IF_ERROR(Name(m.name, "name"));
  if (m.name.empty()) return Status::InvalidArgument("name: must be 1..128 bytes");
  return Name(m.public_key, "public_key");
}

Status Check(Enrolled& m) { return Name(m.name, "name"); }

Status Check(Reject& m) {
  Text(m.reason, kMaxMessageTextBytes);
  return Status::Ok();
}

Status Check(Heartbeat& m) {
  Text(m.disk_full, kMaxMessageTextBytes);
  TSR_RETURN_IF_ERROR(Count(m.gpu_samples, "gpu_samples", kMaxListEntries));
  for (GpuSample& g : m.gpu_samples) {
    if (g.index < 0 || static_cast<size_t>(g.index) >= kMaxListEntries) {
      return Status::InvalidArgument("gpu_samples: index " + std::to_string(g.index) +
                                     " is out of range");
    }
    Sample(g);
  }
  TSR_RETURN_IF_ERROR(Count(m.running, "running", kMaxTaskRefs));
  return Count(m.delivering, "delivering", kMaxTaskRefs);
}

Status Check(Assign& m) {
  constexpr size_t kAny = kMaxMessageBytes;
  TSR_RETURN_IF_ERROR(Name(m.scene_yaml, "scene_yaml", kAny));
  TSR_RETURN_IF_ERROR(Name(m.renderer, "renderer"));
  TSR_RETURN_IF_ERROR(Name(m.scene_name, "scene_name", kAny));
  TSR_RETURN_IF_ERROR(Name(m.resume_checkpoint, "resume_checkpoint"));
  TSR_RETURN_IF_ERROR(Count(m.gpus, "gpus", kMaxListEntries));
  TSR_RETURN_IF_ERROR(Count(m.acks, "acks", kMaxTaskRefs));
  if (m.resume_samples < 0) return Status::InvalidArgument("resume_samples: negative");
  if (m.checkpoint_interval_s < 0) {
    return Status::InvalidArgument("checkpoint_interval_s: negative");
  }
  if (m.gpu_memory_mb < 0) return Status::InvalidArgument("gpu_memory_mb: negative");
  for (const auto& [key, value] : m.settings) {
    TSR_RETURN_IF_ERROR(Name(key, "settings", kAny));
    TSR_RETURN_IF_ERROR(Name(value, "settings." + key, kAny));
  }
  for (const auto& [path, hash] : m.assets) {
    TSR_RETURN_IF_ERROR(Name(path, "assets", kAny));
    TSR_RETURN_IF_ERROR(Name(hash, "assets." + path));
  }
  TSR_RETURN_IF_ERROR(Name(m.output.dir, "output.dir", kAny));
  TSR_RETURN_IF_ERROR(Name(m.output.pattern, "output.pattern", kAny));
  return Names(m.output.formats, "output.formats");
}

Status Check(Progress& m) {
  Text(m.message);
  return Status::Ok();
}

Status Check(FrameResult& m) {
  Text(m.backend);
  TSR_RETURN_IF_ERROR(Names(m.channel_names, "channel_names", kMaxChannels));
  return Name(m.encoding, "encoding");
}

Status Check(FileResult& m) {
  // The path rules are the job spec's (spec::ValidateAssetPath), applied by the scheduler where
  // the name meets the file system; here only what any name must be.
  TSR_RETURN_IF_ERROR(Name(m.name, "name", 512));
  if (m.size < 0 || m.size > kMaxResultBytes) return Status::InvalidArgument("size: out of range");
  return Name(m.encoding, "encoding");
}

Status Check(TaskDone& m) {
  Log(m.log);
  if (m.files < 0 || m.files > kMaxOutputFiles)
    return Status::InvalidArgument("files: out of range");
  return Status::Ok();
}

Status Check(TaskFailed& m) {
  Text(m.message, kMaxMessageTextBytes);
  Log(m.log);
  for (const char* known :
       {kFailureRender, kFailureStorageFull, kFailureAsset, kFailureTimeout, kFailureNoSlot,
        kFailureSceneError, kFailureOutOfMemory, kFailureLicense, kFailureCrash}) {
    if (m.failure_class == known) return Status::Ok();
  }
  m.failure_class = kFailureRender;  // a class this scheduler does not know
  return Status::Ok();
}

Status Check(Handback& m) {
  Text(m.reason, kMaxMessageTextBytes);
  Log(m.log);
  return Status::Ok();
}

Status Check(Checkpoint& m) {
  if (m.samples_done < 0) return Status::InvalidArgument("samples_done: negative");
  return Status::Ok();
}

Status Check(PieceAck& m) {
  Text(m.error, kMaxMessageTextBytes);
  return Status::Ok();
}

Status Check(BlobRequest& m) { return Name(m.hash, "hash"); }

Status Check(BlobData& m) {
  TSR_RETURN_IF_ERROR(Name(m.hash, "hash"));
  Text(m.error, kMaxMessageTextBytes);
  return Status::Ok();
}

}  // namespace tessera::protocol
