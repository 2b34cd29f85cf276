// The CUDA backend's repacked weight layout, checked on the CPU: repack then unpack must give
// exactly what the reference decoder gives for the original GGUF rows (runs in CI without a GPU).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "quant/quant.h"
#ifdef MEMRA_HAVE_CUDA
#include "backend/cuda/weight_layout.h"
#endif

namespace memra {
namespace {

#ifdef MEMRA_HAVE_CUDA
void check_type(GgmlType type, int64_t n_in, int64_t rows) {
  std::mt19937 rng(static_cast<uint32_t>(type) * 7919 + static_cast<uint32_t>(n_in));
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const size_t row_bytes = quant::row_bytes(type, n_in);
  std::vector<uint8_t> file(row_bytes * rows);
  std::vector<float> src(static_cast<size_t>(n_in));
  for (int64_t r = 0; r < rows; ++r) {
    for (auto& v : src) v = dist(rng) * (1.0f + r);
    quant::quantize_row(type, src.data(), file.data() + r * row_bytes, n_in);
  }
  cuda::DevWeight w = cuda::plan_layout(type, n_in, rows, 1);
  ASSERT_EQ(w.row_stride % 16, 0u);
  std::vector<uint8_t> dev(w.mat_stride);
  cuda::repack_rows(w, type, file.data(), rows, dev.data());
  std::vector<float> want(static_cast<size_t>(n_in)), got(static_cast<size_t>(n_in));
  for (int64_t r = 0; r < rows; ++r) {
    quant::dequantize_row(type, file.data() + r * row_bytes, want.data(), n_in);
    if (w.type != type)  // converted on upload: the device holds the f16 rounding of the decoded value
      for (auto& v : want) v = quant::f16_to_f32(quant::f32_to_f16(v));
    cuda::unpack_row(w, dev.data() + r * w.row_stride, got.data());
    for (int64_t i = 0; i < n_in; ++i)
      ASSERT_EQ(got[i], want[i]) << quant::type_name(type) << " row " << r << " element " << i;
  }
}

TEST(CudaLayout, RepackRoundTripsEveryDeviceType) {
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K,
                     GgmlType::Q5_K, GgmlType::Q6_K})
    check_type(t, 512, 5);
}

TEST(CudaLayout, ConvertedTypesBecomeF16) {
  for (GgmlType t : {GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q2_K, GgmlType::Q3_K}) {
    EXPECT_EQ(cuda::device_type(t), GgmlType::F16);
    check_type(t, 256, 3);
  }
}

TEST(CudaLayout, RowStrideIsPaddedForOddBlockCounts) {
  // 3 blocks occupy 32 slots (one chunk each, matmul_order.h): 32 x 18 bytes.
  cuda::DevWeight w = cuda::plan_layout(GgmlType::Q4_0, 96, 4, 1);
  EXPECT_EQ(w.ns, 32);
  EXPECT_EQ(w.row_stride, 576u);
  check_type(GgmlType::Q4_0, 96, 4);
  check_type(GgmlType::Q8_0, 160, 4);
}
#else
TEST(CudaLayout, RepackRoundTripsEveryDeviceType) { GTEST_SKIP() << "built without the CUDA backend"; }
#endif

}  // namespace
}  // namespace memra
