// Hostile-input corpus for the GGUF reader: (a) truncation at many offsets, (b) deterministic
// random mutation, (c) one crafted file per bug class reported against GGUF loaders.
// Every case must end in a loaded file whose tensors lie inside the buffer or a FormatError;
// anything else (crash, ASan report, std::bad_alloc, other exception) fails the test.
// Buffers are exact-size heap copies so AddressSanitizer sees any read past the end.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <random>

#include "gguf/gguf.h"
#include "gguf_test_builder.h"
#include "test_util.h"

namespace memra::gguf {
namespace {

using test::build;
using test::Bytes;
using test::enc_array;
using test::enc_str;
using test::enc_str_array;
using test::enc_u32;
using test::enc_u64;
using test::ExactBuffer;
using test::FileSpec;
using test::parse_error;
using test::TensorSpec;
using VT = ValueType;

constexpr uint64_t kTwo63 = uint64_t{1} << 63;

// Walks everything a consumer could touch in a file that loaded. Returns true if it loaded.
bool load_and_touch(const uint8_t* p, size_t n) {
  std::unique_ptr<File> f;
  try {
    f = File::from_memory(p, n, "mutant.gguf");
  } catch (const FormatError&) {
    return false;
  }
  volatile uint8_t sink = 0;
  for (const TensorInfo& t : f->tensors()) {
    const uint8_t* d = f->tensor_data(t);
    EXPECT_GE(d, p) << t.name;
    EXPECT_LE(d, p + n) << t.name;
    EXPECT_LE(t.n_bytes, static_cast<uint64_t>(p + n - d)) << t.name;
    EXPECT_GT(t.n_bytes, 0u);
    if (d >= p && d <= p + n && t.n_bytes <= static_cast<uint64_t>(p + n - d)) sink = sink + d[0] + d[t.n_bytes - 1];
  }
  for (const auto& [key, v] : f->metadata()) {
    try {
      switch (v.type) {
        case VT::STRING:
          if (!v.str.empty()) sink = sink + static_cast<uint8_t>(v.str.back());
          break;
        case VT::ARRAY:
          if (v.elem_type == VT::STRING) {
            for (auto s : f->get_string_array(key))
              if (!s.empty()) sink = sink + static_cast<uint8_t>(s.front()) + static_cast<uint8_t>(s.back());
          } else if (v.elem_type == VT::F32 || v.elem_type == VT::F64) {
            sink = sink + static_cast<uint8_t>(f->get_f64_array(key).size());
          } else {
            sink = sink + static_cast<uint8_t>(f->get_int_array(key).size());
          }
          break;
        case VT::BOOL: sink = sink + f->get_bool(key); break;
        case VT::F32: case VT::F64: sink = sink + static_cast<uint8_t>(f->get_f64(key)); break;
        default: sink = sink + static_cast<uint8_t>(f->get_i64(key));
      }
    } catch (const FormatError&) {
      // conversions a mutant value does not allow (e.g. a u64 past INT64_MAX) are fine
    }
  }
  (void)sink;
  return true;
}

// ---------------------------------------------------------------- (a) truncation

TEST(GgufCorpusTruncation, CraftedFileAtEveryByte) {
  const std::vector<uint8_t> full = build(test::small_valid_spec()).b;
  ASSERT_EQ(parse_error(full), "");  // the intact file loads: the truncations below must fail
  for (size_t n = 0; n < full.size(); ++n) {
    std::vector<uint8_t> cut(full.begin(), full.begin() + static_cast<ptrdiff_t>(n));
    std::string msg = parse_error(cut);
    ASSERT_NE(msg, "") << "truncated to " << n << " of " << full.size() << " bytes, it still loaded";
    EXPECT_EQ(msg.rfind("crafted.gguf: ", 0), 0u) << msg;
  }
}

// Truncates a real fixture at `count` pseudo-random offsets below the byte the file needs
// (weighted towards the header region, where the parser works) and checks each is refused.
void truncate_fixture(const std::string& name, int count, uint32_t seed) {
  const std::vector<uint8_t> full = memra::test::read_bytes(memra::test::fixture(name));
  ASSERT_GT(full.size(), 0u);
  auto f = File::from_memory(full.data(), full.size(), name);
  const size_t data_start = static_cast<size_t>(f->data_section() - full.data());
  size_t needed = data_start;  // a truncated file must lose at least one byte it needs
  for (const TensorInfo& t : f->tensors()) needed = std::max<size_t>(needed, data_start + t.offset + t.n_bytes);
  if (f->tensors().empty()) needed = full.size();
  std::mt19937_64 rng(seed);
  for (int i = 0; i < count; ++i) {
    const size_t limit = (i % 3 == 0) ? needed : std::min(needed, data_start + 64);
    const size_t n = static_cast<size_t>(rng() % limit);
    ExactBuffer buf(full.data(), n);
    try {
      File::from_memory(buf.p.get(), buf.n, name);
      ADD_FAILURE() << name << " truncated to " << n << " bytes still loaded";
    } catch (const FormatError& e) {
      EXPECT_EQ(std::string(e.what()).rfind(name + ": ", 0), 0u) << e.what();
    }
  }
}

TEST(GgufCorpusTruncation, Qwen35TinyAtManyOffsets) { truncate_fixture("qwen35-tiny.f32.gguf", 300, 1); }
TEST(GgufCorpusTruncation, Qwen3VocabAtManyOffsets) { truncate_fixture("qwen3-vocab.gguf", 40, 2); }

// ---------------------------------------------------------------- (b) mutation

const uint64_t kExtremes[] = {0,          1,           2,          31,         32,          0x7fffffff,
                              0x80000000, 0xffffffff,  uint64_t{1} << 32,       uint64_t{1} << 60,
                              uint64_t{1} << 62,       kTwo63 - 1, kTwo63,      ~uint64_t{0} - 7,
                              ~uint64_t{0}};

// Applies one random edit to buf[lo, region): a bit flip, a random byte, or an extreme u32/u64
// at a random (possibly unaligned) position or at one of the known u64 fields.
void mutate(uint8_t* buf, size_t lo, size_t region, const std::vector<size_t>& u64_fields, std::mt19937_64& rng) {
  const size_t pos = lo + static_cast<size_t>(rng() % (region - lo));
  switch (rng() % 5) {
    case 0: buf[pos] ^= static_cast<uint8_t>(1u << (rng() % 8)); break;
    case 1: buf[pos] = static_cast<uint8_t>(rng()); break;
    case 2: {
      uint64_t v = (rng() % 2) ? kExtremes[rng() % std::size(kExtremes)] : rng();
      size_t at = std::min(pos, region - 8);  // regions are >= 8 bytes
      std::memcpy(buf + at, &v, 8);
      break;
    }
    case 3: {
      uint32_t v = static_cast<uint32_t>((rng() % 2) ? kExtremes[rng() % std::size(kExtremes)] : rng());
      size_t at = std::min(pos, region - 4);
      std::memcpy(buf + at, &v, 4);
      break;
    }
    default: {
      if (u64_fields.empty()) break;
      size_t at = u64_fields[rng() % u64_fields.size()];
      if (at + 8 > region) break;
      uint64_t old;
      std::memcpy(&old, buf + at, 8);
      uint64_t v = kExtremes[rng() % std::size(kExtremes)];
      if (rng() % 3 == 0) v = old + (rng() % 64) - 32;  // near-miss lengths and offsets
      std::memcpy(buf + at, &v, 8);
    }
  }
}

struct MutationStats {
  int loaded = 0;
  int rejected = 0;
};

// `rounds` mutants of `original`, each 1-3 edits inside [lo, region), restored in place after.
MutationStats run_mutations(const std::vector<uint8_t>& original, size_t lo, size_t region,
                            const std::vector<size_t>& fields, int rounds, uint64_t seed) {
  ExactBuffer buf(original);
  std::mt19937_64 rng(seed);
  MutationStats stats;
  for (int r = 0; r < rounds; ++r) {
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) mutate(buf.p.get(), lo, region, fields, rng);
    if (load_and_touch(buf.p.get(), buf.n))
      ++stats.loaded;
    else
      ++stats.rejected;
    std::memcpy(buf.p.get() + lo, original.data() + lo, region - lo);
    if (::testing::Test::HasFailure()) {
      ADD_FAILURE() << "first failing mutation: round " << r << " of seed " << seed;
      break;
    }
  }
  return stats;
}

TEST(GgufCorpusMutation, CraftedFile) {
  const Bytes file = build(test::small_valid_spec());
  MutationStats total;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    MutationStats s = run_mutations(file.b, 0, file.b.size(), file.u64_fields, 1000, seed);
    total.loaded += s.loaded;
    total.rejected += s.rejected;
  }
  // Both outcomes occur (a mutation in a string's bytes or tensor data is harmless).
  EXPECT_GT(total.rejected, 1000);
  EXPECT_GT(total.loaded, 50);
}

