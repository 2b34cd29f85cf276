// Row entry points: dot_row against dequantize_row, dequantize_rows, row_bytes, block sizes
// against the type table, and errors for types memra cannot handle.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "common/error.h"
#include "quant/blocks.h"
#include "quant/quant.h"
#include "quant_test_util.h"

namespace memra::quant {
namespace {

std::vector<GgmlType> decodable_types() {
  std::vector<GgmlType> out;
  for (uint32_t id = 0; id < kGgmlTypeCount; ++id)
    if (const TypeInfo* info = type_info(id); info && info->decodable) out.push_back(static_cast<GgmlType>(id));
  return out;
}

TEST(QuantDispatch, DecodableAndEncodableSetsAreTheOnesImplemented) {
  const std::vector<std::string> expected = {"f32",  "f16",  "q4_0", "q4_1", "q5_0",   "q5_1",   "q8_0", "q2_k",
                                             "q3_k", "q4_k", "q5_k", "q6_k", "iq4_nl", "iq4_xs", "bf16"};
  std::vector<std::string> dec, enc;
  for (uint32_t id = 0; id < kGgmlTypeCount; ++id) {
    const TypeInfo* info = type_info(id);
    if (info && info->decodable) dec.push_back(info->name);
    if (info && info->encodable) enc.push_back(info->name);
  }
  EXPECT_EQ(dec, expected);
  EXPECT_EQ(enc, expected);
}

TEST(QuantDispatch, BlockStructSizesMatchTypeTable) {
  EXPECT_EQ(sizeof(BlockQ4_0), type_info(GgmlType::Q4_0).block_bytes);
  EXPECT_EQ(sizeof(BlockQ4_1), type_info(GgmlType::Q4_1).block_bytes);
  EXPECT_EQ(sizeof(BlockQ5_0), type_info(GgmlType::Q5_0).block_bytes);
  EXPECT_EQ(sizeof(BlockQ5_1), type_info(GgmlType::Q5_1).block_bytes);
  EXPECT_EQ(sizeof(BlockQ8_0), type_info(GgmlType::Q8_0).block_bytes);
  EXPECT_EQ(sizeof(BlockQ2_K), type_info(GgmlType::Q2_K).block_bytes);
  EXPECT_EQ(sizeof(BlockQ3_K), type_info(GgmlType::Q3_K).block_bytes);
  EXPECT_EQ(sizeof(BlockQ4_K), type_info(GgmlType::Q4_K).block_bytes);
  EXPECT_EQ(sizeof(BlockQ5_K), type_info(GgmlType::Q5_K).block_bytes);
  EXPECT_EQ(sizeof(BlockQ6_K), type_info(GgmlType::Q6_K).block_bytes);
  EXPECT_EQ(sizeof(BlockIQ4_NL), type_info(GgmlType::IQ4_NL).block_bytes);
  EXPECT_EQ(sizeof(BlockIQ4_XS), type_info(GgmlType::IQ4_XS).block_bytes);
  EXPECT_EQ(type_info(GgmlType::Q4_0).block_elems, kQK);
  EXPECT_EQ(type_info(GgmlType::Q4_K).block_elems, kQK_K);
}

TEST(QuantDispatch, RowBytes) {
  EXPECT_EQ(row_bytes(GgmlType::F32, 7), 28u);
  EXPECT_EQ(row_bytes(GgmlType::F16, 10), 20u);
  EXPECT_EQ(row_bytes(GgmlType::BF16, 3), 6u);
  EXPECT_EQ(row_bytes(GgmlType::Q4_0, 64), 36u);
  EXPECT_EQ(row_bytes(GgmlType::Q4_1, 4096), 128u * 20);
  EXPECT_EQ(row_bytes(GgmlType::Q5_0, 32), 22u);
  EXPECT_EQ(row_bytes(GgmlType::Q5_1, 96), 72u);
  EXPECT_EQ(row_bytes(GgmlType::Q8_0, 4096), 128u * 34);
  EXPECT_EQ(row_bytes(GgmlType::Q2_K, 512), 168u);
  EXPECT_EQ(row_bytes(GgmlType::Q3_K, 256), 110u);
  EXPECT_EQ(row_bytes(GgmlType::Q4_K, 4096), 16u * 144);
  EXPECT_EQ(row_bytes(GgmlType::Q5_K, 768), 3u * 176);
  EXPECT_EQ(row_bytes(GgmlType::Q6_K, 2560), 10u * 210);
  EXPECT_EQ(row_bytes(GgmlType::Q6_K, 0), 0u);
}

TEST(QuantDot, EqualsSequentialDoubleDotOfDequantizedRow) {
  for (GgmlType t : decodable_types()) {
    SCOPED_TRACE(type_name(t));
    for (int64_t n : {int64_t{256}, int64_t{2560}}) {
      const std::vector<float> w = test::normal_vector(100 + n, static_cast<size_t>(n));
      std::vector<float> x = test::normal_vector(200 + n, static_cast<size_t>(n), 3.0f);
      // Magnitudes spread over 2^-30 .. 2^30 make the double sum round, so a different order
      // of accumulation (per-block partial sums, pairwise, several accumulators) shows.
      for (int64_t i = 0; i < n; ++i) x[i] = std::ldexp(x[i], static_cast<int>((i * 13) % 61) - 30);
      std::vector<uint8_t> row(row_bytes(t, n));
      quantize_row(t, w.data(), row.data(), n);
      std::vector<float> y(static_cast<size_t>(n));
      dequantize_row(t, row.data(), y.data(), n);
      double ref = 0.0;
      for (int64_t i = 0; i < n; ++i) ref += static_cast<double>(y[i]) * static_cast<double>(x[i]);
      const double got = dot_row(t, row.data(), x.data(), n);
      EXPECT_EQ(std::memcmp(&got, &ref, sizeof got), 0) << got << " vs " << ref;
      // Sanity: the reference is not trivially zero.
      EXPECT_NE(ref, 0.0);
    }
  }
}

TEST(QuantDot, ReadsOnlyItsRow) {
  // A row inside a larger buffer at an odd offset: neighbouring garbage must not leak in.
  const int64_t n = 512;
  for (GgmlType t : decodable_types()) {
    SCOPED_TRACE(type_name(t));
    const std::vector<float> w = test::normal_vector(7, n);
    const std::vector<float> x = test::normal_vector(8, n);
    std::vector<uint8_t> row(row_bytes(t, n));
    quantize_row(t, w.data(), row.data(), n);
    std::vector<uint8_t> buf(row.size() + 3, 0xFF);
    std::memcpy(buf.data() + 1, row.data(), row.size());
    EXPECT_EQ(dot_row(t, buf.data() + 1, x.data(), n), dot_row(t, row.data(), x.data(), n));
  }
}

TEST(QuantDispatch, DequantizeRowsMatchesRowByRow) {
  const int64_t rows = 3, cols = 512;
  for (GgmlType t : decodable_types()) {
    SCOPED_TRACE(type_name(t));
    const std::vector<float> w = test::normal_vector(5, static_cast<size_t>(rows * cols));
    const size_t rb = row_bytes(t, cols);
    std::vector<uint8_t> data(rb * rows);
    for (int64_t r = 0; r < rows; ++r) quantize_row(t, w.data() + r * cols, data.data() + r * rb, cols);
    std::vector<float> all(static_cast<size_t>(rows * cols), -7.0f);
    dequantize_rows(t, data.data(), all.data(), rows, cols);
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<float> one(static_cast<size_t>(cols));
      dequantize_row(t, data.data() + r * rb, one.data(), cols);
      ASSERT_EQ(std::vector<float>(all.begin() + r * cols, all.begin() + (r + 1) * cols), one) << r;
    }
  }
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no memra::Error thrown>";
}

TEST(QuantDispatch, UnsupportedTypesAreUserErrors) {
  std::vector<uint8_t> buf(4096, 0);
  std::vector<float> out(256), x(256, 1.0f);
  const std::string msg = error_of([&] { dequantize_row(GgmlType::IQ2_XXS, buf.data(), out.data(), 256); });
  EXPECT_NE(msg.find("tensor type iq2_xxs is not supported by memra (supported: f32, f16, q4_0"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("q6_k, iq4_nl, iq4_xs, bf16)"), std::string::npos) << msg;
  for (GgmlType t : {GgmlType::Q8_1, GgmlType::Q8_K, GgmlType::IQ3_S, GgmlType::I32, GgmlType::F64,
                     GgmlType::TQ2_0, GgmlType::MXFP4}) {
    SCOPED_TRACE(type_name(t));
    const int64_t n = type_info(t).block_elems == 1 ? 32 : type_info(t).block_elems;
    EXPECT_THROW(dequantize_row(t, buf.data(), out.data(), n), Error);
    EXPECT_THROW(dequantize_rows(t, buf.data(), out.data(), 1, n), Error);
    EXPECT_THROW(dot_row(t, buf.data(), x.data(), n), Error);
    const std::string enc = error_of([&] { quantize_row(t, x.data(), buf.data(), n); });
    EXPECT_NE(enc.find(type_name(t)), std::string::npos) << enc;
  }
  // Ids the format never defined (4 and 5 were removed types) and ids past the table.
  for (uint32_t id : {4u, 5u, 31u, kGgmlTypeCount, 1000u}) {
    const std::string m = error_of([&] { dequantize_row(static_cast<GgmlType>(id), buf.data(), out.data(), 32); });
    EXPECT_NE(m.find("unknown"), std::string::npos) << id << ": " << m;
    EXPECT_THROW(quantize_row(static_cast<GgmlType>(id), x.data(), buf.data(), 32), Error);
  }
}

}  // namespace
}  // namespace memra::quant
