// QK-norm + NeoX rope, in place: per head RMSNorm with the weight, then rotation of the pairs
// (i, i + n_rot/2) for i < n_rot/2 by pos * inv_freq[i]; dims >= n_rot keep the normed value.
// One warp per head (query heads first, then key heads, row by row); a head's result depends only
// on that head's values and the row's position (fixed per-lane order, fixed butterfly).
#include "backend/cuda/common.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/kernels.h"

namespace memra::cuda {
namespace {

constexpr int kNormRopeWarps = 8;  // heads per block
constexpr int kMaxHeadDim = 1024;  // keeps the per-block staging (warps * head_dim floats) under 48 KiB

__global__ void __launch_bounds__(kNormRopeWarps* kWarp)
    qk_norm_rope_kernel(float* __restrict__ q, float* __restrict__ k, const float* __restrict__ q_norm,
                        const float* __restrict__ k_norm, const float* __restrict__ inv_freq,
                        const int32_t* __restrict__ positions, int64_t n_heads_total, int n_head, int n_head_kv,
                        int head_dim, int n_rot, int q_head_stride, float eps) {
  pdl_enter();
  MEMRA_DYNAMIC_SMEM(float, staging, 4);  // [kNormRopeWarps][head_dim]: the normed head, read by the rotation
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int64_t item = static_cast<int64_t>(blockIdx.x) * kNormRopeWarps + warp;
  if (item >= n_heads_total) return;  // whole warp; no block-wide barrier follows
  const int per_row = n_head + n_head_kv;
  const int64_t r = item / per_row;
  const int hh = static_cast<int>(item % per_row);
  float* x;
  const float* w;
  if (hh < n_head) {
    x = q + (r * n_head + hh) * q_head_stride;
    w = q_norm;
  } else {
    x = k + (r * n_head_kv + (hh - n_head)) * head_dim;
    w = k_norm;
  }
  float* h = staging + warp * head_dim;

  float ss = 0.0f;
  for (int i = lane; i < head_dim; i += kWarp) {
    const float v = x[i];
    h[i] = v;
    ss = __fmaf_rn(v, v, ss);
  }
  ss = warp_sum(ss);
  const float scale = __frsqrt_rn(__fadd_rn(__fdiv_rn(ss, static_cast<float>(head_dim)), eps));
  for (int i = lane; i < head_dim; i += kWarp) h[i] = __fmul_rn(__fmul_rn(h[i], scale), w[i]);
  __syncwarp();

  const int half = n_rot / 2;
  const float pos = static_cast<float>(positions[r]);
  for (int i = lane; i < half; i += kWarp) {
    float s, c;
    sincosf(__fmul_rn(pos, inv_freq[i]), &s, &c);
    const float a = h[i], b = h[i + half];
    x[i] = __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s));
    x[i + half] = __fadd_rn(__fmul_rn(b, c), __fmul_rn(a, s));
  }
  for (int i = n_rot + lane; i < head_dim; i += kWarp) x[i] = h[i];
}

}  // namespace

void qk_norm_rope(float* q, float* k, const float* q_norm, const float* k_norm, const float* inv_freq,
                  const DeviceStep& step, int64_t n_rows, const AttnShape& s, float eps, cudaStream_t stream) {
  MEMRA_ASSERT(n_rows >= 0 && s.n_head > 0 && s.n_head_kv > 0);
  MEMRA_ASSERT(s.head_dim > 0 && s.head_dim <= kMaxHeadDim);
  MEMRA_ASSERT(s.n_rot >= 0 && s.n_rot % 2 == 0 && s.n_rot <= s.head_dim);
  MEMRA_ASSERT(s.q_head_stride >= s.head_dim);
  if (n_rows == 0) return;
  const int64_t total = n_rows * (s.n_head + s.n_head_kv);
  const size_t smem = static_cast<size_t>(kNormRopeWarps) * s.head_dim * sizeof(float);
  launch(qk_norm_rope_kernel, div_up(total, kNormRopeWarps), kNormRopeWarps * kWarp, smem, stream, q, k, q_norm, k_norm,
         inv_freq, step.positions, total, s.n_head, s.n_head_kv, s.head_dim, s.n_rot, s.q_head_stride, eps);
  CUDA_LAUNCH_CHECK();
}

}  // namespace memra::cuda
