// GGUF reader on the real fixtures (values cross-checked with gguf-py's GGUFReader) and the
// typed getters' conversion rules on crafted files.
#include <dirent.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "gguf/gguf.h"
#include "gguf_test_builder.h"
#include "test_util.h"

namespace memra::gguf {
namespace {

using test::enc_array;
using test::enc_str;
using test::enc_str_array;
using test::enc_u32;
using test::enc_u64;
using VT = ValueType;

int count_open_fds() {
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return -1;
  while (readdir(d) != nullptr) ++n;
  closedir(d);
  return n;
}

TEST(GgufReader, Qwen35TinyMetadata) {
  auto f = File::open(memra::test::fixture("qwen35-tiny.f32.gguf"));
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_EQ(f->file_size(), 3994112u);
  EXPECT_EQ(f->metadata().size(), 32u);  // gguf-py lists 35 fields, 3 of them the header's own
  EXPECT_EQ(f->metadata().front().first, "general.architecture");
  EXPECT_EQ(f->metadata().back().first, "tokenizer.chat_template");
  EXPECT_EQ(f->get_string("general.architecture"), "qwen35");
  EXPECT_EQ(f->get_u64("qwen35.block_count"), 4u);
  EXPECT_EQ(f->get_i64("qwen35.embedding_length"), 128);
  EXPECT_EQ(f->get_u64("qwen35.ssm.conv_kernel"), 4u);
  EXPECT_DOUBLE_EQ(f->get_f64("qwen35.rope.freq_base"), 1e7);
  EXPECT_EQ(f->find("qwen35.rope.freq_base")->type, VT::F32);
  auto tokens = f->get_string_array("tokenizer.ggml.tokens");
  EXPECT_EQ(tokens.size(), 1024u);
  EXPECT_EQ(f->get_int_array("tokenizer.ggml.token_type").size(), 1024u);
  EXPECT_EQ(f->get_string_array("tokenizer.ggml.merges").size(), 765u);
  auto sections = f->get_int_array("qwen35.rope.dimension_sections");
  EXPECT_EQ(sections.size(), 4u);
  EXPECT_EQ(f->find("qwen35.rope.dimension_sections")->elem_type, VT::I32);
  EXPECT_EQ(f->get_string("tokenizer.ggml.model"), "gpt2");
  EXPECT_FALSE(f->has("no.such.key"));
  EXPECT_EQ(f->get_u64_opt("no.such.key"), std::nullopt);
}

TEST(GgufReader, Qwen35TinyTensors) {
  const std::string path = memra::test::fixture("qwen35-tiny.f32.gguf");
  auto f = File::open(path);
  ASSERT_EQ(f->tensors().size(), 56u);
  const TensorInfo* conv = f->find_tensor("blk.0.ssm_conv1d.weight");
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(conv->type, GgmlType::F32);
  EXPECT_EQ(conv->n_dims, 2u);
  EXPECT_EQ(conv->ne[0], 4);
  EXPECT_EQ(conv->ne[1], 256);
  EXPECT_EQ(conv->ne[2], 1);
  EXPECT_EQ(conv->n_elements, 1024u);
  EXPECT_EQ(conv->n_bytes, 4096u);
  const TensorInfo* out = f->find_tensor("output.weight");
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(out->ne[0], 128);
  EXPECT_EQ(out->ne[1], 1024);
  EXPECT_EQ(out->offset, 0u);
  EXPECT_EQ(f->tensors()[0].name, "output.weight");  // file order preserved
  EXPECT_EQ(f->find_tensor("blk.99.nothing"), nullptr);

  // gguf-py reports the data section at byte 31680; compare tensor bytes against a plain read.
  const size_t data_offset = 31680;
  EXPECT_EQ(f->data_offset(), data_offset);
  EXPECT_EQ(f->data_section(), f->tensor_data(*out));
  auto bytes = memra::test::read_bytes(path);
  ASSERT_EQ(bytes.size(), f->file_size());
  uint64_t end = 0;
  for (const TensorInfo& t : f->tensors()) {
    ASSERT_LE(data_offset + t.offset + t.n_bytes, bytes.size()) << t.name;
    EXPECT_EQ(std::memcmp(f->tensor_data(t), bytes.data() + data_offset + t.offset, t.n_bytes), 0) << t.name;
    EXPECT_EQ(t.offset % 32, 0u) << t.name;
    EXPECT_EQ(t.n_bytes, t.n_elements * 4) << t.name;
    end = std::max(end, data_offset + t.offset + t.n_bytes);
  }
  EXPECT_EQ(end, bytes.size());  // the last tensor is a 32-byte multiple: no trailing padding
  float w0;
  std::memcpy(&w0, f->tensor_data(*conv), 4);
  EXPECT_TRUE(std::isfinite(w0));
}

TEST(GgufReader, Qwen3VocabOnlyFile) {
  auto f = File::open(memra::test::fixture("qwen3-vocab.gguf"));
  EXPECT_EQ(f->tensors().size(), 0u);
  auto tokens = f->get_string_array("tokenizer.ggml.tokens");
  ASSERT_EQ(tokens.size(), 151936u);
  EXPECT_EQ(tokens[0], "!");
  EXPECT_EQ(f->get_int_array("tokenizer.ggml.token_type").size(), 151936u);
  EXPECT_EQ(f->get_string_array("tokenizer.ggml.merges").size(), 151387u);
  auto tmpl = f->get_string("tokenizer.chat_template");
  EXPECT_GT(tmpl.size(), 100u);
  EXPECT_NE(tmpl.find("<|im_start|>"), std::string_view::npos);
  EXPECT_EQ(f->get_bool_opt("tokenizer.ggml.add_bos_token").has_value(), true);
  EXPECT_EQ(f->get_string("general.architecture"), "qwen3");
  // No tensors and no padding after the tensor table: the data section is the end of the file.
  EXPECT_EQ(f->data_section(), f->tensor_data(TensorInfo{}));
  EXPECT_EQ(f->data_offset(), f->file_size());
}

TEST(GgufReader, AllFixturesLoad) {
  for (const char* name : {"qwen3-tiny.f32.gguf", "qwen35-tiny.f32.gguf", "qwen35moe-tiny.f32.gguf",
                           "qwen3next-tiny.f32.gguf", "qwen3-vocab.gguf"}) {
    auto f = File::open(memra::test::fixture(name));
    EXPECT_GT(f->metadata().size(), 10u) << name;
    EXPECT_EQ(f->path(), memra::test::fixture(name));
  }
}

TEST(GgufReader, MissingFileDirectoryAndEmptyFile) {
  const std::string missing = "/nonexistent-dir/model.gguf";
  try {
    File::open(missing);
    FAIL() << "no error";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("No such file"), std::string::npos) << e.what();
  }
  auto dir = std::filesystem::temp_directory_path();
  try {
    File::open(dir.string());
    FAIL() << "no error";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("directory"), std::string::npos) << e.what();
  }
  auto empty = dir / ("memra_gguf_empty_" + std::to_string(::getpid()) + ".gguf");
  { std::ofstream(empty.string()); }
  try {
    File::open(empty.string());
    FAIL() << "no error";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("empty"), std::string::npos) << e.what();
  }
  std::filesystem::remove(empty);
}

