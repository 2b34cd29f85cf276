// Byte-level GGUF builder for the reader tests. Unlike gguf::Writer (which refuses invalid
// input) it writes whatever it is told, so tests can craft hostile files: impossible counts,
// huge lengths, unknown type ids, misaligned or overlapping tensors.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "quant/quant.h"

namespace memra::gguf::test {

// Appends little-endian fields; remembers where every u64 went (lengths, counts, dims, offsets)
// so mutation tests can aim at the fields that steer the reader.
struct Bytes {
  std::vector<uint8_t> b;
  std::vector<size_t> u64_fields;

  void raw(const void* p, size_t n) {
    const auto* c = static_cast<const uint8_t*>(p);
    b.insert(b.end(), c, c + n);
  }
  void u8(uint8_t v) { b.push_back(v); }
  void u16(uint16_t v) { raw(&v, 2); }
  void u32(uint32_t v) { raw(&v, 4); }
  void u64(uint64_t v) {
    u64_fields.push_back(b.size());
    raw(&v, 8);
  }
  void str(const std::string& s) {
    u64(s.size());
    raw(s.data(), s.size());
  }
  void pad_to(uint64_t alignment, uint8_t fill = 0) {
    while (b.size() % alignment != 0) b.push_back(fill);
  }
};

// Encoded metadata values (the bytes after the u32 type id).
inline std::vector<uint8_t> enc_u32(uint32_t v) {
  Bytes x;
  x.u32(v);
  return x.b;
}
inline std::vector<uint8_t> enc_u64(uint64_t v) {
  Bytes x;
  x.u64(v);
  return x.b;
}
inline std::vector<uint8_t> enc_str(const std::string& s) {
  Bytes x;
  x.str(s);
  return x.b;
}
// Array header + raw element bytes.
inline std::vector<uint8_t> enc_array(gguf::ValueType elem, uint64_t count, const std::vector<uint8_t>& elems) {
  Bytes x;
  x.u32(static_cast<uint32_t>(elem));
  x.u64(count);
  x.raw(elems.data(), elems.size());
  return x.b;
}
inline std::vector<uint8_t> enc_str_array(const std::vector<std::string>& v) {
  Bytes x;
  x.u32(static_cast<uint32_t>(gguf::ValueType::STRING));
  x.u64(v.size());
  for (const auto& s : v) x.str(s);
  return x.b;
}

struct KvSpec {
  std::string key;
  uint32_t type;               // ValueType id, possibly invalid
  std::vector<uint8_t> value;  // encoded value bytes
};

struct TensorSpec {
  std::string name;
  std::vector<uint64_t> ne;
  uint32_t type = 0;  // ggml type id, possibly invalid
  uint64_t offset = 0;
  std::optional<uint32_t> n_dims;  // default ne.size()
};

struct FileSpec {
  uint32_t version = 3;
  std::optional<uint64_t> tensor_count;  // default tensors.size()
  std::optional<uint64_t> kv_count;      // default kvs.size()
  std::vector<KvSpec> kvs;
  std::vector<TensorSpec> tensors;
  uint64_t alignment = 32;             // padding before the data section
  std::optional<uint64_t> data_bytes;  // default: up to the end of the furthest tensor
};

// Size of a tensor as the reader should compute it, or 0 when unknown or absurd.
inline uint64_t spec_bytes(const TensorSpec& t) {
  const quant::TypeInfo* ti = quant::type_info(t.type);
  if (ti == nullptr || t.ne.empty()) return 0;
  unsigned __int128 n = t.ne[0] / static_cast<uint64_t>(ti->block_elems) * ti->block_bytes;
  for (size_t d = 1; d < t.ne.size(); ++d) n *= t.ne[d];
  return n > (uint64_t{1} << 24) ? 0 : static_cast<uint64_t>(n);
}

inline Bytes build(const FileSpec& s) {
  Bytes x;
  x.raw("GGUF", 4);
  x.u32(s.version);
  x.u64(s.tensor_count.value_or(s.tensors.size()));
  x.u64(s.kv_count.value_or(s.kvs.size()));
  for (const auto& kv : s.kvs) {
    x.str(kv.key);
    x.u32(kv.type);
    x.raw(kv.value.data(), kv.value.size());
  }
  uint64_t end = 0;
  for (const auto& t : s.tensors) {
    x.str(t.name);
    x.u32(t.n_dims.value_or(static_cast<uint32_t>(t.ne.size())));
    for (uint64_t n : t.ne) x.u64(n);
    x.u32(t.type);
    x.u64(t.offset);
    uint64_t bytes = spec_bytes(t);
    if (bytes > 0 && t.offset < (uint64_t{1} << 24)) end = std::max(end, t.offset + bytes);
  }
  x.pad_to(s.alignment);
  uint64_t n = s.data_bytes.value_or(end);
  for (uint64_t i = 0; i < n; ++i) x.u8(static_cast<uint8_t>(i * 131 + 7));
  return x;
}

// A valid file using every value type, a string array, and tensors of three types whose data
// ends exactly at the end of the file (so every truncation must be detected).
inline FileSpec small_valid_spec() {
  using VT = gguf::ValueType;
  FileSpec s;
  auto kv = [&](std::string k, VT t, std::vector<uint8_t> v) { s.kvs.push_back({std::move(k), uint32_t(t), v}); };
  kv("general.architecture", VT::STRING, enc_str("tiny"));
  kv("tiny.u8", VT::U8, {200});
  kv("tiny.i8", VT::I8, {0xfe});
  kv("tiny.u16", VT::U16, {0x34, 0x12});
  kv("tiny.i16", VT::I16, {0xff, 0xff});
  kv("tiny.block_count", VT::U32, enc_u32(4));
  kv("tiny.i32", VT::I32, enc_u32(0xfffffff9u));
  float f = 1.5f;
  std::vector<uint8_t> fb(4);
  std::memcpy(fb.data(), &f, 4);
  kv("tiny.f32", VT::F32, fb);
  kv("tiny.bool", VT::BOOL, {1});
  kv("tiny.u64", VT::U64, enc_u64(uint64_t{1} << 40));
  kv("tiny.i64", VT::I64, enc_u64(static_cast<uint64_t>(-5)));
  double d = 0.25;
  std::vector<uint8_t> db(8);
  std::memcpy(db.data(), &d, 8);
  kv("tiny.f64", VT::F64, db);
  kv("tokenizer.ggml.tokens", VT::ARRAY, enc_str_array({"a", "b", "<|x|>", ""}));
  kv("tokenizer.ggml.token_type", VT::ARRAY, enc_array(VT::U8, 4, {1, 1, 3, 1}));
  kv("tiny.sections", VT::ARRAY, enc_array(VT::I32, 2, {8, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}));
  s.tensors.push_back({"token_embd.weight", {32, 2}, 8 /* q8_0: 34 bytes/block */, 0, {}});
  s.tensors.push_back({"blk.0.attn_norm.weight", {8}, 0 /* f32 */, 96, {}});
  s.tensors.push_back({"blk.0.ffn.weight", {4, 3}, 1 /* f16 */, 128, {}});
  return s;
}

// A copy of `bytes` in a heap block of exactly that size, so AddressSanitizer flags any read
// one past the end (a slice of a larger buffer would hide it).
struct ExactBuffer {
  std::unique_ptr<uint8_t[]> p;
  size_t n;
  ExactBuffer(const uint8_t* src, size_t size) : p(new uint8_t[size]), n(size) {
    if (size) std::memcpy(p.get(), src, size);
  }
  explicit ExactBuffer(const std::vector<uint8_t>& v) : ExactBuffer(v.data(), v.size()) {}
};

// Parses `bytes`; returns the FormatError message ("" if it loaded).
inline std::string parse_error(const std::vector<uint8_t>& bytes, const std::string& name = "crafted.gguf") {
  ExactBuffer buf(bytes);
  try {
    auto f = gguf::File::from_memory(buf.p.get(), buf.n, name);
    return "";
  } catch (const gguf::FormatError& e) {
    return e.what();
  }
}

}  // namespace memra::gguf::test
