// Mixture-of-experts routing and combine (the experts themselves are grouped matmuls,
// k_matmul.cu). Every row is routed and combined from its own logits and outputs alone, in fixed
// orders, so its bits never depend on which other rows share the step or what they route to.
#include <algorithm>
#include <climits>
#include <cmath>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"

namespace memra::cuda {
namespace {

constexpr int kRouteThreads = 256;
// Selections the grouping stages in shared memory at a time (after 2 n_expert ints).
constexpr int kGroupChunk = 2048;

// Warps that place the selections (route_group_kernel's positions): up to all of the block's, as long
// as their per-expert slot tables ([warps][n_expert] ints) stay within 32 KiB.
__host__ __device__ inline int route_placers(int n_expert, int n_warps) {
  const int fit = (32 << 10) / (4 * n_expert);
  return fit < 1 ? 1 : (fit < n_warps ? fit : n_warps);
}

// Blocks of the routing launch that have finished; the last one groups and sets it back to 0.
// (One stream runs the launches one after another.)
__device__ unsigned g_route_blocks_done = 0;

// Whether expert (pa, a) ranks before (pb, b): larger probability first, then the lower id.
// Probabilities are doubles in [+0, 1] (never NaN or -0): their bit patterns order like them.
__device__ __forceinline__ bool ranks_before(unsigned long long pa, int a, unsigned long long pb, int b) {
  return pa > pb || (pa == pb && a < b);
}

// The routing's arithmetic, shared by its two kernels so that a row gets the same bits from either:
// an expert's unnormalised probability (softmax in float64 from the row's largest logit), the
// warp's total of the lanes' sums (each lane adds its experts l, l + 32, ... in order; then a
// butterfly, which leaves every lane the same bits), an expert's probability as bits that order
// like it, the k best's sum in rank order, and a selection's weight.
__device__ __forceinline__ double route_exp(float logit, float mx) {
  return exp(static_cast<double>(logit) - static_cast<double>(mx));
}
__device__ __forceinline__ double route_warp_total(double lane_sum) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) lane_sum = __dadd_rn(lane_sum, __shfl_xor_sync(0xffffffffu, lane_sum, o));
  return lane_sum;
}
__device__ __forceinline__ unsigned long long route_prob_bits(double p, double sum) {
  const double v = p / sum;
  return __double_as_longlong(v > 0.0 ? v : 0.0);  // NaN logits select like zeros: ids stay in range
}
__device__ __forceinline__ double route_top_sum(const unsigned long long* top, int k) {
  double s = 0.0;
  for (int i = 0; i < k; ++i) s = __dadd_rn(s, __longlong_as_double(top[i]));
  return s;
}
__device__ __forceinline__ float route_weight(unsigned long long pk_bits, double top, int norm_topk) {
  const double pk = __longlong_as_double(pk_bits);
  return static_cast<float>(norm_topk ? pk / top : pk);
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

// One block per row: softmax in double over all experts, the top k in rank order (larger p first,
// ties to the lower id: what k rounds of "take the best left" give, as the CPU does) and their
// weights. A row's routing reads its own logits only. The k best are found in two rounds: each
// chunk of 32 experts (one warp, an expert a lane) keeps its own k best as candidates (an expert of
// the row's k best is among its chunk's k best); then each candidate's rank among the candidates
// is its rank among all experts if that is below k. (One warp taking the best left k times,
// 8 rows a block, was 12.9 us a launch at B = 1: H200, 35B-A3B, 2026-12-03.)
// Then the last block to finish groups every row's selections by expert (increasing id; within
// an expert, in selection order), writing the group tables and each selection's grouped row.
// LISTS: and the grouped launches' block lists (a separate instantiation, so steps without lists
// run the kernel as it was measured before them).
template <bool LISTS>
__global__ void __launch_bounds__(kRouteThreads)
    route_group_kernel(const float* __restrict__ logits, int64_t rows, int n_expert, int k, int norm_topk,
                       MoeRouting r) {
  pdl_enter();
  // [n_expert] p as bits, then the candidates: [n_expert] p bits and [n_expert] ids. The grouping
  // reuses it.
  MEMRA_DYNAMIC_SMEM(unsigned long long, scratch, 16);
  __shared__ float s_max[kRouteThreads / kWarp];
  __shared__ double s_sum;
  __shared__ int s_cands;
  __shared__ unsigned long long s_top[kMaxExpertsUsed];
  const int tid = static_cast<int>(threadIdx.x), lane = tid % kWarp, warp = tid / kWarp;
  const int n_threads = static_cast<int>(blockDim.x), n_warps = n_threads / kWarp;
  const int64_t row = blockIdx.x;
  {
    unsigned long long* p = scratch;
    unsigned long long* cand_p = scratch + n_expert;
    int* cand_id = reinterpret_cast<int*>(scratch + 2 * static_cast<int64_t>(n_expert));
    const float* l = logits + row * n_expert;
    float mx = -INFINITY;
    for (int e = tid; e < n_expert; e += n_threads) mx = fmaxf(mx, l[e]);
    mx = warp_max(mx);
    if (lane == 0) s_max[warp] = mx;
    if (tid == 0) s_cands = 0;
    __syncthreads();
    mx = s_max[0];
    for (int w = 1; w < n_warps; ++w) mx = fmaxf(mx, s_max[w]);
    for (int e = tid; e < n_expert; e += n_threads) p[e] = __double_as_longlong(route_exp(l[e], mx));
    __syncthreads();
    if (warp == 0) {
      double sum = 0.0;
      for (int e = lane; e < n_expert; e += kWarp) sum = __dadd_rn(sum, __longlong_as_double(p[e]));
      sum = route_warp_total(sum);
      if (lane == 0) s_sum = sum;
    }
    __syncthreads();
    const double sum = s_sum;
    // Chunk c (experts 32c .. 32c + 31) goes to warp c % n_warps, expert 32c + l to lane l.
    const int n_chunks = (n_expert + kWarp - 1) / kWarp;
    for (int c = warp; c < n_chunks; c += n_warps) {
      const int e = c * kWarp + lane;
      const unsigned long long pe = e < n_expert ? route_prob_bits(__longlong_as_double(p[e]), sum) : 0;
      int rank = 0;
      for (int j = 0; j < kWarp; ++j) {
        const unsigned long long pj = __shfl_sync(0xffffffffu, pe, j);
        rank += (c * kWarp + j < n_expert && ranks_before(pj, c * kWarp + j, pe, e)) ? 1 : 0;
      }
      if (e < n_expert && rank < k) {
        const int at = atomicAdd(&s_cands, 1);  // list order is free: ranks below count, not position
        cand_p[at] = pe;
        cand_id[at] = e;
      }
    }
    __syncthreads();
    const int n_cands = s_cands;
    for (int i = tid; i < n_cands; i += n_threads) {
      const unsigned long long pi = cand_p[i];
      const int id = cand_id[i];
      int rank = 0;
      for (int j = 0; j < n_cands; ++j) rank += ranks_before(cand_p[j], cand_id[j], pi, id) ? 1 : 0;
      if (rank < k) {
        r.sel[row * k + rank] = id;
        s_top[rank] = pi;
      }
    }
    __syncthreads();
    if (tid == 0) s_sum = route_top_sum(s_top, k);
    __syncthreads();
    if (tid < k) r.weight[row * k + tid] = route_weight(s_top[tid], s_sum, norm_topk);
  }

  // A launch of one block (a one-row decode step) groups at once: its own writes are visible to
  // its threads after the barrier, with no fence and no counter round trip.
  if (gridDim.x > 1) {
    __shared__ int s_last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) s_last = atomicAdd(&g_route_blocks_done, 1u) == gridDim.x - 1;
    __syncthreads();
    if (!s_last) return;
    __threadfence();
    if (threadIdx.x == 0) g_route_blocks_done = 0;
  } else {
    __syncthreads();
  }

  // Grouping. The scratch now holds n_expert counts, n_expert offsets, a chunk of the selections
  // (kGroupChunk), then the placing warps' slot tables.
  const int64_t n_sel = rows * k;
  int32_t* count = reinterpret_cast<int32_t*>(scratch);
  int32_t* off = count + n_expert;
  int32_t* sel = off + n_expert;
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
  const int z_first = z;  // the slot of this thread's first used expert
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
  // The grouped launches' block lists (GroupTiles): the shared slot's tiles, then each used slot's
  // ceil(rows / R) tiles in slot order (a scan over this thread's run of experts, as above).
  const int slots = r.groups + (r.shared_rows > 0 ? 1 : 0);
  for (int list = 0; list < (LISTS ? 2 : 0); ++list) {
    const GroupTiles& gt = r.tiles[list];
    if (gt.rows == 0) continue;  // uniform
    const int R = gt.rows;
    const int shared_tiles = static_cast<int>((r.shared_rows + R - 1) / R);
    int run_tiles = 0;
    for (int e = e0; e < e1; ++e) run_tiles += (count[e] + R - 1) / R;
    const int inc_tiles = warp_inclusive_scan(run_tiles);
    __syncthreads();  // s_warp_rows is read above (and by the previous list)
    if (lane == kWarp - 1) s_warp_rows[warp] = inc_tiles;
    __syncthreads();
    int at_tile = shared_tiles + inc_tiles - run_tiles, total = shared_tiles;
    for (int w = 0; w < n_warps; ++w) {
      if (w < warp) at_tile += s_warp_rows[w];
      total += s_warp_rows[w];
    }
    int zz = z_first;
    for (int e = e0; e < e1; ++e) {
      if (count[e] == 0) continue;
      const int n_tiles = (count[e] + R - 1) / R;
      for (int xt = 0; xt < n_tiles; ++xt) gt.tile[at_tile++] = xt * slots + zz;
      ++zz;
    }
    for (int i = tid; i < shared_tiles; i += n_threads) gt.tile[i] = i * slots + r.groups;
    for (int i = total + tid; i < gt.capacity; i += n_threads) gt.tile[i] = -1;
  }
  // Positions: each selection's slot is its expert's offset plus the number of selections of the
  // same expert before it (selection order: row, then rank), as if one thread walked them in order.
  // The selections are cut into `placers` contiguous runs, one a warp: a warp counts its run's
  // selections per expert (32 at a time: lanes with the same expert found by match, the lowest of
  // them adds their number), a scan over the runs turns the counts into each run's first slot per
  // expert, and the warp walks its run again, a lane's slot being its run's next slot plus the
  // lanes of the same expert below it. (Before: warp 0 walked the rows one after another, a chain
  // of shared-memory round trips as long as the step's rows: H100, 35B-A3B Q4_0 @ d512, two
  // alternations in one call, serial -> parallel: pp512 12,993 / 13,034 -> 13,942 / 13,963 tok/s,
  // B = 64 4,287 / 4,295 -> 4,385 / 4,387, B = 16 2,243 / 2,248 -> 2,272 / 2,268;
  // bench/results/2026-12-07-0753-h100-s46-a.log.) Chunks of selections staged in shared memory.
  const int placers = route_placers(n_expert, n_warps);
  int32_t* run_slot = sel + kGroupChunk;  // [placers][n_expert]
  const unsigned lanes_below = (1u << lane) - 1u;
  for (int64_t f0 = 0; f0 < n_sel; f0 += kGroupChunk) {
    const int n_f = static_cast<int>(min(static_cast<int64_t>(kGroupChunk), n_sel - f0));
    const int run = (n_f + placers - 1) / placers;
    const int f_lo = warp * run, f_hi = min(n_f, f_lo + run);
    __syncthreads();  // the offsets above, or the previous chunk consumed
    for (int f = tid; f < n_f; f += n_threads) sel[f] = __ldcg(r.sel + f0 + f);
    for (int i = tid; i < placers * n_expert; i += n_threads) run_slot[i] = 0;
    __syncthreads();
    int32_t* my_slots = run_slot + warp * n_expert;
    if (warp < placers) {
      for (int fb = f_lo; fb < f_hi; fb += kWarp) {
        const int f = fb + lane;
        const int e = f < f_hi ? sel[f] : -1;
        const unsigned same = __match_any_sync(0xffffffffu, e);
        if (e >= 0 && (same & lanes_below) == 0) my_slots[e] += __popc(same);
        __syncwarp();
      }
    }
    __syncthreads();
    for (int e = tid; e < n_expert; e += n_threads) {  // counts -> first slots, run by run
      int at_e = off[e];
      for (int w = 0; w < placers; ++w) {
        const int c = run_slot[w * n_expert + e];
        run_slot[w * n_expert + e] = at_e;
        at_e += c;
      }
      off[e] = at_e;
    }
    __syncthreads();
    if (warp < placers) {
      for (int fb = f_lo; fb < f_hi; fb += kWarp) {
        const int f = fb + lane;
        const int e = f < f_hi ? sel[f] : -1;
        const unsigned same = __match_any_sync(0xffffffffu, e);
        if (e >= 0) {
          const int32_t slot = my_slots[e] + __popc(same & lanes_below);
          r.pos[f0 + f] = slot;
          r.act_row[slot] = static_cast<int32_t>((f0 + f) / k);
        }
        __syncwarp();
        if (e >= 0 && (same & lanes_below) == 0) my_slots[e] += __popc(same);
        __syncwarp();
      }
    }
  }
}

