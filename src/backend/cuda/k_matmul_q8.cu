// Quantized-weight matmul against 8-bit activations (Q8Act), one warp per output row, all rows of
// the launch at once (each weight block is read once per group of up to 8 activation rows).
// Block terms come from exact integer dot products (dp4a); the float reduction follows the
// canonical order of matmul_order.h, so results are bit-identical for any number of rows.
#include <algorithm>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/matmul_order.h"
#include "backend/cuda/matmul_terms.cuh"
#include "backend/cuda/quantize_q8.cuh"
#include "backend/cuda/weight_layout.h"

// The CPU emulation used by CI (tests/cudasim) has no tensor cores: every row count takes the GEMV.
#ifdef MEMRA_CUDASIM
#define MEMRA_HAVE_MMA false
#else
#define MEMRA_HAVE_MMA true
#endif

namespace memra::cuda {
namespace {
// From this many activation rows on, the launchers below hand the work to the tensor-core kernel
// (matmul_q8_mma, k_matmul_mma.cu): same bits, so this is a pure performance choice.
constexpr int64_t kMmaMinRows = 16;
// MEMRA_CUDA_MMA (set by the backend at start-up): 0 keeps every row count on the GEMV.
bool g_mma_enabled = MEMRA_HAVE_MMA;
constexpr int kRowsPerBlock = 8;  // warps per thread block, one output row each
constexpr int64_t kPrefetchItems = 3;  // work items per warp pulled into L2 before pdl_wait

// Fused quantization of the SwiGLU output: the warp that finishes the last of the 32 rows of a
// block (per pass of NB activation rows) quantizes the block's values for each activation row,
// as quantize_q8 would. Counting warps with atomics only decides WHO quantizes; the values and
// their quantization are fixed, so the bits never depend on timing. The writer's store is
// fenced before its count; the last warp fences after seeing 32 and reads through L2.
template <int NB>
__device__ __forceinline__ void swiglu_block_done(const GemvJob& job, int64_t j, int64_t r0, int64_t rows, int lane) {
  const int64_t n_out = job.row_begin[1], nblk = n_out / 32, jb = j / 32;
  unsigned* count = job.q8_count + (r0 / NB) * nblk + jb;
  __threadfence();
  unsigned prev = 0;
  if (lane == 0) prev = atomicAdd(count, 1u);
  prev = __shfl_sync(0xffffffffu, prev, 0);
  if (prev != kWarp - 1) return;
  __threadfence();
  __syncwarp();  // lanes 1..31 learnt the count through a shuffle: order their reads after lane 0's atomic
#pragma unroll
  for (int i = 0; i < NB; ++i) {
    const int64_t r = r0 + i;
    if (r >= rows) break;
    const float v = __ldcg(job.out[0] + r * job.out_stride[0] + jb * 32 + lane);
    quantize_block_warp(v, job.q8.q, job.q8.d, job.q8.s, r * job.q8.slots + slot_of_block(jb, nblk));
  }
  if (lane == 0) *count = 0;  // for the next launch (ordered by the kernel boundary)
}

// NW = 1: each warp computes output rows of one of job.n projections (entry found from the
// row's global index). NW = 2: the SwiGLU pair, each warp computes row j of gate and of up and
// writes silu(gate) * up. Every P follows the canonical order, so the results are the bits that
// separate launches (and silu_mul) would give, whatever the grid.
//
// Persistent and software-pipelined: a warp walks its rows (global row index first, first +
// n_warps, ...) in work items of kU blocks per lane; the fetch of item i+1 is issued before item
// i is computed, so each warp always has loads in flight while it computes.
template <GgmlType T, int NB, int NW>
__global__ void __launch_bounds__(kRowsPerBlock * kWarp)
    matmul_q8_kernel(const DevWeight w, const GemvJob job, const int8_t* __restrict__ xq,
                     const float* __restrict__ xd, const int32_t* __restrict__ xs, int64_t rows) {
  constexpr int kU = NW == 1 ? 4 : 2;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int64_t total = job.row_begin[job.n];
  const int64_t n_warps = static_cast<int64_t>(gridDim.x) * kRowsPerBlock;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + warp;
  if (first >= total) return;
  const int64_t nb = w.nb, ns = w.ns, cs = chunk_blocks(nb);
  const int64_t b0 = bitrev5(lane) * cs;
  const int64_t mine = b0 < nb ? min(nb, b0 + cs) - b0 : 0;  // blocks in this lane's chunk
  const int64_t rounds = (cs + kU - 1) / kU;                      // work items per row (warp-uniform)
  const int64_t n_items = (total - first + n_warps - 1) / n_warps * rounds;

  auto row_of = [&](int64_t item, int& e, int64_t& j) {
    const int64_t g = first + (item / rounds) * n_warps;
    e = 0;
    if constexpr (NW == 1) {
      while (g >= job.row_begin[e + 1]) ++e;
    }
    j = g - job.row_begin[e];
  };
  // Calls f(u, v, row, slot, block) for the blocks of work item `item` this lane reads.
  auto for_item_blocks = [&](int64_t item, auto&& f) {
    int e;
    int64_t j;
    row_of(item, e, j);
    const int64_t q = item % rounds;
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int64_t ub = q * kU + u;
      if (ub < mine)
#pragma unroll
        for (int v = 0; v < NW; ++v) f(u, v, job.mat[e + v] + j * w.row_stride, ub * kWarp + lane, b0 + ub);
    }
  };
  auto fetch = [&](int64_t item, RawBlock (&dst)[NW][kU]) {
    for_item_blocks(item, [&](int u, int v, const uint8_t* row, int64_t k, int64_t b) {
      dst[v][u] = fetch_block<T>(row, w, k, b);
    });
  };

