#pragma once
// UTF-8 at the trust boundary. Every string that enters from outside is either refused (text a
// person wrote: job and scene files, API bodies, names) with the field and the byte offset, or
// made valid (text a program printed: renderer output, logs, anything a worker reports) by
// replacing each invalid sequence with U+FFFD, so nothing downstream (JSON, the dashboard, the
// terminal) can throw on it.
//
// "Valid" is RFC 3629: no overlong forms, no surrogates (U+D800..U+DFFF), nothing above U+10FFFF.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "shared/base/status.h"

namespace tessera::utf8 {

// The byte offset of the first invalid sequence, or nullopt when `text` is valid UTF-8.
std::optional<size_t> FirstInvalid(std::string_view text);

inline bool IsValid(std::string_view text) { return !FirstInvalid(text).has_value(); }

// `text` with every invalid sequence replaced by U+FFFD (the maximal-subpart rule of Unicode
// 15 §3.9, as browsers decode). Valid text comes back unchanged.
std::string Sanitize(std::string_view text);

// Sanitises in place; returns whether anything was replaced.
bool SanitizeInPlace(std::string& text);

// Valid `text` cut to at most `max_bytes`, never inside a character.
std::string Truncate(std::string_view text, size_t max_bytes);

// InvalidArgument "<field>: not valid UTF-8 (byte N)" for text a person wrote.
Status Check(std::string_view text, std::string_view field);

}  // namespace tessera::utf8
