#pragma once
// Bulk bytes over the worker protocol without stalling it: a message whose payload is larger
// than kPieceBytes (a frame result, a hand-back checkpoint) travels as a sequence of kPiece
// messages with credit-based flow control (zguide chapter 7, "file transfer"), and a blob the
// scheduler serves travels as kBlobData pieces the worker asks for one window at a time.
//
// A message sent in pieces (worker -> scheduler):
//   kPiece{transfer, offset, total} + payload piece, in order. The last piece (offset + size ==
//   total) also carries the original message's header and body frames, so the receiver rebuilds
//   [header, body, payload] and handles it like any other message.
//   kPieceAck{transfer, received} (scheduler -> worker) after every piece: the sender keeps at
//   most kPieceWindow pieces unacknowledged, so heartbeats and other messages from the same
//   worker wait behind at most kPieceWindow * kPieceBytes, and other workers are served between
//   pieces (the ROUTER fair-queues its peers).
//   A receiver that cannot take the transfer now (memory budget) answers retry_after_ms and
//   forgets it: the sender starts it again from 0 after that long. One it must refuse (above
//   kMaxResultBytes, out of order) answers `error`: the sender drops the message and logs why.
//
// Limits: the scheduler accepts no ZeroMQ message above kMaxMessageBytes (ZMQ_MAXMSGSIZE: a peer
// that sends one is disconnected), and no reassembled payload above kMaxResultBytes.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "shared/wire/protocol.h"

namespace tessera::protocol {

// Payloads above this many bytes are sent in pieces of this size.
inline constexpr int64_t kPieceBytes = 1 << 20;
// Pieces a sender may have unacknowledged.
inline constexpr int kPieceWindow = 4;

// Sends one message at a time in pieces (the agent's I/O thread owns one).
class PieceSender {
 public:
  // Whether an encoded message ([header, body, payload]) must go in pieces.
  static bool NeedsPieces(const std::vector<zmq::message_t>& frames);

  bool active() const { return message_.has_value(); }
  // Starts sending `frames` (NeedsPieces must be true). Only when !active().
  void Start(std::vector<zmq::message_t> frames);
  // Sends pieces while the window allows; `send` returns false when the socket would block
  // (the piece is offered again on the next call).
  void Pump(const std::function<bool(std::vector<zmq::message_t>&)>& send,
            std::chrono::steady_clock::time_point now);
  // Applies the receiver's acknowledgement. Returns an error text when the receiver refused the
  // message (it is dropped); the transfer ends when every piece is acknowledged.
  std::optional<std::string> OnAck(const PieceAck& ack, std::chrono::steady_clock::time_point now);
  // The connection is gone: the message is dropped (the caller re-sends from its spool).
  void Reset() { message_.reset(); }

 private:
  std::optional<std::vector<zmq::message_t>> message_;  // header, body, payload
  uint64_t transfers_ = 0;                              // ids handed out so far
  uint64_t transfer_ = 0;
  int64_t sent_ = 0;   // bytes of the payload sent
  int64_t acked_ = 0;  // bytes of the payload acknowledged
  std::chrono::steady_clock::time_point resume_at_{};
};

// Reassembles messages sent in pieces, one transfer per peer at a time (the scheduler's broker
// thread owns one). Memory: at most `memory_budget` bytes of payload are held across all peers.
class PieceReceiver {
 public:
  explicit PieceReceiver(int64_t memory_budget) : budget_(memory_budget) {}

  struct Outcome {
    PieceAck ack;  // to send back to the peer
    // The whole message ([header, body, payload]) once its last piece arrived.
    std::optional<std::vector<zmq::message_t>> message;
  };
  // `piece` is the decoded kPiece and `bytes` its payload; `extra` the frames after its payload
  // (the original header and body on the last piece).
  Outcome Add(const std::string& peer, const Piece& piece, zmq::message_t bytes,
              std::vector<zmq::message_t> extra);
  // The peer left: its partial transfer is dropped.
  void Forget(const std::string& peer);
  int64_t buffered_bytes() const { return buffered_; }

 private:
  struct Partial {
    uint64_t transfer = 0;
    int64_t received = 0;
    zmq::message_t payload;
  };
  int64_t budget_;
  int64_t buffered_ = 0;
  std::map<std::string, Partial> partials_;
};

}  // namespace tessera::protocol
