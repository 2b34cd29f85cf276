// Row-wise ops: embedding lookup, RMSNorm, SwiGLU product, attention output gate, row gather.
// Each output row depends only on its own input row (fixed in-row reduction trees).
#include <algorithm>

#include "backend/cuda/act_f16.cuh"
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/weight_layout.h"

namespace memra::cuda {
namespace {

__global__ void embed_kernel(const DevWeight w, const int32_t* __restrict__ tokens, float* __restrict__ out) {
  pdl_enter();
  const int64_t r = blockIdx.y;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= w.n_in) return;
  out[r * w.n_in + i] = decode_weight(w, w.data, tokens[r], i);
}

// RMSNorm fused with the f16 form of its output (act_f16.cuh: one warp per k-tile, every block
// of a row reduces the whole row). y_k = (x_k * scale) * w_k with scale = 1 / sqrt(ss / dim + eps);
// ss: thread i takes the row's 4-element chunks i, i + kActThreads, ... in order, an fma chain
// over each chunk's elements in index order, then block_sum's fixed tree: the order depends on
// dim only. Rows up to kNormRegDim keep each thread's chunks of x and w in registers (loaded
// once, all in flight; launches of up to kActStageMaxRows rows also keep the block's own k-tiles
// of y in shared memory for the conversion); longer rows read them again for each pass
// (kRegChunks = 0), in the same order, so every form gives the same bits.
constexpr int kNormRegChunks = 8;
constexpr int64_t kNormRegDim = int64_t{4} * kNormRegChunks * kActThreads;  // 8192

template <int kRegChunks, bool kStage>
__global__ void __launch_bounds__(kActThreads)
    rms_norm_act_kernel(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ out,
                        const F16Act a, int64_t dim, float eps) {
  constexpr int kHeld = kRegChunks > 0 ? kRegChunks : 1;
  const int64_t n_chunks = (dim + 3) / 4;
  const int tid = static_cast<int>(threadIdx.x);
  const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  // The norm weights (never written by a kernel) are loaded before waiting for the previous
  // kernel (launch.cuh), so their loads overlap it.
  const bool w_vec = chunks_vectorizable(w, dim);
  float4 wv[kHeld];
  if constexpr (kRegChunks > 0) {
#pragma unroll
    for (int j = 0; j < kRegChunks; ++j) {
      const int64_t c = tid + int64_t{j} * kActThreads;
      wv[j] = c < n_chunks ? load_chunk(w, c, dim, w_vec) : zero;
    }
  }
  pdl_enter();
  __shared__ float red[32];
  // kStage (rows held in registers, launches of up to kActStageMaxRows rows): the block's own
  // k-tiles of y are staged (act_f16.cuh).
  static_assert(!kStage || kRegChunks > 0);
  __shared__ __align__(16) float staged[kStage ? ActStage::kFloats : 1];
  const ActStage stage{staged, act_stage_first_chunk()};
  const int64_t r = blockIdx.x;
  const bool valid = r < a.rows;
  const float* xr = valid ? x + r * dim : x;
  const bool x_vec = chunks_vectorizable(xr, dim);
  float4 xv[kHeld];
  auto add_squares = [](float ss, float4 v) {
    ss = __fmaf_rn(v.x, v.x, ss);
    ss = __fmaf_rn(v.y, v.y, ss);
    ss = __fmaf_rn(v.z, v.z, ss);
    return __fmaf_rn(v.w, v.w, ss);
  };
  float ss = 0.0f;
  if (valid) {
    if constexpr (kRegChunks > 0) {
#pragma unroll
      for (int j = 0; j < kRegChunks; ++j) {
        const int64_t c = tid + int64_t{j} * kActThreads;
        xv[j] = c < n_chunks ? load_chunk(xr, c, dim, x_vec) : zero;
      }
#pragma unroll
      for (int j = 0; j < kRegChunks; ++j) ss = add_squares(ss, xv[j]);  // zero chunks add +0 exactly
    } else {
      for (int64_t c = tid; c < n_chunks; c += kActThreads) ss = add_squares(ss, load_chunk(xr, c, dim, x_vec));
    }
  }
  ss = block_sum(ss, red);
  const float scale = __frsqrt_rn(__fadd_rn(__fdiv_rn(ss, static_cast<float>(dim)), eps));
  auto y = [scale](float xk, float wk) { return __fmul_rn(__fmul_rn(xk, scale), wk); };
  auto y4 = [&](float4 xc, float4 wc) { return make_float4(y(xc.x, wc.x), y(xc.y, wc.y), y(xc.z, wc.z), y(xc.w, wc.w)); };
  float m = 0.0f;
  if (valid) {
    if constexpr (kRegChunks > 0) {
#pragma unroll
      for (int j = 0; j < kRegChunks; ++j) {
        const float4 yc = y4(xv[j], wv[j]);
        m = abs_max4(m, yc);  // zero chunks: |0| adds nothing
        const int64_t c = tid + int64_t{j} * kActThreads;
        if (kStage && c < n_chunks && stage.holds(c)) stage.put(c, yc);
      }
    } else {
      for (int64_t c = tid; c < n_chunks; c += kActThreads)
        m = abs_max4(m, y4(load_chunk(xr, c, dim, x_vec), load_chunk(w, c, dim, w_vec)));
    }
  }
  m = block_max(m, red);  // its barriers also publish the staged chunks
  const int e = scale_exponent(m);
  if (valid && tid == 0 && blockIdx.y == 0) a.exps[r] = e;
  const int64_t kt = static_cast<int64_t>(blockIdx.y) * kActWarps + tid / kWarp;
  if (kt >= a.n_kt) return;
  float* const out_row = valid ? out + r * dim : nullptr;
  if constexpr (kStage)
    write_act_tile([&](int64_t k) { return stage.at(k); }, r, valid, exp2_int(-e), a, kt, out_row);
  else
    write_act_tile([&](int64_t k) { return y(xr[k], w[k]); }, r, valid, exp2_int(-e), a, kt, out_row);
}

__global__ void silu_mul_kernel(const float* __restrict__ g, const float* __restrict__ u, float* __restrict__ out,
                                int64_t n) {
  pdl_enter();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __fmul_rn(silu(g[i]), u[i]);
}

__global__ void sigmoid_gate_mul_kernel(float* __restrict__ out, const float* __restrict__ gate, int n_head,
                                        int head_dim, int64_t gate_row_stride, int gate_head_stride, int64_t n) {
  pdl_enter();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int64_t per_row = static_cast<int64_t>(n_head) * head_dim;
  const int64_t r = i / per_row;
  const int h = static_cast<int>((i % per_row) / head_dim), e = static_cast<int>(i % head_dim);
  const float g = gate[r * gate_row_stride + static_cast<int64_t>(h) * gate_head_stride + e];
  out[i] = __fmul_rn(out[i], sigmoid(g));
}

__global__ void gather_rows_kernel(const float* __restrict__ x, const int32_t* __restrict__ src, int64_t cols,
                                   float* __restrict__ out) {
  pdl_enter();
  const int64_t r = blockIdx.y;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < cols) out[r * cols + i] = x[static_cast<int64_t>(src[r]) * cols + i];
}

}  // namespace

