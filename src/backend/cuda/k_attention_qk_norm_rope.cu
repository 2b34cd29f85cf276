// QK-norm + NeoX rope, in place: per head RMSNorm with the weight, then rotation of the pairs
// (i, i + n_rot/2) for i < n_rot/2 by pos * inv_freq[i]; dims >= n_rot keep the normed value.
// One warp per head (query heads first, then key heads, row by row); a head's result depends only
// on that head's values and the row's position (fixed per-lane order, fixed butterfly). The
// attention block's form (qk_norm_rope_append) also writes the k heads it made and the v heads
// into the KV cache: kv_append's bytes, one launch instead of two.
#include "backend/cuda/common.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/kv_append.cuh"

namespace memra::cuda {
namespace {

constexpr int kNormRopeWarps = 8;  // heads per block
constexpr int kMaxHeadDim = 1024;  // keeps the per-block staging (warps * head_dim floats) under 48 KiB

// What the kernel also does with each row: nothing (the op qk_norm_rope), or append its k (after
// the rope) and v heads to the layer's KV cache as kv_append does (kv_append.cuh), f16 or 8-bit.
enum class Append : int { None, F16, Q8 };

// The cache rows a launch that appends writes (kv_append's arguments).
struct AppendArgs {
  int layer = 0;
  const float* v = nullptr;
  DeviceStep step;
};

// One head's head_dim values (src: global or shared memory) into their place in a cache row of
// kv_dim values, by the whole warp.
template <Append kAppend>
__device__ __forceinline__ void append_head(uint8_t* row, int64_t kv_dim, int head, int head_dim, const float* src) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  if constexpr (kAppend == Append::Q8) {
    for (int b = 0; b < head_dim / 32; ++b) kv_q8_block(row, kv_dim, head * (head_dim / 32) + b, src[b * 32 + lane]);
  } else {
    __half* dst = reinterpret_cast<__half*>(row) + static_cast<int64_t>(head) * head_dim;
    for (int i = lane; i < head_dim; i += kWarp) dst[i] = kv_f16(src[i]);
  }
}

// Warps walk the items of a row: its query heads, its key heads, then (when appending) its value
// heads, which are only copied into the cache.
template <Append kAppend>
__global__ void __launch_bounds__(kNormRopeWarps* kWarp)
    qk_norm_rope_kernel(float* __restrict__ q, float* __restrict__ k, const float* __restrict__ q_norm,
                        const float* __restrict__ k_norm, const float* __restrict__ inv_freq,
                        const int32_t* __restrict__ positions, int64_t n_items, int n_head, int n_head_kv,
                        int head_dim, int n_rot, int q_head_stride, float eps, const AppendArgs app) {
  pdl_enter();
  MEMRA_DYNAMIC_SMEM(float, staging, 4);  // [kNormRopeWarps][head_dim]: the normed head, read by the rotation
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int64_t item = static_cast<int64_t>(blockIdx.x) * kNormRopeWarps + warp;
  if (item >= n_items) return;  // whole warp; no block-wide barrier follows
  constexpr bool kAppends = kAppend != Append::None;
  const int per_row = n_head + (kAppends ? 2 : 1) * n_head_kv;
  const int64_t r = item / per_row;
  const int hh = static_cast<int>(item % per_row);
  const int64_t kv_dim = static_cast<int64_t>(n_head_kv) * head_dim;
  const int64_t row_bytes = kAppend == Append::Q8 ? kv_q8_row_bytes(kv_dim) : 2 * kv_dim;
  if (kAppends && hh >= n_head + n_head_kv) {  // a value head: into the cache as it is
    const int vh = hh - n_head - n_head_kv;
    const float* src = app.v + r * kv_dim + static_cast<int64_t>(vh) * head_dim;
    append_head<kAppend>(kv_cache_row(app.step, app.layer, r, true, row_bytes), kv_dim, vh, head_dim, src);
    return;
  }
  const bool is_q = hh < n_head;
  float* x;
  const float* w;
  if (is_q) {
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
    const float ra = __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s)), rb = __fadd_rn(__fmul_rn(b, c), __fmul_rn(a, s));
    x[i] = ra;
    x[i + half] = rb;
    h[i] = ra;  // the lane that read the pair writes it: the head's final values stay in h
    h[i + half] = rb;
  }
  for (int i = n_rot + lane; i < head_dim; i += kWarp) x[i] = h[i];
  if (!kAppends || is_q) return;
  __syncwarp();  // every lane's final values in h
  append_head<kAppend>(kv_cache_row(app.step, app.layer, r, false, row_bytes), kv_dim, hh - n_head, head_dim, h);
}

template <Append kAppend>
void launch_norm_rope(float* q, float* k, const float* q_norm, const float* k_norm, const float* inv_freq,
                      const DeviceStep& step, int64_t n_rows, const AttnShape& s, float eps, const AppendArgs& app,
                      cudaStream_t stream) {
  MEMRA_ASSERT(n_rows >= 0 && s.n_head > 0 && s.n_head_kv > 0);
  MEMRA_ASSERT(s.head_dim > 0 && s.head_dim <= kMaxHeadDim);
  MEMRA_ASSERT(s.n_rot >= 0 && s.n_rot % 2 == 0 && s.n_rot <= s.head_dim);
  MEMRA_ASSERT(s.q_head_stride >= s.head_dim);
  if (n_rows == 0) return;
  const int64_t items = n_rows * (s.n_head + (kAppend == Append::None ? 1 : 2) * s.n_head_kv);
  const size_t smem = static_cast<size_t>(kNormRopeWarps) * s.head_dim * sizeof(float);
  launch(qk_norm_rope_kernel<kAppend>, div_up(items, kNormRopeWarps), kNormRopeWarps * kWarp, smem, stream, q, k,
         q_norm, k_norm, inv_freq, step.positions, items, s.n_head, s.n_head_kv, s.head_dim, s.n_rot,
         s.q_head_stride, eps, app);
  CUDA_LAUNCH_CHECK();
}

}  // namespace

void qk_norm_rope(float* q, float* k, const float* q_norm, const float* k_norm, const float* inv_freq,
                  const DeviceStep& step, int64_t n_rows, const AttnShape& s, float eps, cudaStream_t stream) {
  launch_norm_rope<Append::None>(q, k, q_norm, k_norm, inv_freq, step, n_rows, s, eps, AppendArgs{}, stream);
}

void qk_norm_rope_append(int layer, float* q, float* k, const float* v, const float* q_norm, const float* k_norm,
                         const float* inv_freq, const DeviceStep& step, int64_t n_rows, const AttnShape& s, float eps,
                         GgmlType kv_type, cudaStream_t stream) {
  MEMRA_ASSERT(layer >= 0 && n_rows <= step.n_rows);
  MEMRA_ASSERT(kv_type == GgmlType::F16 || (kv_type == GgmlType::Q8_0 && s.head_dim % 32 == 0 &&
                                            (int64_t{s.n_head_kv} * s.head_dim) % 64 == 0),
               "CUDA KV cache type");
  const AppendArgs app{layer, v, step};
  if (kv_type == GgmlType::Q8_0)
    launch_norm_rope<Append::Q8>(q, k, q_norm, k_norm, inv_freq, step, n_rows, s, eps, app, stream);
  else
    launch_norm_rope<Append::F16>(q, k, q_norm, k_norm, inv_freq, step, n_rows, s, eps, app, stream);
}

}  // namespace memra::cuda
