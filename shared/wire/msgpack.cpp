#include "shared/wire/msgpack.h"

#include <cstdio>
#include <cstring>

#include "shared/base/utf8.h"

namespace tessera::msgpack {

// ---- Writer ----------------------------------------------------------------------------------

void Writer::BigEndian(uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) Byte(static_cast<uint8_t>(v >> (8 * i)));
}

void Writer::Uint(uint64_t v) {
  if (v < 0x80) {
    Byte(static_cast<uint8_t>(v));  // positive fixint
  } else if (v <= 0xff) {
    Byte(0xcc);
    BigEndian(v, 1);
  } else if (v <= 0xffff) {
    Byte(0xcd);
    BigEndian(v, 2);
  } else if (v <= 0xffffffffu) {
    Byte(0xce);
    BigEndian(v, 4);
  } else {
    Byte(0xcf);
    BigEndian(v, 8);
  }
}

void Writer::Int(int64_t v) {
  if (v >= 0) return Uint(static_cast<uint64_t>(v));
  if (v >= -32) {
    Byte(static_cast<uint8_t>(v));  // negative fixint
  } else if (v >= INT8_MIN) {
    Byte(0xd0);
    BigEndian(static_cast<uint64_t>(v), 1);
  } else if (v >= INT16_MIN) {
    Byte(0xd1);
    BigEndian(static_cast<uint64_t>(v), 2);
  } else if (v >= INT32_MIN) {
    Byte(0xd2);
    BigEndian(static_cast<uint64_t>(v), 4);
  } else {
    Byte(0xd3);
    BigEndian(static_cast<uint64_t>(v), 8);
  }
}

void Writer::Double(double v) {
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(bits));
  Byte(0xcb);
  BigEndian(bits, 8);
}

void Writer::Str(std::string_view s) {
  const size_t n = s.size();
  if (n < 32) {
    Byte(static_cast<uint8_t>(0xa0 | n));
  } else if (n <= 0xff) {
    Byte(0xd9);
    BigEndian(n, 1);
  } else if (n <= 0xffff) {
    Byte(0xda);
    BigEndian(n, 2);
  } else {
    Byte(0xdb);
    BigEndian(n, 4);
  }
  out_.append(s.data(), n);
}

void Writer::ArrayHeader(uint32_t n) {
  if (n < 16) {
    Byte(static_cast<uint8_t>(0x90 | n));
  } else if (n <= 0xffff) {
    Byte(0xdc);
    BigEndian(n, 2);
  } else {
    Byte(0xdd);
    BigEndian(n, 4);
  }
}

void Writer::MapHeader(uint32_t n) {
  if (n < 16) {
    Byte(static_cast<uint8_t>(0x80 | n));
  } else if (n <= 0xffff) {
    Byte(0xde);
    BigEndian(n, 2);
  } else {
    Byte(0xdf);
    BigEndian(n, 4);
  }
}

// ---- Reader ----------------------------------------------------------------------------------

Status Reader::Need(size_t n) const {
  if (static_cast<size_t>(end_ - p_) < n) {
    return Status::InvalidArgument("MessagePack value ends early");
  }
  return Status::Ok();
}

uint64_t Reader::BigEndian(int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | *p_++;
  return v;
}

Status Reader::Mistyped(const char* expected) const {
  if (p_ >= end_) return Status::InvalidArgument(std::string("expected ") + expected);
  char found[8];
  std::snprintf(found, sizeof(found), "0x%02x", *p_);
  return Status::InvalidArgument(std::string("expected ") + expected + " (MessagePack type byte " +
                                 found + ")");
}

Status Reader::Count(uint32_t n, uint32_t* out) const {
  // Every element takes at least one byte: a count beyond what is left is a lie, refused before
  // anyone reserves memory for it.
  if (n > static_cast<size_t>(end_ - p_)) {
    return Status::InvalidArgument("MessagePack container of " + std::to_string(n) +
                                   " entries ends early");
  }
  *out = n;
  return Status::Ok();
}