  // Weights are never written by a kernel: the first work item is loaded and the next few are
  // pulled into L2 before waiting for the previous kernel (launch.cuh), so the weight stream is
  // already flowing when the activations become readable.
  RawBlock cur[NW][kU], nxt[NW][kU];
  fetch(0, cur);
  const int64_t prefetch = job.prefetch_l2 ? kPrefetchItems : 0;  // only useful under PDL
  for (int64_t item = 1; item < n_items && item <= prefetch; ++item)
    for_item_blocks(item, [&](int, int, const uint8_t* row, int64_t k, int64_t) { prefetch_block_l2<T>(row, k); });
  pdl_enter();

  for (int64_t r0 = 0; r0 < rows; r0 += NB) {
    float P[NW][NB];
#pragma unroll
    for (int v = 0; v < NW; ++v)
#pragma unroll
      for (int i = 0; i < NB; ++i) P[v][i] = 0.0f;
    if (r0 > 0) fetch(0, cur);
    for (int64_t item = 0; item < n_items; ++item) {
      if (item + 1 < n_items) fetch(item + 1, nxt);
      const int64_t q = item % rounds;
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const int64_t ub = q * kU + u;
        if (ub >= mine) break;
        const int64_t k = ub * kWarp + lane;
        int wq[NW][8];
        BlockScales sc[NW];
#pragma unroll
        for (int v = 0; v < NW; ++v) decode_block<T>(cur[v][u], wq[v], sc[v]);
#pragma unroll
        for (int i = 0; i < NB; ++i) {
          const int64_t r = r0 + i;
          if (r < rows) {
            const ActBlock x = load_act_block(xq, xd, xs, r, ns, k);
#pragma unroll
            for (int v = 0; v < NW; ++v) P[v][i] = __fadd_rn(P[v][i], block_term<T>(wq[v], sc[v], x.q, x.d, x.s));
          }
        }
      }
      if (q == rounds - 1) {  // the row is complete: reduce, write, start the next
        int e;
        int64_t j;
        row_of(item, e, j);
#pragma unroll
        for (int v = 0; v < NW; ++v)
#pragma unroll
          for (int i = 0; i < NB; ++i) P[v][i] = warp_sum(P[v][i]);
        if (lane == 0) {
#pragma unroll
          for (int i = 0; i < NB; ++i) {
            const int64_t r = r0 + i;
            if (r >= rows) break;
            float* o = job.out[e] + r * job.out_stride[e] + j;
            if constexpr (NW == 2) *o = __fmul_rn(silu(P[0][i]), P[1][i]);
            else *o = job.accumulate[e] ? __fadd_rn(*o, P[0][i]) : P[0][i];
          }
        }
        if constexpr (NW == 2) {
          if (job.q8.q) swiglu_block_done<NB>(job, j, r0, rows, lane);  // uniform over the grid
        }
#pragma unroll
        for (int v = 0; v < NW; ++v)
#pragma unroll
          for (int i = 0; i < NB; ++i) P[v][i] = 0.0f;
      }
#pragma unroll
      for (int v = 0; v < NW; ++v)
#pragma unroll
        for (int u = 0; u < kU; ++u) cur[v][u] = nxt[v][u];
    }
  }
}

