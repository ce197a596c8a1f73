#pragma once
// The worker protocol's messages for bulk bytes (shared/wire/protocol.h has the whole
// conversation; shared/wire/piece_transfer.h moves the pieces): a large message in acknowledged
// pieces, and job assets fetched from the scheduler's blob store.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "shared/wire/msgpack.h"

namespace tessera::protocol {

// One piece of a message sent in pieces (shared/wire/piece_transfer.h): payload bytes
// [offset, offset + size) of `total`; the last piece also carries the original header and body
// frames.
struct Piece {
  uint64_t transfer = 0;  // the sender's id for this message
  int64_t offset = 0;
  int64_t total = 0;
};

struct PieceAck {
  uint64_t transfer = 0;
  int64_t received = 0;    // payload bytes the receiver holds
  int retry_after_ms = 0;  // > 0: not now (memory budget); start again from 0 after this long
  std::string error;       // non-empty: refused for good (the sender drops the message)
};

// A worker asks for bytes [offset, offset + length) of the blob with this SHA-256 (hex).
struct BlobRequest {
  std::string hash;
  int64_t offset = 0;
  int64_t length = 0;
};

// The answer: the payload holds the bytes (at most the length asked for). `error` non-empty:
// the scheduler has no such blob.
struct BlobData {
  std::string hash;
  int64_t offset = 0;
  int64_t total = 0;  // the blob's size
  std::string error;
};

// Missing fields take their defaults (forward compatibility); mistyped fields are errors.
TSR_MESSAGE_FIELDS(Piece, transfer, offset, total)
TSR_MESSAGE_FIELDS(PieceAck, transfer, received, retry_after_ms, error)
TSR_MESSAGE_FIELDS(BlobRequest, hash, offset, length)
TSR_MESSAGE_FIELDS(BlobData, hash, offset, total, error)

}  // namespace tessera::protocol
