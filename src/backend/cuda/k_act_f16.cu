// act_f16: float activation rows to the f16 form of the matmuls (act_f16.cuh: the layout and the launch shape).
#include "backend/cuda/act_f16.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"

namespace memra::cuda {
namespace {

// One row's largest magnitude, then one warp per k-tile (act_f16.cuh: the launch shape).
__global__ void __launch_bounds__(kActThreads) act_f16_kernel(const float* __restrict__ x, const F16Act a) {
  pdl_enter();
  __shared__ float red[32];
  const int64_t r = blockIdx.x;
  const bool valid = r < a.rows;
  const float* xr = valid ? x + r * a.cols : x;
  float m = 0.0f;
  if (valid) {
    const bool vec = chunks_vectorizable(xr, a.cols);
    const int64_t n_chunks = (a.cols + 3) / 4;
#pragma unroll 4
    for (int64_t c = threadIdx.x; c < n_chunks; c += blockDim.x) m = abs_max4(m, load_chunk(xr, c, a.cols, vec));
  }
  m = block_max(m, red);
  const int e = scale_exponent(m);
  if (valid && threadIdx.x == 0 && blockIdx.y == 0) a.exps[r] = e;
  const int64_t kt = static_cast<int64_t>(blockIdx.y) * kActWarps + threadIdx.x / kWarp;
  if (kt < a.n_kt) write_act_tile([&](int64_t k) { return xr[k]; }, r, valid, exp2_int(-e), a, kt, nullptr);
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
  launch(act_f16_kernel, act_grid(out), kActThreads, 0, stream, x, out);
  CUDA_LAUNCH_CHECK();
}

}  // namespace memra::cuda