TEST(GgufCorpusMutation, Qwen35TinyHeader) {
  const std::vector<uint8_t> full = memra::test::read_bytes(memra::test::fixture("qwen35-tiny.f32.gguf"));
  auto f = File::from_memory(full.data(), full.size(), "qwen35-tiny");
  const size_t header = static_cast<size_t>(f->data_section() - full.data());
  // The tensor table (the end of the header) and the first bytes steer parsing the most: aim
  // there, and also anywhere in the header (mostly string bytes, usually harmless).
  const TensorInfo& first = f->tensors().front();
  std::string marker(8, '\0');
  const uint64_t len = first.name.size();
  std::memcpy(marker.data(), &len, 8);
  marker += first.name;
  const std::string_view header_view(reinterpret_cast<const char*>(full.data()), header);
  const size_t table = header_view.rfind(marker);
  ASSERT_NE(table, std::string_view::npos);
  MutationStats a = run_mutations(full, table, header, {}, 700, 11);
  MutationStats b = run_mutations(full, 0, 64, {}, 300, 12);
  MutationStats c = run_mutations(full, 0, header, {}, 300, 13);
  EXPECT_GT(a.rejected + b.rejected + c.rejected, 500);
  EXPECT_GT(a.loaded + b.loaded + c.loaded, 0);
}

