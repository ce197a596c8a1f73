#include "shared/base/sha256.h"

#include <fstream>
#include <vector>

namespace tessera {

Sha256::Sha256() {
  [[maybe_unused]] static const int initialised = sodium_init();
  crypto_hash_sha256_init(&state_);
}

void Sha256::Update(const void* data, size_t size) {
  crypto_hash_sha256_update(&state_, static_cast<const unsigned char*>(data), size);
}

std::string Sha256::HexDigest() {
  unsigned char digest[crypto_hash_sha256_BYTES];
  crypto_hash_sha256_final(&state_, digest);
  std::string hex(2 * sizeof(digest) + 1, '\0');
  sodium_bin2hex(hex.data(), hex.size(), digest, sizeof(digest));
  hex.pop_back();
  return hex;
}

std::string Sha256Hex(std::string_view bytes) {
  Sha256 h;
  h.Update(bytes);
  return h.HexDigest();
}

StatusOr<std::string> Sha256File(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(path + ": cannot open");
  Sha256 h;
  std::vector<char> buffer(1 << 20);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    if (in.gcount() > 0) h.Update(buffer.data(), static_cast<size_t>(in.gcount()));
  }
  if (in.bad()) return Status::Internal(path + ": read error");
  return h.HexDigest();
}

bool IsSha256Hex(std::string_view text) {
  if (text.size() != 64) return false;
  for (char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace tessera
