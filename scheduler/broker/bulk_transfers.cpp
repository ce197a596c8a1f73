#include "scheduler/broker/bulk_transfers.h"

#include <spdlog/spdlog.h>

#include "scheduler/blobs/blob_store.h"
#include "scheduler/broker/broker_counters.h"
#include "scheduler/broker/outbox.h"
#include "shared/base/sha256.h"

namespace tessera::broker {

BulkTransfers::BulkTransfers(blobs::BlobStore* blobs, int64_t memory_budget)
    : blobs_(blobs), pieces_(memory_budget) {}

std::optional<protocol::PieceReceiver::Outcome> BulkTransfers::OnPiece(Pass& pass,
                                                                       Boundary& boundary,
                                                                       const std::string& identity,
                                                                       protocol::Envelope& env) {
  StatusOr<protocol::Piece> piece = env.As<protocol::Piece>();
  if (!piece.ok()) {
    boundary.DropMessage(pass, identity, piece.status().message());
    return std::nullopt;
  }
  protocol::PieceReceiver::Outcome out =
      AddPiece(identity, *piece, std::move(env.payload), std::move(env.extra));
  if (!out.ack.error.empty()) {
    boundary.noisy().LogAt(pass.now, spdlog::level::warn, "piece refused",
                           "refused a message sent in pieces: {}", out.ack.error);
  }
  pass.counters.result_bytes_buffered.store(static_cast<uint64_t>(buffered_bytes()),
                                            std::memory_order_relaxed);
  return out;
}

void BulkTransfers::OnBlobRequest(Pass& pass, Boundary& boundary, const std::string& identity,
                                  const protocol::Envelope& env) {
  StatusOr<protocol::BlobRequest> req = env.As<protocol::BlobRequest>();
  if (!req.ok()) return boundary.DropMessage(pass, identity, req.status().message());
  BlobPiece piece = ServeBlob(*req);
  pass.counters.blob_bytes_served.fetch_add(piece.payload.size(), std::memory_order_relaxed);
  pass.outbox.Send(identity, protocol::Encode(protocol::MessageType::kBlobData, piece.data,
                                              std::move(piece.payload)));
}

protocol::PieceReceiver::Outcome BulkTransfers::AddPiece(const std::string& peer,
                                                         const protocol::Piece& piece,
                                                         zmq::message_t bytes,
                                                         std::vector<zmq::message_t> extra) {
  return pieces_.Add(peer, piece, std::move(bytes), std::move(extra));
}

void BulkTransfers::DropPeer(const std::string& peer) { pieces_.Forget(peer); }

BulkTransfers::BlobPiece BulkTransfers::ServeBlob(const protocol::BlobRequest& request) const {
  BlobPiece piece;
  protocol::BlobData& data = piece.data;
  data.hash = request.hash;
  data.offset = request.offset;
  if (!IsSha256Hex(request.hash)) {
    data.error = "hash: not 64 lowercase hex digits";
  } else if (blobs_ == nullptr) {
    data.error = "this scheduler keeps no blobs";
  } else if (request.offset < 0 || request.length <= 0 || request.length > protocol::kPieceBytes) {
    data.error = "length: a piece is 1.." + std::to_string(protocol::kPieceBytes) + " bytes";
  } else if (StatusOr<int64_t> size = blobs_->Size(request.hash); !size.ok()) {
    data.error = size.status().message();
  } else {
    data.total = *size;
    StatusOr<std::string> bytes = blobs_->Read(request.hash, request.offset, request.length);
    if (bytes.ok()) {
      piece.payload = zmq::message_t(bytes->data(), bytes->size());
    } else {
      data.error = bytes.status().message();
    }
  }
  return piece;
}

}  // namespace tessera::broker
