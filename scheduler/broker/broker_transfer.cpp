// The broker's bulk traffic: large worker results arriving in pieces (kChunk), and job asset
// blobs served to workers in pieces (kBlobRequest -> kBlobData). Both keep every message on the
// socket small, so heartbeats and other workers are never stuck behind a big transfer.

#include <spdlog/spdlog.h>

#include "scheduler/blobs/blob_store.h"
#include "scheduler/broker/broker.h"
#include "shared/chunked_transfer.h"
#include "shared/sha256.h"

namespace tessera::broker {

using protocol::MessageType;

void Broker::OnChunk(const std::string& identity, protocol::Envelope& env) {
  StatusOr<protocol::Chunk> chunk = env.As<protocol::Chunk>();
  if (!chunk.ok()) return DropMessage(identity, chunk.status().message());
  protocol::ChunkReceiver::Outcome out =
      chunks_.Add(identity, *chunk, std::move(env.payload), std::move(env.extra));
  if (!out.ack.error.empty()) {
    noisy_.Log(spdlog::level::warn, "chunk refused", "refused a chunked message: {}",
               out.ack.error);
  }
  if (out.message) {
    // The whole message is here: handle it as if it had come in one piece.
    std::vector<zmq::message_t> frames;
    frames.reserve(4);
    frames.emplace_back(identity.data(), identity.size());
    for (zmq::message_t& f : *out.message) frames.push_back(std::move(f));
    HandleMessage(frames);
  }
  result_bytes_buffered_.store(static_cast<uint64_t>(chunks_.buffered_bytes()),
                               std::memory_order_relaxed);
  Send(identity, protocol::Encode(MessageType::kChunkAck, out.ack));
}

void Broker::OnBlobRequest(const std::string& identity, const protocol::Envelope& env) {
  StatusOr<protocol::BlobRequest> req = env.As<protocol::BlobRequest>();
  if (!req.ok()) return DropMessage(identity, req.status().message());
  protocol::BlobData data;
  data.hash = req->hash;
  data.offset = req->offset;
  zmq::message_t payload;
  if (!IsSha256Hex(req->hash)) {
    data.error = "hash: not 64 lowercase hex digits";
  } else if (options_.blobs == nullptr) {
    data.error = "this scheduler keeps no blobs";
  } else if (req->offset < 0 || req->length <= 0 || req->length > protocol::kChunkBytes) {
    data.error = "length: a piece is 1.." + std::to_string(protocol::kChunkBytes) + " bytes";
  } else if (StatusOr<int64_t> size = options_.blobs->Size(req->hash); !size.ok()) {
    data.error = size.status().message();
  } else {
    data.total = *size;
    StatusOr<std::string> bytes = options_.blobs->Read(req->hash, req->offset, req->length);
    if (bytes.ok()) {
      payload = zmq::message_t(bytes->data(), bytes->size());
      blob_bytes_served_.fetch_add(bytes->size(), std::memory_order_relaxed);
    } else {
      data.error = bytes.status().message();
    }
  }
  Send(identity, protocol::Encode(MessageType::kBlobData, data, std::move(payload)));
}

}  // namespace tessera::broker