Status Reader::ReadInt(int64_t* v) {
  TSR_RETURN_IF_ERROR(Need(1));
  const uint8_t t = *p_;
  if (t < 0x80 || t >= 0xe0) {  // positive or negative fixint
    ++p_;
    *v = static_cast<int8_t>(t);
    return Status::Ok();
  }
  if (t >= 0xcc && t <= 0xcf) {
    uint64_t u = 0;
    TSR_RETURN_IF_ERROR(ReadUint(&u));
    if (u > static_cast<uint64_t>(INT64_MAX)) {
      return Status::InvalidArgument(std::to_string(u) + " is out of range");
    }
    *v = static_cast<int64_t>(u);
    return Status::Ok();
  }
  if (t >= 0xd0 && t <= 0xd3) {
    const int bytes = 1 << (t - 0xd0);
    TSR_RETURN_IF_ERROR(Need(1 + bytes));
    ++p_;
    const uint64_t raw = BigEndian(bytes);
    switch (bytes) {
      case 1:
        *v = static_cast<int8_t>(raw);
        break;
      case 2:
        *v = static_cast<int16_t>(raw);
        break;
      case 4:
        *v = static_cast<int32_t>(raw);
        break;
      default:
        *v = static_cast<int64_t>(raw);
    }
    return Status::Ok();
  }
  return Mistyped("an integer");
}

Status Reader::ReadUint(uint64_t* v) {
  TSR_RETURN_IF_ERROR(Need(1));
  const uint8_t t = *p_;
  if (t < 0x80) {
    ++p_;
    *v = t;
    return Status::Ok();
  }
  if (t >= 0xcc && t <= 0xcf) {
    const int bytes = 1 << (t - 0xcc);
    TSR_RETURN_IF_ERROR(Need(1 + bytes));
    ++p_;
    *v = BigEndian(bytes);
    return Status::Ok();
  }
  if (t >= 0xe0 || (t >= 0xd0 && t <= 0xd3)) {
    int64_t s = 0;
    TSR_RETURN_IF_ERROR(ReadInt(&s));
    if (s < 0) return Status::InvalidArgument(std::to_string(s) + " is out of range");
    *v = static_cast<uint64_t>(s);
    return Status::Ok();
  }
  return Mistyped("an unsigned integer");
}

Status Reader::ReadDouble(double* v) {
  TSR_RETURN_IF_ERROR(Need(1));
  const uint8_t t = *p_;
  if (t == 0xca) {
    TSR_RETURN_IF_ERROR(Need(5));
    ++p_;
    const auto bits = static_cast<uint32_t>(BigEndian(4));
    float f = 0;
    std::memcpy(&f, &bits, sizeof(f));
    *v = f;
    return Status::Ok();
  }
  if (t == 0xcb) {
    TSR_RETURN_IF_ERROR(Need(9));
    ++p_;
    const uint64_t bits = BigEndian(8);
    std::memcpy(v, &bits, sizeof(*v));
    return Status::Ok();
  }
  if (t >= 0xcc && t <= 0xcf) {
    uint64_t u = 0;
    TSR_RETURN_IF_ERROR(ReadUint(&u));
    *v = static_cast<double>(u);
    return Status::Ok();
  }
  int64_t i = 0;
  if (Status s = ReadInt(&i); !s.ok()) return Mistyped("a number");
  *v = static_cast<double>(i);
  return Status::Ok();
}

Status Reader::ReadBool(bool* v) {
  TSR_RETURN_IF_ERROR(Need(1));
  if (*p_ != 0xc2 && *p_ != 0xc3) return Mistyped("a boolean");
  *v = *p_++ == 0xc3;
  return Status::Ok();
}

Status Reader::ReadStr(std::string_view* v) {
  TSR_RETURN_IF_ERROR(Need(1));
  const uint8_t t = *p_;
  size_t n = 0;
  if ((t & 0xe0) == 0xa0) {
    ++p_;
    n = t & 0x1f;
  } else if (t >= 0xd9 && t <= 0xdb) {
    const int bytes = 1 << (t - 0xd9);
    TSR_RETURN_IF_ERROR(Need(1 + bytes));
    ++p_;
    n = BigEndian(bytes);
  } else {
    return Mistyped("a string");
  }
  TSR_RETURN_IF_ERROR(Need(n));
  *v = std::string_view(reinterpret_cast<const char*>(p_), n);
  p_ += n;
  return Status::Ok();
}

Status Reader::ReadArrayHeader(uint32_t* n) {
  TSR_RETURN_IF_ERROR(Need(1));
  const uint8_t t = *p_;
  if ((t & 0xf0) == 0x90) {
    ++p_;
    return Count(t & 0x0f, n);
  }
  if (t == 0xdc || t == 0xdd) {
    const int bytes = t == 0xdc ? 2 : 4;
    TSR_RETURN_IF_ERROR(Need(1 + bytes));
    ++p_;
    return Count(static_cast<uint32_t>(BigEndian(bytes)), n);
  }
  return Mistyped("an array");
}

