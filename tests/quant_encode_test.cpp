// Encoders: encode -> decode round trips with stated error bounds, exactly representable
// inputs, special blocks, and failure on non-finite input.
//
// Bounds (Gaussian data, sigma 1, 2^18 elements; measured values in brackets):
//   relative RMS error  Q4_0 < 0.095 [0.086]  Q4_1 < 0.087 [0.078]  Q5_0 < 0.048 [0.043]
//                       Q5_1 < 0.043 [0.038]  Q8_0 < 0.006 [0.0053] Q2_K < 0.30 [0.276]
//                       Q3_K < 0.16 [0.148]   Q4_K < 0.082 [0.074]  Q5_K < 0.041 [0.037]
//                       Q6_K < 0.020 [0.018]  F16 < 2^-11           BF16 < 2^-8
//                       IQ4_NL < 0.088 [0.080] IQ4_XS < 0.088 [0.080]
//   (for F16 / BF16 the same figure bounds each element's relative error, and f16
//   subnormals' absolute error is at most 2^-25)
//   per element, from the format math (d, m = the block's stored f16 scale / min):
//     Q8_0       |y - x| <= 0.563 |d|     (half a step, plus 127 codes times f16 rounding of d)
//     Q4_0, Q5_0 |y - x| <= 1.01 |d|      (the value opposite the largest one may clip one code)
//     Q4_1       |y - x| <= 0.51 d + |m| 2^-10;  Q5_1: 0.52 d + |m| 2^-10
//     K-quants   |y - x| <= c * (largest |x| of the 256-element super-block), c = 0.5 (Q2_K),
//                0.35 (Q3_K), 0.1 (Q4_K), 0.06 (Q5_K), 0.035 (Q6_K), 0.13 (IQ4_XS): coarse, since
//                the sub-block scales are themselves quantized against one super-block scale.
//     IQ4_NL     |y - x| <= 14.1 |d|      (half the table's widest gap, 113 to 127)
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "common/error.h"
#include "quant/quant.h"
#include "quant_test_util.h"

