// GGUF writer (v3). Streaming: declare all metadata and tensor infos, then write tensor data in
// declaration order, so multi-gigabyte files (synth 27B) never sit in memory whole.
#pragma once

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <unordered_set>
#include <vector>

#include "common/ggml_type.h"
#include "gguf/gguf.h"

namespace memra::gguf {

class Writer {
 public:
  explicit Writer(std::string path, uint64_t alignment = 32);
  ~Writer();  // closes the file; an unfinished file is removed
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  // Metadata, in the order given.
  void add_u8(const std::string& key, uint8_t v);
  void add_u16(const std::string& key, uint16_t v);
  void add_u32(const std::string& key, uint32_t v);
  void add_i32(const std::string& key, int32_t v);
  void add_u64(const std::string& key, uint64_t v);
  void add_f32(const std::string& key, float v);
  void add_bool(const std::string& key, bool v);
  void add_string(const std::string& key, const std::string& v);
  void add_string_array(const std::string& key, const std::vector<std::string>& v);
  void add_i32_array(const std::string& key, const std::vector<int32_t>& v);
  void add_f32_array(const std::string& key, const std::vector<float>& v);
  // Raw escape hatch for tests that craft unusual files: value bytes exactly as on disk.
  void add_raw(const std::string& key, ValueType type, std::vector<uint8_t> value_bytes);

  // Tensor table. ne in ggml order (ne[0] fastest). Size is derived from type and ne.
  void add_tensor(const std::string& name, GgmlType type, std::vector<int64_t> ne);

  // Writes header, metadata and tensor table. Call once, after all add_* calls.
  void write_header();
  // Appends the data of the next declared tensor (or part of it: call repeatedly until its
  // byte count is reached). Padding between tensors is written automatically.
  void write_tensor_data(const void* data, size_t bytes);
  // Checks every declared byte was written, flushes and closes. Throws on I/O error.
  void finish();

 private:
  struct Pending { std::string name; GgmlType type; std::vector<int64_t> ne; uint64_t bytes; uint64_t offset; };
  std::string path_;
  uint64_t alignment_;
  std::FILE* f_ = nullptr;
  std::vector<uint8_t> meta_;  // serialized kv pairs
  uint64_t n_kv_ = 0;
  std::vector<Pending> tensors_;
  size_t current_ = 0;          // tensor being written
  uint64_t current_written_ = 0;
  uint64_t data_pos_ = 0;       // bytes written into the data section
  bool header_done_ = false;
  bool finished_ = false;
  // Added by the implementation: validation state and the temporary file written until finish().
  std::unordered_set<std::string> keys_;
  std::unordered_set<std::string> tensor_names_;
  std::string tmp_path_;  // path_ + ".partial"; renamed to path_ by finish()

  void add_kv(const std::string& key, ValueType type, const void* value, size_t n);
  void write_bytes(const void* p, size_t n);
  void write_zeros(uint64_t n);
};

}  // namespace memra::gguf
