#include "shared/wire/piece_transfer.h"

#include <algorithm>
#include <cstring>

namespace tessera::protocol {
namespace {

// How long a peer waits before starting again when the receiver's memory budget is full.
constexpr int kBusyRetryMs = 200;

zmq::message_t Copy(const zmq::message_t& m) { return zmq::message_t(m.data(), m.size()); }

}  // namespace

bool PieceSender::NeedsPieces(const std::vector<zmq::message_t>& frames) {
  return frames.size() == 3 && static_cast<int64_t>(frames[2].size()) > kPieceBytes;
}

void PieceSender::Start(std::vector<zmq::message_t> frames) {
  message_ = std::move(frames);
  transfer_ = ++transfers_;
  sent_ = acked_ = 0;
  resume_at_ = {};
}

void PieceSender::Pump(const std::function<bool(std::vector<zmq::message_t>&)>& send,
                       std::chrono::steady_clock::time_point now) {
  if (!message_ || now < resume_at_) return;
  const zmq::message_t& payload = (*message_)[2];
  const auto total = static_cast<int64_t>(payload.size());
  while (sent_ < total && sent_ - acked_ < kPieceWindow * kPieceBytes) {
    const int64_t size = std::min(kPieceBytes, total - sent_);
    std::vector<zmq::message_t> piece =
        Encode(MessageType::kPiece, Piece{transfer_, sent_, total},
               zmq::message_t(payload.data<char>() + sent_, static_cast<size_t>(size)));
    if (sent_ + size == total) {
      piece.push_back(Copy((*message_)[0]));
      piece.push_back(Copy((*message_)[1]));
    }
    if (!send(piece)) return;
    sent_ += size;
  }
}

std::optional<std::string> PieceSender::OnAck(const PieceAck& ack,
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

PieceReceiver::Outcome PieceReceiver::Add(const std::string& peer, const Piece& piece,
                                          zmq::message_t bytes, std::vector<zmq::message_t> extra) {
  Outcome out;
  out.ack.transfer = piece.transfer;
  const auto size = static_cast<int64_t>(bytes.size());
  auto refuse = [&](std::string error) {
    Forget(peer);
    out.ack.error = std::move(error);
    return std::move(out);
  };
  if (piece.total <= 0 || piece.total > kMaxResultBytes) {
    return refuse("a payload of " + std::to_string(piece.total) +
                  " bytes sent in pieces is outside 1.." + std::to_string(kMaxResultBytes) +
                  " (the scheduler's result limit): split the frame into tiles");
  }
  if (size <= 0 || size > kPieceBytes || piece.offset < 0 || piece.offset + size > piece.total) {
    return refuse("piece [" + std::to_string(piece.offset) + ", +" + std::to_string(size) +
                  ") does not fit a payload of " + std::to_string(piece.total) + " bytes");
  }
  auto it = partials_.find(peer);
  if (piece.offset == 0) {
    Forget(peer);  // a new transfer replaces whatever this peer left unfinished
    if (buffered_ > 0 && buffered_ + piece.total > budget_) {
      out.ack.retry_after_ms = kBusyRetryMs;
      return out;
    }
    Partial p;
    p.transfer = piece.transfer;
    p.payload = zmq::message_t(static_cast<size_t>(piece.total));
    buffered_ += piece.total;
    it = partials_.emplace(peer, std::move(p)).first;
  } else if (it == partials_.end() || it->second.transfer != piece.transfer ||
             it->second.received != piece.offset ||
             static_cast<int64_t>(it->second.payload.size()) != piece.total) {
    // A piece of a transfer this side no longer holds (or out of order): start again.
    if (it != partials_.end() && it->second.transfer == piece.transfer) Forget(peer);
    out.ack.retry_after_ms = 1;
    return out;
  }
  Partial& p = it->second;
  std::memcpy(p.payload.data<char>() + piece.offset, bytes.data(), bytes.size());
  p.received += size;
  out.ack.received = p.received;
  if (p.received < piece.total) return out;
  // The last piece: it must bring the original header and body.
  if (extra.size() != 2 || extra[0].size() != 4 ||
      static_cast<const uint8_t*>(extra[0].data())[3] ==
          static_cast<uint8_t>(MessageType::kPiece)) {
    return refuse("the last piece does not carry the original message's header and body");
  }
  std::vector<zmq::message_t> message;
  message.push_back(std::move(extra[0]));
  message.push_back(std::move(extra[1]));
  message.push_back(std::move(p.payload));
  buffered_ -= piece.total;
  partials_.erase(it);
  out.message = std::move(message);
  return out;
}

void PieceReceiver::Forget(const std::string& peer) {
  auto it = partials_.find(peer);
  if (it == partials_.end()) return;
  buffered_ -= static_cast<int64_t>(it->second.payload.size());
  partials_.erase(it);
}

}  // namespace tessera::protocol
