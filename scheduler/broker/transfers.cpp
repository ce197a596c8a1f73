#include "scheduler/broker/transfers.h"

#include "scheduler/blobs/blob_store.h"
#include "shared/base/sha256.h"

namespace tessera::broker {

Transfers::Transfers(blobs::BlobStore* blobs, int64_t memory_budget)
    : blobs_(blobs), chunks_(memory_budget) {}

protocol::ChunkReceiver::Outcome Transfers::AddChunk(const std::string& peer,
                                                     const protocol::Chunk& chunk,
                                                     zmq::message_t piece,
                                                     std::vector<zmq::message_t> extra) {
  return chunks_.Add(peer, chunk, std::move(piece), std::move(extra));
}

void Transfers::Forget(const std::string& peer) { chunks_.Forget(peer); }

Transfers::BlobPiece Transfers::ServeBlob(const protocol::BlobRequest& request) const {
  BlobPiece piece;
  protocol::BlobData& data = piece.data;
  data.hash = request.hash;
  data.offset = request.offset;
  if (!IsSha256Hex(request.hash)) {
    data.error = "hash: not 64 lowercase hex digits";
  } else if (blobs_ == nullptr) {
    data.error = "this scheduler keeps no blobs";
  } else if (request.offset < 0 || request.length <= 0 || request.length > protocol::kChunkBytes) {
    data.error = "length: a piece is 1.." + std::to_string(protocol::kChunkBytes) + " bytes";
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