void embed_rows(const DevWeight& table, const DeviceStep& step, int64_t n_rows, float* out, cudaStream_t stream) {
  if (n_rows == 0) return;
  dim3 grid(div_up(table.n_in, 256), static_cast<unsigned>(n_rows));
  launch(embed_kernel, grid, 256, 0, stream, table, step.tokens, out);
  CUDA_LAUNCH_CHECK();
}

void rms_norm_act(const float* x, const float* w, float* out, const F16Act& act, int64_t rows, int64_t dim, float eps,
                  cudaStream_t stream) {
  MEMRA_ASSERT(act.rows == rows && act.cols == dim && act.n_kt == k_tiles(dim));
  MEMRA_ASSERT(out + rows * dim <= x || x + rows * dim <= out,
               "rms_norm: the output overlaps the input (every block of a row reads the whole input row)");
  if (rows == 0) return;
  const int carveout = act_carveout(rows);
  if (dim <= kNormRegDim && rows <= kActStageMaxRows)
    launch_carveout(carveout, rms_norm_act_kernel<kNormRegChunks, true>, act_grid(act), kActThreads, 0, stream, x, w, out, act, dim, eps);
  else if (dim <= kNormRegDim)
    launch_carveout(carveout, rms_norm_act_kernel<kNormRegChunks, false>, act_grid(act), kActThreads, 0, stream, x, w, out, act, dim, eps);
  else
    launch_carveout(carveout, rms_norm_act_kernel<0, false>, act_grid(act), kActThreads, 0, stream, x, w, out, act, dim, eps);
  CUDA_LAUNCH_CHECK();
}

void silu_mul(const float* gate, const float* up, float* out, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  launch(silu_mul_kernel, div_up(n, 256), 256, 0, stream, gate, up, out, n);
  CUDA_LAUNCH_CHECK();
}

void sigmoid_gate_mul(float* out, const float* gate, int64_t rows, int n_head, int head_dim, int64_t gate_row_stride,
                      int gate_head_stride, cudaStream_t stream) {
  const int64_t n = rows * n_head * head_dim;
  if (n == 0) return;
  launch(sigmoid_gate_mul_kernel, div_up(n, 256), 256, 0, stream, out, gate, n_head, head_dim, gate_row_stride,
         gate_head_stride, n);
  CUDA_LAUNCH_CHECK();
}

void gather_rows(const float* x, const int32_t* src_rows_dev, int64_t n, int64_t cols, float* out, cudaStream_t stream) {
  if (n == 0) return;
  dim3 grid(div_up(cols, 256), static_cast<unsigned>(n));
  launch(gather_rows_kernel, grid, 256, 0, stream, x, src_rows_dev, cols, out);
  CUDA_LAUNCH_CHECK();
}

}  // namespace memra::cuda
