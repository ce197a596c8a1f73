// Fuzzes the wire protocol as the daemons read it (shared/wire/protocol.h): the input is split into
// ZeroMQ frames and decoded as an envelope, and its body is read as EVERY message type, the way
// the broker and the worker read them (Envelope::As: MessagePack, then the boundary checks).
// What reads must be safe downstream -- its JSON text (what the store and the API write) never
// throws -- and must round-trip: encoded again and read back, it encodes to the same bytes.
//
// Input layout: the first byte picks how many frames to cut (and the header's type for the
// envelope path); each frame is prefixed by one length byte; whatever is left is the body.

#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "shared/wire/piece_transfer.h"
#include "shared/wire/protocol.h"

namespace {

using namespace tessera::protocol;

template <typename T>
void ReadAs(MessageType type, const void* body, size_t size) {
  std::vector<zmq::message_t> frames =
      EncodeFrames(type, std::string_view(static_cast<const char*>(body), size), zmq::message_t());
  tessera::StatusOr<Envelope> env = Decode(frames);
  if (!env.ok()) return;
  tessera::StatusOr<T> message = env->template As<T>();
  if (!message.ok()) return;
  // Checked at the boundary: nothing in it can make JSON serialisation throw.
  try {
    (void)nlohmann::json(*message).dump();
  } catch (const std::exception&) {
    std::abort();
  }
  std::vector<zmq::message_t> again = Encode(type, *message);
  const std::string encoded = again[1].to_string();  // (Decode takes the frames' bytes)
  tessera::StatusOr<Envelope> env2 = Decode(again);
  if (!env2.ok()) std::abort();
  tessera::StatusOr<T> message2 = env2->template As<T>();
  if (!message2.ok()) std::abort();
  std::vector<zmq::message_t> third = Encode(type, *message2);
  if (third.size() != 2 || third[1].to_string() != encoded) std::abort();
}

void ReadEveryType(const uint8_t* body, size_t size) {
  ReadAs<Register>(MessageType::kRegister, body, size);
  ReadAs<Heartbeat>(MessageType::kHeartbeat, body, size);
  ReadAs<Progress>(MessageType::kProgress, body, size);
  ReadAs<FrameResult>(MessageType::kFrameResult, body, size);
  ReadAs<TaskDone>(MessageType::kTaskDone, body, size);
  ReadAs<TaskFailed>(MessageType::kTaskFailed, body, size);
  ReadAs<Enrol>(MessageType::kEnrol, body, size);
  ReadAs<Handback>(MessageType::kHandback, body, size);
  ReadAs<Piece>(MessageType::kPiece, body, size);
  ReadAs<BlobRequest>(MessageType::kBlobRequest, body, size);
  ReadAs<Welcome>(MessageType::kWelcome, body, size);
  ReadAs<Reject>(MessageType::kReject, body, size);
  ReadAs<Assign>(MessageType::kAssign, body, size);
  ReadAs<Cancel>(MessageType::kCancel, body, size);
  ReadAs<Enrolled>(MessageType::kEnrolled, body, size);
  ReadAs<ResultAck>(MessageType::kResultAck, body, size);
  ReadAs<PieceAck>(MessageType::kPieceAck, body, size);
  ReadAs<BlobData>(MessageType::kBlobData, body, size);
}

// The input as frames, as a peer could send them: the envelope decoder and, for the pieces of
// a message sent in pieces, the receiver that reassembles them.
void DecodeFrames(const uint8_t* data, size_t size) {
  if (size == 0) return;
  const int count = 1 + data[0] % 5;
  size_t at = 1;
  std::vector<zmq::message_t> frames;
  for (int i = 0; i + 1 < count && at < size; ++i) {
    const size_t n = std::min<size_t>(data[at], size - at - 1);
    frames.emplace_back(data + at + 1, n);
    at += 1 + n;
  }
  frames.emplace_back(data + std::min(at, size), size - std::min(at, size));
  tessera::StatusOr<Envelope> env = Decode(frames);
  if (!env.ok() || env->type != MessageType::kPiece) return;
  tessera::StatusOr<Piece> piece = env->As<Piece>();
  if (!piece.ok()) return;
  PieceReceiver receiver(int64_t{1} << 20);
  PieceReceiver::Outcome out =
      receiver.Add("peer", *piece, std::move(env->payload), std::move(env->extra));
  if (out.message) {
    std::vector<zmq::message_t> whole = std::move(*out.message);
    (void)Decode(whole);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ReadEveryType(data, size);
  DecodeFrames(data, size);
  return 0;
}
