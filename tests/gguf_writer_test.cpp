// gguf::Writer: round trips through the reader (every value type, arrays, tensors of several
// types, alignment 32 and 64), streaming in pieces, and refusal of invalid input.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

#include "gguf/gguf.h"
#include "gguf/writer.h"
#include "quant/quant.h"

namespace memra::gguf {
namespace {

namespace fs = std::filesystem;
using VT = ValueType;

// A scratch path unique to this process and test, removed afterwards.
class GgufWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = std::string(info->test_suite_name()) + "_" + info->name();
    for (char& c : name)
      if (c == '/') c = '_';
    dir_ = fs::temp_directory_path() / ("memra_gguf_writer_" + std::to_string(::getpid()) + "_" + name);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& file) const { return (dir_ / file).string(); }
  fs::path dir_;
};

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

template <typename T>
std::vector<uint8_t> le(T v) {
  std::vector<uint8_t> b(sizeof v);
  std::memcpy(b.data(), &v, sizeof v);
  return b;
}

std::vector<uint8_t> array_bytes(VT elem, uint64_t count, const std::vector<uint8_t>& elems) {
  std::vector<uint8_t> b = le(static_cast<uint32_t>(elem));
  auto c = le(count);
  b.insert(b.end(), c.begin(), c.end());
  b.insert(b.end(), elems.begin(), elems.end());
  return b;
}

struct TensorCase {
  std::string name;
  GgmlType type;
  std::vector<int64_t> ne;
};

class GgufWriterRoundTrip : public GgufWriterTest, public ::testing::WithParamInterface<uint64_t> {};