TEST(GgufReader, OpenClosesTheDescriptor) {
  const int before = count_open_fds();
  ASSERT_GT(before, 0);
  {
    auto f = File::open(memra::test::fixture("qwen35-tiny.f32.gguf"));
    EXPECT_EQ(count_open_fds(), before);  // the mapping stays, the fd does not
  }
  auto bad = std::filesystem::temp_directory_path() / ("memra_gguf_bad_" + std::to_string(::getpid()) + ".gguf");
  { std::ofstream(bad.string(), std::ios::binary) << "GGUF\x01\x00\x00\x00garbage"; }
  EXPECT_THROW(File::open(bad.string()), FormatError);
  EXPECT_EQ(count_open_fds(), before);
  std::filesystem::remove(bad);
}

TEST(GgufReader, FromMemoryMatchesOpen) {
  const std::string path = memra::test::fixture("qwen3-tiny.f32.gguf");
  auto bytes = memra::test::read_bytes(path);
  auto a = File::open(path);
  auto b = File::from_memory(bytes.data(), bytes.size(), "in-memory");
  EXPECT_EQ(b->path(), "in-memory");
  ASSERT_EQ(a->metadata().size(), b->metadata().size());
  for (size_t i = 0; i < a->metadata().size(); ++i) EXPECT_EQ(a->metadata()[i].first, b->metadata()[i].first);
  ASSERT_EQ(a->tensors().size(), b->tensors().size());
  for (size_t i = 0; i < a->tensors().size(); ++i) {
    EXPECT_EQ(a->tensors()[i].offset, b->tensors()[i].offset);
    EXPECT_EQ(std::memcmp(a->tensor_data(a->tensors()[i]), b->tensor_data(b->tensors()[i]), a->tensors()[i].n_bytes),
              0);
  }
}

