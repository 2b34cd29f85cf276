// Row-wise ops: embedding lookup, RMSNorm, SwiGLU product, attention output gate, row gather.
// Each output row depends only on its own input row (fixed in-row reduction trees).
#include <algorithm>

#include "backend/cuda/act_f16.cuh"
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/weight_layout.h"

namespace memra::cuda {
namespace {

__global__ void embed_kernel(const DevWeight w, const int32_t* __restrict__ tokens, float* __restrict__ out) {
  pdl_enter();
  const int64_t r = blockIdx.y;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= w.n_in) return;
  out[r * w.n_in + i] = decode_weight(w, w.data, tokens[r], i);
}

// RMSNorm of one row per thread block. Each thread keeps its elements in registers (loaded once,
// all loads in flight together); the sum of squares is a per-thread fma chain over its elements
// in index order, then block_sum's fixed tree. kMaxPerThread * blockDim.x >= dim.
constexpr int kNormThreads = 1024;
constexpr int kMaxPerThread = 8;  // dim up to 8192

__device__ __forceinline__ float row_rms_scale(const float* xr, int64_t dim, float eps, float (&v)[kMaxPerThread],
                                               float* red) {
  float ss = 0.0f;
#pragma unroll
  for (int k = 0; k < kMaxPerThread; ++k) {
    const int64_t i = threadIdx.x + static_cast<int64_t>(k) * blockDim.x;
    v[k] = i < dim ? xr[i] : 0.0f;
  }
#pragma unroll
  for (int k = 0; k < kMaxPerThread; ++k) ss = __fmaf_rn(v[k], v[k], ss);
  ss = block_sum(ss, red);
  return __frsqrt_rn(__fadd_rn(__fdiv_rn(ss, static_cast<float>(dim)), eps));
}

// The norm weights (never written by a kernel) into registers before waiting for the previous
// kernel (launch.cuh), so their load overlaps it instead of following the reduction.
__device__ __forceinline__ void load_norm_weights(const float* __restrict__ w, int64_t dim, float (&wv)[kMaxPerThread]) {
#pragma unroll
  for (int k = 0; k < kMaxPerThread; ++k) {
    const int64_t i = threadIdx.x + static_cast<int64_t>(k) * blockDim.x;
    wv[k] = i < dim ? w[i] : 0.0f;
  }
}

__global__ void __launch_bounds__(kNormThreads) rms_norm_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                                               float* __restrict__ out, int64_t dim, float eps) {
  float wv[kMaxPerThread];
  load_norm_weights(w, dim, wv);
  pdl_enter();
  __shared__ float red[32];
  float v[kMaxPerThread];
  const float scale = row_rms_scale(x + blockIdx.x * dim, dim, eps, v, red);
#pragma unroll
  for (int k = 0; k < kMaxPerThread; ++k) {
    const int64_t i = threadIdx.x + static_cast<int64_t>(k) * blockDim.x;
    if (i < dim) out[blockIdx.x * dim + i] = __fmul_rn(__fmul_rn(v[k], scale), wv[k]);
  }
}

// The same values as rms_norm_kernel, also staged in shared memory (dim floats) so the block
// can write the row's f16 form (write_act_row). Blocks past the last row write the zero padding
// rows of the last n-tile.
__global__ void __launch_bounds__(kNormThreads)
    rms_norm_act_kernel(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ out,
                        const F16Act a, int64_t dim, float eps) {
  float wv[kMaxPerThread];
  load_norm_weights(w, dim, wv);
  pdl_enter();
  __shared__ float red[32];
  MEMRA_DYNAMIC_SMEM(float, row, 16);
  const int64_t r = blockIdx.x;
  const bool valid = r < a.rows;
  if (valid) {
    float v[kMaxPerThread];
    const float scale = row_rms_scale(x + r * dim, dim, eps, v, red);
#pragma unroll
    for (int k = 0; k < kMaxPerThread; ++k) {
      const int64_t i = threadIdx.x + static_cast<int64_t>(k) * blockDim.x;
      if (i >= dim) break;
      const float y = __fmul_rn(__fmul_rn(v[k], scale), wv[k]);
      out[r * dim + i] = y;
      row[i] = y;
    }
  }
  __syncthreads();
  write_act_row(row, r, valid, a, red);
}

