#include "shared/base/utf8.h"

#include <cstdint>

namespace tessera::utf8 {

namespace {

// The length of the valid sequence starting at `p` (1..4), or 0 when the bytes there do not
// start one. On 0, `*bad_len` is the maximal subpart to replace with one U+FFFD (at least 1).
size_t ValidSequence(const unsigned char* p, size_t left, size_t* bad_len) {
  const unsigned char c = p[0];
  *bad_len = 1;
  if (c < 0x80) return 1;
  size_t need = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the range allowed for the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    need = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    need = 3;
    if (c == 0xE0) lo = 0xA0;  // overlong
    if (c == 0xED) hi = 0x9F;  // surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    need = 4;
    if (c == 0xF0) lo = 0x90;  // overlong
    if (c == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    return 0;  // a continuation byte, C0/C1 or F5..FF
  }
  for (size_t i = 1; i < need; ++i) {
    if (i >= left) {
      *bad_len = i;
      return 0;
    }
    const unsigned char b = p[i];
    const unsigned char min = i == 1 ? lo : 0x80;
    const unsigned char max = i == 1 ? hi : 0xBF;
    if (b < min || b > max) {
      *bad_len = i;
      return 0;
    }
  }
  return need;
}

}  // namespace

std::optional<size_t> FirstInvalid(std::string_view text) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    // Runs of ASCII are the common case: skip them eight bytes at a time.
    while (i + 8 <= n) {
      uint64_t word;
      __builtin_memcpy(&word, p + i, 8);
      if (word & 0x8080808080808080ULL) break;
      i += 8;
    }
    if (i >= n) break;
    size_t bad = 0;
    const size_t len = ValidSequence(p + i, n - i, &bad);
    if (len == 0) return i;
    i += len;
  }
  return std::nullopt;
}

std::string Sanitize(std::string_view text) {
  std::optional<size_t> first = FirstInvalid(text);
  if (!first) return std::string(text);
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  std::string out;
  out.reserve(text.size() + 16);
  out.append(text.substr(0, *first));
  size_t i = *first;
  while (i < text.size()) {
    size_t bad = 0;
    const size_t len = ValidSequence(p + i, text.size() - i, &bad);
    if (len == 0) {
      out.append(kReplacement);
      i += bad;
    } else {
      out.append(text.substr(i, len));
      i += len;
    }
  }
  return out;
}

bool SanitizeInPlace(std::string& text) {
  if (IsValid(text)) return false;
  text = Sanitize(text);
  return true;
}

Status Check(std::string_view text, std::string_view field) {
  std::optional<size_t> bad = FirstInvalid(text);
  if (!bad) return Status::Ok();
  return Status::InvalidArgument(std::string(field) + ": not valid UTF-8 (byte " +
                                 std::to_string(*bad) + ")");
}

std::string Truncate(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  size_t end = max_bytes;
  // Back over continuation bytes (10xxxxxx) to the start of the cut character.
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return std::string(text.substr(0, end));
}

}  // namespace tessera::utf8