Status Reader::ReadMapHeader(uint32_t* n) {
  TSR_RETURN_IF_ERROR(Need(1));
  const uint8_t t = *p_;
  if ((t & 0xf0) == 0x80) {
    ++p_;
    return Count(t & 0x0f, n);
  }
  if (t == 0xde || t == 0xdf) {
    const int bytes = t == 0xde ? 2 : 4;
    TSR_RETURN_IF_ERROR(Need(1 + bytes));
    ++p_;
    return Count(static_cast<uint32_t>(BigEndian(bytes)), n);
  }
  return Mistyped("a map");
}

Status Reader::Skip(int depth) {
  if (depth > kMaxDepth) return Status::InvalidArgument("MessagePack nested too deep");
  TSR_RETURN_IF_ERROR(Need(1));
  const uint8_t t = *p_;
  // Values of a fixed size after the type byte.
  auto skip_bytes = [&](size_t n) -> Status {
    TSR_RETURN_IF_ERROR(Need(1 + n));
    p_ += 1 + n;
    return Status::Ok();
  };
  // Values whose length follows the type byte (`len_bytes` wide), plus `extra` bytes (ext type).
  auto skip_sized = [&](int len_bytes, size_t extra) -> Status {
    TSR_RETURN_IF_ERROR(Need(1 + len_bytes));
    ++p_;
    const uint64_t n = BigEndian(len_bytes) + extra;
    TSR_RETURN_IF_ERROR(Need(n));
    p_ += n;
    return Status::Ok();
  };
  if (t < 0x80 || t >= 0xe0 || t == 0xc0 || t == 0xc2 || t == 0xc3) return skip_bytes(0);
  if ((t & 0xe0) == 0xa0) return skip_bytes(t & 0x1f);
  const bool is_map = (t & 0xf0) == 0x80 || t == 0xde || t == 0xdf;
  const bool is_array = (t & 0xf0) == 0x90 || t == 0xdc || t == 0xdd;
  if (is_map || is_array) {
    uint32_t n = 0;
    TSR_RETURN_IF_ERROR(is_map ? ReadMapHeader(&n) : ReadArrayHeader(&n));
    const uint64_t values = is_map ? uint64_t{n} * 2 : n;
    for (uint64_t i = 0; i < values; ++i) TSR_RETURN_IF_ERROR(Skip(depth + 1));
    return Status::Ok();
  }
  switch (t) {
    case 0xc4:  // bin 8/16/32
      return skip_sized(1, 0);
    case 0xc5:
      return skip_sized(2, 0);
    case 0xc6:
      return skip_sized(4, 0);
    case 0xc7:  // ext 8/16/32: length, type byte, data
      return skip_sized(1, 1);
    case 0xc8:
      return skip_sized(2, 1);
    case 0xc9:
      return skip_sized(4, 1);
    case 0xca:
      return skip_bytes(4);
    case 0xcb:
      return skip_bytes(8);
    case 0xcc:
    case 0xd0:
      return skip_bytes(1);
    case 0xcd:
    case 0xd1:
      return skip_bytes(2);
    case 0xce:
    case 0xd2:
      return skip_bytes(4);
    case 0xcf:
    case 0xd3:
      return skip_bytes(8);
    case 0xd4:  // fixext 1/2/4/8/16: type byte + data
      return skip_bytes(2);
    case 0xd5:
      return skip_bytes(3);
    case 0xd6:
      return skip_bytes(5);
    case 0xd7:
      return skip_bytes(9);
    case 0xd8:
      return skip_bytes(17);
    case 0xd9:  // str 8/16/32
      return skip_sized(1, 0);
    case 0xda:
      return skip_sized(2, 0);
    case 0xdb:
      return skip_sized(4, 0);
    default:
      return Mistyped("a MessagePack value");  // 0xc1 is never used
  }
}

Status Within(const std::string& key, const Status& s) {
  // A map's key is the peer's: what lands in a log line or an answer is valid and short.
  constexpr size_t kMaxKeyBytes = 64;
  std::string where = utf8::Sanitize(std::string_view(key).substr(0, kMaxKeyBytes));
  if (key.size() > kMaxKeyBytes) where += "...";
  const std::string& m = s.message();
  // Paths join as "part.x0" and "running[2].attempt". The reader's own messages never contain
  // ": " nor start with '[', so either mark a message that already carries a path.
  const bool nested = !m.empty() && (m[0] == '[' || m.find(": ") != std::string::npos);
  std::string path = where;
  if (nested && m[0] != '[') path += ".";
  return Status(s.code(), path + (nested ? "" : ": ") + m);
}

}  // namespace tessera::msgpack
