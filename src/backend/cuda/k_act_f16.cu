// act_f16: float activation rows to the f16 form of the matmuls (act_f16.cuh), one block per row.
#include "backend/cuda/act_f16.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"

namespace memra::cuda {
namespace {

constexpr int kThreads = 512;

// The row is staged in shared memory first (coalesced loads once; write_act_row then reads
// each element several times).
__global__ void __launch_bounds__(kThreads) act_f16_kernel(const float* __restrict__ x, const F16Act a) {
  pdl_enter();
  __shared__ float red[32];
  MEMRA_DYNAMIC_SMEM(float, row, 16);
  const int64_t r = blockIdx.x;
  const bool valid = r < a.rows;
  if (valid)
    for (int64_t i = threadIdx.x; i < a.cols; i += blockDim.x) row[i] = x[r * a.cols + i];
  __syncthreads();
  write_act_row(row, r, valid, a, red);
}

}  // namespace

size_t act_f16_frag_bytes(int64_t rows, int64_t cols) {
  return static_cast<size_t>((rows + 7) / 8 * 8) * static_cast<size_t>(k_tiles(cols)) * kTileK * 2;
}
size_t act_f16_sums_bytes(int64_t rows, int64_t cols) {
  return static_cast<size_t>((rows + 7) / 8 * 8) * static_cast<size_t>(k_tiles(cols)) * kTileBlocks * 4;
}

void act_f16(const float* x, const F16Act& out, cudaStream_t stream) {
  MEMRA_ASSERT(out.n_kt == k_tiles(out.cols) && out.frag && out.frag_lo && out.sums && out.exps);
  if (out.rows == 0) return;
  const size_t smem = static_cast<size_t>(out.cols) * sizeof(float);
  MEMRA_ASSERT(smem <= (227u << 10), "act_f16: rows of {} floats do not fit in shared memory", out.cols);
  static size_t configured = 0;  // the dynamic shared memory limit raised so far (static + dynamic may pass 48 KiB)
  if (smem > configured) {
    CUDA_CHECK(cudaFuncSetAttribute(act_f16_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    configured = smem;
  }
  launch(act_f16_kernel, static_cast<unsigned>((out.rows + 7) / 8 * 8), kThreads, smem, stream, x, out);
  CUDA_LAUNCH_CHECK();
}

}  // namespace memra::cuda
