#include "shared/protocol.h"

#include <cstring>

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
    case MessageType::kChunk:
      return "CHUNK";
    case MessageType::kBlobRequest:
      return "BLOB_REQUEST";
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
    case MessageType::kChunkAck:
      return "CHUNK_ACK";
    case MessageType::kBlobData:
      return "BLOB_DATA";
  }
  return "UNKNOWN_TYPE";
}

namespace {
bool IsKnownType(uint8_t t) {
  return (t >= static_cast<uint8_t>(MessageType::kRegister) &&
          t <= static_cast<uint8_t>(MessageType::kBlobRequest)) ||
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
  // 2 or 3 frames; the last piece of a chunked message carries 2 more (the original header and
  // body).
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
  if (frames.size() == first + 5 && env.type != MessageType::kChunk) {
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