namespace memra::quant {
namespace {

struct Bound {
  GgmlType type;
  double rel_rms;
  double k_amax;  // K-quants: per-element bound as a fraction of the super-block max |x|
};

const Bound kBounds[] = {
    {GgmlType::Q4_0, 0.095, 0}, {GgmlType::Q4_1, 0.087, 0}, {GgmlType::Q5_0, 0.048, 0},
    {GgmlType::Q5_1, 0.043, 0}, {GgmlType::Q8_0, 0.006, 0}, {GgmlType::Q2_K, 0.30, 0.5},
    {GgmlType::Q3_K, 0.16, 0.35}, {GgmlType::Q4_K, 0.082, 0.1}, {GgmlType::Q5_K, 0.041, 0.06},
    {GgmlType::Q6_K, 0.020, 0.035}, {GgmlType::F16, 0x1p-11, 0}, {GgmlType::BF16, 0x1p-8, 0},
    {GgmlType::IQ4_NL, 0.088, 0}, {GgmlType::IQ4_XS, 0.088, 0.13},
};

std::vector<uint8_t> encode(GgmlType t, const std::vector<float>& x) {
  std::vector<uint8_t> b(row_bytes(t, static_cast<int64_t>(x.size())));
  quantize_row(t, x.data(), b.data(), static_cast<int64_t>(x.size()));
  return b;
}

std::vector<float> decode(GgmlType t, const std::vector<uint8_t>& b, size_t n) {
  std::vector<float> y(n);
  dequantize_row(t, b.data(), y.data(), static_cast<int64_t>(n));
  return y;
}

std::vector<float> round_trip(GgmlType t, const std::vector<float>& x) { return decode(t, encode(t, x), x.size()); }

float f16_at(const std::vector<uint8_t>& b, size_t off) {
  return f16_to_f32(static_cast<uint16_t>(b[off] | (b[off + 1] << 8)));
}

// Per-element bound of a legacy block from its stored scale (and min).
double legacy_bound(GgmlType t, const std::vector<uint8_t>& b, size_t block) {
  const size_t bb = type_info(t).block_bytes, o = block * bb;
  const double d = std::fabs(f16_at(b, o));
  switch (t) {
    case GgmlType::Q8_0: return 0.563 * d;
    case GgmlType::Q4_0:
    case GgmlType::Q5_0: return 1.01 * d;
    case GgmlType::Q4_1: return 0.51 * d + std::fabs(f16_at(b, o + 2)) * 0x1p-10;
    case GgmlType::Q5_1: return 0.52 * d + std::fabs(f16_at(b, o + 2)) * 0x1p-10;
    case GgmlType::IQ4_NL: return 14.1 * d;  // half the widest gap of the table (113..127, scale rounding aside)
    default: return 0;
  }
}

TEST(QuantEncode, RoundTripErrorBounds) {
  const size_t n = size_t{1} << 18;
  const std::vector<float> x = test::normal_vector(42, n);
  for (const Bound& bd : kBounds) {
    SCOPED_TRACE(type_name(bd.type));
    const std::vector<uint8_t> b = encode(bd.type, x);
    const std::vector<float> y = decode(bd.type, b, n);
    double se = 0, sx = 0;
    for (size_t i = 0; i < n; ++i) {
      se += (static_cast<double>(y[i]) - x[i]) * (static_cast<double>(y[i]) - x[i]);
      sx += static_cast<double>(x[i]) * x[i];
    }
    const double rel = std::sqrt(se / sx);
    EXPECT_LT(rel, bd.rel_rms);
    // A broken encoder that still lands in the bound by luck would be far from it; a working one
    // is not absurdly better than the format allows either (guards against comparing y with y).
    EXPECT_GT(rel, bd.rel_rms / 40);
    const int64_t qk = type_info(bd.type).block_elems;
    std::vector<float> amax(n / 256, 0.0f);  // per super-block, for the K-quant bound
    for (size_t i = 0; i < n; ++i) amax[i / 256] = std::max(amax[i / 256], std::fabs(x[i]));
    for (size_t i = 0; i < n; ++i) {
      const double err = std::fabs(static_cast<double>(y[i]) - x[i]);
      double bound;
      if (qk == 1)  // relative rounding error; f16 subnormals have an absolute step of 2^-24
        bound = std::max(std::fabs(x[i]) * bd.rel_rms, bd.type == GgmlType::F16 ? 0x1p-25 : 0.0);
      else if (bd.k_amax > 0)
        bound = bd.k_amax * amax[i / 256];
      else
        bound = legacy_bound(bd.type, b, i / static_cast<size_t>(qk));
      ASSERT_LE(err, bound) << "element " << i << " x " << x[i] << " y " << y[i];
    }
  }
}

TEST(QuantEncode, ExactlyRepresentableBlocksRoundTripExactly) {
  // Q4_0: codes k - 8 with the most negative present: d = -4 / -8 = 0.5 reproduces them exactly.
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>((j * 7) % 16 - 8) * 0.5f;
  EXPECT_EQ(round_trip(GgmlType::Q4_0, x), x);
  // Q5_0: 32 distinct codes -16..15 times 0.25.
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>((j * 7) % 32 - 16) * 0.25f;
  EXPECT_EQ(round_trip(GgmlType::Q5_0, x), x);
  // Q4_1 / Q5_1: min -3, step 0.5 (Q4_1) / 0.25 (Q5_1), both ends present.
  for (int j = 0; j < 32; ++j) x[j] = -3.0f + static_cast<float>((j * 7) % 16) * 0.5f;
  EXPECT_EQ(round_trip(GgmlType::Q4_1, x), x);
  for (int j = 0; j < 32; ++j) x[j] = -3.0f + static_cast<float>((j * 7) % 32) * 0.25f;
  EXPECT_EQ(round_trip(GgmlType::Q5_1, x), x);
  // Q8_0: codes -127..127 times 2^-3, +127 present.
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j == 0 ? 127 : (j * 37) % 255 - 127) * 0.125f;
  EXPECT_EQ(round_trip(GgmlType::Q8_0, x), x);
  // F16 / BF16 / F32: values on their grids.
  const std::vector<float> g = {1.0f, -2.5f, 0x1p-24f, 65504.0f, -0.0f, 3.0f, 1e-3f, 7.0f};
  std::vector<float> g16;
  for (float v : g) g16.push_back(f16_to_f32(f32_to_f16(v)));
  EXPECT_EQ(round_trip(GgmlType::F16, g16), g16);
  EXPECT_EQ(round_trip(GgmlType::F32, g), g);
  const std::vector<float> gb = {1.0f, -3.0f, 0.5f, 1e30f};
  std::vector<float> gb16;
  for (float v : gb) gb16.push_back(bf16_to_f32(f32_to_bf16(v)));
  EXPECT_EQ(round_trip(GgmlType::BF16, gb16), gb16);
}

// Halfway cases follow ggml's reference quantizers: Q8_0 rounds them away from zero (roundf);
// Q4_0 / Q5_0 compute trunc(x / d + 8.5), which rounds them up.
TEST(QuantEncode, HalfwayCasesRoundLikeGgml) {
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;  // d = 1
  x[1] = 2.5f;
  x[2] = -2.5f;
  x[3] = 0.5f;
  x[4] = -0.5f;
  std::vector<float> y = round_trip(GgmlType::Q8_0, x);
  EXPECT_EQ(y[1], 3.0f);
  EXPECT_EQ(y[2], -3.0f);
  EXPECT_EQ(y[3], 1.0f);
  EXPECT_EQ(y[4], -1.0f);
  std::fill(x.begin(), x.end(), 0.0f);
  x[0] = -8.0f;  // Q4_0: d = 1
  x[1] = 2.5f;
  x[2] = -2.5f;
  x[17] = 0.5f;
  x[18] = -0.5f;
  y = round_trip(GgmlType::Q4_0, x);
  EXPECT_EQ(y[0], -8.0f);
  EXPECT_EQ(y[1], 3.0f);
  EXPECT_EQ(y[2], -2.0f);
  EXPECT_EQ(y[17], 1.0f);
  EXPECT_EQ(y[18], 0.0f);
  x[0] = 8.0f;  // largest magnitude positive: d = -1, so the sign of the codes flips
  y = round_trip(GgmlType::Q4_0, x);
  EXPECT_EQ(y[0], 8.0f);
  EXPECT_EQ(y[1], 2.0f);   // 2.5 / -1 + 8.5 = 6 -> code 6 -> -2 * -1
  EXPECT_EQ(y[2], -3.0f);  // -2.5 / -1 + 8.5 = 11 -> code 11 -> 3 * -1
}

TEST(QuantEncode, ZeroAndConstantBlocks) {
  for (uint32_t id = 0; id < kGgmlTypeCount; ++id) {
    const TypeInfo* info = type_info(id);
    if (!info || !info->encodable) continue;
    const auto t = static_cast<GgmlType>(id);
    SCOPED_TRACE(info->name);
    const size_t n = 512;
    const std::vector<float> zero(n, 0.0f);
    for (float v : round_trip(t, zero)) ASSERT_EQ(v, 0.0f);
    // A constant block: types with a min (or plain floats) keep it within f16 rounding; the
    // symmetric ones keep it within half a step.
    const std::vector<float> c(n, -1.25f);
    for (float v : round_trip(t, c)) ASSERT_NEAR(v, -1.25f, 1.25f * 0.02f);
  }
}

TEST(QuantEncode, OffsetAndOutlierBlocksStayBounded) {
  const size_t n = 256 * 8;
  std::vector<float> x = test::normal_vector(9, n, 0.1f);
  for (size_t i = 0; i < n; ++i) x[i] += (i / 256) % 2 ? 5.0f : -5.0f;  // all-positive / all-negative blocks
  x[300] = 60.0f;                                                      // an outlier
  for (const Bound& bd : kBounds) {
    if (bd.k_amax == 0) continue;
    SCOPED_TRACE(type_name(bd.type));
    const std::vector<float> y = round_trip(bd.type, x);
    for (size_t i = 0; i < n; ++i) {
      float amax = 0;
      for (size_t j = i / 256 * 256; j < i / 256 * 256 + 256; ++j) amax = std::max(amax, std::fabs(x[j]));
      ASSERT_LE(std::fabs(y[i] - x[i]), bd.k_amax * amax) << i;
    }
  }
}

TEST(QuantEncode, BlocksAreEncodedIndependently) {
  const std::vector<float> x = test::normal_vector(11, 1024);
  for (const Bound& bd : kBounds) {
    SCOPED_TRACE(type_name(bd.type));
    const std::vector<uint8_t> whole = encode(bd.type, x);
    const size_t half = x.size() / 2;
    const std::vector<uint8_t> a = encode(bd.type, std::vector<float>(x.begin(), x.begin() + half));
    const std::vector<uint8_t> b = encode(bd.type, std::vector<float>(x.begin() + half, x.end()));
    std::vector<uint8_t> joined = a;
    joined.insert(joined.end(), b.begin(), b.end());
    EXPECT_EQ(whole, joined);
  }
}

TEST(QuantEncode, NonFiniteInputIsAnError) {
  for (const Bound& bd : kBounds) {
    const int64_t qk = type_info(bd.type).block_elems;
    std::vector<float> x(static_cast<size_t>(std::max<int64_t>(qk, 4)) * 2, 1.0f);
    std::vector<uint8_t> out(row_bytes(bd.type, static_cast<int64_t>(x.size())));
    for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
      x[x.size() - 3] = bad;
      if (qk == 1) {  // plain floats carry specials through
        EXPECT_NO_THROW(quantize_row(bd.type, x.data(), out.data(), static_cast<int64_t>(x.size())));
      } else {
        EXPECT_THROW(quantize_row(bd.type, x.data(), out.data(), static_cast<int64_t>(x.size())), Error)
            << type_name(bd.type);
      }
    }
  }
  std::vector<float> x(32, 1.0f);
  x[5] = -std::numeric_limits<float>::infinity();
  std::vector<uint8_t> out(34);
  try {
    quantize_row(GgmlType::Q8_0, x.data(), out.data(), 32);
    FAIL() << "expected memra::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("q8_0"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace memra::quant