unsigned norm_threads(int64_t dim) {
  // About 4 elements per thread (a single row is latency-bound: spread it over many warps), at
  // most kMaxPerThread; a multiple of 32.
  int64_t t = std::max<int64_t>((dim + 3) / 4, (dim + kMaxPerThread - 1) / kMaxPerThread);
  t = std::max<int64_t>(64, (t + 31) / 32 * 32);
  return static_cast<unsigned>(std::min<int64_t>(t, kNormThreads));
}

__global__ void silu_mul_kernel(const float* __restrict__ g, const float* __restrict__ u, float* __restrict__ out,
                                int64_t n) {
  pdl_enter();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __fmul_rn(silu(g[i]), u[i]);
}

__global__ void sigmoid_gate_mul_kernel(float* __restrict__ out, const float* __restrict__ gate, int n_head,
                                        int head_dim, int64_t gate_row_stride, int gate_head_stride, int64_t n) {
  pdl_enter();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int64_t per_row = static_cast<int64_t>(n_head) * head_dim;
  const int64_t r = i / per_row;
  const int h = static_cast<int>((i % per_row) / head_dim), e = static_cast<int>(i % head_dim);
  const float g = gate[r * gate_row_stride + static_cast<int64_t>(h) * gate_head_stride + e];
  out[i] = __fmul_rn(out[i], sigmoid(g));
}

__global__ void gather_rows_kernel(const float* __restrict__ x, const int32_t* __restrict__ src, int64_t cols,
                                   float* __restrict__ out) {
  pdl_enter();
  const int64_t r = blockIdx.y;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < cols) out[r * cols + i] = x[static_cast<int64_t>(src[r]) * cols + i];
}

}  // namespace

void embed_rows(const DevWeight& table, const DeviceStep& step, int64_t n_rows, float* out, cudaStream_t stream) {
  if (n_rows == 0) return;
  dim3 grid(div_up(table.n_in, 256), static_cast<unsigned>(n_rows));
  launch(embed_kernel, grid, 256, 0, stream, table, step.tokens, out);
  CUDA_LAUNCH_CHECK();
}

void rms_norm(const float* x, const float* w, float* out, int64_t rows, int64_t dim, float eps, cudaStream_t stream) {
  MEMRA_ASSERT(dim <= int64_t{kNormThreads} * kMaxPerThread);
  if (rows == 0) return;
  launch(rms_norm_kernel, static_cast<unsigned>(rows), norm_threads(dim), 0, stream, x, w, out, dim, eps);
  CUDA_LAUNCH_CHECK();
}

void rms_norm_act(const float* x, const float* w, float* out, const F16Act& act, int64_t rows, int64_t dim, float eps,
                  cudaStream_t stream) {
  MEMRA_ASSERT(act.rows == rows && act.cols == dim && act.n_kt == k_tiles(dim));
  MEMRA_ASSERT(dim <= int64_t{kNormThreads} * kMaxPerThread);
  if (rows == 0) return;
  const size_t smem = static_cast<size_t>(dim) * sizeof(float);
  static size_t configured = 0;  // the dynamic shared memory limit raised so far (static + dynamic may pass 48 KiB)
  if (smem > configured) {
    CUDA_CHECK(cudaFuncSetAttribute(rms_norm_act_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(smem)));
    configured = smem;
  }
  launch(rms_norm_act_kernel, static_cast<unsigned>((rows + 7) / 8 * 8), norm_threads(dim), smem, stream, x, w, out,
         act, dim, eps);
  CUDA_LAUNCH_CHECK();
}

void silu_mul(const float* gate, const float* up, float* out, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  launch(silu_mul_kernel, div_up(n, 256), 256, 0, stream, gate, up, out, n);
  CUDA_LAUNCH_CHECK();
}

void sigmoid_gate_mul(float* out, const float* gate, int64_t rows, int n_head, int head_dim, int64_t gate_row_stride,
                      int gate_head_stride, cudaStream_t stream) {
  const int64_t n = rows * n_head * head_dim;
  if (n == 0) return;
  launch(sigmoid_gate_mul_kernel, div_up(n, 256), 256, 0, stream, out, gate, n_head, head_dim, gate_row_stride,
         gate_head_stride, n);
  CUDA_LAUNCH_CHECK();
}

void gather_rows(const float* x, const int32_t* src_rows_dev, int64_t n, int64_t cols, float* out, cudaStream_t stream) {
  if (n == 0) return;
  dim3 grid(div_up(cols, 256), static_cast<unsigned>(n));
  launch(gather_rows_kernel, grid, 256, 0, stream, x, src_rows_dev, cols, out);
  CUDA_LAUNCH_CHECK();
}

}  // namespace memra::cuda
