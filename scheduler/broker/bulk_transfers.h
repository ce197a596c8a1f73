#pragma once
// BulkTransfers: the broker's bulk traffic, kept apart from the messages that steer the farm.
// Large worker results arrive as kPiece messages and are reassembled here (within a memory budget
// for all workers together); job assets and checkpoints are served to workers one piece per
// kBlobRequest. Both keep every message on the socket small, so heartbeats and other workers
// are never stuck behind a big transfer. A reassembled result is handed back to the loop, which
// handles it as if it had come in one piece.
//
// Threads: owned by the broker's poll loop; broker thread only.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "scheduler/broker/boundary.h"
#include "scheduler/broker/pass.h"
#include "shared/wire/piece_transfer.h"
#include "shared/wire/protocol.h"

namespace tessera::blobs {
class BlobStore;
}

namespace tessera::broker {

class BulkTransfers {
 public:
  // `blobs` may be null (asset requests are then answered with an error). `memory_budget`: the
  // bytes of partly received results held at most, all workers together.
  BulkTransfers(blobs::BlobStore* blobs, int64_t memory_budget);

  // A kPiece message from `identity`: nullopt when it is not one (dropped at the boundary);
  // else the acknowledgement to send back, and the whole message once its last piece is here.
  std::optional<protocol::PieceReceiver::Outcome> OnPiece(Pass& pass, Boundary& boundary,
                                                          const std::string& identity,
                                                          protocol::Envelope& env);
  // A kBlobRequest: the piece asked for (or why not) goes back as kBlobData.
  void OnBlobRequest(Pass& pass, Boundary& boundary, const std::string& identity,
                     const protocol::Envelope& env);

  // A piece of a large result from `peer`: the acknowledgement to send back, and the whole
  // message ([header, body, payload]) once its last piece is here.
  protocol::PieceReceiver::Outcome AddPiece(const std::string& peer, const protocol::Piece& piece,
                                            zmq::message_t bytes,
                                            std::vector<zmq::message_t> extra);
  // The peer left (or will send its results again): its partial results are dropped.
  void DropPeer(const std::string& peer);
  int64_t buffered_bytes() const { return pieces_.buffered_bytes(); }

  // A piece of a stored blob to send as kBlobData: the bytes asked for (at most
  // kPieceBytes), or data.error saying why not.
  struct BlobPiece {
    protocol::BlobData data;
    zmq::message_t payload;
  };
  BlobPiece ServeBlob(const protocol::BlobRequest& request) const;

 private:
  blobs::BlobStore* blobs_;
  protocol::PieceReceiver pieces_;
};

}  // namespace tessera::broker
