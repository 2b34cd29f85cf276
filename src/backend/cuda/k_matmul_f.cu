// Float-weight matmul (F32, F16, BF16 weights; float32 activations). Same structure and the same
// canonical order as the quantized matmul (matmul_order.h): the block term is a fused
// multiply-add chain over the block's 32 elements in index order.
#include "backend/cuda/common.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/matmul_order.h"
#include "backend/cuda/weight_layout.h"

namespace memra::cuda {
namespace {

template <GgmlType T>
__device__ __forceinline__ void load_weights(const uint8_t* row, int64_t b, float (&wv)[32]) {
  if constexpr (T == GgmlType::F32) {
    const float4* p = reinterpret_cast<const float4*>(row + 128 * b);
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const float4 v = __ldg(p + k);
      wv[4 * k] = v.x; wv[4 * k + 1] = v.y; wv[4 * k + 2] = v.z; wv[4 * k + 3] = v.w;
    }
  } else {
    const int4* p = reinterpret_cast<const int4*>(row + 64 * b);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int4 v = __ldg(p + k);
      const uint32_t u[4] = {static_cast<uint32_t>(v.x), static_cast<uint32_t>(v.y), static_cast<uint32_t>(v.z),
                             static_cast<uint32_t>(v.w)};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const uint16_t lo = static_cast<uint16_t>(u[e] & 0xFFFF), hi = static_cast<uint16_t>(u[e] >> 16);
        if constexpr (T == GgmlType::F16) {
          wv[8 * k + 2 * e] = __half2float(__ushort_as_half(lo));
          wv[8 * k + 2 * e + 1] = __half2float(__ushort_as_half(hi));
        } else {
          wv[8 * k + 2 * e] = __uint_as_float(static_cast<uint32_t>(lo) << 16);
          wv[8 * k + 2 * e + 1] = __uint_as_float(static_cast<uint32_t>(hi) << 16);
        }
      }
    }
  }
}

constexpr int kRowsPerBlock = 8;

template <GgmlType T, int NB>
__global__ void __launch_bounds__(kRowsPerBlock * kWarp)
    matmul_f_kernel(const DevWeight w, const uint8_t* __restrict__ mat, const float* __restrict__ x, int64_t rows,
                    float* __restrict__ out, int64_t out_stride, bool accumulate) {
  pdl_enter();
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + warp;
  if (j >= w.n_out) return;
  const uint8_t* row = mat + j * w.row_stride;
  const int64_t nb = w.n_in / 32, cols = w.n_in;
  const int c = bitrev5(lane);
  for (int64_t r0 = 0; r0 < rows; r0 += NB) {
    float P[NB];
#pragma unroll
    for (int i = 0; i < NB; ++i) P[i] = 0.0f;
    const int64_t cs = chunk_blocks(nb), b_end = min(nb, (c + 1) * cs);
    for (int64_t b = c * cs; b < b_end; ++b) {
      float wv[32];
      load_weights<T>(row, b, wv);
#pragma unroll
      for (int i = 0; i < NB; ++i) {
        const int64_t r = r0 + i;
        if (r < rows) {
          const float4* xp = reinterpret_cast<const float4*>(x + r * cols + 32 * b);
          float t = 0.0f;
#pragma unroll
          for (int k = 0; k < 8; ++k) {
            const float4 v = __ldg(xp + k);
            t = __fmaf_rn(wv[4 * k], v.x, t);
            t = __fmaf_rn(wv[4 * k + 1], v.y, t);
            t = __fmaf_rn(wv[4 * k + 2], v.z, t);
            t = __fmaf_rn(wv[4 * k + 3], v.w, t);
          }
          P[i] = __fadd_rn(P[i], t);
        }
      }
    }
#pragma unroll
    for (int i = 0; i < NB; ++i) P[i] = warp_sum(P[i]);
    if (lane == 0) {
#pragma unroll
      for (int i = 0; i < NB; ++i) {
        const int64_t r = r0 + i;
        if (r < rows) {
          float* o = out + r * out_stride + j;
          *o = accumulate ? __fadd_rn(*o, P[i]) : P[i];
        }
      }
    }
  }
}

template <GgmlType T>
void launch_type(const DevWeight& w, const uint8_t* mat, const float* x, int64_t rows, float* out, int64_t out_stride,
                 bool accumulate, cudaStream_t stream) {
  const unsigned grid = div_up(w.n_out, kRowsPerBlock);
  const unsigned threads = kRowsPerBlock * kWarp;
#define MEMRA_MATMUL_F(NB) \
  launch(matmul_f_kernel<T, NB>, grid, threads, 0, stream, w, mat, x, rows, out, out_stride, accumulate)
  if (rows >= 8) MEMRA_MATMUL_F(8);
  else if (rows >= 3) MEMRA_MATMUL_F(4);
  else if (rows == 2) MEMRA_MATMUL_F(2);
  else MEMRA_MATMUL_F(1);
#undef MEMRA_MATMUL_F
  CUDA_LAUNCH_CHECK();
}

}  // namespace

void matmul_f(const DevWeight& w, int64_t mat, const float* x, int64_t rows, float* out, int64_t out_stride,
              bool accumulate, cudaStream_t stream) {
  MEMRA_ASSERT(w.n_in % 32 == 0 && mat >= 0 && mat < w.n_mat && out_stride >= w.n_out);
  if (rows == 0) return;
  const uint8_t* base = w.data + w.mat_stride * static_cast<size_t>(mat);
  switch (w.type) {
    case GgmlType::F32: launch_type<GgmlType::F32>(w, base, x, rows, out, out_stride, accumulate, stream); break;
    case GgmlType::F16: launch_type<GgmlType::F16>(w, base, x, rows, out, out_stride, accumulate, stream); break;
    case GgmlType::BF16: launch_type<GgmlType::BF16>(w, base, x, rows, out, out_stride, accumulate, stream); break;
    default: MEMRA_ASSERT(false, "matmul_f: not a float device type");
  }
}

}  // namespace memra::cuda