// Thread blocks for a persistent launch: all that fit on the device at once, at most one per
// 8 output rows.
template <typename Kernel>
unsigned persistent_grid(Kernel kernel, int64_t total_rows) {
  static int sms = [] {
    int n = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, 0));
    return n;
  }();
  int per_sm = 0;
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kRowsPerBlock * kWarp, 0));
  const int64_t want = (total_rows + kRowsPerBlock - 1) / kRowsPerBlock;  // int64: no narrowing
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(want, int64_t{std::max(per_sm, 1)} * sms)));
}

template <GgmlType T, int NW>
void launch_type(const DevWeight& w, const GemvJob& job, const Q8Act& x, cudaStream_t stream) {
  const unsigned threads = kRowsPerBlock * kWarp;
  const int64_t rows = x.rows;
  GemvJob j = job;
  j.prefetch_l2 = pdl_enabled();
#define MEMRA_MATMUL_Q8(NB)                                                                          \
  do {                                                                                               \
    static const unsigned grid_cap = persistent_grid(matmul_q8_kernel<T, NB, NW>, int64_t{1} << 30); \
    const unsigned grid = std::min<unsigned>(grid_cap, div_up(job.row_begin[job.n], kRowsPerBlock)); \
    launch(matmul_q8_kernel<T, NB, NW>, grid, threads, 0, stream, w, j, x.q, x.d, x.s, rows);        \
  } while (0)
  if (rows >= 8) MEMRA_MATMUL_Q8(8);
  else if (rows >= 3) MEMRA_MATMUL_Q8(4);
  else if (rows == 2) MEMRA_MATMUL_Q8(2);
  else MEMRA_MATMUL_Q8(1);
#undef MEMRA_MATMUL_Q8
  CUDA_LAUNCH_CHECK();
}

template <int NW>
void launch_gemv(const DevWeight& w, const GemvJob& job, const Q8Act& x, cudaStream_t stream) {
  switch (w.type) {
    case GgmlType::Q4_0: launch_type<GgmlType::Q4_0, NW>(w, job, x, stream); break;
    case GgmlType::Q8_0: launch_type<GgmlType::Q8_0, NW>(w, job, x, stream); break;
    case GgmlType::Q4_K: launch_type<GgmlType::Q4_K, NW>(w, job, x, stream); break;
    case GgmlType::Q5_K: launch_type<GgmlType::Q5_K, NW>(w, job, x, stream); break;
    case GgmlType::Q6_K: launch_type<GgmlType::Q6_K, NW>(w, job, x, stream); break;
    default: MEMRA_ASSERT(false, "matmul_q8: not a quantized device type");
  }
}

bool same_geometry(const DevWeight& a, const DevWeight& b) {
  return a.type == b.type && a.n_in == b.n_in && a.row_stride == b.row_stride;
}

}  // namespace

