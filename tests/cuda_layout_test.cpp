// The CUDA backend's tiled weight layout (weight_layout.h), checked on the CPU: repack then
// decode must give exactly what the reference decoder gives for the original GGUF rows (F32:
// its hi + lo form, within 2^-21 of the block's largest value). Runs in CI without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "quant/quant.h"
#ifdef MEMRA_HAVE_CUDA
#include "backend/cuda/weight_layout.h"
#include "cuda_layout_reference.h"
#endif

namespace memra {
namespace {

#ifdef MEMRA_HAVE_CUDA
void check_type(GgmlType type, int64_t n_in, int64_t rows, int64_t n_mat = 1) {
  std::mt19937 rng(static_cast<uint32_t>(type) * 7919 + static_cast<uint32_t>(n_in));
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const size_t row_bytes = quant::row_bytes(type, n_in);
  std::vector<uint8_t> file(row_bytes * rows * n_mat);
  std::vector<float> src(static_cast<size_t>(n_in));
  for (int64_t r = 0; r < rows * n_mat; ++r) {
    for (auto& v : src) v = dist(rng) * (1.0f + r % 7) * (r % 3 == 0 ? 1e-3f : 1.0f);
    quant::quantize_row(type, src.data(), file.data() + r * row_bytes, n_in);
  }
  const cuda::DevWeight w = cuda::plan_layout(type, n_in, rows, n_mat);
  ASSERT_EQ(w.tile_bytes % 16, 0);
  ASSERT_EQ(w.n_rg, (rows + 15) / 16);
  ASSERT_EQ(w.n_kt, (n_in + 255) / 256);
  std::vector<uint8_t> dev(w.mat_stride * n_mat);
  for (int64_t e = 0; e < n_mat; ++e)
    for (int64_t g = 0; g < w.n_rg; ++g)
      cuda::repack_group(w, file.data() + (e * rows + g * 16) * row_bytes, static_cast<int64_t>(row_bytes),
                         std::min<int64_t>(16, rows - g * 16), dev.data() + e * w.mat_stride + g * w.group_stride);
  std::vector<float> want(static_cast<size_t>(n_in)), got(static_cast<size_t>(n_in));
  for (int64_t e = 0; e < n_mat; ++e)
    for (int64_t r = 0; r < rows; ++r) {
      quant::dequantize_row(type, file.data() + (e * rows + r) * row_bytes, want.data(), n_in);
      if (w.type == GgmlType::F16 && type != GgmlType::F16)  // widened on upload: the f16 rounding of the value
        for (auto& v : want) v = quant::f16_to_f32(quant::f32_to_f16(v));
      if (quant::rounded_wider_type(type) == w.type) {  // its scales rounded: the transcoded row's values
        std::vector<uint8_t> wide(quant::row_bytes(w.type, n_in));
        quant::transcode_row(type, w.type, file.data() + (e * rows + r) * row_bytes, wide.data(), n_in);
        std::vector<float> exact = want;
        quant::dequantize_row(w.type, wide.data(), want.data(), n_in);
        for (int64_t i = 0; i < n_in; ++i)
          ASSERT_LE(std::fabs(want[i] - exact[i]), std::ldexp(std::fabs(exact[i]), -11)) << quant::type_name(type);
      }
      cuda::unpack_row(w, dev.data(), e, r, got.data());
      for (int64_t i = 0; i < n_in; ++i) {
        if (type == GgmlType::F32) {
          float amax = 0;
          for (int64_t k = i / 32 * 32; k < std::min<int64_t>(n_in, i / 32 * 32 + 32); ++k) amax = std::max(amax, std::fabs(want[k]));
          ASSERT_LE(std::fabs(got[i] - want[i]), std::ldexp(amax, -21)) << "f32 row " << r << " element " << i;
        } else {
          ASSERT_EQ(got[i], want[i]) << quant::type_name(type) << " matrix " << e << " row " << r << " element " << i;
        }
      }
    }
}

TEST(CudaLayout, RepackRoundTripsEveryDeviceType) {
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K,
                     GgmlType::Q5_K, GgmlType::Q6_K})
    check_type(t, 512, 37, 2);
}

