// Mixture-of-experts routing and combine (the experts themselves are grouped matmuls,
// k_matmul.cu). Every row is routed and combined from its own logits and outputs alone, in fixed
// orders, so its bits never depend on which other rows share the step or what they route to.
#include <algorithm>
#include <cmath>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"

namespace memra::cuda {
namespace {

constexpr int kRouteThreads = 256;
// A routing warp's scratch: n_expert doubles and n_expert flags; rows per block as that allows
// in this much shared memory (8 for 256 experts, 1 for 4096).
constexpr int kRouteScratchBudget = 48 << 10;
// Selections the grouping stages in shared memory at a time (after 2 n_expert ints).
constexpr int kGroupChunk = 2048;
int route_warps(int n_expert) {
  return std::clamp(kRouteScratchBudget / (n_expert * 9), 1, kRouteThreads / kWarp);
}

// Blocks of the routing launch that have finished; the last one groups and sets it back to 0.
// (One stream runs the launches one after another.)
__device__ unsigned g_route_blocks_done = 0;

// Every lane ends with the warp's largest (best, id), ties to the lowest id.
__device__ __forceinline__ void warp_best(double& best, int& id) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const double ob = __shfl_xor_sync(0xffffffffu, best, o);
    const int oi = __shfl_xor_sync(0xffffffffu, id, o);
    if (ob > best || (ob == best && oi < id)) {
      best = ob;
      id = oi;
    }
  }
}

// Inclusive sum over the warp's lanes in lane order (integers: exact).
__device__ __forceinline__ int warp_inclusive_scan(int v) {
  const int lane = threadIdx.x % kWarp;
#pragma unroll
  for (int o = 1; o < kWarp; o <<= 1) {
    const int u = __shfl_sync(0xffffffffu, v, lane - o);
    if (lane >= o) v += u;
  }
  return v;
}