TEST_P(GgufWriterRoundTrip, EveryValueTypeAndTensorType) {
  const uint64_t alignment = GetParam();
  const std::string file = path("round.gguf");
  const std::vector<TensorCase> tensors = {
      {"token_embd.weight", GgmlType::F32, {16, 3}},
      {"blk.0.attn_q.weight", GgmlType::F16, {5, 2, 3}},  // 60 bytes: forces padding
      {"blk.0.ffn_up.weight", GgmlType::Q8_0, {64, 2}},
      {"blk.0.ffn_down.weight", GgmlType::Q4_K, {256, 1, 1, 2}},
      {"blk.0.norm", GgmlType::BF16, {7}},
      {"positions", GgmlType::I32, {3}},
  };
  std::vector<std::vector<uint8_t>> data;
  {
    Writer w(file, alignment);
    w.add_string("general.architecture", "test");
    w.add_u8("v.u8", 250);
    w.add_u32("v.u32", 4000000000u);
    w.add_i32("v.i32", -123456);
    w.add_u64("v.u64", ~uint64_t{0});
    w.add_f32("v.f32", 3.25f);
    w.add_bool("v.true", true);
    w.add_bool("v.false", false);
    w.add_string("v.string", "h\xc3\xa9llo\nworld");
    w.add_string("v.empty", "");
    w.add_string_array("v.strings", {"a", "", "<|im_end|>", std::string(300, 'x')});
    w.add_i32_array("v.i32s", {1, -2, INT32_MAX, INT32_MIN});
    w.add_f32_array("v.f32s", {0.5f, -1.0f});
    w.add_raw("v.i8", VT::I8, le<int8_t>(-8));
    w.add_raw("v.u16", VT::U16, le<uint16_t>(65000));
    w.add_raw("v.i16", VT::I16, le<int16_t>(-300));
    w.add_raw("v.i64", VT::I64, le<int64_t>(INT64_MIN));
    w.add_raw("v.f64", VT::F64, le<double>(1e-300));
    w.add_raw("v.u8s", VT::ARRAY, array_bytes(VT::U8, 3, {1, 2, 3}));
    w.add_raw("v.bools", VT::ARRAY, array_bytes(VT::BOOL, 2, {1, 0}));
    w.add_raw("v.u64s", VT::ARRAY, array_bytes(VT::U64, 1, le<uint64_t>(7)));
    w.add_raw("v.f64s", VT::ARRAY, array_bytes(VT::F64, 1, le<double>(2.5)));
    w.add_raw("v.none", VT::ARRAY, array_bytes(VT::I16, 0, {}));
    for (size_t i = 0; i < tensors.size(); ++i) w.add_tensor(tensors[i].name, tensors[i].type, tensors[i].ne);
    w.write_header();
    for (size_t i = 0; i < tensors.size(); ++i) {
      const auto& t = tensors[i];
      const auto& ti = quant::type_info(t.type);
      size_t bytes = quant::row_bytes(t.type, t.ne[0]);
      for (size_t d = 1; d < t.ne.size(); ++d) bytes *= static_cast<size_t>(t.ne[d]);
      ASSERT_GT(ti.block_bytes, 0u);
      data.push_back(random_bytes(bytes, static_cast<uint32_t>(i + 1)));
      // Stream odd-sized pieces to exercise partial writes.
      for (size_t pos = 0; pos < bytes; pos += 7)
        w.write_tensor_data(data[i].data() + pos, std::min<size_t>(7, bytes - pos));
    }
    w.finish();
  }
  EXPECT_FALSE(fs::exists(file + ".partial"));
  auto f = File::open(file);
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), alignment);
  EXPECT_EQ(f->file_size() % alignment, 0u);  // padded after the last tensor, like ggml
  if (alignment == 32) {
    EXPECT_FALSE(f->has("general.alignment"));
    EXPECT_EQ(f->metadata().size(), 23u);
  } else {
    EXPECT_EQ(f->find("general.alignment")->type, VT::U32);
    EXPECT_EQ(f->get_u64("general.alignment"), alignment);
    EXPECT_EQ(f->metadata().size(), 24u);
  }
  EXPECT_EQ(f->metadata()[alignment == 32 ? 0 : 1].first, "general.architecture");
  EXPECT_EQ(f->metadata().back().first, "v.none");
  EXPECT_EQ(f->get_string("general.architecture"), "test");
  EXPECT_EQ(f->find("v.u8")->type, VT::U8);
  EXPECT_EQ(f->get_u64("v.u8"), 250u);
  EXPECT_EQ(f->get_u64("v.u32"), 4000000000u);
  EXPECT_EQ(f->get_i64("v.i32"), -123456);
  EXPECT_EQ(f->get_u64("v.u64"), ~uint64_t{0});
  EXPECT_EQ(f->get_f64("v.f32"), 3.25);
  EXPECT_EQ(f->find("v.f32")->type, VT::F32);
  EXPECT_TRUE(f->get_bool("v.true"));
  EXPECT_FALSE(f->get_bool("v.false"));
  EXPECT_EQ(f->get_string("v.string"), "h\xc3\xa9llo\nworld");
  EXPECT_EQ(f->get_string("v.empty"), "");
  auto strings = f->get_string_array("v.strings");
  ASSERT_EQ(strings.size(), 4u);
  EXPECT_EQ(strings[2], "<|im_end|>");
  EXPECT_EQ(strings[3], std::string(300, 'x'));
  EXPECT_EQ(f->get_int_array("v.i32s"), (std::vector<int64_t>{1, -2, INT32_MAX, INT32_MIN}));
  EXPECT_EQ(f->get_f64_array("v.f32s"), (std::vector<double>{0.5, -1.0}));
  EXPECT_EQ(f->get_i64("v.i8"), -8);
  EXPECT_EQ(f->find("v.i8")->type, VT::I8);
  EXPECT_EQ(f->get_u64("v.u16"), 65000u);
  EXPECT_EQ(f->get_i64("v.i16"), -300);
  EXPECT_EQ(f->get_i64("v.i64"), INT64_MIN);
  EXPECT_EQ(f->get_f64("v.f64"), 1e-300);
  EXPECT_EQ(f->get_int_array("v.u8s"), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(f->find("v.bools")->elem_type, VT::BOOL);
  EXPECT_EQ(f->find("v.bools")->elems[0], 1);
  EXPECT_EQ(f->get_int_array("v.u64s"), std::vector<int64_t>{7});
  EXPECT_EQ(f->get_f64_array("v.f64s"), std::vector<double>{2.5});
  EXPECT_EQ(f->find("v.none")->count, 0u);

  ASSERT_EQ(f->tensors().size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorInfo& t = f->tensors()[i];
    EXPECT_EQ(t.name, tensors[i].name);
    EXPECT_EQ(t.type, tensors[i].type);
    EXPECT_EQ(t.n_dims, tensors[i].ne.size());
    for (size_t d = 0; d < 4; ++d) EXPECT_EQ(t.ne[d], d < tensors[i].ne.size() ? tensors[i].ne[d] : 1);
    EXPECT_EQ(t.offset % alignment, 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(f->tensor_data(t)) % alignment, 0u);  // mmap is page-aligned
    ASSERT_EQ(t.n_bytes, data[i].size()) << t.name;
    EXPECT_EQ(std::memcmp(f->tensor_data(t), data[i].data(), t.n_bytes), 0) << t.name;
  }
}

