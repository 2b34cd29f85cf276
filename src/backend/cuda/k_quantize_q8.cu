// Activation quantization for the quantized matmuls (quantize_q8.cuh): one warp per 32-element
// block; a row's blocks never depend on other rows.
#include "backend/cuda/common.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/matmul_order.h"
#include "backend/cuda/quantize_q8.cuh"

namespace memra::cuda {

__global__ void quantize_q8_kernel(const float* __restrict__ x, int8_t* __restrict__ q, float* __restrict__ d,
                                   int32_t* __restrict__ s, int64_t n_blocks, int64_t nb, int64_t ns) {
  pdl_enter();
  const int64_t g = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (g >= n_blocks) return;
  const int64_t r = g / nb, b = g % nb;
  const int64_t blk = r * ns + slot_of_block(b, nb);  // storage slot of this block
  quantize_block_warp(x[g * 32 + lane], q, d, s, blk);
}

void quantize_q8(const float* x, const Q8Act& out, cudaStream_t stream) {
  MEMRA_ASSERT(out.cols % 32 == 0 && out.rows >= 0 && out.slots == n_slots(out.cols / 32));
  const int64_t n_blocks = out.rows * out.cols / 32;
  if (n_blocks == 0) return;
  constexpr int threads = 256;
  launch(quantize_q8_kernel, div_up(n_blocks * kWarp, threads), threads, 0, stream, x, out.q, out.d, out.s, n_blocks,
         out.cols / 32, out.slots);
  CUDA_LAUNCH_CHECK();
}

}  // namespace memra::cuda
