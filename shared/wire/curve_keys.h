#pragma once
// CURVE keys for the scheduler <-> worker link (ZeroMQ's CurveZMQ: Curve25519 key pairs).
//
// Keys are 32 bytes. ZeroMQ takes them as Z85 text (40 characters), which is what this header
// hands out; people see and type them as hex (64 characters), which survives shells, YAML and
// cloud-init templates unquoted. ParseKey accepts either.
//
// Join tokens ("tsrj-" + 64 hex characters) are 32 random bytes that double as the secret key
// of a CURVE key pair: a new worker connects with that pair to enrol. The scheduler stores only
// the pair's public key, so its database never holds a usable token.

#include <string>

#include "shared/base/status.h"

namespace tessera::curve {

struct KeyPair {
  std::string public_key;  // Z85, 40 characters
  std::string secret_key;  // Z85, 40 characters
};

// A fresh key pair from libsodium's random source.
KeyPair Generate();

// `text` as a Z85 key: 40 Z85 characters or 64 hex digits; otherwise kInvalidArgument naming
// `field`.
StatusOr<std::string> ParseKey(const std::string& text, const std::string& field);
// 64 lowercase hex digits of a Z85 key.
std::string ToHex(const std::string& z85);

// Key files: two lines, "public: HEX" and "secret: HEX", created mode 0600 (written aside and
// renamed, so a crash never leaves half a key). A secret readable by others is refused.
StatusOr<KeyPair> LoadKeyFile(const std::string& path);
Status SaveKeyFile(const std::string& path, const KeyPair& keys);
// Loads `path`, or creates it with a fresh pair when it does not exist.
StatusOr<KeyPair> LoadOrCreateKeyFile(const std::string& path, bool* created = nullptr);

// A new join token, and the key pair it stands for (kInvalidArgument if it is not one).
std::string NewJoinToken();
StatusOr<KeyPair> JoinTokenKeys(const std::string& token);

}  // namespace tessera::curve
