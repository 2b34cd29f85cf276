// GGUF reader: memory-maps a file (or adopts a buffer), validates everything before use, and
// exposes metadata and the tensor table. Every length and offset read from the file is checked
// against the bytes that remain, so a truncated, corrupted or hostile file produces a
// gguf::FormatError naming the file and the problem; never a crash, hang or giant allocation.
//
// Format (v2/v3, little-endian): magic "GGUF", u32 version, u64 tensor_count, u64 kv_count,
// kv pairs (string key, u32 value type, value), tensor infos (string name, u32 n_dims,
// u64 ne[n_dims], u32 ggml type, u64 offset relative to the data section), padding to
// `general.alignment` (default 32), data section.
//
// Split models (llama.cpp's gguf-split layout): files `<prefix>-00001-of-0000N.gguf` ..
// `-0000N-of-0000N.gguf`, each a whole GGUF with `split.no` (0-based), `split.count` and
// `split.tensors.count`; the first also holds the model's metadata. Opening the first opens and
// validates every part and lists all their tensors as one table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/error.h"
#include "common/ggml_type.h"

namespace memra::gguf {

class FormatError : public Error {
 public:
  using Error::Error;
};

enum class ValueType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7,
  STRING = 8, ARRAY = 9, U64 = 10, I64 = 11, F64 = 12,
};
const char* value_type_name(ValueType t);

// One metadata value. Scalars are decoded; strings and arrays point into the file's bytes
// (valid while the File lives). Array elements of scalar type are stored packed, unaligned.
struct Value {
  ValueType type = ValueType::U8;
  // scalars
  uint64_t u = 0;  // unsigned integer types and BOOL
  int64_t i = 0;   // signed integer types
  double f = 0;    // F32 / F64
  std::string_view str;  // STRING
  // arrays
  ValueType elem_type = ValueType::U8;
  uint64_t count = 0;
  const uint8_t* elems = nullptr;          // packed scalar elements (non-string arrays)
  std::vector<std::string_view> strings;   // string arrays
  // nested arrays are rejected by the reader (no model uses them).
};

struct TensorInfo {
  std::string name;
  GgmlType type = GgmlType::F32;
  uint32_t n_dims = 0;
  int64_t ne[4] = {1, 1, 1, 1};  // ggml order: ne[0] is the fastest-varying dimension
  uint64_t offset = 0;           // relative to the data section, multiple of the alignment
  uint64_t n_elements = 0;
  uint64_t n_bytes = 0;
  uint32_t part = 0;  // the file of a split model that holds the data (0: the one opened)
};

class File {
 public:
  // Opens and validates `path` (mmap, read-only), and the other parts of a split model. Throws
  // FormatError.
  static std::unique_ptr<File> open(const std::string& path);
  // Validates an in-memory image (not copied; must outlive the File). `name` is used in errors.
  static std::unique_ptr<File> from_memory(const uint8_t* data, size_t size, std::string name);
  ~File();
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  size_t file_size() const { return size_; }

  // ---- metadata ----
  const std::vector<std::pair<std::string, Value>>& metadata() const { return kv_; }
  const Value* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }
  // Typed getters. Missing key or wrong type -> FormatError naming file, key, expected and
  // actual type. Integer getters accept any integer type whose value fits.
  std::string_view get_string(std::string_view key) const;
  uint64_t get_u64(std::string_view key) const;
  int64_t get_i64(std::string_view key) const;
  double get_f64(std::string_view key) const;  // F32, F64, or an integer type
  bool get_bool(std::string_view key) const;
  std::optional<std::string_view> get_string_opt(std::string_view key) const;
  std::optional<uint64_t> get_u64_opt(std::string_view key) const;
  std::optional<double> get_f64_opt(std::string_view key) const;
  std::optional<bool> get_bool_opt(std::string_view key) const;
  // Arrays. Element types are converted when lossless (e.g. token_type stored as u8 or i32),
  // otherwise FormatError.
  std::vector<std::string_view> get_string_array(std::string_view key) const;
  std::vector<int64_t> get_int_array(std::string_view key) const;
  std::vector<double> get_f64_array(std::string_view key) const;

  // ---- tensors ----
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;
  const uint8_t* tensor_data(const TensorInfo& t) const {
    return (t.part == 0 ? data_ : parts_[t.part - 1]->data_) + t.offset;
  }
  // Asks the OS to start reading a tensor's bytes now, all of them (a mapped file: readahead of
  // the whole range instead of page by page as a copy touches it). Advice only: nothing happens
  // where it is not taken (a file in memory, an OS that refuses).
  void prefetch(const TensorInfo& t) const;
  // Files of the model: 1, or split.count of a split model.
  size_t part_count() const { return parts_.size() + 1; }
  const uint8_t* data_section() const { return data_; }
  // Byte offset of the data section in the file (the file size for a file without tensors
  // that omits the final padding).
  uint64_t data_offset() const { return static_cast<uint64_t>(data_ - base_); }

 private:
  File() = default;
  static std::unique_ptr<File> open_one(const std::string& path);
  void parse();
  void open_parts();

  std::string path_;
  const uint8_t* base_ = nullptr;
  size_t size_ = 0;
  bool mapped_ = false;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  const uint8_t* data_ = nullptr;
  std::vector<std::pair<std::string, Value>> kv_;
  std::unordered_map<std::string, size_t> kv_index_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;
  std::vector<std::unique_ptr<File>> parts_;  // parts 2.. of a split model
};

}  // namespace memra::gguf