TEST(CudaLayout, DirectRepackEqualsThePerElementPathByteForByte) {
  // The direct writers against the type-neutral path: every byte of the tiles (codes, padding codes,
  // scales, fifth / high bits, f16 values, block exponents, F32's low parts), whole and partial row
  // groups and k-tiles, the widened types too.
  struct Case {
    GgmlType type;
    int64_t n_in, rows;
  };
  for (const Case& c : {Case{GgmlType::Q4_0, 4096, 16}, Case{GgmlType::Q4_0, 96, 5}, Case{GgmlType::Q4_0, 800, 16},
                        Case{GgmlType::Q8_0, 2048, 16}, Case{GgmlType::Q8_0, 160, 9}, Case{GgmlType::Q4_K, 1024, 16},
                        Case{GgmlType::Q5_K, 1024, 11}, Case{GgmlType::Q6_K, 1024, 16}, Case{GgmlType::Q6_K, 512, 3},
                        Case{GgmlType::F16, 1000, 16}, Case{GgmlType::BF16, 520, 7}, Case{GgmlType::F32, 300, 16},
                        Case{GgmlType::Q4_1, 512, 16}, Case{GgmlType::Q2_K, 256, 5}, Case{GgmlType::Q3_K, 768, 16},
                        Case{GgmlType::Q3_K, 256, 7}, Case{GgmlType::Q5_0, 800, 16}, Case{GgmlType::Q5_0, 96, 3},
                        Case{GgmlType::IQ4_NL, 800, 16}, Case{GgmlType::IQ4_NL, 96, 3}, Case{GgmlType::IQ4_XS, 512, 9}}) {
    std::mt19937 rng(static_cast<uint32_t>(c.type) * 31 + static_cast<uint32_t>(c.n_in));
    const size_t row_bytes = quant::row_bytes(c.type, c.n_in);
    std::vector<uint8_t> file(row_bytes * static_cast<size_t>(c.rows));
    for (auto& b : file) b = static_cast<uint8_t>(rng());  // any bits: the repack moves them unread
    if (c.type == GgmlType::BF16 || c.type == GgmlType::F32 || c.type == GgmlType::Q4_1 || c.type == GgmlType::Q2_K ||
        c.type == GgmlType::IQ4_XS) {
      // Converted types: finite values of a realistic range (random bits hold NaNs and infinities).
      std::normal_distribution<float> dist(0.0f, 1.0f);
      std::vector<float> vals(static_cast<size_t>(c.n_in));
      for (int64_t r = 0; r < c.rows; ++r) {
        for (auto& x : vals) x = dist(rng) * (r % 3 == 0 ? 1e-4f : 3.0f);
        quant::quantize_row(c.type, vals.data(), file.data() + r * row_bytes, c.n_in);
      }
    }
    const cuda::DevWeight w = cuda::plan_layout(c.type, c.n_in, c.rows, 1);
    std::vector<uint8_t> fast(static_cast<size_t>(w.group_stride), 0xAB), slow(static_cast<size_t>(w.group_stride), 0xCD);
    cuda::repack_group(w, file.data(), static_cast<int64_t>(row_bytes), c.rows, fast.data());
    test::layout_ref::repack_group_per_element(w, file.data(), static_cast<int64_t>(row_bytes), c.rows, slow.data());
    for (size_t i = 0; i < fast.size(); ++i)
      ASSERT_EQ(fast[i], slow[i]) << quant::type_name(c.type) << " n_in " << c.n_in << " rows " << c.rows << " byte "
                                  << i << " of " << fast.size();
  }
}

TEST(CudaLayout, WidenedTypesBecomeF16) {
  for (GgmlType t : {GgmlType::Q4_1, GgmlType::Q5_1, GgmlType::Q2_K}) {
    EXPECT_EQ(cuda::device_type(t), GgmlType::F16);
    check_type(t, 256, 3);
  }
}

TEST(CudaLayout, TranscodedTypesKeepTheirValuesExactly) {
  // Q3_K runs as Q6_K, Q5_0 and IQ4_NL as Q8_0: check_type compares every decoded value with the
  // CPU's decode of the file's own type for equality (whole and partial k-tiles and row groups).
  EXPECT_EQ(cuda::device_type(GgmlType::Q3_K), GgmlType::Q6_K);
  EXPECT_EQ(cuda::device_type(GgmlType::Q5_0), GgmlType::Q8_0);
  EXPECT_EQ(cuda::device_type(GgmlType::IQ4_NL), GgmlType::Q8_0);
  check_type(GgmlType::IQ4_NL, 800, 20);
  check_type(GgmlType::IQ4_NL, 96, 4);
  // IQ4_XS runs as Q8_0 with its block scales rounded to f16 (within 2^-11 of the file's values;
  // then every value equals the transcoded row's), in Q8_0's bytes.
  EXPECT_EQ(cuda::device_type(GgmlType::IQ4_XS), GgmlType::Q8_0);
  check_type(GgmlType::IQ4_XS, 512, 20);
  check_type(GgmlType::IQ4_XS, 768, 3, 2);
  EXPECT_EQ(cuda::plan_layout(GgmlType::IQ4_XS, 4096, 64, 1).mat_stride, quant::row_bytes(GgmlType::Q8_0, 4096) * 64);
  check_type(GgmlType::Q3_K, 512, 37, 2);
  check_type(GgmlType::Q3_K, 256, 3);
  check_type(GgmlType::Q5_0, 800, 20);
  check_type(GgmlType::Q5_0, 96, 4);
  EXPECT_EQ(cuda::plan_layout(GgmlType::Q3_K, 4096, 64, 1).mat_stride, quant::row_bytes(GgmlType::Q6_K, 4096) * 64);
  EXPECT_EQ(cuda::plan_layout(GgmlType::Q5_0, 4096, 64, 1).mat_stride, quant::row_bytes(GgmlType::Q8_0, 4096) * 64);
}

TEST(CudaLayout, PartialTilesArePadded) {
  // 96 columns: one k-tile of 256, 3 real blocks; 4 rows: one row group of 16.
  const cuda::DevWeight w = cuda::plan_layout(GgmlType::Q4_0, 96, 4, 1);
  EXPECT_EQ(w.n_kt, 1);
  EXPECT_EQ(w.n_rg, 1);
  EXPECT_EQ(w.mat_stride, 2304u);
  check_type(GgmlType::Q4_0, 96, 4);
  check_type(GgmlType::Q8_0, 160, 20);
  check_type(GgmlType::F16, 1000, 17);
  check_type(GgmlType::BF16, 40, 33);
}

TEST(CudaLayout, QuantizedTilesKeepTheFileBytes) {
  // Whole tiles hold exactly the GGUF bytes of their 16 x 256 values (the bandwidth floor).
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::F16})
    EXPECT_EQ(cuda::plan_layout(t, 4096, 4096, 1).mat_stride, quant::row_bytes(t, 4096) * 4096) << quant::type_name(t);
}
#else
TEST(CudaLayout, RepackRoundTripsEveryDeviceType) { GTEST_SKIP() << "built without the CUDA backend"; }
#endif

}  // namespace
}  // namespace memra
