// CUDA helpers shared by every kernel file: checked calls with file:line, launch checks,
// warp reductions with a fixed shape (so results never depend on scheduling).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/cuda_check.h"

namespace memra::cuda {

constexpr int kWarp = 32;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over a block of blockDim.x threads (a multiple of 32, at most 1024) in a fixed tree:
// warp butterflies, then the warp totals in warp order by warp 0's butterfly. `shared` needs 32
// floats. Every thread gets the result.
template <typename WarpOp>
__device__ __forceinline__ float block_reduce(float v, float* shared, float identity, WarpOp warp_op) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, n_warps = blockDim.x / kWarp;
  v = warp_op(v);
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  return warp_op(lane < n_warps ? shared[lane] : identity);
}
__device__ __forceinline__ float block_sum(float v, float* shared) {
  return block_reduce(v, shared, 0.0f, [](float x) { return warp_sum(x); });
}
// Max in the same shape; NaN never wins (fmaxf). Values are magnitudes here (identity 0).
__device__ __forceinline__ float block_max(float v, float* shared) {
  return block_reduce(v, shared, 0.0f, [](float x) { return warp_max(x); });
}

// The f16 rounding of what hi = f16_rn(x) left out of x (x - hi is exact in float): hi + lo
// carries ~22 bits of x (the matmul's float activations, the tensor-core attention's q and p).
__device__ __forceinline__ __half f16_lo_part(float x, __half hi) {
  return __float2half_rn(__fsub_rn(x, __half2float(hi)));
}

// Two f16 bit patterns as one register (an mma.sync fragment word), `first` in the low half.
__device__ __forceinline__ uint32_t f16_pair(uint16_t first, uint16_t second) {
  return static_cast<uint32_t>(first) | static_cast<uint32_t>(second) << 16;
}

__device__ __forceinline__ float silu(float x) { return __fdiv_rn(x, __fadd_rn(1.0f, expf(-x))); }
__device__ __forceinline__ float sigmoid(float x) { return __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-x))); }

// A kernel's dynamic shared memory (the launch's smem bytes) as an array of T. The CPU emulation
// used by CI (tests/cudasim) hands out a buffer instead of an extern __shared__ array.
#ifdef MEMRA_CUDASIM
#define MEMRA_DYNAMIC_SMEM(T, name, align) T* const name = static_cast<T*>(::cudasim::dynamic_smem())
#else
#define MEMRA_DYNAMIC_SMEM(T, name, align) extern __shared__ __align__(align) T name[]
#endif

inline unsigned div_up(int64_t a, int64_t b) { return static_cast<unsigned>((a + b - 1) / b); }

}  // namespace memra::cuda
