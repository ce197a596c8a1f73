// The broker's bulk traffic: large worker results arriving in pieces (kChunk), and job asset
// blobs served to workers in pieces (kBlobRequest -> kBlobData). Both keep every message on the
// socket small, so heartbeats and other workers are never stuck behind a big transfer.

#include <spdlog/spdlog.h>

#include "scheduler/broker/broker.h"

namespace tessera::broker {

using protocol::MessageType;

void Broker::OnChunk(const std::string& identity, protocol::Envelope& env) {
  StatusOr<protocol::Chunk> chunk = env.As<protocol::Chunk>();
  if (!chunk.ok()) return DropMessage(identity, chunk.status().message());
  protocol::ChunkReceiver::Outcome out =
      transfers_.AddChunk(identity, *chunk, std::move(env.payload), std::move(env.extra));
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
  result_bytes_buffered_.store(static_cast<uint64_t>(transfers_.buffered_bytes()),
                               std::memory_order_relaxed);
  Send(identity, protocol::Encode(MessageType::kChunkAck, out.ack));
}

void Broker::OnBlobRequest(const std::string& identity, const protocol::Envelope& env) {
  StatusOr<protocol::BlobRequest> req = env.As<protocol::BlobRequest>();
  if (!req.ok()) return DropMessage(identity, req.status().message());
  Transfers::BlobPiece piece = transfers_.ServeBlob(*req);
  blob_bytes_served_.fetch_add(piece.payload.size(), std::memory_order_relaxed);
  Send(identity, protocol::Encode(MessageType::kBlobData, piece.data, std::move(piece.payload)));
}

}  // namespace tessera::broker
