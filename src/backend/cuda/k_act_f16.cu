// act_f16: float activation rows to the f16 form of the matmuls (act_f16.cuh: the layout and the launch shape).
#include "backend/cuda/act_f16.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"

namespace memra::cuda {
namespace {

// One row's largest magnitude, then one warp per k-tile (act_f16.cuh: the launch shape).
// kChunks > 0 (launches of up to kActStageMaxRows rows, rows of up to kChunks 4-element chunks a
// thread): every chunk is loaded before any is used (all in flight at once: a 12,288-column row
// took three dependent rounds of four loads) and the block's own k-tiles are staged (ActStage).
// kChunks = 0: a loop over the row, and the conversion reads its elements again. The maximum does
// not depend on the order its elements are taken in, so both forms give the same bits.
template <int kChunks>
__global__ void __launch_bounds__(kActThreads) act_f16_kernel(const float* __restrict__ x, const F16Act a) {
  pdl_enter();
  __shared__ float red[32];
  __shared__ __align__(16) float staged[kChunks > 0 ? ActStage::kFloats : 1];
  const ActStage stage{staged, act_stage_first_chunk()};
  const int64_t r = blockIdx.x;
  const bool valid = r < a.rows;
  const float* xr = valid ? x + r * a.cols : x;
  float m = 0.0f;
  if (valid) {
    const bool vec = chunks_vectorizable(xr, a.cols);
    const int64_t n_chunks = (a.cols + 3) / 4;
    auto take = [&](int64_t c, float4 v) {
      m = abs_max4(m, v);
      if (kChunks > 0 && stage.holds(c)) stage.put(c, v);
    };
    if constexpr (kChunks > 0) {
      float4 v[kChunks];
#pragma unroll
      for (int j = 0; j < kChunks; ++j) {
        const int64_t c = threadIdx.x + int64_t{j} * kActThreads;
        v[j] = c < n_chunks ? load_chunk(xr, c, a.cols, vec) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      }
#pragma unroll
      for (int j = 0; j < kChunks; ++j) {
        const int64_t c = threadIdx.x + int64_t{j} * kActThreads;
        if (c < n_chunks) take(c, v[j]);
      }
    } else {
#pragma unroll 4
      for (int64_t c = threadIdx.x; c < n_chunks; c += blockDim.x) take(c, load_chunk(xr, c, a.cols, vec));
    }
  }
  m = block_max(m, red);  // its barriers also publish the staged chunks
  const int e = scale_exponent(m);
  if (valid && threadIdx.x == 0 && blockIdx.y == 0) a.exps[r] = e;
  const int64_t kt = static_cast<int64_t>(blockIdx.y) * kActWarps + threadIdx.x / kWarp;
  if (kt >= a.n_kt) return;
  if constexpr (kChunks > 0)
    write_act_tile([&](int64_t k) { return stage.at(k); }, r, valid, exp2_int(-e), a, kt, nullptr);
  else
    write_act_tile([&](int64_t k) { return xr[k]; }, r, valid, exp2_int(-e), a, kt, nullptr);
}

}  // namespace

size_t act_f16_frag_bytes(int64_t rows, int64_t cols) {
  return static_cast<size_t>((rows + 7) / 8 * 8) * static_cast<size_t>(k_tiles(cols)) * kTileK * 2;
}
size_t act_f16_sums_bytes(int64_t rows, int64_t cols) {
  return static_cast<size_t>((rows + 7) / 8 * 8) * static_cast<size_t>(k_tiles(cols)) * 32;  // 4 lanes x 8 bytes
}

void act_f16(const float* x, const F16Act& out, cudaStream_t stream) {
  MEMRA_ASSERT(out.n_kt == k_tiles(out.cols) && out.frag && out.frag_lo && out.sums && out.exps);
  if (out.rows == 0) return;
  const int64_t per_thread = ((out.cols + 3) / 4 + kActThreads - 1) / kActThreads;  // 4-element chunks
  const int carveout = act_carveout(out.rows);
  if (out.rows > kActStageMaxRows)
    launch_carveout(carveout, act_f16_kernel<0>, act_grid(out), kActThreads, 0, stream, x, out);
  else if (per_thread <= 4)
    launch_carveout(carveout, act_f16_kernel<4>, act_grid(out), kActThreads, 0, stream, x, out);
  else if (per_thread <= 8)
    launch_carveout(carveout, act_f16_kernel<8>, act_grid(out), kActThreads, 0, stream, x, out);
  else if (per_thread <= 16)
    launch_carveout(carveout, act_f16_kernel<16>, act_grid(out), kActThreads, 0, stream, x, out);
  else
    launch_carveout(carveout, act_f16_kernel<0>, act_grid(out), kActThreads, 0, stream, x, out);
  CUDA_LAUNCH_CHECK();
}

}  // namespace memra::cuda
