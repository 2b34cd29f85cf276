// Internal to src/gguf: a bounds-checked little-endian reader over untrusted bytes, and the
// metadata value decoder shared by the reader (File::parse) and the writer (add_raw checks the
// bytes it is handed the same way the reader will read them back).
//
// Every read states what it is reading (a What) so that a failure can say, for example,
// "file ends inside the string length of metadata key 'general.name'". Errors are built only
// when something is wrong, so decoding 150k vocabulary strings formats nothing.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "gguf/gguf.h"

namespace memra::gguf::detail {

static_assert(std::endian::native == std::endian::little,
              "the GGUF reader decodes little-endian fields with memcpy; a big-endian host needs byte swaps");

// Limits that keep hostile files from steering the reader into huge work or memory.
inline constexpr uint64_t kMaxNameBytes = 65535;        // keys and tensor names (the spec's u16 bound)
inline constexpr uint64_t kMaxAlignment = uint64_t{1} << 20;  // 1 MiB; real files use 32
inline constexpr uint64_t kDefaultAlignment = 32;
inline constexpr uint32_t kMaxDims = 4;                 // ggml's GGML_MAX_DIMS
inline constexpr uint64_t kNoIndex = ~uint64_t{0};
// Real models carry tens of keys and at most a few thousand tensors. A parsed entry costs far
// more memory than its smallest encoding (~150 bytes for a 14-byte kv), so counts beyond these
// are refused outright and reservations are capped until entries actually parse.
inline constexpr uint64_t kMaxKeys = uint64_t{1} << 20;
inline constexpr uint64_t kMaxTensors = uint64_t{1} << 20;
inline constexpr uint64_t kMaxReserve = 4096;

// Smallest encodings, used to reject counts the remaining bytes cannot possibly hold before
// anything is reserved: a kv is key length (8) + >= 1 key byte + type (4) + >= 1 value byte;
// a tensor info is name length (8) + >= 1 name byte + n_dims (4) + >= 1 ne (8) + type (4) +
// offset (8).
inline constexpr uint64_t kMinKvBytes = 8 + 1 + 4 + 1;
inline constexpr uint64_t kMinTensorInfoBytes = 8 + 1 + 4 + 8 + 4 + 8;

// Encoded size of a scalar value type; 0 for STRING and ARRAY (variable length) and for ids
// that are not value types.
size_t scalar_size(ValueType t);
bool is_integer_type(ValueType t);
bool is_known_value_type(uint32_t id);

// Describes the field being read, for error messages.
struct What {
  const char* thing;            // e.g. "length of metadata key", "value"
  std::string_view owner = {};  // key or tensor name the field belongs to (already validated)
  uint64_t index = kNoIndex;    // array element, if any
  std::string str() const;
};

// `s` made safe for a one-line message: control and non-ASCII bytes escaped, long text cut.
std::string printable(std::string_view s, size_t max_bytes = 80);

// Throws FormatError "<name>: <problem> (at byte offset <off>)".
[[noreturn]] void throw_at(const std::string& name, uint64_t off, const std::string& problem);

// Why `key` is not a valid metadata key (empty string if it is): 1..65535 bytes of printable
// ASCII, as the GGUF spec requires.
std::string key_problem(std::string_view key);
// Why `name` is not a valid tensor name: 1..65535 bytes without control characters.
std::string tensor_name_problem(std::string_view name);

class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size, const std::string& name) : p_(data), size_(size), name_(name) {}

  size_t pos() const { return pos_; }
  size_t left() const { return size_ - pos_; }
  const std::string& name() const { return name_; }

  [[noreturn]] void fail_at(uint64_t off, const std::string& problem) const { throw_at(name_, off, problem); }

  template <typename T>
  T read(const What& what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, p_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  uint32_t u32(const What& what) { return read<uint32_t>(what); }
  uint64_t u64(const What& what) { return read<uint64_t>(what); }

  // n raw bytes (n already known to be sane or checked here against what is left).
  const uint8_t* bytes(uint64_t n, const What& what) {
    need(n, what);
    const uint8_t* p = p_ + pos_;
    pos_ += n;
    return p;
  }
  // A GGUF string: u64 length + bytes (no terminator). `max_len` bounds names.
  std::string_view string(const What& what, uint64_t max_len = ~uint64_t{0});

 private:
  void need(uint64_t n, const What& what) const {
    if (n > left()) [[unlikely]]
      truncated(n, what);
  }
  [[noreturn]] void truncated(uint64_t n, const What& what) const;

  const uint8_t* p_;
  size_t size_;
  size_t pos_ = 0;
  const std::string& name_;
};

// Reads the u32 value type id and validates it.
ValueType read_value_type(Cursor& c, const What& what);
// Decodes one value of `type` (already validated) belonging to `key` into `out`.
// Arrays: element type must be a known non-array type; the count must fit in the bytes left.
void read_value(Cursor& c, ValueType type, std::string_view key, Value& out);

}  // namespace memra::gguf::detail