// One warp per row: softmax in double over all experts, the top k, the weights in rank order.
// Then the last block to finish groups every row's selections by expert (increasing id; within
// an expert, in selection order), writing the group tables and each selection's grouped row.
// A row's routing reads its own logits only; the grouping is a function of all selections.
__global__ void __launch_bounds__(kRouteThreads)
    route_group_kernel(const float* __restrict__ logits, int64_t rows, int n_expert, int k, int norm_topk,
                       int row_warps, MoeRouting r) {
  pdl_enter();
  MEMRA_DYNAMIC_SMEM(double, scratch, 16);  // [row_warps][n_expert] doubles, then as many flags
  const int lane = static_cast<int>(threadIdx.x) % kWarp, warp = static_cast<int>(threadIdx.x) / kWarp;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * row_warps + warp;
  if (warp < row_warps && row < rows) {
    double* p = scratch + static_cast<int64_t>(warp) * n_expert;
    unsigned char* taken = reinterpret_cast<unsigned char*>(scratch + static_cast<int64_t>(row_warps) * n_expert) +
                           static_cast<int64_t>(warp) * n_expert;
    const float* l = logits + row * n_expert;
    float mx = -INFINITY;
    for (int e = lane; e < n_expert; e += kWarp) mx = fmaxf(mx, l[e]);
    mx = warp_max(mx);
    double sum = 0.0;
    for (int e = lane; e < n_expert; e += kWarp) {
      const double v = exp(static_cast<double>(l[e]) - static_cast<double>(mx));
      p[e] = v;
      taken[e] = 0;
      sum = __dadd_rn(sum, v);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) sum = __dadd_rn(sum, __shfl_xor_sync(0xffffffffu, sum, o));
    // Lane l owns experts l, l + 32, ...: only it reads or writes their p and flags.
    for (int e = lane; e < n_expert; e += kWarp) {
      const double v = p[e] / sum;
      p[e] = v >= 0.0 ? v : 0.0;  // NaN logits select like zeros: every id stays in range
    }
    double top = 0.0, p_lo = 0.0, p_hi = 0.0;
    int id_lo = 0, id_hi = 0;  // selection `lane` and `lane + 32`
    for (int i = 0; i < k; ++i) {
      double best = -1.0;
      int id = n_expert;
      for (int e = lane; e < n_expert; e += kWarp)  // increasing e: the lowest id of equals stays
        if (!taken[e] && p[e] > best) {
          best = p[e];
          id = e;
        }
      warp_best(best, id);
      if (id % kWarp == lane) taken[id] = 1;
      top = __dadd_rn(top, best);  // rank order, the same in every lane
      if (i == lane) {
        id_lo = id;
        p_lo = best;
      }
      if (i == lane + kWarp) {
        id_hi = id;
        p_hi = best;
      }
    }
    if (lane < k) {
      r.sel[row * k + lane] = id_lo;
      r.weight[row * k + lane] = static_cast<float>(norm_topk ? p_lo / top : p_lo);
    }
    if (lane + kWarp < k) {
      r.sel[row * k + lane + kWarp] = id_hi;
      r.weight[row * k + lane + kWarp] = static_cast<float>(norm_topk ? p_hi / top : p_hi);
    }
  }

  __shared__ int s_last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) s_last = atomicAdd(&g_route_blocks_done, 1u) == gridDim.x - 1;
  __syncthreads();
  if (!s_last) return;
  __threadfence();
  if (threadIdx.x == 0) g_route_blocks_done = 0;

  // Grouping. The scratch now holds n_expert counts, n_expert offsets, then a chunk of the
  // selections (kGroupChunk).
  const int64_t n_sel = rows * k;
  int32_t* count = reinterpret_cast<int32_t*>(scratch);
  int32_t* off = count + n_expert;
  int32_t* sel = off + n_expert;
  const int tid = static_cast<int>(threadIdx.x), n_threads = static_cast<int>(blockDim.x);
  for (int e = tid; e < n_expert; e += n_threads) count[e] = 0;
  __syncthreads();
  for (int64_t f = tid; f < n_sel; f += n_threads) atomicAdd(&count[__ldcg(r.sel + f)], 1);  // exact
  __syncthreads();
  // Exclusive scans over experts of the counts and of the used flags: thread t owns a run of
  // experts; run totals scanned over the warp, then over the warps.
  __shared__ int s_warp_rows[kRouteThreads / kWarp], s_warp_used[kRouteThreads / kWarp];
  const int per = (n_expert + n_threads - 1) / n_threads;
  const int e0 = min(tid * per, n_expert), e1 = min(e0 + per, n_expert);
  int run_rows = 0, run_used = 0;
  for (int e = e0; e < e1; ++e) {
    run_rows += count[e];
    run_used += count[e] > 0 ? 1 : 0;
  }
  const int inc_rows = warp_inclusive_scan(run_rows), inc_used = warp_inclusive_scan(run_used);
  if (lane == kWarp - 1) {
    s_warp_rows[warp] = inc_rows;
    s_warp_used[warp] = inc_used;
  }
  __syncthreads();
  int at = inc_rows - run_rows, z = inc_used - run_used;
  for (int w = 0; w < warp; ++w) {
    at += s_warp_rows[w];
    z += s_warp_used[w];
  }
  for (int e = e0; e < e1; ++e) {
    off[e] = at;
    if (count[e] > 0) {
      r.grp_expert[z] = e;
      r.grp_off[z] = at;
      ++z;
    }
    at += count[e];
  }
  if (tid == n_threads - 1) {  // the slots past the used ones: empty ranges at the end
    for (; z <= r.groups; ++z) {
      r.grp_off[z] = static_cast<int32_t>(n_sel);
      if (z < r.groups) r.grp_expert[z] = 0;
    }
    if (r.shared_rows > 0) {  // then the shared expert's slot over every row
      r.grp_expert[r.groups] = -1;
      r.grp_off[r.groups + 1] = static_cast<int32_t>(n_sel + r.shared_rows);
    }
  }
  for (int64_t i = tid; i < r.shared_rows; i += n_threads) r.act_row[n_sel + i] = static_cast<int32_t>(i);
  // Positions: warp 0 walks the rows in order, lane i taking a row's selection i; a row's experts
  // are distinct, so its lanes advance distinct offsets. Chunks of rows staged in shared memory.
  const int64_t chunk_rows = max(1, kGroupChunk / k);
  for (int64_t row0 = 0; row0 < rows; row0 += chunk_rows) {
    const int64_t n_rows = min(chunk_rows, rows - row0);
    __syncthreads();  // the offsets above, or the previous chunk consumed
    for (int64_t f = tid; f < n_rows * k; f += n_threads) sel[f] = __ldcg(r.sel + row0 * k + f);
    __syncthreads();
    if (warp == 0) {
      for (int64_t rr = 0; rr < n_rows; ++rr) {
        for (int i = lane; i < k; i += kWarp) {
          const int e = sel[rr * k + i];
          const int32_t slot = off[e];
          off[e] = slot + 1;
          r.pos[(row0 + rr) * k + i] = slot;
          r.act_row[slot] = static_cast<int32_t>(row0 + rr);
        }
        __syncwarp();
      }
    }
  }
}

