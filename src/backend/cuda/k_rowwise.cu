// Row-wise ops: embedding lookup, RMSNorm, SwiGLU product, attention output gate, row gather.
// Each output row depends only on its own input row (fixed in-row reduction trees).
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
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
  const int l = static_cast<int>(i % 32);
  switch (w.type) {
    case GgmlType::F32: return reinterpret_cast<const float*>(row)[i];
    case GgmlType::F16: return __half2float(reinterpret_cast<const __half*>(row)[i]);
    case GgmlType::BF16: return __uint_as_float(static_cast<uint32_t>(reinterpret_cast<const uint16_t*>(row)[i]) << 16);
    case GgmlType::Q4_0:
      return __fmul_rn(half_at(row + w.off_b + 2 * b), static_cast<float>(nibble(row + 16 * b, l) - 8));
    case GgmlType::Q8_0:
      return __fmul_rn(half_at(row + w.off_b + 2 * b), static_cast<float>(static_cast<int8_t>(row[32 * b + l])));
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
      int v = nibble(row + 16 * b, l);
      if (five) v += 16 * ((*reinterpret_cast<const uint32_t*>(row + w.off_b + 4 * b) >> l) & 1);
      return __fsub_rn(__fmul_rn(d, static_cast<float>(v)), mn);
    }
    case GgmlType::Q6_K: {
      const uint32_t word = reinterpret_cast<const uint32_t*>(row + w.off_b + 8 * b)[l / 16];
      const int k4 = (l % 16) / 4, p = l % 4;
      const int q = nibble(row + 16 * b, l) | static_cast<int>(((word >> (8 * p + 2 * k4)) & 3) << 4);
      const int sc = static_cast<int8_t>(row[w.off_c + 2 * b + (l / 16)]);
      const float d = half_at(row + w.off_c + 2 * w.nb + 2 * (b / 8));
      return __fmul_rn(__fmul_rn(d, static_cast<float>(sc)), static_cast<float>(q - 32));
    }
    default: return __int_as_float(0x7fc00000);
  }
}

__global__ void embed_kernel(const DevWeight w, const int32_t* __restrict__ tokens, float* __restrict__ out) {
  const int64_t r = blockIdx.y;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= w.n_in) return;
  const uint8_t* row = w.data + static_cast<size_t>(tokens[r]) * w.row_stride;
  out[r * w.n_in + i] = decode_element(w, row, i);
}

__global__ void rms_norm_kernel(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ out,
                                int64_t dim, float eps) {
  __shared__ float red[32];
  const float* xr = x + blockIdx.x * dim;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) ss = __fmaf_rn(xr[i], xr[i], ss);
  ss = block_sum(ss, red);
  const float scale = __frsqrt_rn(__fadd_rn(__fdiv_rn(ss, static_cast<float>(dim)), eps));
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x)
    out[blockIdx.x * dim + i] = __fmul_rn(__fmul_rn(xr[i], scale), w[i]);
}

__global__ void silu_mul_kernel(const float* __restrict__ g, const float* __restrict__ u, float* __restrict__ out,
                                int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __fmul_rn(silu(g[i]), u[i]);
}

__global__ void sigmoid_gate_mul_kernel(float* __restrict__ out, const float* __restrict__ gate, int n_head,
                                        int head_dim, int64_t gate_row_stride, int gate_head_stride, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int64_t per_row = static_cast<int64_t>(n_head) * head_dim;
  const int64_t r = i / per_row;
  const int h = static_cast<int>((i % per_row) / head_dim), e = static_cast<int>(i % head_dim);
  out[i] = __fmul_rn(out[i], sigmoid(gate[r * gate_row_stride + static_cast<int64_t>(h) * gate_head_stride + e]));
}

__global__ void gather_rows_kernel(const float* __restrict__ x, const int32_t* __restrict__ src, int64_t cols,
                                   float* __restrict__ out) {
  const int64_t r = blockIdx.y;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < cols) out[r * cols + i] = x[static_cast<int64_t>(src[r]) * cols + i];
}

}  // namespace

void embed_rows(const DevWeight& table, const DeviceStep& step, int64_t n_rows, float* out, cudaStream_t stream) {
  if (n_rows == 0) return;
  dim3 grid(div_up(table.n_in, 256), static_cast<unsigned>(n_rows));
  embed_kernel<<<grid, 256, 0, stream>>>(table, step.tokens, out);
  CUDA_LAUNCH_CHECK();
}

void rms_norm(const float* x, const float* w, float* out, int64_t rows, int64_t dim, float eps, cudaStream_t stream) {
  if (rows == 0) return;
  rms_norm_kernel<<<static_cast<unsigned>(rows), 256, 0, stream>>>(x, w, out, dim, eps);
  CUDA_LAUNCH_CHECK();
}

void silu_mul(const float* gate, const float* up, float* out, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  silu_mul_kernel<<<div_up(n, 256), 256, 0, stream>>>(gate, up, out, n);
  CUDA_LAUNCH_CHECK();
}

void sigmoid_gate_mul(float* out, const float* gate, int64_t rows, int n_head, int head_dim, int64_t gate_row_stride,
                      int gate_head_stride, cudaStream_t stream) {
  const int64_t n = rows * n_head * head_dim;
  if (n == 0) return;
  sigmoid_gate_mul_kernel<<<div_up(n, 256), 256, 0, stream>>>(out, gate, n_head, head_dim, gate_row_stride,
                                                                gate_head_stride, n);
  CUDA_LAUNCH_CHECK();
}

void gather_rows(const float* x, const int32_t* src_rows_dev, int64_t n, int64_t cols, float* out, cudaStream_t stream) {
  if (n == 0) return;
  dim3 grid(div_up(cols, 256), static_cast<unsigned>(n));
  gather_rows_kernel<<<grid, 256, 0, stream>>>(x, src_rows_dev, cols, out);
  CUDA_LAUNCH_CHECK();
}

}  // namespace memra::cuda
