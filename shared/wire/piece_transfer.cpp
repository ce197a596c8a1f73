#include "shared/wire/piece_transfer.h"

#include <algorithm>
#include <cstring>

namespace tessera::protocol {
namespace {

// How long a peer waits before starting again when the receiver's memory budget is full.
constexpr int kBusyRetryMs = 200;

zmq::message_t Copy(const zmq::message_t& m) { return zmq::message_t(m.data(), m.size()); }

}  // namespace

bool ChunkSender::NeedsChunks(const std::vector<zmq::message_t>& frames) {
  return frames.size() == 3 && static_cast<int64_t>(frames[2].size()) > kChunkBytes;
}

void ChunkSender::Start(std::vector<zmq::message_t> frames) {
  message_ = std::move(frames);
  transfer_ = ++transfers_;
  sent_ = acked_ = 0;
  resume_at_ = {};
}

void ChunkSender::Pump(const std::function<bool(std::vector<zmq::message_t>&)>& send,
                       std::chrono::steady_clock::time_point now) {
  if (!message_ || now < resume_at_) return;
  const zmq::message_t& payload = (*message_)[2];
  const auto total = static_cast<int64_t>(payload.size());
  while (sent_ < total && sent_ - acked_ < kChunkWindow * kChunkBytes) {
    const int64_t size = std::min(kChunkBytes, total - sent_);
    std::vector<zmq::message_t> piece =
        Encode(MessageType::kChunk, Chunk{transfer_, sent_, total},
               zmq::message_t(payload.data<char>() + sent_, static_cast<size_t>(size)));
    if (sent_ + size == total) {
      piece.push_back(Copy((*message_)[0]));
      piece.push_back(Copy((*message_)[1]));
    }
    if (!send(piece)) return;
    sent_ += size;
  }
}

std::optional<std::string> ChunkSender::OnAck(const ChunkAck& ack,
                                              std::chrono::steady_clock::time_point now) {
  if (!message_ || ack.transfer != transfer_) return std::nullopt;  // an earlier transfer's
  if (!ack.error.empty()) {
    message_.reset();
    return ack.error;
  }
  if (ack.retry_after_ms > 0) {
    // The receiver forgot this transfer: start again, under a new id so that pieces still in
    // flight are not mistaken for the new ones.
    transfer_ = ++transfers_;
    sent_ = acked_ = 0;
    resume_at_ = now + std::chrono::milliseconds(ack.retry_after_ms);
    return std::nullopt;
  }
  acked_ = std::max(acked_, ack.received);
  if (acked_ >= static_cast<int64_t>((*message_)[2].size())) message_.reset();  // delivered
  return std::nullopt;
}

ChunkReceiver::Outcome ChunkReceiver::Add(const std::string& peer, const Chunk& chunk,
                                          zmq::message_t piece, std::vector<zmq::message_t> extra) {
  Outcome out;
  out.ack.transfer = chunk.transfer;
  const auto size = static_cast<int64_t>(piece.size());
  auto refuse = [&](std::string error) {
    Forget(peer);
    out.ack.error = std::move(error);
    return std::move(out);
  };
  if (chunk.total <= 0 || chunk.total > kMaxResultBytes) {
    return refuse("a chunked payload of " + std::to_string(chunk.total) + " bytes is outside 1.." +
                  std::to_string(kMaxResultBytes) +
                  " (the scheduler's result limit): split the frame into tiles");
  }
  if (size <= 0 || size > kChunkBytes || chunk.offset < 0 || chunk.offset + size > chunk.total) {
    return refuse("chunk [" + std::to_string(chunk.offset) + ", +" + std::to_string(size) +
                  ") does not fit a payload of " + std::to_string(chunk.total) + " bytes");
  }
  auto it = partials_.find(peer);
  if (chunk.offset == 0) {
    Forget(peer);  // a new transfer replaces whatever this peer left unfinished
    if (buffered_ > 0 && buffered_ + chunk.total > budget_) {
      out.ack.retry_after_ms = kBusyRetryMs;
      return out;
    }
    Partial p;
    p.transfer = chunk.transfer;
    p.payload = zmq::message_t(static_cast<size_t>(chunk.total));
    buffered_ += chunk.total;
    it = partials_.emplace(peer, std::move(p)).first;
  } else if (it == partials_.end() || it->second.transfer != chunk.transfer ||
             it->second.received != chunk.offset ||
             static_cast<int64_t>(it->second.payload.size()) != chunk.total) {
    // A piece of a transfer this side no longer holds (or out of order): start again.
    if (it != partials_.end() && it->second.transfer == chunk.transfer) Forget(peer);
    out.ack.retry_after_ms = 1;
    return out;
  }
  Partial& p = it->second;
  std::memcpy(p.payload.data<char>() + chunk.offset, piece.data(), piece.size());
  p.received += size;
  out.ack.received = p.received;
  if (p.received < chunk.total) return out;
  // The last piece: it must bring the original header and body.
  if (extra.size() != 2 || extra[0].size() != 4 ||
      static_cast<const uint8_t*>(extra[0].data())[3] ==
          static_cast<uint8_t>(MessageType::kChunk)) {
    return refuse("the last chunk does not carry the original message's header and body");
  }
  std::vector<zmq::message_t> message;
  message.push_back(std::move(extra[0]));
  message.push_back(std::move(extra[1]));
  message.push_back(std::move(p.payload));
  buffered_ -= chunk.total;
  partials_.erase(it);
  out.message = std::move(message);
  return out;
}

void ChunkReceiver::Forget(const std::string& peer) {
  auto it = partials_.find(peer);
  if (it == partials_.end()) return;
  buffered_ -= static_cast<int64_t>(it->second.payload.size());
  partials_.erase(it);
}

}  // namespace tessera::protocol
