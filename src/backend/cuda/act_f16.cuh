// Writing one activation row in the f16 form of the matmuls (F16Act, kernels.h), by a whole
// thread block: shared by act_f16 (k_act_f16.cu) and the fused RMSNorm (k_rowwise.cu), so an
// activation has the same bits whichever kernel produced it.
#pragma once

#include <cstdint>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/matmul_order.h"

namespace memra::cuda {

// Row r (src: its cols floats, readable by every thread; valid == false: a padding row of the
// last n-tile, written as zeros without reading src).
__device__ __forceinline__ void write_act_row(const float* src, int64_t r, bool valid, const F16Act& a,
                                              float* red) {
  const int tid = static_cast<int>(threadIdx.x), nt = static_cast<int>(blockDim.x);
  const int64_t cols = a.cols;
  float m = 0.0f;
  if (valid)
    for (int64_t i = tid; i < cols; i += nt) m = fmaxf(m, fabsf(src[i]));
  m = block_max(m, red);
  const int e = scale_exponent(m);
  if (tid == 0 && valid) a.exps[r] = e;
  const float inv = exp2_int(-e);
  const int64_t n8 = r / 8, g = r % 8;
  auto scaled = [&](int64_t k) { return valid && k < cols ? __fmul_rn(src[k], inv) : 0.0f; };
  auto code = [&](int64_t k) -> uint16_t { return __half_as_ushort(__float2half_rn(scaled(k))); };
  // x' - hi is exact in float (hi is x' rounded to 11 bits); lo is its f16 rounding.
  auto code_lo = [&](int64_t k) -> uint16_t {
    const float v = scaled(k);
    return __half_as_ushort(__float2half_rn(__fsub_rn(v, __half2float(__float2half_rn(v)))));
  };
  for (int64_t idx = tid; idx < a.n_kt * 32; idx += nt) {
    const int64_t kt = idx / 32, b = (idx / 4) % 8, t = idx % 4;
    const int64_t k0 = kt * kTileK + 32 * b + 2 * t;
    const int64_t at = (((n8 * a.n_kt + kt) * 8 + b) * 8 + g) * 4 + t;
    uint32_t w[4], lo[4];
#pragma unroll
    for (int p = 0; p < 4; ++p) {
      w[p] = static_cast<uint32_t>(code(k0 + 8 * p)) | static_cast<uint32_t>(code(k0 + 8 * p + 1)) << 16;
      lo[p] = static_cast<uint32_t>(code_lo(k0 + 8 * p)) | static_cast<uint32_t>(code_lo(k0 + 8 * p + 1)) << 16;
    }
    reinterpret_cast<uint4*>(a.frag)[at] = make_uint4(w[0], w[1], w[2], w[3]);
    reinterpret_cast<uint4*>(a.frag_lo)[at] = make_uint4(lo[0], lo[1], lo[2], lo[3]);
  }
  // Block sums: warp w takes blocks w, w + n_warps, ...; lane l holds element l and warp_sum's
  // fixed butterfly adds them (every lane gets the same bits).
  const int lane = tid % kWarp, n_warps = nt / kWarp;
  for (int64_t blk = tid / kWarp; blk < a.n_kt * 8; blk += n_warps) {
    const float sum = warp_sum(__half2float(__ushort_as_half(code(blk * 32 + lane))));
    if (lane == 0) a.sums[(n8 * a.n_kt * 8 + blk) * 8 + g] = sum;
  }
}

}  // namespace memra::cuda
