// Row-wise ops: embedding lookup, RMSNorm, SwiGLU product, attention output gate, row gather.
// Each output row depends only on its own input row (fixed in-row reduction trees).
#include <algorithm>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/matmul_order.h"
#include "backend/cuda/quantize_q8.cuh"
#include "backend/cuda/weight_layout.h"

namespace memra::cuda {
namespace {

__device__ __forceinline__ float half_at(const uint8_t* p) { return __half2float(*reinterpret_cast<const __half*>(p)); }

__device__ __forceinline__ int nibble(const uint8_t* qs16, int l) {
  return l < 16 ? (qs16[l] & 0xF) : (qs16[l - 16] >> 4);
}

// Element i of a device-layout row, decoded exactly as weight_layout.cpp's unpack_row does.
__device__ float decode_element(const DevWeight& w, const uint8_t* row, int64_t i) {
  const int64_t b = i / 32;
  const int64_t k = slot_of_block(b, w.nb);  // per-block sections are stored by slot
  const int l = static_cast<int>(i % 32);
  switch (w.type) {
    case GgmlType::F32: return reinterpret_cast<const float*>(row)[i];
    case GgmlType::F16: return __half2float(reinterpret_cast<const __half*>(row)[i]);
    case GgmlType::BF16: return __uint_as_float(static_cast<uint32_t>(reinterpret_cast<const uint16_t*>(row)[i]) << 16);
    case GgmlType::Q4_0:
      return __fmul_rn(half_at(row + w.off_b + 2 * k), static_cast<float>(nibble(row + 16 * k, l) - 8));
    case GgmlType::Q8_0:
      return __fmul_rn(half_at(row + w.off_b + 2 * k), static_cast<float>(static_cast<int8_t>(row[32 * k + l])));
    case GgmlType::Q4_K:
    case GgmlType::Q5_K: {
      const bool five = w.type == GgmlType::Q5_K;
      const uint8_t* meta = row + (five ? w.off_c : w.off_b) + 16 * (b / 8);
      const uint8_t* q = meta + 4;
      const int j = static_cast<int>(b % 8);
      int sc, m;
      if (j < 4) {
        sc = q[j] & 63;
        m = q[j + 4] & 63;
      } else {
        sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
      }
      const float d = __fmul_rn(half_at(meta), static_cast<float>(sc));
      const float mn = __fmul_rn(half_at(meta + 2), static_cast<float>(m));
      int v = nibble(row + 16 * k, l);
      if (five) v += 16 * ((*reinterpret_cast<const uint32_t*>(row + w.off_b + 4 * k) >> l) & 1);
      return __fsub_rn(__fmul_rn(d, static_cast<float>(v)), mn);
    }
    case GgmlType::Q6_K: {
      const uint32_t word = reinterpret_cast<const uint32_t*>(row + w.off_b + 8 * k)[l / 16];
      const int k4 = (l % 16) / 4, p = l % 4;
      const int q = nibble(row + 16 * k, l) | static_cast<int>(((word >> (8 * p + 2 * k4)) & 3) << 4);
      const int sc = static_cast<int8_t>(row[w.off_c + 2 * k + (l / 16)]);
      const float d = half_at(row + w.off_c + 2 * w.ns + 2 * (b / 8));
      return __fmul_rn(__fmul_rn(d, static_cast<float>(sc)), static_cast<float>(q - 32));
    }
    default: return __int_as_float(0x7fc00000);
  }
}

__global__ void embed_kernel(const DevWeight w, const int32_t* __restrict__ tokens, float* __restrict__ out) {
  pdl_enter();
  const int64_t r = blockIdx.y;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= w.n_in) return;
  const uint8_t* row = w.data + static_cast<size_t>(tokens[r]) * w.row_stride;
  out[r * w.n_in + i] = decode_element(w, row, i);
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

// The same values as rms_norm_kernel, then each warp quantizes the 32-element blocks it holds
// (quantize_block_warp), writing them in slot order. Thread t holds element t + k*blockDim.x:
// with blockDim.x a multiple of 32, warp w holds whole blocks (w + k*blockDim.x/32).
__global__ void __launch_bounds__(kNormThreads)
    rms_norm_q8_kernel(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ out,
                       int8_t* __restrict__ q, float* __restrict__ d, int32_t* __restrict__ s, int64_t dim, int64_t ns,
                       float eps) {
  float wv[kMaxPerThread];
  load_norm_weights(w, dim, wv);
  pdl_enter();
  __shared__ float red[32];
  float v[kMaxPerThread];
  const float scale = row_rms_scale(x + blockIdx.x * dim, dim, eps, v, red);
  const int lane = threadIdx.x % kWarp;
  const int64_t nb = dim / 32;
#pragma unroll
  for (int k = 0; k < kMaxPerThread; ++k) {
    const int64_t i = threadIdx.x + static_cast<int64_t>(k) * blockDim.x;
    if (i - lane >= dim) break;  // warp-uniform: whole blocks
    const float y = __fmul_rn(__fmul_rn(v[k], scale), wv[k]);
    out[blockIdx.x * dim + i] = y;
    quantize_block_warp(y, q, d, s, blockIdx.x * ns + slot_of_block(i / 32, nb));
  }
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

// q8.q non-null: n_head * head_dim is a multiple of 32, so each warp holds one whole block.
// One warp per 32-element block of a row (cols % 32 == 0).
__global__ void silu_mul_q8_kernel(const float* __restrict__ g, const float* __restrict__ u, float* __restrict__ out,
                                   int64_t n, int64_t cols, const Q8Act q8) {
  pdl_enter();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;  // whole warps: n is a multiple of 32
  const float y = __fmul_rn(silu(g[i]), u[i]);
  out[i] = y;
  quantize_block_warp(y, q8.q, q8.d, q8.s, (i / cols) * q8.slots + slot_of_block((i % cols) / 32, cols / 32));
}

__global__ void sigmoid_gate_mul_kernel(float* __restrict__ out, const float* __restrict__ gate, int n_head,
                                        int head_dim, int64_t gate_row_stride, int gate_head_stride, int64_t n,
                                        const Q8Act q8) {
  pdl_enter();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int64_t per_row = static_cast<int64_t>(n_head) * head_dim;
  const int64_t r = i / per_row;
  const int h = static_cast<int>((i % per_row) / head_dim), e = static_cast<int>(i % head_dim);
  const float g = gate[r * gate_row_stride + static_cast<int64_t>(h) * gate_head_stride + e];
  const float y = __fmul_rn(out[i], sigmoid(g));
  out[i] = y;
  if (q8.q) quantize_block_warp(y, q8.q, q8.d, q8.s, r * q8.slots + slot_of_block((i % per_row) / 32, per_row / 32));
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

void rms_norm_q8(const float* x, const float* w, float* out, const Q8Act& q, int64_t rows, int64_t dim, float eps,
                 cudaStream_t stream) {
  MEMRA_ASSERT(dim % 32 == 0 && q.rows == rows && q.cols == dim && q.slots == n_slots(dim / 32));
  MEMRA_ASSERT(dim <= int64_t{kNormThreads} * kMaxPerThread);
  if (rows == 0) return;
  launch(rms_norm_q8_kernel, static_cast<unsigned>(rows), norm_threads(dim), 0, stream, x, w, out, q.q, q.d, q.s, dim,
         q.slots, eps);
  CUDA_LAUNCH_CHECK();
}

void silu_mul(const float* gate, const float* up, float* out, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  launch(silu_mul_kernel, div_up(n, 256), 256, 0, stream, gate, up, out, n);
  CUDA_LAUNCH_CHECK();
}

void silu_mul_q8(const float* gate, const float* up, float* out, int64_t rows, int64_t cols, const Q8Act& q8,
                 cudaStream_t stream) {
  MEMRA_ASSERT(cols % 32 == 0 && q8.rows == rows && q8.cols == cols && q8.slots == n_slots(cols / 32));
  const int64_t n = rows * cols;
  if (n == 0) return;
  launch(silu_mul_q8_kernel, div_up(n, 256), 256, 0, stream, gate, up, out, n, cols, q8);
  CUDA_LAUNCH_CHECK();
}

void sigmoid_gate_mul(float* out, const float* gate, int64_t rows, int n_head, int head_dim, int64_t gate_row_stride,
                      int gate_head_stride, const Q8Act* q8_out, cudaStream_t stream) {
  const int64_t n = rows * n_head * head_dim;
  if (n == 0) return;
  Q8Act q8;
  if (q8_out) {
    const int64_t cols = static_cast<int64_t>(n_head) * head_dim;
    MEMRA_ASSERT(cols % 32 == 0 && q8_out->rows == rows && q8_out->cols == cols && q8_out->slots == n_slots(cols / 32));
    q8 = *q8_out;
  }
  launch(sigmoid_gate_mul_kernel, div_up(n, 256), 256, 0, stream, out, gate, n_head, head_dim, gate_row_stride,
         gate_head_stride, n, q8);
  CUDA_LAUNCH_CHECK();
}

void gather_rows(const float* x, const int32_t* src_rows_dev, int64_t n, int64_t cols, float* out, cudaStream_t stream) {
  if (n == 0) return;
  dim3 grid(div_up(cols, 256), static_cast<unsigned>(n));
  launch(gather_rows_kernel, grid, 256, 0, stream, x, src_rows_dev, cols, out);
  CUDA_LAUNCH_CHECK();
}

}  // namespace memra::cuda
