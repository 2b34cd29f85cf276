// The inexact comparison tier (issue: the cost of exactness): the quantized GEMV with S warps per
// output row, each over a contiguous 1/S of the row's block slots, combined in shared memory.
// Same block terms as the exact kernel, a different summation tree, so its results differ from the
// exact kernels' in the last bits, and rows computed here differ from rows of 16+ (tensor-core)
// launches: batch exactness no longer holds across that boundary. Used only when a backend has
// MEMRA_CUDA_SPLITK = 2 or 4; it exists to measure what the canonical order costs at small batches.
#include <algorithm>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/matmul_order.h"
#include "backend/cuda/matmul_terms.cuh"
#include "backend/cuda/weight_layout.h"

namespace memra::cuda {
namespace {

constexpr int kWarps = 8;  // per thread block

// Warp w of a block: output row blockIdx.x * (kWarps / S) + w / S, part w % S. NW = 2: the
// SwiGLU pair (gate and up of the same row), written as silu(gate) * up.
template <GgmlType T, int NB, int NW, int S>
__global__ void __launch_bounds__(kWarps * kWarp)
    matmul_q8_splitk_kernel(const DevWeight w, const GemvJob job, const int8_t* __restrict__ xq,
                            const float* __restrict__ xd, const int32_t* __restrict__ xs, int64_t rows) {
  static_assert(kWarps % S == 0);
  __shared__ float part[kWarps][NW][NB];
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int64_t g = static_cast<int64_t>(blockIdx.x) * (kWarps / S) + warp / S;
  const int p = warp % S;
  const int64_t total = job.row_begin[job.n];
  const bool live = g < total;
  int e = 0;
  if constexpr (NW == 1) {
    while (live && g >= job.row_begin[e + 1]) ++e;
  }
  const int64_t j = live ? g - job.row_begin[e] : 0;
  const int64_t nb = w.nb, ns = w.ns, cs = chunk_blocks(nb);
  const int64_t u0 = p * cs / S, u1 = (p + 1) * cs / S;  // this part's slot steps
  const int64_t b_lane = static_cast<int64_t>(bitrev5(lane)) * cs;  // lane's chunk start (natural blocks)
  pdl_enter();
  for (int64_t r0 = 0; r0 < rows; r0 += NB) {
    float acc[NW][NB];
#pragma unroll
    for (int v = 0; v < NW; ++v)
#pragma unroll
      for (int i = 0; i < NB; ++i) acc[v][i] = 0.0f;
    if (live) {
      for (int64_t u = u0; u < u1; ++u) {
        const int64_t b = b_lane + u;
        if (b >= nb) continue;  // padding slot
        const int64_t k = u * kWarp + lane;
        int wq[NW][8];
        BlockScales sc[NW];
#pragma unroll
        for (int v = 0; v < NW; ++v)
          decode_block<T>(fetch_block<T>(job.mat[e + v] + j * w.row_stride, w, k, b), wq[v], sc[v]);
#pragma unroll
        for (int i = 0; i < NB; ++i) {
          const int64_t r = r0 + i;
          if (r >= rows) break;
          const ActBlock x = load_act_block(xq, xd, xs, r, ns, k);
#pragma unroll
          for (int v = 0; v < NW; ++v) acc[v][i] += block_term<T>(wq[v], sc[v], x.q, x.d, x.s);
        }
      }
    }
#pragma unroll
    for (int v = 0; v < NW; ++v)
#pragma unroll
      for (int i = 0; i < NB; ++i) acc[v][i] = warp_sum(acc[v][i]);
    if (lane == 0) {
#pragma unroll
      for (int v = 0; v < NW; ++v)
#pragma unroll
        for (int i = 0; i < NB; ++i) part[warp][v][i] = acc[v][i];
    }
    __syncthreads();
    if (live && p == 0 && lane < NB) {
      const int i = lane;
      const int64_t r = r0 + i;
      if (r < rows) {
        float sum[NW];
#pragma unroll
        for (int v = 0; v < NW; ++v) {
          sum[v] = part[warp][v][i];
#pragma unroll
          for (int q = 1; q < S; ++q) sum[v] += part[warp + q][v][i];
        }
        float* o = job.out[e] + r * job.out_stride[e] + j;
        if constexpr (NW == 2) *o = silu(sum[0]) * sum[1];
        else *o = job.accumulate[e] ? *o + sum[0] : sum[0];
      }
    }
    __syncthreads();  // part is rewritten by the next pass
  }
}

template <GgmlType T, int NW, int S>
void launch_s(const DevWeight& w, const GemvJob& job, const Q8Act& x, cudaStream_t stream) {
  const unsigned grid = div_up(job.row_begin[job.n], kWarps / S);
  const unsigned threads = kWarps * kWarp;
#define MEMRA_SPLITK(NB) \
  launch(matmul_q8_splitk_kernel<T, NB, NW, S>, grid, threads, 0, stream, w, job, x.q, x.d, x.s, x.rows)
  if (x.rows >= 8) MEMRA_SPLITK(8);
  else if (x.rows >= 3) MEMRA_SPLITK(4);
  else if (x.rows == 2) MEMRA_SPLITK(2);
  else MEMRA_SPLITK(1);
#undef MEMRA_SPLITK
  CUDA_LAUNCH_CHECK();
}

template <GgmlType T, int NW>
void launch_t(const DevWeight& w, const GemvJob& job, const Q8Act& x, int splitk, cudaStream_t stream) {
  if (splitk == 4) launch_s<T, NW, 4>(w, job, x, stream);
  else launch_s<T, NW, 2>(w, job, x, stream);
}

}  // namespace

void matmul_q8_splitk(const DevWeight& w, const GemvJob& job, const Q8Act& x, bool swiglu, int splitk,
                      cudaStream_t stream) {
  MEMRA_ASSERT((splitk == 2 || splitk == 4) && x.rows > 0, "split-K tier: 2 or 4 warps per row");
  switch (w.type) {
#define MEMRA_SPLITK_TYPE(T)                                  \
  case T:                                                     \
    if (swiglu) launch_t<T, 2>(w, job, x, splitk, stream);    \
    else launch_t<T, 1>(w, job, x, splitk, stream);           \
    break;
    MEMRA_SPLITK_TYPE(GgmlType::Q4_0)
    MEMRA_SPLITK_TYPE(GgmlType::Q8_0)
    MEMRA_SPLITK_TYPE(GgmlType::Q4_K)
    MEMRA_SPLITK_TYPE(GgmlType::Q5_K)
    MEMRA_SPLITK_TYPE(GgmlType::Q6_K)
#undef MEMRA_SPLITK_TYPE
    default: MEMRA_ASSERT(false, "matmul_q8_splitk: not a quantized device type");
  }
}

}  // namespace memra::cuda