// ---------------------------------------------------------------- (c) crafted files

// The file must be refused with a message that names it and contains `needle`.
void expect_rejected(const std::vector<uint8_t>& bytes, const std::string& needle) {
  const std::string msg = parse_error(bytes);
  ASSERT_NE(msg, "") << "expected an error containing: " << needle;
  EXPECT_EQ(msg.rfind("crafted.gguf: ", 0), 0u) << msg;
  EXPECT_NE(msg.find(needle), std::string::npos) << msg;
}
void expect_rejected(const FileSpec& s, const std::string& needle) { expect_rejected(build(s).b, needle); }

FileSpec with_tensor(TensorSpec t) {
  FileSpec s;
  s.tensors.push_back(std::move(t));
  return s;
}
FileSpec with_kv(std::string key, VT type, std::vector<uint8_t> value) {
  FileSpec s;
  s.kvs.push_back({std::move(key), static_cast<uint32_t>(type), std::move(value)});
  return s;
}

TEST(GgufCorpusCrafted, ValidBaselinesLoad) {
  EXPECT_EQ(parse_error(build(FileSpec{}).b), "");
  EXPECT_EQ(parse_error(build(with_tensor({"t", {8, 2}, 0, 0, {}})).b), "");
  FileSpec v2 = test::small_valid_spec();
  v2.version = 2;
  EXPECT_EQ(parse_error(build(v2).b), "");
}

TEST(GgufCorpusCrafted, BadMagic) {
  std::vector<uint8_t> b = build(FileSpec{}).b;
  b[0] = 'G', b[1] = 'G', b[2] = 'M', b[3] = 'L';
  expect_rejected(b, "not a GGUF file");
  expect_rejected(std::vector<uint8_t>{}, "too small");
  expect_rejected(std::vector<uint8_t>{'G', 'G', 'U'}, "too small");
  expect_rejected(std::vector<uint8_t>{'G', 'G', 'U', 'F'}, "file ends inside the version");
}

TEST(GgufCorpusCrafted, Version1And99AndBigEndian) {
  FileSpec s;
  s.version = 1;
  expect_rejected(s, "version 1 is not supported");
  s.version = 99;
  expect_rejected(s, "unsupported GGUF version 99 (supported: 2 and 3) (at byte offset 4)");
  s.version = 0x03000000;
  expect_rejected(s, "big-endian");
  s.version = 0;
  expect_rejected(s, "unsupported GGUF version 0");
}

TEST(GgufCorpusCrafted, StringLength2Pow63) {
  Bytes v;
  v.u64(kTwo63);
  v.raw("abc", 3);
  expect_rejected(with_kv("general.name", VT::STRING, v.b), "claims 9223372036854775808 bytes");
}