// ---- getters on a crafted file holding every value type ----

class GgufGetters : public ::testing::Test {
 protected:
  void SetUp() override {
    bytes_ = test::build(test::small_valid_spec()).b;
    f_ = File::from_memory(bytes_.data(), bytes_.size(), "getters.gguf");
  }
  std::string error_of(const std::function<void()>& fn) {
    try {
      fn();
    } catch (const FormatError& e) {
      return e.what();
    }
    return "";
  }
  std::vector<uint8_t> bytes_;
  std::unique_ptr<File> f_;
};

TEST_F(GgufGetters, ScalarsOfEveryType) {
  EXPECT_EQ(f_->get_u64("tiny.u8"), 200u);
  EXPECT_EQ(f_->get_i64("tiny.i8"), -2);
  EXPECT_EQ(f_->get_u64("tiny.u16"), 0x1234u);
  EXPECT_EQ(f_->get_i64("tiny.i16"), -1);
  EXPECT_EQ(f_->get_u64("tiny.block_count"), 4u);
  EXPECT_EQ(f_->get_i64("tiny.i32"), -7);
  EXPECT_EQ(f_->get_f64("tiny.f32"), 1.5);
  EXPECT_EQ(f_->get_bool("tiny.bool"), true);
  EXPECT_EQ(f_->get_u64("tiny.u64"), uint64_t{1} << 40);
  EXPECT_EQ(f_->get_i64("tiny.i64"), -5);
  EXPECT_EQ(f_->get_f64("tiny.f64"), 0.25);
  EXPECT_EQ(f_->get_f64("tiny.block_count"), 4.0);  // integers read as doubles
  EXPECT_EQ(f_->get_f64("tiny.i64"), -5.0);
  EXPECT_EQ(f_->get_string("general.architecture"), "tiny");
  EXPECT_EQ(f_->get_string_opt("general.architecture"), "tiny");
  EXPECT_EQ(f_->get_u64_opt("tiny.u16"), 0x1234u);
  EXPECT_EQ(f_->get_f64_opt("tiny.f32"), 1.5);
  EXPECT_EQ(f_->get_bool_opt("tiny.bool"), true);
  EXPECT_EQ(f_->get_string_opt("missing"), std::nullopt);
  EXPECT_EQ(f_->get_f64_opt("missing"), std::nullopt);
  EXPECT_EQ(f_->get_bool_opt("missing"), std::nullopt);
  EXPECT_EQ(f_->metadata()[1].first, "tiny.u8");
}

TEST_F(GgufGetters, WrongTypeNamesKeyAndBothTypes) {
  std::string e = error_of([&] { f_->get_u64("general.architecture"); });
  EXPECT_NE(e.find("getters.gguf"), std::string::npos) << e;
  EXPECT_NE(e.find("'general.architecture'"), std::string::npos) << e;
  EXPECT_NE(e.find("string"), std::string::npos) << e;
  EXPECT_NE(e.find("unsigned integer"), std::string::npos) << e;
  e = error_of([&] { f_->get_string("tiny.block_count"); });
  EXPECT_NE(e.find("has type u32, expected string"), std::string::npos) << e;
  e = error_of([&] { f_->get_bool("tiny.u8"); });
  EXPECT_NE(e.find("has type u8, expected bool"), std::string::npos) << e;
  e = error_of([&] { f_->get_f64("tiny.bool"); });
  EXPECT_NE(e.find("has type bool"), std::string::npos) << e;
  e = error_of([&] { f_->get_u64_opt("tokenizer.ggml.tokens"); });
  EXPECT_NE(e.find("array of string"), std::string::npos) << e;
  e = error_of([&] { f_->get_u64("tiny.i32"); });  // -7 does not fit
  EXPECT_NE(e.find("-7"), std::string::npos) << e;
  EXPECT_NE(e.find("non-negative"), std::string::npos) << e;
  e = error_of([&] { f_->get_string("not.there"); });
  EXPECT_NE(e.find("'not.there' is missing"), std::string::npos) << e;
}

