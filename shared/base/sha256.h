#pragma once
// SHA-256 (libsodium) for content-addressed blobs: job assets are stored and fetched by the hex
// digest of their bytes, and verified against it on arrival.

#include <sodium.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "shared/base/status.h"

namespace tessera {

// Incremental hashing of a stream of bytes.
class Sha256 {
 public:
  Sha256();
  void Update(const void* data, size_t size);
  void Update(std::string_view bytes) { Update(bytes.data(), bytes.size()); }
  // The digest as 64 lowercase hex characters; the object is spent afterwards.
  std::string HexDigest();

 private:
  crypto_hash_sha256_state state_;
};

std::string Sha256Hex(std::string_view bytes);
// The digest of a file's contents, read in pieces.
StatusOr<std::string> Sha256File(const std::string& path);
// 64 lowercase hex characters: the only form blob names take (so a name is never a path).
bool IsSha256Hex(std::string_view text);

}  // namespace tessera
