// Decoding of GGUF metadata values from untrusted bytes (see cursor.h).
#include <fmt/format.h>

#include "gguf/cursor.h"

namespace memra::gguf {

const char* value_type_name(ValueType t) {
  switch (t) {
    case ValueType::U8: return "u8";
    case ValueType::I8: return "i8";
    case ValueType::U16: return "u16";
    case ValueType::I16: return "i16";
    case ValueType::U32: return "u32";
    case ValueType::I32: return "i32";
    case ValueType::F32: return "f32";
    case ValueType::BOOL: return "bool";
    case ValueType::STRING: return "string";
    case ValueType::ARRAY: return "array";
    case ValueType::U64: return "u64";
    case ValueType::I64: return "i64";
    case ValueType::F64: return "f64";
  }
  return "unknown";
}

namespace detail {

size_t scalar_size(ValueType t) {
  switch (t) {
    case ValueType::U8: case ValueType::I8: case ValueType::BOOL: return 1;
    case ValueType::U16: case ValueType::I16: return 2;
    case ValueType::U32: case ValueType::I32: case ValueType::F32: return 4;
    case ValueType::U64: case ValueType::I64: case ValueType::F64: return 8;
    case ValueType::STRING: case ValueType::ARRAY: return 0;
  }
  return 0;
}

bool is_integer_type(ValueType t) {
  switch (t) {
    case ValueType::U8: case ValueType::I8: case ValueType::U16: case ValueType::I16:
    case ValueType::U32: case ValueType::I32: case ValueType::U64: case ValueType::I64: return true;
    default: return false;
  }
}

bool is_known_value_type(uint32_t id) { return id <= static_cast<uint32_t>(ValueType::F64); }

std::string What::str() const {
  std::string s = thing;
  if (!owner.empty()) s += fmt::format(" of '{}'", printable(owner));
  if (index != kNoIndex) s += fmt::format(" (array element {})", index);
  return s;
}

std::string printable(std::string_view s, size_t max_bytes) {
  std::string out;
  size_t n = s.size() < max_bytes ? s.size() : max_bytes;
  for (size_t i = 0; i < n; ++i) {
    unsigned char ch = static_cast<unsigned char>(s[i]);
    if (ch >= 0x20 && ch < 0x7f && ch != '\\')
      out += static_cast<char>(ch);
    else if (ch == '\\')
      out += "\\\\";
    else
      out += fmt::format("\\x{:02x}", ch);
  }
  if (n < s.size()) out += fmt::format("... ({} bytes)", s.size());
  return out;
}

void throw_at(const std::string& name, uint64_t off, const std::string& problem) {
  throw FormatError(fmt::format("{}: {} (at byte offset {})", name, problem, off));
}

std::string key_problem(std::string_view key) {
  if (key.empty()) return "metadata key is empty";
  if (key.size() > kMaxNameBytes)
    return fmt::format("metadata key is {} bytes long (at most {} allowed)", key.size(), kMaxNameBytes);
  for (size_t i = 0; i < key.size(); ++i) {
    unsigned char ch = static_cast<unsigned char>(key[i]);
    if (ch < 0x20 || ch >= 0x7f)
      return fmt::format("metadata key '{}' contains byte 0x{:02x} at position {} (keys must be printable ASCII)",
                         printable(key), ch, i);
  }
  return {};
}

std::string tensor_name_problem(std::string_view name) {
  if (name.empty()) return "tensor name is empty";
  if (name.size() > kMaxNameBytes)
    return fmt::format("tensor name is {} bytes long (at most {} allowed)", name.size(), kMaxNameBytes);
  for (size_t i = 0; i < name.size(); ++i) {
    unsigned char ch = static_cast<unsigned char>(name[i]);
    if (ch < 0x20 || ch == 0x7f)
      return fmt::format("tensor name '{}' contains control byte 0x{:02x} at position {}", printable(name), ch, i);
  }
  return {};
}

void Cursor::truncated(uint64_t n, const What& what) const {
  fail_at(pos_, fmt::format("file ends inside the {}: {} bytes needed, {} left", what.str(), n, left()));
}

std::string_view Cursor::string(const What& what, uint64_t max_len) {
  const size_t start = pos_;
  uint64_t len = u64(What{"string length", what.owner, what.index});
  if (len > max_len)
    fail_at(start, fmt::format("{} is {} bytes long (at most {} allowed)", what.str(), len, max_len));
  if (len > left())
    fail_at(start, fmt::format("{} claims {} bytes but only {} bytes are left in the file", what.str(), len, left()));
  const uint8_t* p = bytes(len, what);
  return {reinterpret_cast<const char*>(p), static_cast<size_t>(len)};
}

ValueType read_value_type(Cursor& c, const What& what) {
  const size_t at = c.pos();
  uint32_t id = c.u32(what);
  if (!is_known_value_type(id))
    c.fail_at(at, fmt::format("unknown metadata value type {} for {} (known types are 0..12)", id, what.str()));
  return static_cast<ValueType>(id);
}

namespace {

// Scalars are stored packed and possibly unaligned; decode through memcpy.
template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

void decode_scalar(ValueType t, const uint8_t* p, Value& out) {
  switch (t) {
    case ValueType::U8: out.u = load<uint8_t>(p); break;
    case ValueType::BOOL: out.u = load<uint8_t>(p); break;
    case ValueType::I8: out.i = load<int8_t>(p); break;
    case ValueType::U16: out.u = load<uint16_t>(p); break;
    case ValueType::I16: out.i = load<int16_t>(p); break;
    case ValueType::U32: out.u = load<uint32_t>(p); break;
    case ValueType::I32: out.i = load<int32_t>(p); break;
    case ValueType::U64: out.u = load<uint64_t>(p); break;
    case ValueType::I64: out.i = load<int64_t>(p); break;
    case ValueType::F32: out.f = load<float>(p); break;
    case ValueType::F64: out.f = load<double>(p); break;
    case ValueType::STRING: case ValueType::ARRAY: break;
  }
}

void read_array(Cursor& c, std::string_view key, Value& out) {
  const size_t type_at = c.pos();
  uint32_t et_id = c.u32(What{"array element type", key});
  if (!is_known_value_type(et_id))
    c.fail_at(type_at, fmt::format("unknown array element type {} for metadata key '{}' (known types are 0..12)",
                                   et_id, printable(key)));
  ValueType et = static_cast<ValueType>(et_id);
  if (et == ValueType::ARRAY)
    c.fail_at(type_at, fmt::format("metadata key '{}' is an array of arrays; nested arrays are not supported",
                                   printable(key)));
  const size_t count_at = c.pos();
  uint64_t count = c.u64(What{"array length", key});
  // Strings need at least their 8-byte length each; checked before anything is reserved.
  const uint64_t min_elem = et == ValueType::STRING ? 8 : scalar_size(et);
  if (count > c.left() / min_elem)
    c.fail_at(count_at, fmt::format("metadata key '{}' claims {} {} elements, but each needs at least {} bytes "
                                    "and only {} bytes are left in the file; the file is truncated or corrupt",
                                    printable(key), count, value_type_name(et), min_elem, c.left()));
  out.elem_type = et;
  out.count = count;
  if (et == ValueType::STRING) {
    out.strings.reserve(count);
    for (uint64_t i = 0; i < count; ++i) out.strings.push_back(c.string(What{"string", key, i}));
    return;
  }
  const size_t elems_at = c.pos();
  out.elems = c.bytes(count * min_elem, What{"array data", key});
  if (et == ValueType::BOOL) {
    for (uint64_t i = 0; i < count; ++i)
      if (out.elems[i] > 1)
        c.fail_at(elems_at + i, fmt::format("bool element {} of '{}' is {} (must be 0 or 1)", i, printable(key),
                                            out.elems[i]));
  }
}

}  // namespace

void read_value(Cursor& c, ValueType type, std::string_view key, Value& out) {
  out.type = type;
  if (type == ValueType::STRING) {
    out.str = c.string(What{"string value", key});
    return;
  }
  if (type == ValueType::ARRAY) {
    read_array(c, key, out);
    return;
  }
  const size_t at = c.pos();
  const uint8_t* p = c.bytes(scalar_size(type), What{"value", key});
  decode_scalar(type, p, out);
  if (type == ValueType::BOOL && out.u > 1)
    c.fail_at(at, fmt::format("bool value of '{}' is {} (must be 0 or 1)", printable(key), out.u));
}

}  // namespace detail
}  // namespace memra::gguf