TEST(GgufCorpusCrafted, StringLength2Pow64Minus1) {
  expect_rejected(with_kv("general.name", VT::STRING, enc_u64(~uint64_t{0})), "claims 18446744073709551615 bytes");
  // Also as a key length and a tensor name length.
  Bytes b;
  b.raw("GGUF", 4);
  b.u32(3);
  b.u64(0);
  b.u64(1);
  b.u64(~uint64_t{0});
  b.raw("general.name", 12);
  expect_rejected(b.b, "metadata key is 18446744073709551615 bytes long");
  Bytes t;
  t.raw("GGUF", 4);
  t.u32(3);
  t.u64(1);
  t.u64(0);
  t.u64(kTwo63);
  for (int i = 0; i < 40; ++i) t.u8(0);
  expect_rejected(t.b, "tensor name is 9223372036854775808 bytes long");
}

TEST(GgufCorpusCrafted, ArrayCount2Pow62) {
  expect_rejected(with_kv("tokenizer.ggml.token_type", VT::ARRAY, enc_array(VT::U8, uint64_t{1} << 62, {1, 2, 3})),
                  "claims 4611686018427387904 u8 elements");
  expect_rejected(with_kv("tokenizer.ggml.tokens", VT::ARRAY, enc_array(VT::STRING, uint64_t{1} << 62, enc_str("a"))),
                  "claims 4611686018427387904 string elements");
  expect_rejected(with_kv("x", VT::ARRAY, enc_array(VT::U64, (~uint64_t{0}) / 8 + 1, {})), "u64 elements");
  // A plausible count one element past the end of the file is still caught (the padding is cut
  // off here; with it, the third element would be read from the padding, which is valid).
  Bytes b = build(with_kv("x", VT::ARRAY, enc_array(VT::I32, 3, {1, 0, 0, 0, 2, 0, 0, 0})));
  b.b.resize(24 + (8 + 1 + 4) + (4 + 8 + 8));
  expect_rejected(b.b, "claims 3 i32 elements");
}

TEST(GgufCorpusCrafted, TensorAndKeyCounts2Pow60) {
  FileSpec s = test::small_valid_spec();
  s.tensor_count = uint64_t{1} << 60;
  expect_rejected(s, "tensor count 1152921504606846976 is absurd");
  s = test::small_valid_spec();
  s.kv_count = uint64_t{1} << 60;
  expect_rejected(s, "metadata key count 1152921504606846976 is absurd");
  s = test::small_valid_spec();
  s.kv_count = ~uint64_t{0};
  s.tensor_count = ~uint64_t{0};
  expect_rejected(s, "is absurd");
  // Plausible counts the bytes cannot hold are refused before anything is reserved.
  s = test::small_valid_spec();
  s.tensor_count = 1000;
  expect_rejected(s, "tensor count 1000 is impossible");
  s = test::small_valid_spec();
  s.kv_count = 100000;
  expect_rejected(s, "metadata key count 100000 is impossible");
  // Counts that each fit the bytes but not together, or one more than the file holds.
  s = test::small_valid_spec();
  s.kv_count = s.kvs.size() + 1;
  expect_rejected(s, "crafted.gguf");
}

TEST(GgufCorpusCrafted, DimensionProductOverflow) {
  expect_rejected(with_tensor({"t", {uint64_t{1} << 32, uint64_t{1} << 32, uint64_t{1} << 16}, 0, 0, {}}),
                  "element count overflows 64 bits");
  // Elements fit in int64, bytes (x4 for f32) do not.
  expect_rejected(with_tensor({"t", {uint64_t{1} << 31, uint64_t{1} << 31}, 0, 0, {}}), "byte size overflows");
  // Fits in 64 bits but not in the file.
  expect_rejected(with_tensor({"t", {uint64_t{1} << 20, uint64_t{1} << 20}, 0, 0, {}}),
                  "extends past the end of the file");
}

TEST(GgufCorpusCrafted, DimensionCounts) {
  TensorSpec t{"t", {1, 1, 1, 1, 1}, 0, 0, {}};
  expect_rejected(with_tensor(t), "has 5 dimensions (1 to 4 supported)");
  t = {"t", {}, 0, 0, {}};
  expect_rejected(with_tensor(t), "has 0 dimensions");
  t = {"t", {4}, 0, 0, 0xffffffffu};
  expect_rejected(with_tensor(t), "has 4294967295 dimensions");
}

TEST(GgufCorpusCrafted, ZeroAndNegativeDimensions) {
  // Zero-sized tensors are refused (see gguf.cpp): no model has one.
  expect_rejected(with_tensor({"t", {4, 0}, 0, 0, {}}), "ne[1] = 0");
  expect_rejected(with_tensor({"t", {kTwo63}, 0, 0, {}}), "ne[0] = 9223372036854775808");
  expect_rejected(with_tensor({"t", {~uint64_t{0}}, 0, 0, {}}), "must be between 1 and 2^63-1");
}

