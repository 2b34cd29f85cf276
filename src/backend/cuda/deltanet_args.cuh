// The arguments of the Gated DeltaNet core kernels and the per-row math they share: the fused
// kernel (k_deltanet.cu: the recurrent form, one row after another, everything in one launch) and
// the prompt form (k_deltanet_prompt.cu: the same arithmetic, its per-row parts run for all rows at
// once around the recurrence). Both call the functions below, so a row's bits do not depend on
// which form ran it. (A chunked form for prompts measured slower on the H200,
// pp512 -2% and -4% in two sessions, and was removed: git show c29548b:src/backend/cuda/k_deltanet_chunked.cu.)
#pragma once

#include <cstdint>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#ifdef MEMRA_CUDASIM
#include "quant/float_convert.h"
#endif

namespace memra::cuda {

struct CoreArgs {
  int layer;
  const float* conv_out;  // rows x (2*n_k*d + n_v*d): q | k | v
  const float* z;         // rows x n_v*d
  const float* beta_raw;  // Separate: rows x n_v; GroupedBA: rows x 2*n_v (b and a)
  const float* alpha_raw; // Separate: rows x n_v; unused for GroupedBA
  const float* ssm_a;     // n_v
  const float* dt_bias;   // n_v
  const float* norm_w;    // d
  float* y;               // rows x n_v*d
  int n_k, n_v;
  GdnHeadMap head_map;
  GdnGateLayout gate_layout;
  float eps;
};

// The recurrent state between tokens (CacheShape::ssm_type): float32, or bf16 (BF16) rounded to
// nearest even from the float32 value after every token's update (round_state), so the stored
// bits are the rounded registers' upper halves. The CPU rounds the same way (cpu_deltanet.cpp).
__device__ __forceinline__ uint32_t bf16_bits(float v) {
#ifdef MEMRA_CUDASIM
  return quant::f32_to_bf16(v);  // the emulation runs on the host: the CPU's own rounding
#else
  return __bfloat16_as_ushort(__float2bfloat16_rn(v));
#endif
}
template <bool BF16>
__device__ __forceinline__ float round_state(float v) {
  if constexpr (BF16) return __uint_as_float(bf16_bits(v) << 16);
  return v;
}
template <bool BF16>
__device__ __forceinline__ float4 round_state(float4 v) {
  return make_float4(round_state<BF16>(v.x), round_state<BF16>(v.y), round_state<BF16>(v.z), round_state<BF16>(v.w));
}
// Elements idx .. idx + 3 (idx % 4 == 0) of a head's state.
template <bool BF16>
__device__ __forceinline__ float4 load_state4(const void* base, int64_t idx) {
  if constexpr (!BF16) return *reinterpret_cast<const float4*>(static_cast<const float*>(base) + idx);
  const uint2 u = *reinterpret_cast<const uint2*>(static_cast<const uint16_t*>(base) + idx);
  return make_float4(__uint_as_float(u.x << 16), __uint_as_float(u.x & 0xFFFF0000u), __uint_as_float(u.y << 16),
                     __uint_as_float(u.y & 0xFFFF0000u));
}
// Stores values that went through round_state<BF16> (exact: their low halves are zero).
template <bool BF16>
__device__ __forceinline__ void store_state4(void* base, int64_t idx, float4 v) {
  if constexpr (!BF16) {
    *reinterpret_cast<float4*>(static_cast<float*>(base) + idx) = v;
  } else {
    const uint2 u = make_uint2((__float_as_uint(v.x) >> 16) | (__float_as_uint(v.y) & 0xFFFF0000u),
                               (__float_as_uint(v.z) >> 16) | (__float_as_uint(v.w) & 0xFFFF0000u));
    *reinterpret_cast<uint2*>(static_cast<uint16_t*>(base) + idx) = u;
  }
}
template <bool BF16>
__device__ __forceinline__ float load_state1(const void* base, int64_t idx) {
  if constexpr (!BF16) return static_cast<const float*>(base)[idx];
  return __uint_as_float(static_cast<uint32_t>(static_cast<const uint16_t*>(base)[idx]) << 16);
}
template <bool BF16>
__device__ __forceinline__ void store_state1(void* base, int64_t idx, float v) {
  if constexpr (!BF16) {
    static_cast<float*>(base)[idx] = v;
  } else {
    static_cast<uint16_t*>(base)[idx] = static_cast<uint16_t>(__float_as_uint(v) >> 16);
  }
}

__device__ __forceinline__ float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

// Raw gate inputs (b, a) of value head h at a row, for either gate layout.
__device__ __forceinline__ void gate_inputs(const CoreArgs& p, int64_t row, int h, float& b, float& a) {
  if (p.gate_layout == GdnGateLayout::Separate) {
    b = p.beta_raw[row * p.n_v + h];
    a = p.alpha_raw[row * p.n_v + h];
  } else {
    const int r = p.n_v / p.n_k;
    const float* ba = p.beta_raw + row * 2 * p.n_v + static_cast<int64_t>(h / r) * 2 * r;
    b = ba[h % r];
    a = ba[r + h % r];
  }
}

// The raw gate inputs as the recurrence uses them: beta = sigmoid(b), decay = exp(A * softplus(a + dt_bias)).
__device__ __forceinline__ void gdn_gates(const CoreArgs& p, int64_t row, int h, float& beta, float& decay) {
  float b, a;
  gate_inputs(p, row, h, b, a);
  beta = sigmoid(b);
  decay = expf(p.ssm_a[h] * softplus(a + p.dt_bias[h]));
}

// The key head that value head h reads q and k from.
__device__ __forceinline__ int key_head_of(const CoreArgs& p, int h) {
  return p.head_map == GdnHeadMap::Tiled ? h % p.n_k : h / (p.n_v / p.n_k);
}

// N consecutive floats of shared memory into registers; 16-byte loads when N allows (src is
// then 16-byte aligned: a multiple of N floats into an aligned array).
template <int N>
__device__ __forceinline__ void load_rows(const float* src, float (&dst)[N]) {
  if constexpr (N % 4 == 0) {
#pragma unroll
    for (int i = 0; i < N / 4; ++i) {
      const float4 v = reinterpret_cast<const float4*>(src)[i];
      dst[4 * i] = v.x;
      dst[4 * i + 1] = v.y;
      dst[4 * i + 2] = v.z;
      dst[4 * i + 3] = v.w;
    }
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) dst[i] = src[i];
  }
}

