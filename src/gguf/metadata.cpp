// Typed metadata getters. Conversions are allowed only when lossless (any integer type whose
// value fits; integers to double when exact), so a consumer reading `token_type` works whether
// the converter stored it as u8 or i32, and a key of the wrong kind is a FormatError that names
// the key and both types instead of a silently wrong number.
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "gguf/cursor.h"
#include "gguf/gguf.h"

namespace memra::gguf {

using detail::is_integer_type;
using detail::printable;

namespace {

std::string type_desc(const Value& v) {
  if (v.type == ValueType::ARRAY) return fmt::format("array of {}", value_type_name(v.elem_type));
  return value_type_name(v.type);
}

bool is_signed_type(ValueType t) {
  return t == ValueType::I8 || t == ValueType::I16 || t == ValueType::I32 || t == ValueType::I64;
}

// Integer value of a scalar (signed and unsigned 64-bit both fit in 128 bits).
__int128 scalar_int(const Value& v) {
  return is_signed_type(v.type) ? static_cast<__int128>(v.i) : static_cast<__int128>(v.u);
}

// Integer element `i` of a packed array of integer type `t`.
__int128 elem_int(ValueType t, const uint8_t* elems, uint64_t i) {
  const uint8_t* p = elems + i * detail::scalar_size(t);
  auto load = [p](auto v) {
    std::memcpy(&v, p, sizeof v);
    return static_cast<__int128>(v);
  };
  switch (t) {
    case ValueType::U8: return load(uint8_t{});
    case ValueType::I8: return load(int8_t{});
    case ValueType::U16: return load(uint16_t{});
    case ValueType::I16: return load(int16_t{});
    case ValueType::U32: return load(uint32_t{});
    case ValueType::I32: return load(int32_t{});
    case ValueType::U64: return load(uint64_t{});
    case ValueType::I64: return load(int64_t{});
    default: return 0;
  }
}

double elem_float(ValueType t, const uint8_t* elems, uint64_t i) {
  if (t == ValueType::F32) {
    float f;
    std::memcpy(&f, elems + i * 4, 4);
    return f;
  }
  double d;
  std::memcpy(&d, elems + i * 8, 8);
  return d;
}

std::string int_str(__int128 v) {
  if (v < 0) return "-" + std::to_string(static_cast<uint64_t>(-(v + 1)) + 1);
  return std::to_string(static_cast<uint64_t>(v));
}

// Integers up to 2^53 in magnitude convert to double exactly.
constexpr __int128 kMaxExactDouble = static_cast<__int128>(1) << 53;

}  // namespace

// ---- lookups with uniform errors ----

namespace {

[[noreturn]] void wrong_type(const std::string& path, std::string_view key, const char* expected, const Value& v) {
  throw FormatError(fmt::format("{}: metadata key '{}' has type {}, expected {}", path, printable(key),
                                type_desc(v), expected));
}

const Value& require(const File& f, std::string_view key) {
  const Value* v = f.find(key);
  if (v == nullptr)
    throw FormatError(fmt::format("{}: required metadata key '{}' is missing", f.path(), printable(key)));
  return *v;
}

std::string_view as_string(const File& f, std::string_view key, const Value& v) {
  if (v.type != ValueType::STRING) wrong_type(f.path(), key, "string", v);
  return v.str;
}

uint64_t as_u64(const File& f, std::string_view key, const Value& v) {
  if (!is_integer_type(v.type)) wrong_type(f.path(), key, "an unsigned integer", v);
  __int128 x = scalar_int(v);
  if (x < 0)
    throw FormatError(fmt::format("{}: metadata key '{}' is {} ({}), expected a non-negative integer", f.path(),
                                  printable(key), int_str(x), value_type_name(v.type)));
  return static_cast<uint64_t>(x);
}

int64_t as_i64(const File& f, std::string_view key, const Value& v) {
  if (!is_integer_type(v.type)) wrong_type(f.path(), key, "an integer", v);
  __int128 x = scalar_int(v);
  if (x > std::numeric_limits<int64_t>::max())
    throw FormatError(fmt::format("{}: metadata key '{}' is {} (u64), too large for a signed 64-bit integer",
                                  f.path(), printable(key), int_str(x)));
  return static_cast<int64_t>(x);
}

double as_f64(const File& f, std::string_view key, const Value& v) {
  if (v.type == ValueType::F32 || v.type == ValueType::F64) return v.f;
  if (is_integer_type(v.type)) return static_cast<double>(scalar_int(v));
  wrong_type(f.path(), key, "a number (f32, f64 or integer)", v);
}

bool as_bool(const File& f, std::string_view key, const Value& v) {
  if (v.type != ValueType::BOOL) wrong_type(f.path(), key, "bool", v);
  return v.u != 0;
}

const Value& require_array(const File& f, std::string_view key, const char* expected) {
  const Value& v = require(f, key);
  if (v.type != ValueType::ARRAY) wrong_type(f.path(), key, expected, v);
  return v;
}

}  // namespace

std::string_view File::get_string(std::string_view key) const { return as_string(*this, key, require(*this, key)); }
uint64_t File::get_u64(std::string_view key) const { return as_u64(*this, key, require(*this, key)); }
int64_t File::get_i64(std::string_view key) const { return as_i64(*this, key, require(*this, key)); }
double File::get_f64(std::string_view key) const { return as_f64(*this, key, require(*this, key)); }
bool File::get_bool(std::string_view key) const { return as_bool(*this, key, require(*this, key)); }

std::optional<std::string_view> File::get_string_opt(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  return as_string(*this, key, *v);
}
std::optional<uint64_t> File::get_u64_opt(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  return as_u64(*this, key, *v);
}
std::optional<double> File::get_f64_opt(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  return as_f64(*this, key, *v);
}
std::optional<bool> File::get_bool_opt(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  return as_bool(*this, key, *v);
}

std::vector<std::string_view> File::get_string_array(std::string_view key) const {
  const Value& v = require_array(*this, key, "array of string");
  if (v.elem_type != ValueType::STRING) wrong_type(path_, key, "array of string", v);
  return v.strings;
}

std::vector<int64_t> File::get_int_array(std::string_view key) const {
  const Value& v = require_array(*this, key, "array of integers");
  if (!is_integer_type(v.elem_type)) wrong_type(path_, key, "array of integers", v);
  std::vector<int64_t> out;
  out.reserve(v.count);  // the reader bounded count by the file's bytes
  for (uint64_t i = 0; i < v.count; ++i) {
    __int128 x = elem_int(v.elem_type, v.elems, i);
    if (x > std::numeric_limits<int64_t>::max())
      throw FormatError(fmt::format("{}: element {} of metadata key '{}' is {} (u64), too large for a signed 64-bit "
                                    "integer",
                                    path_, i, printable(key), int_str(x)));
    out.push_back(static_cast<int64_t>(x));
  }
  return out;
}

std::vector<double> File::get_f64_array(std::string_view key) const {
  const Value& v = require_array(*this, key, "array of numbers");
  const bool is_float = v.elem_type == ValueType::F32 || v.elem_type == ValueType::F64;
  if (!is_float && !is_integer_type(v.elem_type)) wrong_type(path_, key, "array of numbers", v);
  std::vector<double> out;
  out.reserve(v.count);
  for (uint64_t i = 0; i < v.count; ++i) {
    if (is_float) {
      out.push_back(elem_float(v.elem_type, v.elems, i));
      continue;
    }
    __int128 x = elem_int(v.elem_type, v.elems, i);
    if (x > kMaxExactDouble || x < -kMaxExactDouble)
      throw FormatError(fmt::format("{}: element {} of metadata key '{}' is {} ({}), which a double cannot hold "
                                    "exactly",
                                    path_, i, printable(key), int_str(x), value_type_name(v.elem_type)));
    out.push_back(static_cast<double>(x));
  }
  return out;
}

}  // namespace memra::gguf