__global__ void combine_kernel(const float* __restrict__ y, const int32_t* __restrict__ pos,
                               const float* __restrict__ weight, int k, const float* __restrict__ shared,
                               const float* __restrict__ gate_logit, float* __restrict__ out, int64_t hidden) {
  pdl_enter();
  const int64_t r = blockIdx.y;
  const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= hidden) return;
  float acc = 0.0f;
  for (int i = 0; i < k; ++i) acc = __fmaf_rn(weight[r * k + i], y[static_cast<int64_t>(pos[r * k + i]) * hidden + j], acc);
  if (shared) {
    const float g = gate_logit ? sigmoid(gate_logit[r]) : 1.0f;
    acc = __fmaf_rn(g, shared[r * hidden + j], acc);
  }
  out[r * hidden + j] = __fadd_rn(out[r * hidden + j], acc);
}

}  // namespace

void moe_route(const float* logits, int64_t rows, int n_expert, int k, bool norm_topk, const MoeRouting& r,
               cudaStream_t stream) {
  MEMRA_ASSERT(n_expert >= 1 && k >= 1 && k <= kMaxExpertsUsed && k <= n_expert && n_expert <= kMaxExperts);
  MEMRA_ASSERT(r.groups == static_cast<int>(std::min<int64_t>(rows * k, n_expert)));
  MEMRA_ASSERT(r.shared_rows == 0 || r.shared_rows == rows);
  static_assert(kMaxExpertsUsed <= 2 * kWarp, "a routing lane holds two selections");
  if (rows == 0) return;
  const int row_warps = route_warps(n_expert);
  const size_t route_smem = static_cast<size_t>(row_warps) * n_expert * (sizeof(double) + 1);
  // The grouping reuses that scratch: counts and offsets, then a chunk of selections.
  const size_t group_smem = (static_cast<size_t>(n_expert) * 2 + kGroupChunk) * sizeof(int32_t);
  const size_t smem = std::max(route_smem, group_smem);
  static size_t configured = 48 << 10;
  if (smem > configured) {
    CUDA_CHECK(cudaFuncSetAttribute(route_group_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(smem)));
    configured = smem;
  }
  launch(route_group_kernel, div_up(rows, row_warps), kRouteThreads, smem, stream, logits, rows, n_expert, k,
         norm_topk ? 1 : 0, row_warps, r);
  CUDA_LAUNCH_CHECK();
}

void moe_combine(const float* y, const MoeRouting& r, int k, const float* shared, const float* gate_logit, float* out,
                 int64_t rows, int64_t hidden, cudaStream_t stream) {
  if (rows == 0) return;
  launch(combine_kernel, dim3(div_up(hidden, 256), static_cast<unsigned>(rows)), 256, 0, stream,
         static_cast<const float*>(y), static_cast<const int32_t*>(r.pos), static_cast<const float*>(r.weight), k,
         shared, gate_logit, out, hidden);
  CUDA_LAUNCH_CHECK();
}

}  // namespace memra::cuda
