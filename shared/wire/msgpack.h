#pragma once
// MessagePack for the wire protocol, written from and read into the message structs directly:
// no JSON document in between. The broker encodes and decodes several messages per task, tens of
// thousands a second; building an nlohmann::json tree for each (a std::map node and a string per
// key) took about as much of the broker thread as the SQL that records each task.
//
// One field list per struct, TSR_MESSAGE_FIELDS(Type, field...), defines both this codec and the
// nlohmann JSON conversion (tests, logs). Maps are keyed by field name, as before, so the wire
// carries the same document nlohmann::json::to_msgpack wrote for the struct (fields in declared
// rather than sorted order, floats always 64-bit) and either side reads the other's. Reading
// follows the JSON rules the protocol always had: a missing field keeps its default (forward
// compatibility), an unknown one is skipped, a mistyped or out-of-range one is an error naming the
// field.

#include <cstdint>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "shared/base/status.h"

namespace tessera::msgpack {

// Appends MessagePack values to a byte string, each in its shortest form.
class Writer {
 public:
  Writer() { out_.reserve(256); }
  void Nil() { Byte(0xc0); }
  void Bool(bool v) { Byte(v ? 0xc3 : 0xc2); }
  void Int(int64_t v);
  void Uint(uint64_t v);
  void Double(double v);
  void Str(std::string_view s);
  void ArrayHeader(uint32_t n);
  void MapHeader(uint32_t n);
  const std::string& bytes() const { return out_; }

 private:
  void Byte(uint8_t b) { out_.push_back(static_cast<char>(b)); }
  void BigEndian(uint64_t v, int bytes);
  std::string out_;
};

// Reads MessagePack values from a buffer it does not own. Every read checks the bounds and the
// type; nothing it is given can make it read past the end or recurse without limit.
class Reader {
 public:
  Reader(const void* data, size_t size) : p_(static_cast<const uint8_t*>(data)), end_(p_ + size) {}
  Status ReadInt(int64_t* v);
  Status ReadUint(uint64_t* v);
  Status ReadDouble(double* v);  // integers too
  Status ReadBool(bool* v);
  Status ReadStr(std::string_view* v);  // points into the buffer
  Status ReadArrayHeader(uint32_t* n);
  Status ReadMapHeader(uint32_t* n);
  // Skips one whole value (nested ones included, at most kMaxDepth deep).
  Status Skip() { return Skip(0); }
  bool at_map() const { return p_ < end_ && ((*p_ & 0xf0) == 0x80 || *p_ == 0xde || *p_ == 0xdf); }
  bool done() const { return p_ == end_; }

  static constexpr int kMaxDepth = 64;