TEST(GgufCorpusCrafted, UnknownTensorTypeIds) {
  expect_rejected(with_tensor({"t", {32}, 4, 0, {}}), "unknown ggml type id 4");
  expect_rejected(with_tensor({"t", {32}, 5, 0, {}}), "unknown ggml type id 5");
  expect_rejected(with_tensor({"t", {32}, 1000, 0, {}}), "unknown ggml type id 1000");
  expect_rejected(with_tensor({"t", {32}, 0xffffffffu, 0, {}}), "unknown ggml type id 4294967295");
}

TEST(GgufCorpusCrafted, BlockSizeMismatch) {
  expect_rejected(with_tensor({"q", {33, 2}, 2 /* q4_0 */, 0, {}}), "ne[0] = 33, not a multiple of the block size 32");
  expect_rejected(with_tensor({"k", {128}, 12 /* q4_k */, 0, {}}), "block size 256");
}

TEST(GgufCorpusCrafted, Alignment) {
  auto spec = [](VT type, std::vector<uint8_t> value) {
    FileSpec s = with_kv("general.alignment", type, std::move(value));
    s.tensors.push_back({"t", {8}, 0, 0, {}});
    return s;
  };
  expect_rejected(spec(VT::U32, enc_u32(0)), "general.alignment is 0 (must be a power of two)");
  expect_rejected(spec(VT::U32, enc_u32(3)), "general.alignment is 3 (must be a power of two)");
  expect_rejected(spec(VT::U32, enc_u32(0x80000000u)), "general.alignment is 2147483648 (at most 1048576");
  expect_rejected(spec(VT::STRING, enc_str("32")), "general.alignment has type string (must be u32)");
  expect_rejected(spec(VT::U64, enc_u64(32)), "general.alignment has type u64 (must be u32)");
  expect_rejected(spec(VT::ARRAY, enc_array(VT::U32, 1, enc_u32(32))), "has type array of u32");
  // A valid non-default alignment is honoured for padding and offsets.
  FileSpec ok = spec(VT::U32, enc_u32(64));
  ok.alignment = 64;
  ok.tensors.push_back({"u", {8}, 0, 64, {}});
  EXPECT_EQ(parse_error(build(ok).b), "");
  ok.tensors[1].offset = 32;  // aligned for the default, not for 64
  expect_rejected(ok, "offset 32 is not a multiple of the alignment 64");
}

TEST(GgufCorpusCrafted, TensorOffsets) {
  FileSpec s = with_tensor({"t", {8}, 0, 1 << 20, {}});
  s.data_bytes = 64;
  expect_rejected(s, "tensor 't' data (offset 1048576, 32 bytes) extends past the end of the file");
  s = with_tensor({"t", {8}, 0, 64, {}});
  s.data_bytes = 64;  // ends one tensor short
  expect_rejected(s, "extends past the end");
  s = with_tensor({"t", {8}, 0, ~uint64_t{0} - 31, {}});  // aligned, offset + size wraps
  expect_rejected(s, "extends past the end");
  expect_rejected(with_tensor({"t", {8}, 0, 16, {}}), "offset 16 is not a multiple of the alignment 32");
  expect_rejected(with_tensor({"t", {8}, 0, 1, {}}), "not a multiple of the alignment");
  // Tensor table ends, but the file stops before its data section starts.
  Bytes b = build(with_tensor({"t", {8}, 0, 0, {}}));
  ASSERT_EQ(b.b.size(), 96u);  // 57-byte header + table, padding to 64, 32 data bytes
  b.b.erase(b.b.begin() + 63, b.b.end());
  expect_rejected(b.b, "file ends before its data section");
}

TEST(GgufCorpusCrafted, OverlappingTensors) {
  FileSpec s;
  s.tensors.push_back({"a", {16}, 0, 0, {}});   // bytes 0..64
  s.tensors.push_back({"b", {8}, 0, 32, {}});   // bytes 32..64
  expect_rejected(s, "tensors 'a' (bytes 0..64) and 'b' (bytes 32..64) overlap");
  s.tensors[1].offset = 0;  // same start
  expect_rejected(s, "overlap");
  s.tensors[1].offset = 64;  // adjacent is fine
  EXPECT_EQ(parse_error(build(s).b), "");
  // Overlap detected regardless of declaration order.
  s.tensors = {{"late", {8}, 0, 96, {}}, {"early", {32}, 0, 0, {}}};
  expect_rejected(s, "overlap");
}