TEST_F(GgufGetters, Arrays) {
  auto tokens = f_->get_string_array("tokenizer.ggml.tokens");
  ASSERT_EQ(tokens.size(), 4u);
  EXPECT_EQ(tokens[2], "<|x|>");
  EXPECT_EQ(tokens[3], "");
  EXPECT_EQ(f_->get_int_array("tokenizer.ggml.token_type"), (std::vector<int64_t>{1, 1, 3, 1}));
  EXPECT_EQ(f_->get_int_array("tiny.sections"), (std::vector<int64_t>{8, -1}));
  EXPECT_EQ(f_->get_f64_array("tiny.sections"), (std::vector<double>{8.0, -1.0}));
  std::string e = error_of([&] { f_->get_int_array("tokenizer.ggml.tokens"); });
  EXPECT_NE(e.find("has type array of string, expected array of integers"), std::string::npos) << e;
  e = error_of([&] { f_->get_string_array("tiny.sections"); });
  EXPECT_NE(e.find("array of i32"), std::string::npos) << e;
  e = error_of([&] { f_->get_int_array("tiny.u8"); });
  EXPECT_NE(e.find("has type u8"), std::string::npos) << e;
}

TEST(GgufGetterConversions, IntArraysOfEveryIntegerType) {
  struct Case {
    VT type;
    std::vector<uint8_t> elems;
    std::vector<int64_t> want;
  };
  const std::vector<Case> cases = {
      {VT::U8, {1, 255}, {1, 255}},
      {VT::I8, {1, 0xff}, {1, -1}},
      {VT::U16, {1, 0, 0xff, 0xff}, {1, 65535}},
      {VT::I16, {1, 0, 0xfe, 0xff}, {1, -2}},
      {VT::U32, {1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}, {1, 4294967295}},
      {VT::I32, {1, 0, 0, 0, 0xfd, 0xff, 0xff, 0xff}, {1, -3}},
      {VT::U64, {1, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, {1, INT64_MAX}},
      {VT::I64, {1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x80}, {1, INT64_MIN}},
  };
  for (const auto& c : cases) {
    test::FileSpec s;
    s.kvs.push_back({"tokenizer.ggml.token_type", uint32_t(VT::ARRAY), enc_array(c.type, 2, c.elems)});
    auto bytes = test::build(s).b;
    auto f = File::from_memory(bytes.data(), bytes.size(), "conv.gguf");
    EXPECT_EQ(f->get_int_array("tokenizer.ggml.token_type"), c.want) << value_type_name(c.type);
  }
  // u64 values above INT64_MAX do not fit: an error naming the element, not a wrapped number.
  test::FileSpec s;
  s.kvs.push_back({"big", uint32_t(VT::ARRAY), enc_array(VT::U64, 1, enc_u64(~uint64_t{0}))});
  s.kvs.push_back({"big.scalar", uint32_t(VT::U64), enc_u64(~uint64_t{0})});
  s.kvs.push_back({"floats", uint32_t(VT::ARRAY), enc_array(VT::F32, 1, {0, 0, 0x80, 0x3f})});
  s.kvs.push_back({"huge.ints", uint32_t(VT::ARRAY), enc_array(VT::I64, 1, enc_u64(uint64_t{1} << 60))});
  auto bytes = test::build(s).b;
  auto f = File::from_memory(bytes.data(), bytes.size(), "conv.gguf");
  EXPECT_THROW(f->get_int_array("big"), FormatError);
  EXPECT_EQ(f->get_u64("big.scalar"), ~uint64_t{0});
  EXPECT_THROW(f->get_i64("big.scalar"), FormatError);
  EXPECT_THROW(f->get_int_array("floats"), FormatError);
  EXPECT_EQ(f->get_f64_array("floats"), std::vector<double>{1.0});
  EXPECT_THROW(f->get_f64_array("huge.ints"), FormatError);  // 2^60 is not exact as a double
}

TEST(GgufGetterConversions, BoolArraysAndEmptyArrays) {
  test::FileSpec s;
  s.kvs.push_back({"flags", uint32_t(VT::ARRAY), enc_array(VT::BOOL, 3, {1, 0, 1})});
  s.kvs.push_back({"empty", uint32_t(VT::ARRAY), enc_array(VT::I32, 0, {})});
  s.kvs.push_back({"empty.strings", uint32_t(VT::ARRAY), enc_str_array({})});
  auto bytes = test::build(s).b;
  auto f = File::from_memory(bytes.data(), bytes.size(), "arrays.gguf");
  EXPECT_EQ(f->find("flags")->count, 3u);
  EXPECT_THROW(f->get_int_array("flags"), FormatError);  // bools are not integers
  EXPECT_TRUE(f->get_int_array("empty").empty());
  EXPECT_TRUE(f->get_string_array("empty.strings").empty());
}

}  // namespace
}  // namespace memra::gguf