void set_mma_enabled(bool on) { g_mma_enabled = on && MEMRA_HAVE_MMA; }

void matmul_q8_multi(const MatmulTarget* targets, int n, const Q8Act& x, cudaStream_t stream, int splitk) {
  MEMRA_ASSERT(n >= 1 && n <= 4);
  if (x.rows == 0) return;
  if (g_mma_enabled && x.rows >= kMmaMinRows) {
    for (int e = 0; e < n; ++e) {
      const MatmulTarget& t = targets[e];
      matmul_q8_mma(*t.w, t.mat, x, t.out, t.out_stride, t.accumulate, stream);
    }
    return;
  }
  const DevWeight& w = *targets[0].w;
  GemvJob job;
  job.n = n;
  job.row_begin[0] = 0;
  for (int e = 0; e < n; ++e) {
    const MatmulTarget& t = targets[e];
    MEMRA_ASSERT(same_geometry(*t.w, w) && x.cols == w.n_in && x.slots == w.ns && t.mat >= 0 && t.mat < t.w->n_mat &&
                 t.out_stride >= t.w->n_out);
    job.mat[e] = t.w->data + t.w->mat_stride * static_cast<size_t>(t.mat);
    job.out[e] = t.out;
    job.out_stride[e] = t.out_stride;
    job.accumulate[e] = t.accumulate;
    job.row_begin[e + 1] = job.row_begin[e] + t.w->n_out;
  }
  if (splitk) return matmul_q8_splitk(w, job, x, false, splitk, stream);
  launch_gemv<1>(w, job, x, stream);
}

void matmul_q8(const DevWeight& w, int64_t mat, const Q8Act& x, float* out, int64_t out_stride, bool accumulate,
               cudaStream_t stream, int splitk) {
  MatmulTarget t{&w, mat, out, out_stride, accumulate};
  matmul_q8_multi(&t, 1, x, stream, splitk);
}

void matmul_q8_swiglu(const DevWeight& gate, const DevWeight& up, const Q8Act& x, float* act, const Q8Act* act_q8,
                      unsigned* counters, cudaStream_t stream, int splitk) {
  MEMRA_ASSERT(same_geometry(gate, up) && gate.n_out == up.n_out && x.cols == gate.n_in && x.slots == gate.ns);
  if (x.rows == 0) return;
  if (g_mma_enabled && x.rows >= kMmaMinRows) {  // the two projections, then silu_mul: the bits of the fused GEMV
    const int64_t n = x.rows * gate.n_out;
    float* tmp = nullptr;
    CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&tmp), 2 * static_cast<size_t>(n) * sizeof(float), stream));
    matmul_q8_mma(gate, 0, x, tmp, gate.n_out, false, stream);
    matmul_q8_mma(up, 0, x, tmp + n, up.n_out, false, stream);
    if (act_q8) silu_mul_q8(tmp, tmp + n, act, x.rows, gate.n_out, *act_q8, stream);
    else silu_mul(tmp, tmp + n, act, n, stream);
    CUDA_CHECK(cudaFreeAsync(tmp, stream));
    return;
  }
  GemvJob job;
  job.n = 1;
  job.row_begin[0] = 0;
  job.row_begin[1] = gate.n_out;
  job.mat[0] = gate.data;
  job.mat[1] = up.data;
  job.out[0] = act;
  job.out_stride[0] = gate.n_out;
  if (splitk) {
    matmul_q8_splitk(gate, job, x, true, splitk, stream);
    if (act_q8) quantize_q8(act, *act_q8, stream);
    return;
  }
  if (act_q8) {
    MEMRA_ASSERT(counters && gate.n_out % 32 == 0 && act_q8->rows == x.rows && act_q8->cols == gate.n_out &&
                 act_q8->slots == n_slots(gate.n_out / 32));
    job.q8 = *act_q8;
    job.q8_count = counters;
  }
  launch_gemv<2>(gate, job, x, stream);
}

}  // namespace memra::cuda