TEST(GgufCorpusCrafted, DuplicateKeyAndTensorName) {
  FileSpec s = with_kv("general.name", VT::STRING, enc_str("a"));
  s.kvs.push_back({"general.name", uint32_t(VT::U32), enc_u32(1)});
  expect_rejected(s, "duplicate metadata key 'general.name'");
  s = with_tensor({"w", {8}, 0, 0, {}});
  s.tensors.push_back({"w", {8}, 0, 32, {}});
  expect_rejected(s, "duplicate tensor name 'w'");
}

TEST(GgufCorpusCrafted, TokenTypeStoredAsU8) {
  FileSpec s = with_kv("tokenizer.ggml.token_type", VT::ARRAY, enc_array(VT::U8, 5, {1, 1, 3, 4, 6}));
  const std::vector<uint8_t> bytes = build(s).b;
  auto f = File::from_memory(bytes.data(), bytes.size(), "crafted.gguf");
  EXPECT_EQ(f->get_int_array("tokenizer.ggml.token_type"), (std::vector<int64_t>{1, 1, 3, 4, 6}));
}

TEST(GgufCorpusCrafted, WrongMetadataTypeForGetter) {
  FileSpec s = with_kv("qwen35.block_count", VT::STRING, enc_str("four"));
  const std::vector<uint8_t> bytes = build(s).b;
  auto f = File::from_memory(bytes.data(), bytes.size(), "crafted.gguf");
  try {
    f->get_u64("qwen35.block_count");
    FAIL() << "no error";
  } catch (const FormatError& e) {
    EXPECT_STREQ(e.what(), "crafted.gguf: metadata key 'qwen35.block_count' has type string, expected an unsigned "
                           "integer");
  }
  EXPECT_THROW(f->get_int_array("qwen35.block_count"), FormatError);
  EXPECT_THROW(f->get_f64("qwen35.block_count"), FormatError);
}

TEST(GgufCorpusCrafted, NestedArray) {
  Bytes inner;
  inner.u32(uint32_t(VT::ARRAY));
  inner.u64(1);
  inner.u32(uint32_t(VT::U8));
  inner.u64(1);
  inner.u8(7);
  expect_rejected(with_kv("x", VT::ARRAY, inner.b), "nested arrays are not supported");
}

TEST(GgufCorpusCrafted, UnknownValueTypesAndBadBools) {
  expect_rejected(with_kv("x", static_cast<VT>(13), {0, 0, 0, 0}), "unknown metadata value type 13");
  expect_rejected(with_kv("x", static_cast<VT>(0xffffffffu), {0, 0, 0, 0}), "unknown metadata value type 4294967295");
  expect_rejected(with_kv("x", VT::ARRAY, enc_array(static_cast<VT>(99), 0, {})), "unknown array element type 99");
  expect_rejected(with_kv("x", VT::BOOL, {2}), "bool value of 'x' is 2");
  expect_rejected(with_kv("x", VT::ARRAY, enc_array(VT::BOOL, 2, {0, 9})), "bool element 1 of 'x' is 9");
}

TEST(GgufCorpusCrafted, InvalidNames) {
  expect_rejected(with_kv("", VT::U8, {1}), "metadata key is empty");
  expect_rejected(with_kv("bad\x01key", VT::U8, {1}), "contains byte 0x01");
  expect_rejected(with_kv("caf\xc3\xa9", VT::U8, {1}), "printable ASCII");
  expect_rejected(with_kv(std::string(70000, 'k'), VT::U8, {1}), "at most 65535 allowed");
  expect_rejected(with_tensor({"", {8}, 0, 0, {}}), "tensor name is empty");
  expect_rejected(with_tensor({"a\nb", {8}, 0, 0, {}}), "control byte 0x0a");
}

TEST(GgufCorpusCrafted, ErrorsNameTheFileAndOffset) {
  // The key-length field of the first entry sits right after the 24-byte header.
  expect_rejected(with_kv("x", VT::STRING, enc_u64(kTwo63)), "(at byte offset 37)");
  FileSpec s;
  s.version = 99;
  const std::string msg = parse_error(build(s).b, "/models/m.gguf");
  EXPECT_EQ(msg, "/models/m.gguf: unsupported GGUF version 99 (supported: 2 and 3) (at byte offset 4)");
}

}  // namespace
}  // namespace memra::gguf
