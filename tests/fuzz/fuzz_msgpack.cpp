// Fuzzes the MessagePack reader (shared/wire/msgpack.h) on arbitrary bytes: skipping whole values,
// reading them typed, and a round trip -- every value the reader accepts is written back by the
// Writer and must read back the same.

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "shared/wire/msgpack.h"

namespace {

using tessera::msgpack::Reader;
using tessera::msgpack::Writer;

// A MessagePack value as the reader sees it. Binary and extension values, which the protocol
// never uses, are only skipped: they read as nil.
struct Value {
  enum class Kind { kNil, kBool, kInt, kUint, kDouble, kStr, kArray, kMap } kind = Kind::kNil;
  bool b = false;
  int64_t i = 0;
  uint64_t u = 0;
  double d = 0;
  std::string s;
  std::vector<Value> items;  // an array's values; a map's keys and values, alternating
  bool operator==(const Value& o) const {
    // Doubles bit for bit: NaN payloads included.
    return kind == o.kind && b == o.b && i == o.i && u == o.u &&
           std::memcmp(&d, &o.d, sizeof(d)) == 0 && s == o.s && items == o.items;
  }
};

// Reads one value by trying each typed read on a copy of the reader (a failed read may have
// consumed bytes), the way a message field is read. False when nothing reads it.
bool ReadValue(Reader& r, Value* out, int depth) {
  if (depth > Reader::kMaxDepth) return false;
  for (const bool map : {true, false}) {
    Reader probe = r;
    uint32_t n = 0;
    if (!(map ? probe.ReadMapHeader(&n) : probe.ReadArrayHeader(&n)).ok()) continue;
    out->kind = map ? Value::Kind::kMap : Value::Kind::kArray;
    out->items.resize(map ? size_t{n} * 2 : n);
    for (Value& v : out->items) {
      if (!ReadValue(probe, &v, depth + 1)) return false;
    }
    r = probe;
    return true;
  }
  std::string_view text;
  if (Reader probe = r; probe.ReadStr(&text).ok()) {
    out->kind = Value::Kind::kStr;
    out->s = std::string(text);
    r = probe;
    return true;
  }
  if (Reader probe = r; probe.ReadBool(&out->b).ok()) {
    out->kind = Value::Kind::kBool;
    r = probe;
    return true;
  }
  if (Reader probe = r; probe.ReadInt(&out->i).ok()) {
    out->kind = Value::Kind::kInt;
    r = probe;
    return true;
  }
  out->i = 0;
  if (Reader probe = r; probe.ReadUint(&out->u).ok()) {
    out->kind = Value::Kind::kUint;
    r = probe;
    return true;
  }
  out->u = 0;
  if (Reader probe = r; probe.ReadDouble(&out->d).ok()) {
    out->kind = Value::Kind::kDouble;
    r = probe;
    return true;
  }
  out->d = 0;
  // Nil, binary, extension: skipped whole.
  Reader probe = r;
  if (!probe.Skip().ok()) return false;
  out->kind = Value::Kind::kNil;
  r = probe;
  return true;
}

void WriteValue(Writer& w, const Value& v) {
  switch (v.kind) {
    case Value::Kind::kNil:
      return w.Nil();
    case Value::Kind::kBool:
      return w.Bool(v.b);
    case Value::Kind::kInt:
      return w.Int(v.i);
    case Value::Kind::kUint:
      return w.Uint(v.u);
    case Value::Kind::kDouble:
      return w.Double(v.d);
    case Value::Kind::kStr:
      return w.Str(v.s);
    case Value::Kind::kArray:
      w.ArrayHeader(static_cast<uint32_t>(v.items.size()));
      break;
    case Value::Kind::kMap:
      w.MapHeader(static_cast<uint32_t>(v.items.size() / 2));
      break;
  }
  for (const Value& item : v.items) WriteValue(w, item);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Skipping walks every value to the end, or stops at an error: never out of bounds.
  {
    Reader r(data, size);
    while (!r.done() && r.Skip().ok()) {
    }
  }
  // Values read, written back and read again are the same values.
  Reader r(data, size);
  for (int i = 0; i < 16 && !r.done(); ++i) {
    Value first;
    if (!ReadValue(r, &first, 0)) break;
    Writer w;
    WriteValue(w, first);
    Reader again(w.bytes().data(), w.bytes().size());
    Value second;
    if (!ReadValue(again, &second, 0) || !again.done()) std::abort();
    if (!(first == second)) std::abort();
  }
  return 0;
}