INSTANTIATE_TEST_SUITE_P(GgufAlignments, GgufWriterRoundTrip, ::testing::Values(32, 64, 4096));

TEST_F(GgufWriterTest, MetadataOnlyFile) {
  const std::string file = path("vocab.gguf");
  Writer w(file);
  w.add_string_array("tokenizer.ggml.tokens", {"a", "b"});
  w.write_header();
  w.finish();
  auto f = File::open(file);
  EXPECT_EQ(f->tensors().size(), 0u);
  EXPECT_EQ(f->get_string_array("tokenizer.ggml.tokens").size(), 2u);
}

TEST_F(GgufWriterTest, LargeTensorWrittenInOneCall) {
  const std::string file = path("big.gguf");
  auto data = random_bytes(4 << 20, 99);
  Writer w(file);
  w.add_tensor("big", GgmlType::F32, {1024, 1024});
  w.add_tensor("small", GgmlType::F16, {2});
  w.write_header();
  w.write_tensor_data(data.data(), data.size());
  uint16_t small[2] = {1, 2};
  w.write_tensor_data(small, 0);  // empty pieces are fine
  w.write_tensor_data(small, sizeof small);
  w.finish();
  auto f = File::open(file);
  EXPECT_EQ(std::memcmp(f->tensor_data(*f->find_tensor("big")), data.data(), data.size()), 0);
  EXPECT_EQ(std::memcmp(f->tensor_data(*f->find_tensor("small")), small, 4), 0);
  EXPECT_EQ(f->find_tensor("small")->offset, 4u << 20);
}

TEST_F(GgufWriterTest, RefusesInvalidMetadata) {
  Writer w(path("x.gguf"));
  w.add_u32("a.b", 1);
  EXPECT_THROW(w.add_u32("a.b", 2), Error);            // duplicate
  EXPECT_THROW(w.add_string("", "x"), Error);          // empty key
  EXPECT_THROW(w.add_u8("bad\nkey", 1), Error);        // control character
  EXPECT_THROW(w.add_u8(std::string(70000, 'k'), 1), Error);
  EXPECT_THROW(w.add_u32("general.alignment", 64), Error);  // use the constructor
  EXPECT_THROW(w.add_raw("raw.short", VT::U32, {1, 2}), Error);
  EXPECT_THROW(w.add_raw("raw.long", VT::U32, {1, 2, 3, 4, 5}), Error);
  EXPECT_THROW(w.add_raw("raw.str", VT::STRING, le<uint64_t>(10)), Error);  // length past the bytes
  EXPECT_THROW(w.add_raw("raw.nested", VT::ARRAY, array_bytes(VT::ARRAY, 0, {})), Error);
  EXPECT_THROW(w.add_raw("raw.bool", VT::BOOL, {2}), Error);
  EXPECT_THROW(w.add_raw("raw.type", static_cast<VT>(13), {0}), Error);
  w.add_raw("raw.ok", VT::U16, {1, 2});
}

