// The 8-bit activation block (Q8Act, kernels.h) as one warp computes it: lane l holds element l
// of a 32-element block. Codes are round(v * 127 / max|v|) (one division per block, not per
// element), the stored scale is max|v| / 127, and the code sum feeds the zero-point terms of the
// quantized matmuls. Every kernel that writes a Q8Act calls this, so an activation has the same
// bits whichever kernel quantized it (a fused producer or quantize_q8).
#pragma once

#include <cstdint>

#include "backend/cuda/common.cuh"

namespace memra::cuda {

// All 32 lanes must call it (warp shuffles). blk: the block's storage slot (row * slots +
// slot_of_block(b, nb)).
__device__ __forceinline__ void quantize_block_warp(float v, int8_t* __restrict__ q, float* __restrict__ d,
                                                    int32_t* __restrict__ s, int64_t blk) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const float amax = warp_max(fabsf(v));
  const float scale = __fdiv_rn(amax, 127.0f);
  const float inv = amax > 0.0f ? __fdiv_rn(127.0f, amax) : 0.0f;
  const int qi = max(-127, min(127, __float2int_rn(__fmul_rn(v, inv))));
  q[blk * 32 + lane] = static_cast<int8_t>(qi);
  const int sum = __reduce_add_sync(0xffffffffu, qi);
  if (lane == 0) {
    d[blk] = scale;
    s[blk] = sum;
  }
}

}  // namespace memra::cuda
