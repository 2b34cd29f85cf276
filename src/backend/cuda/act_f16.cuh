// Writing activation rows in the f16 form of the matmuls (F16Act, kernels.h): shared by act_f16
// (k_act_f16.cu) and the fused RMSNorm (k_rowwise.cu), so an activation has the same bits
// whichever kernel produced it.
//
// Launch shape (both kernels): block (r, y) of kActThreads threads converts k-tiles
// [y * kActWarps, (y + 1) * kActWarps) of row r, one warp per k-tile; gridDim.x is the row count
// rounded up to the 8 rows of an n-tile (rows past the last one are written as zero padding).
// Every block of a row first reduces the whole row itself (its largest magnitude; the RMSNorm
// also its sum of squares): a decode row is latency-bound, and spreading one row over many
// blocks with all of its loads in flight at once costs less than a second kernel or a grid-wide
// handshake. A redundant reduction gives the same bits in every block (the same code over the
// same elements in the same order: the order depends on the row length only), so the result
// does not depend on the launch shape.
#pragma once

#include <cstdint>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/matmul_order.h"

namespace memra::cuda {

constexpr int kActWarps = 8;
constexpr int kActThreads = kActWarps * kWarp;

inline dim3 act_grid(const F16Act& a) {
  return dim3(static_cast<unsigned>((a.rows + 7) / 8 * 8), static_cast<unsigned>((a.n_kt + kActWarps - 1) / kActWarps));
}

// The shared-memory carveout (percent, launch_carveout) of the kernels that make the f16 form
// (act_f16, rms_norm_act) for `rows` rows: decode steps of 9-16 rows ask for all of it, the others
// leave it to the driver. H200, 9B Q4_0 tg32 @ d512 (2026-12-04, same bits): this rule against
// main in one call, B = 12 3,284 / 3,293 -> 3,333 / 3,355 and B = 16 4,102 / 4,129 -> 4,283 /
// 4,289 tok/s (bench/results/2026-12-04-1338-h200-call9-act-carveout.log). The sweep before it:
// the launch() kernels but the matmuls, GDN and attention at 100% gave B = 16 +3-4% in four runs
// over three machine starts, but B = 2 -1 to -2.5% and B = 32-64 up to -0.6% (B = 4-8 within
// noise); all kernels at 100% lost 1-2% at B = 32-64 (the matmuls alone: within noise). Why only
// there is not established; the driver documents that launching a kernel whose cache preference
// differs from the last one may insert a device-side synchronization point (cuKernelSetCacheConfig),
// which would end the PDL overlap of neighbouring kernels.
inline int act_carveout(int64_t rows) { return rows > 8 && rows <= 16 ? 100 : -1; }

// Elements 4c .. 4c + 3 of a row of n floats (zeros past the end). `vec`: the row starts on a
// 16-byte boundary and n % 4 == 0, so one 16-byte load does; otherwise four scalar loads give the
// same values (the caller's reduction order is over chunks either way).
__device__ __forceinline__ float4 load_chunk(const float* row, int64_t c, int64_t n, bool vec) {
  const int64_t k = 4 * c;
  if (vec) return *reinterpret_cast<const float4*>(row + k);
  return make_float4(k < n ? row[k] : 0.0f, k + 1 < n ? row[k + 1] : 0.0f, k + 2 < n ? row[k + 2] : 0.0f,
                     k + 3 < n ? row[k + 3] : 0.0f);
}
__device__ __forceinline__ bool chunks_vectorizable(const float* row, int64_t n) {
  return n % 4 == 0 && reinterpret_cast<uintptr_t>(row) % 16 == 0;
}
__device__ __forceinline__ float abs_max4(float m, float4 v) {
  return fmaxf(fmaxf(m, fmaxf(fabsf(v.x), fabsf(v.y))), fmaxf(fabsf(v.z), fabsf(v.w)));
}

// The block's own k-tiles of its row, kept in shared memory from the pass that reads the whole row
// (the row's largest magnitude), so the conversion reads shared memory instead of loading the same
// elements from global memory again after the reduction (a decode step's launches of this form
// are latency chains, ~129 a token). Element kk of the block's
// k-tiles sits at kk + 4 * (kk / 32): 16-byte chunks stay aligned, and the fragment reads (lane
// (b, t): elements 32b + 2t + 8p) spread over the banks.
struct ActStage {
  static constexpr int kFloats = kActWarps * kTileK / 32 * 36;
  float* v;
  int64_t first_chunk;  // the row's 4-element chunk at the start of the block's k-tiles
  __device__ __forceinline__ bool holds(int64_t c) const { return c >= first_chunk && c < first_chunk + kActWarps * kTileK / 4; }
  __device__ __forceinline__ void put(int64_t c, float4 x) const {
    const int kk = static_cast<int>(4 * (c - first_chunk));
    *reinterpret_cast<float4*>(v + kk + 4 * (kk / 32)) = x;
  }
  // Element k of the row (k within the block's k-tiles).
  __device__ __forceinline__ float at(int64_t k) const {
    const int kk = static_cast<int>(k - 4 * first_chunk);
    return v[kk + 4 * (kk / 32)];
  }
};
// Launches of up to this many rows stage. H200, 9B Q4_0, 2026-12-03, same bits either way: tg128
// B = 1 373.3 / 372.3 -> 388.2 / 385.1 tok/s (tg32 370.6 -> 380.7); staged up to 8 rows, tg32 B = 2
// 715.0 -> 715.7 / 707.0 / 704.4, B = 4 1,333 -> 1,340 / 1,334 / 1,329, B = 8 2,428 -> 2,403 /
// 2,387 / 2,382; staged at every row count, B = 16 3,762 -> 3,736, B = 64 5,524 -> 5,481, pp512
// 9,153 -> 9,064. Only the one-row step (whose other 7 rows of the n-tile are padding) gains.
constexpr int64_t kActStageMaxRows = 1;
__device__ __forceinline__ int64_t act_stage_first_chunk() { return static_cast<int64_t>(blockIdx.y) * kActWarps * kTileK / 4; }

// Writes k-tile kt of row r with one warp (every lane calls it). elem(k) is element k of the row
// for k < a.cols (called only for a valid row); inv = 2^-e_r. `out_row` (may be null): the row's
// floats are also stored there (elem(k) as is), each element by exactly one lane.
//   frag: lane 4b + t holds elements 32b + 2t + {0, 1, 8, 9, 16, 17, 24, 25} of the k-tile (the
//         mma.sync B fragment of block b for column g = r % 8), hi f16 parts; frag_lo the low parts.
//   sums: block b's 32 hi codes summed by warp_sum with element 32b + l in lane l (s_b), then
//         the min-term B fragments of the row (kernels.h): lane (g, t)'s 8 bytes are the f16 pairs
//         (hi(s_t 2^-5), hi(s_t+4 2^-5)) and (lo(..), lo(..)), lo = f16(s_b 2^-5 - hi): exact
//         steps but the two roundings, so hi + lo carries ~22 bits of s_b. The 2^-5 keeps
//         |s_b| < 32 * 2^15 inside f16's range.
template <typename Elem>
__device__ __forceinline__ void write_act_tile(const Elem& elem, int64_t r, bool valid, float inv, const F16Act& a,
                                               int64_t kt, float* out_row) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int64_t cols = a.cols, n8 = r / 8, g = r % 8;
  auto scaled = [&](int64_t k) { return valid && k < cols ? __fmul_rn(elem(k), inv) : 0.0f; };
  auto hi_of = [](float v) { return __float2half_rn(v); };
  auto lo_bits = [](float v, __half hi) { return __half_as_ushort(f16_lo_part(v, hi)); };
  auto pack2 = f16_pair;
  {
    const int b = lane / 4, t = lane % 4;
    const int64_t k0 = kt * kTileK + 32 * b + 2 * t;
    uint32_t w[4], lo[4];
#pragma unroll
    for (int p = 0; p < 4; ++p) {
      const float v0 = scaled(k0 + 8 * p), v1 = scaled(k0 + 8 * p + 1);
      const __half h0 = hi_of(v0), h1 = hi_of(v1);
      w[p] = pack2(__half_as_ushort(h0), __half_as_ushort(h1));
      lo[p] = pack2(lo_bits(v0, h0), lo_bits(v1, h1));
    }
    const int64_t at = (((n8 * a.n_kt + kt) * 8 + b) * 8 + g) * 4 + t;
    reinterpret_cast<uint4*>(a.frag)[at] = make_uint4(w[0], w[1], w[2], w[3]);
    reinterpret_cast<uint4*>(a.frag_lo)[at] = make_uint4(lo[0], lo[1], lo[2], lo[3]);
  }
  float s[kTileBlocks];
#pragma unroll
  for (int b = 0; b < kTileBlocks; ++b) {
    const int64_t k = kt * kTileK + 32 * b + lane;
    s[b] = __half2float(hi_of(scaled(k)));
    if (out_row != nullptr && valid && k < cols) out_row[k] = elem(k);
  }
#pragma unroll
  for (int b = 0; b < kTileBlocks; ++b) s[b] = warp_sum(s[b]);
  if (lane == 0) {
    uint32_t w[8];
#pragma unroll
    for (int tt = 0; tt < 4; ++tt) {
      uint16_t hi[2], lo[2];
#pragma unroll
      for (int q = 0; q < 2; ++q) {
        const float v = __fmul_rn(s[tt + 4 * q], 0.03125f);  // exact: a power of two
        const __half h = hi_of(v);
        hi[q] = __half_as_ushort(h);
        lo[q] = lo_bits(v, h);
      }
      w[2 * tt] = pack2(hi[0], hi[1]);
      w[2 * tt + 1] = pack2(lo[0], lo[1]);
    }
    uint4* dst = reinterpret_cast<uint4*>(a.sums + ((n8 * a.n_kt + kt) * 8 + g) * 32);
    dst[0] = make_uint4(w[0], w[1], w[2], w[3]);
    dst[1] = make_uint4(w[4], w[5], w[6], w[7]);
  }
}

}  // namespace memra::cuda