 private:
  Status Skip(int depth);
  Status Need(size_t n) const;
  uint64_t BigEndian(int bytes);
  Status Mistyped(const char* expected) const;
  Status Count(uint32_t n, uint32_t* out) const;
  const uint8_t* p_;
  const uint8_t* end_;
};

// ---- packing, by type (structs get theirs from TSR_MESSAGE_FIELDS) ---------------------------
inline void Pack(Writer& w, bool v) { w.Bool(v); }
template <typename T>
requires(std::is_integral_v<T> && !std::is_same_v<T, bool>) void Pack(Writer& w, T v) {
  if constexpr (std::is_signed_v<T>) {
    w.Int(v);
  } else {
    w.Uint(v);
  }
}
inline void Pack(Writer& w, double v) { w.Double(v); }
inline void Pack(Writer& w, const std::string& v) { w.Str(v); }
template <typename T>
void Pack(Writer& w, const std::vector<T>& v) {
  w.ArrayHeader(static_cast<uint32_t>(v.size()));
  for (const T& e : v) Pack(w, e);
}
template <typename T>
void Pack(Writer& w, const std::map<std::string, T>& v) {
  w.MapHeader(static_cast<uint32_t>(v.size()));
  for (const auto& [k, e] : v) {
    w.Str(k);
    Pack(w, e);
  }
}

// ---- unpacking -----------------------------------------------------------------------------
inline Status Unpack(Reader& r, bool& v) { return r.ReadBool(&v); }
template <typename T>
requires(std::is_integral_v<T> && !std::is_same_v<T, bool>) Status Unpack(Reader& r, T& v) {
  if constexpr (std::is_signed_v<T>) {
    int64_t x = 0;
    TSR_RETURN_IF_ERROR(r.ReadInt(&x));
    if (x < std::numeric_limits<T>::min() || x > std::numeric_limits<T>::max()) {
      return Status::InvalidArgument(std::to_string(x) + " is out of range");
    }
    v = static_cast<T>(x);
  } else {
    uint64_t x = 0;
    TSR_RETURN_IF_ERROR(r.ReadUint(&x));
    if (x > std::numeric_limits<T>::max()) {
      return Status::InvalidArgument(std::to_string(x) + " is out of range");
    }
    v = static_cast<T>(x);
  }
  return Status::Ok();
}
inline Status Unpack(Reader& r, double& v) { return r.ReadDouble(&v); }
inline Status Unpack(Reader& r, std::string& v) {
  std::string_view s;
  TSR_RETURN_IF_ERROR(r.ReadStr(&s));
  v.assign(s);
  return Status::Ok();
}
// An error inside element/entry `where` of a container or struct, named as a path.
Status Within(const std::string& where, const Status& s);
template <typename T>
Status Unpack(Reader& r, std::vector<T>& v) {
  uint32_t n = 0;
  TSR_RETURN_IF_ERROR(r.ReadArrayHeader(&n));
  v.clear();
  v.resize(n);
  for (uint32_t i = 0; i < n; ++i) {
    if (Status s = Unpack(r, v[i]); !s.ok()) return Within("[" + std::to_string(i) + "]", s);
  }
  return Status::Ok();
}
template <typename T>
Status Unpack(Reader& r, std::map<std::string, T>& v) {
  uint32_t n = 0;
  TSR_RETURN_IF_ERROR(r.ReadMapHeader(&n));
  v.clear();
  for (uint32_t i = 0; i < n; ++i) {
    std::string_view key;
    TSR_RETURN_IF_ERROR(r.ReadStr(&key));
    if (Status s = Unpack(r, v[std::string(key)]); !s.ok()) return Within(std::string(key), s);
  }
  return Status::Ok();
}
// A struct: a map of its fields by name; UnpackField (from TSR_MESSAGE_FIELDS) reads one.
template <typename T>
Status UnpackStruct(Reader& r, T& v) {
  uint32_t n = 0;
  TSR_RETURN_IF_ERROR(r.ReadMapHeader(&n));
  for (uint32_t i = 0; i < n; ++i) {
    std::string_view key;
    TSR_RETURN_IF_ERROR(r.ReadStr(&key));
    if (Status s = UnpackField(r, key, v); !s.ok()) return Within(std::string(key), s);
  }
  return Status::Ok();
}

}  // namespace tessera::msgpack

#define TSR_MSGPACK_FIELD_NAME(f) #f,
#define TSR_MSGPACK_PACK_FIELD(f) \
  w.Str(#f);                      \
  Pack(w, v.f);
#define TSR_MSGPACK_UNPACK_FIELD(f) \
  if (key == #f) return Unpack(r, v.f);

// Declares a message struct's fields, in the struct's namespace: its MessagePack codec (Pack,
// Unpack) and its nlohmann JSON conversion (missing fields keep their defaults).
#define TSR_MESSAGE_FIELDS(Type, ...)                                                       \
  NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(Type, __VA_ARGS__)                        \
  inline void Pack(::tessera::msgpack::Writer& w, const Type& v) {                          \
    using ::tessera::msgpack::Pack;                                                         \
    static constexpr const char* kFields[] = {                                              \
        NLOHMANN_JSON_EXPAND(NLOHMANN_JSON_PASTE(TSR_MSGPACK_FIELD_NAME, __VA_ARGS__))};    \
    w.MapHeader(static_cast<uint32_t>(std::size(kFields)));                                 \
    NLOHMANN_JSON_EXPAND(NLOHMANN_JSON_PASTE(TSR_MSGPACK_PACK_FIELD, __VA_ARGS__))          \
  }                                                                                         \
  inline ::tessera::Status UnpackField(::tessera::msgpack::Reader& r, std::string_view key, \
                                       Type& v) {                                           \
    using ::tessera::msgpack::Unpack;                                                       \
    NLOHMANN_JSON_EXPAND(NLOHMANN_JSON_PASTE(TSR_MSGPACK_UNPACK_FIELD, __VA_ARGS__))        \
    return r.Skip();                                                                        \
  }                                                                                         \
  inline ::tessera::Status Unpack(::tessera::msgpack::Reader& r, Type& v) {                 \
    return ::tessera::msgpack::UnpackStruct(r, v);                                          \
  }