// The prompt form (k_deltanet_prompt.cu): whether a step runs it, and its launches.
bool deltanet_prompt_form(const DeviceStep& step, const GdnShape& s);
void deltanet_prompt(const CoreArgs& args, float* work, const DeviceStep& step, cudaStream_t stream);

// The block shape of the per-row reductions: every kernel that reduces a head's row does it over
// kGdnThreads threads in the same tree (threads past the head size hold zeros).
constexpr int kGdnThreads = 256;
constexpr int kGdnWarps = kGdnThreads / kWarp;

// NV sums over the block in a fixed tree: warp butterflies, then the warp totals added in warp
// order by every thread (so every thread holds the same bits). One barrier; the caller makes sure
// no thread still reads `red` from a previous use.
template <int NV>
__device__ __forceinline__ void block_sums(float (&v)[NV], float (*red)[NV]) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
#pragma unroll
  for (int x = 0; x < NV; ++x) v[x] = warp_sum(v[x]);
  if (lane == 0) {
#pragma unroll
    for (int x = 0; x < NV; ++x) red[warp][x] = v[x];
  }
  __syncthreads();
#pragma unroll
  for (int x = 0; x < NV; ++x) {
    float acc = red[0][x];
#pragma unroll
    for (int w = 1; w < kGdnWarps; ++w) acc = __fadd_rn(acc, red[w][x]);
    v[x] = acc;
  }
}

// l2norm of a row's q and k for one key head: thread tid < D holds q[tid] and k[tid] (the others
// zeros). qn, kn: the factors (q's with 1/sqrt(D)); kq = k_hat . q_hat from the raw dot. One
// block_sums (one barrier).
struct QkNorms {
  float qn, kn, kq;
};
template <int D>
__device__ __forceinline__ QkNorms qk_norms(float qx, float kx, float (*red)[3]) {
  const float q_scale = 1.0f / sqrtf(static_cast<float>(D));
  float sums[3] = {qx * qx, kx * kx, qx * kx};
  block_sums<3>(sums, red);
  QkNorms r;
  r.qn = __fdiv_rn(1.0f, sqrtf(sums[0] + 1e-6f)) * q_scale;
  r.kn = __fdiv_rn(1.0f, sqrtf(sums[1] + 1e-6f));
  r.kq = sums[2] * r.qn * r.kn;
  return r;
}

// The gated RMSNorm of one row of a head: thread tid < D holds o of column tid (the others zero)
// and gets y of that column. One block_sums (one barrier).
template <int D>
__device__ __forceinline__ float gated_rms_norm(float o, float zj, float nw, float eps, float (*red)[1]) {
  float ss[1] = {o * o};
  block_sums<1>(ss, red);
  const float inv = __fdiv_rn(1.0f, sqrtf(__fdiv_rn(ss[0], static_cast<float>(D)) + eps));
  return o * inv * nw * silu(zj);
}

}  // namespace memra::cuda