TEST_F(GgufWriterTest, RefusesInvalidTensors) {
  Writer w(path("x.gguf"));
  w.add_tensor("ok", GgmlType::Q4_0, {64});
  EXPECT_THROW(w.add_tensor("ok", GgmlType::F32, {1}), Error);        // duplicate name
  EXPECT_THROW(w.add_tensor("q", GgmlType::Q4_0, {33}), Error);       // not whole blocks
  EXPECT_THROW(w.add_tensor("z", GgmlType::F32, {4, 0}), Error);      // empty dimension
  EXPECT_THROW(w.add_tensor("n", GgmlType::F32, {-1}), Error);
  EXPECT_THROW(w.add_tensor("d", GgmlType::F32, {1, 1, 1, 1, 1}), Error);
  EXPECT_THROW(w.add_tensor("d0", GgmlType::F32, {}), Error);
  EXPECT_THROW(w.add_tensor("t", static_cast<GgmlType>(4), {1}), Error);  // removed Q4_2
  EXPECT_THROW(w.add_tensor("o", GgmlType::F32, {int64_t{1} << 32, int64_t{1} << 32, 1 << 16}), Error);
  EXPECT_THROW(w.add_tensor(std::string(64, 'n'), GgmlType::F32, {1}), Error);  // ggml name limit
  EXPECT_THROW(w.add_tensor("", GgmlType::F32, {1}), Error);
}

TEST_F(GgufWriterTest, RefusesBadAlignment) {
  EXPECT_THROW(Writer(path("a.gguf"), 0), Error);
  EXPECT_THROW(Writer(path("a.gguf"), 48), Error);
  EXPECT_THROW(Writer(path("a.gguf"), uint64_t{1} << 21), Error);
}

TEST_F(GgufWriterTest, RefusesOutOfOrderCalls) {
  const std::string file = path("order.gguf");
  Writer w(file);
  w.add_tensor("t", GgmlType::F32, {4});
  EXPECT_THROW(w.write_tensor_data("abcd", 4), Error);  // before header
  EXPECT_THROW(w.finish(), Error);
  w.write_header();
  EXPECT_THROW(w.write_header(), Error);
  EXPECT_THROW(w.add_u32("late", 1), Error);
  EXPECT_THROW(w.add_tensor("late", GgmlType::F32, {4}), Error);
  float four[5] = {};
  EXPECT_THROW(w.write_tensor_data(four, 20), Error);  // more than the tensor holds
  w.write_tensor_data(four, 8);
  EXPECT_THROW(w.finish(), Error);  // 8 of 16 bytes
  w.write_tensor_data(four, 8);
  EXPECT_THROW(w.write_tensor_data(four, 4), Error);  // all tensors complete
  w.finish();
  EXPECT_THROW(w.finish(), Error);
  EXPECT_NO_THROW(File::open(file));
}

TEST_F(GgufWriterTest, UnfinishedFileIsRemoved) {
  const std::string file = path("unfinished.gguf");
  {
    Writer w(file);
    w.add_tensor("t", GgmlType::F32, {4});
    w.write_header();
    EXPECT_TRUE(fs::exists(file + ".partial"));
    float two[2] = {};
    w.write_tensor_data(two, sizeof two);
  }
  EXPECT_FALSE(fs::exists(file));
  EXPECT_FALSE(fs::exists(file + ".partial"));
}

TEST_F(GgufWriterTest, UnwritableDirectoryIsAClearError) {
  Writer w(path("no/such/dir/x.gguf"));
  try {
    w.write_header();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot create"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace memra::gguf