// The routing of a one-row step in one warp, with no block barrier: the same softmax and weights
// (the route_* functions above; the max is order-free), the same k best (k rounds of the best left
// by larger p, then lower id: the ranks route_group_kernel gives), then the row's
// selections grouped directly: a selection's slot is the number of selected experts with a lower
// id (the row's k experts are distinct, one selection a group). Every table the block kernel
// writes for the row gets the same values, so a row routes to the same bits alone or batched.
// Why: a one-row decode step ran route_group_kernel's dozen block barriers and its grouping
// passes on the chain of every MoE layer. H100, 35B-A3B Q4_0 tg64 B = 1 @ d512, two alternations in
// one call against the block kernel at one row: 378.0 / 377.1 -> 379.4 / 380.0 tok/s (~15 us a token,
// less than the events profile's 12 us a launch suggested: that is mostly event overhead);
// bench/results/2026-12-07-0955-h100-s47-route-warp.log.
__global__ void __launch_bounds__(kWarp)
    route_row_warp_kernel(const float* __restrict__ logits, int n_expert, int k, int norm_topk, MoeRouting r) {
  pdl_enter();
  MEMRA_DYNAMIC_SMEM(long long, key, 16);  // [n_expert] p as bits (non-negative), -1 once taken
  __shared__ unsigned long long s_top[kMaxExpertsUsed];
  __shared__ int s_sel[kMaxExpertsUsed];
  const int lane = static_cast<int>(threadIdx.x);
  float mx = -INFINITY;
  for (int e = lane; e < n_expert; e += kWarp) mx = fmaxf(mx, logits[e]);
  mx = warp_max(mx);
  double sum = 0.0;
  for (int e = lane; e < n_expert; e += kWarp) {
    const double pe = route_exp(logits[e], mx);
    key[e] = __double_as_longlong(pe);
    sum = __dadd_rn(sum, pe);
  }
  sum = route_warp_total(sum);
  for (int e = lane; e < n_expert; e += kWarp)
    key[e] = static_cast<long long>(route_prob_bits(__longlong_as_double(key[e]), sum));
  for (int rank = 0; rank < k; ++rank) {
    long long best = -1;
    int best_id = INT_MAX;
    for (int e = lane; e < n_expert; e += kWarp) {
      const long long v = key[e];
      if (v > best) best = v, best_id = e;  // increasing e: a tie keeps the lower id
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const long long ob = __shfl_xor_sync(0xffffffffu, best, o);
      const int oid = __shfl_xor_sync(0xffffffffu, best_id, o);
      if (ob > best || (ob == best && oid < best_id)) best = ob, best_id = oid;
    }
    if (best_id % kWarp == lane) key[best_id] = -1;  // its owner: read by that lane only
    if (lane == 0) {
      s_top[rank] = static_cast<unsigned long long>(best);
      s_sel[rank] = best_id;
      r.sel[rank] = best_id;
    }
  }
  __syncwarp();
  const double top = route_top_sum(s_top, k);  // every lane the same
  for (int f = lane; f < k; f += kWarp) {
    r.weight[f] = route_weight(s_top[f], top, norm_topk);
    const int e = s_sel[f];
    int slot = 0;
    for (int i = 0; i < k; ++i) slot += s_sel[i] < e ? 1 : 0;
    r.pos[f] = slot;
    r.act_row[slot] = 0;
    r.grp_expert[slot] = e;
    r.grp_off[slot] = slot;
  }
  if (lane == 0) {
    r.grp_off[k] = k;
    if (r.shared_rows > 0) {  // the shared expert's slot over the one row
      r.grp_expert[k] = -1;
      r.grp_off[k + 1] = k + 1;
      r.act_row[k] = 0;
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
  for (const GroupTiles& gt : r.tiles)  // room for every block (the bound in kernels.h)
    MEMRA_ASSERT(gt.rows == 0 || (gt.rows > 0 && gt.tile &&
                                  gt.capacity >= group_tiles_capacity(r.shared_rows, rows * k, r.groups, gt.rows)),
                 "moe_route: a block list of {} entries", gt.capacity);
  static_assert(kMaxExpertsUsed <= kRouteThreads, "a thread writes each selection's weight");
  if (rows == 0) return;
  const bool lists = r.tiles[0].rows > 0 || r.tiles[1].rows > 0;
  if (rows == 1 && !lists) {
    MEMRA_ASSERT(r.groups == k);
    launch(route_row_warp_kernel, 1, kWarp, static_cast<size_t>(n_expert) * sizeof(long long), stream, logits,
           n_expert, k, norm_topk ? 1 : 0, r);
    CUDA_LAUNCH_CHECK();
    return;
  }
  // The routing's scratch: p and the candidates (20 bytes an expert); the grouping reuses it for
  // counts and offsets, then a chunk of selections.
  const size_t route_smem = static_cast<size_t>(n_expert) * (2 * sizeof(unsigned long long) + sizeof(int));
  const size_t group_smem =
      (static_cast<size_t>(n_expert) * (2 + route_placers(n_expert, kRouteThreads / kWarp)) + kGroupChunk) *
      sizeof(int32_t);
  const size_t smem = std::max(route_smem, group_smem);
  auto* kernel = lists ? route_group_kernel<true> : route_group_kernel<false>;
  static size_t configured[2] = {48 << 10, 48 << 10};
  if (smem > configured[lists]) {
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    configured[lists] = smem;
  }
  launch(kernel, static_cast<unsigned>(rows), kRouteThreads, smem, stream, logits, rows, n_expert, k, norm_topk ? 1 : 0,
         r);
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
