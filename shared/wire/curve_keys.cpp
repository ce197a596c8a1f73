#include "shared/wire/curve_keys.h"

#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include <array>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>

#include "shared/base/file_io.h"

namespace tessera::curve {
namespace {

constexpr size_t kKeyBytes = 32;
constexpr const char* kTokenPrefix = "tsrj-";

std::string HexEncode(const uint8_t* bytes, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    out.push_back(digits[bytes[i] >> 4]);
    out.push_back(digits[bytes[i] & 15]);
  }
  return out;
}

bool HexDecode(const std::string& text, std::array<uint8_t, kKeyBytes>* out) {
  if (text.size() != 2 * kKeyBytes) return false;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  for (size_t i = 0; i < kKeyBytes; ++i) {
    int hi = nibble(text[2 * i]), lo = nibble(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    (*out)[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return true;
}

std::string Z85(const std::array<uint8_t, kKeyBytes>& bytes) {
  char text[41];
  zmq_z85_encode(text, bytes.data(), bytes.size());
  return std::string(text, 40);
}

// The public half of a Z85 secret key.
StatusOr<std::string> PublicOf(const std::string& secret_z85) {
  char public_z85[41];
  if (zmq_curve_public(public_z85, secret_z85.c_str()) != 0) {
    return Status::Internal(std::string("cannot derive a CURVE public key: ") +
                            zmq_strerror(zmq_errno()));
  }
  return std::string(public_z85, 40);
}

std::array<uint8_t, kKeyBytes> RandomBytes() {
  // CURVE needs libzmq built with libsodium; its key generation is the farm's random source.
  char public_z85[41], secret_z85[41];
  std::array<uint8_t, kKeyBytes> bytes{};
  if (zmq_curve_keypair(public_z85, secret_z85) == 0) {
    zmq_z85_decode(bytes.data(), secret_z85);
    return bytes;
  }
  std::random_device rd;  // only if CURVE is missing, where nothing will use the bytes anyway
  for (auto& b : bytes) b = static_cast<uint8_t>(rd());
  return bytes;
}

}  // namespace

KeyPair Generate() {
  char public_z85[41], secret_z85[41];
  TSR_CHECK(zmq_curve_keypair(public_z85, secret_z85) == 0);  // libzmq without CURVE: a bug
  return {std::string(public_z85, 40), std::string(secret_z85, 40)};
}

StatusOr<std::string> ParseKey(const std::string& text, const std::string& field) {
  std::array<uint8_t, kKeyBytes> bytes{};
  if (HexDecode(text, &bytes)) return Z85(bytes);
  if (text.size() == 40 && zmq_z85_decode(bytes.data(), text.c_str()) != nullptr) return text;
  return Status::InvalidArgument(field +
                                 ": not a CURVE key (expected 64 hex digits or 40 Z85 characters)");
}

std::string ToHex(const std::string& z85) {
  std::array<uint8_t, kKeyBytes> bytes{};
  if (z85.size() != 40 || zmq_z85_decode(bytes.data(), z85.c_str()) == nullptr) return "";
  return HexEncode(bytes.data(), bytes.size());
}

StatusOr<KeyPair> LoadKeyFile(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return Status::NotFound(path + ": " + std::strerror(errno));
  }
  if (st.st_mode & (S_IRWXG | S_IRWXO)) {
    return Status::FailedPrecondition(path +
                                      ": the secret key is readable by others; chmod 600 it");
  }
  std::ifstream in(path);
  if (!in) return Status::NotFound("cannot read " + path);
  KeyPair keys;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    std::string value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(" \t"));
    value.erase(value.find_last_not_of(" \t\r") + 1);
    if (name == "public") {
      TSR_ASSIGN_OR_RETURN(keys.public_key, ParseKey(value, path + ": public"));
    } else if (name == "secret") {
      TSR_ASSIGN_OR_RETURN(keys.secret_key, ParseKey(value, path + ": secret"));
    }
  }
  if (keys.secret_key.empty()) return Status::InvalidArgument(path + ": no secret key");
  TSR_ASSIGN_OR_RETURN(std::string derived, PublicOf(keys.secret_key));
  if (!keys.public_key.empty() && keys.public_key != derived) {
    return Status::InvalidArgument(path + ": public key does not belong to the secret key");
  }
  keys.public_key = derived;
  return keys;
}

Status SaveKeyFile(const std::string& path, const KeyPair& keys) {
  const std::string text =
      "# Tessera CURVE key pair. The secret half is this machine's identity: keep it private.\n"
      "public: " +
      ToHex(keys.public_key) + "\nsecret: " + ToHex(keys.secret_key) + "\n";
  return file_io::WriteAtomically(path, {text}, 0600);
}

StatusOr<KeyPair> LoadOrCreateKeyFile(const std::string& path, bool* created) {
  if (created) *created = false;
  StatusOr<KeyPair> keys = LoadKeyFile(path);
  if (keys.ok() || keys.status().code() != StatusCode::kNotFound ||
      ::access(path.c_str(), F_OK) == 0) {
    return keys;
  }
  KeyPair fresh = Generate();
  TSR_RETURN_IF_ERROR(SaveKeyFile(path, fresh));
  if (created) *created = true;
  return fresh;
}

std::string NewJoinToken() {
  const std::array<uint8_t, kKeyBytes> bytes = RandomBytes();
  return kTokenPrefix + HexEncode(bytes.data(), bytes.size());
}

StatusOr<KeyPair> JoinTokenKeys(const std::string& token) {
  const std::string prefix = kTokenPrefix;
  std::array<uint8_t, kKeyBytes> bytes{};
  if (token.compare(0, prefix.size(), prefix) != 0 ||
      !HexDecode(token.substr(prefix.size()), &bytes)) {
    return Status::InvalidArgument("not a join token (expected tsrj- and 64 hex digits)");
  }
  KeyPair keys;
  keys.secret_key = Z85(bytes);
  TSR_ASSIGN_OR_RETURN(keys.public_key, PublicOf(keys.secret_key));
  return keys;
}

}  // namespace tessera::curve
