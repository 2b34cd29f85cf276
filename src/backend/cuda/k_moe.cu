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

// A double sum over the block in a fixed tree (per-thread values, then warp butterflies, then
// the warp totals in warp order). `shared`: 32 doubles.
__device__ __forceinline__ double block_sum_f64(double v, double* shared) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, n_warps = blockDim.x / kWarp;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = __dadd_rn(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  double t = lane < n_warps ? shared[lane] : 0.0;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) t = __dadd_rn(t, __shfl_xor_sync(0xffffffffu, t, o));
  return t;
}

// The block's largest p among experts not yet taken; ties go to the lowest id. Returns the id.
__device__ __forceinline__ int block_argmax(const double* p, const unsigned char* taken, int n, double* sv, int* si) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, n_warps = blockDim.x / kWarp;
  double best = -1.0;
  int id = n;
  for (int e = threadIdx.x; e < n; e += blockDim.x)
    if (!taken[e] && (p[e] > best || (p[e] == best && e < id))) {
      best = p[e];
      id = e;
    }
  // Every lane ends with the warp's best (ties: lowest id).
  auto warp_best = [&] {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const double ob = __shfl_xor_sync(0xffffffffu, best, o);
      const int oi = __shfl_xor_sync(0xffffffffu, id, o);
      if (ob > best || (ob == best && oi < id)) {
        best = ob;
        id = oi;
      }
    }
  };
  warp_best();
  __syncthreads();
  if (lane == 0) {
    sv[warp] = best;
    si[warp] = id;
  }
  __syncthreads();
  best = lane < n_warps ? sv[lane] : -1.0;
  id = lane < n_warps ? si[lane] : n;
  warp_best();
  return id;
}

// One block per row: softmax in double over all experts, top-k, weights in rank order.
__global__ void __launch_bounds__(kRouteThreads)
    route_kernel(const float* __restrict__ logits, int n_expert, int k, int norm_topk, int32_t* __restrict__ sel,
                 float* __restrict__ weight) {
  pdl_enter();
  MEMRA_DYNAMIC_SMEM(double, p, 16);  // n_expert doubles, then n_expert flags
  unsigned char* taken = reinterpret_cast<unsigned char*>(p + n_expert);
  __shared__ double sv[32];
  __shared__ int si[32];
  const int64_t r = blockIdx.x;
  const float* l = logits + r * n_expert;
  float mx = -INFINITY;
  for (int e = threadIdx.x; e < n_expert; e += blockDim.x) mx = fmaxf(mx, l[e]);
  mx = warp_max(mx);
  __syncthreads();
  if (threadIdx.x % kWarp == 0) sv[threadIdx.x / kWarp] = mx;
  __syncthreads();
  mx = warp_max(static_cast<int>(threadIdx.x % kWarp) < static_cast<int>(blockDim.x / kWarp)
                    ? static_cast<float>(sv[threadIdx.x % kWarp])
                    : -INFINITY);
  double part = 0.0;
  for (int e = threadIdx.x; e < n_expert; e += blockDim.x) {
    p[e] = exp(static_cast<double>(l[e]) - static_cast<double>(mx));
    taken[e] = 0;
    part = __dadd_rn(part, p[e]);
  }
  const double sum = block_sum_f64(part, sv);
  for (int e = threadIdx.x; e < n_expert; e += blockDim.x) p[e] = p[e] / sum;
  __syncthreads();
  __shared__ double chosen_p[64];
  __shared__ int chosen[64];
  for (int i = 0; i < k; ++i) {
    const int id = block_argmax(p, taken, n_expert, sv, si);
    if (threadIdx.x == 0) {
      chosen[i] = id;
      chosen_p[i] = p[id];
      taken[id] = 1;
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    double top = 0.0;
    for (int i = 0; i < k; ++i) top = __dadd_rn(top, chosen_p[i]);
    for (int i = 0; i < k; ++i) {
      sel[r * k + i] = chosen[i];
      weight[r * k + i] = static_cast<float>(norm_topk ? chosen_p[i] / top : chosen_p[i]);
    }
  }
}

// One block: the rows x k selections grouped by expert (increasing id; within an expert, in
// selection order), the group tables and each selection's grouped row. Deterministic.
__global__ void __launch_bounds__(1024)
    group_kernel(const int32_t* __restrict__ sel, int64_t n_sel, int k, int n_expert, int groups,
                 int32_t* __restrict__ pos, int32_t* __restrict__ grp_off, int32_t* __restrict__ grp_expert,
                 int32_t* __restrict__ act_row) {
  pdl_enter();
  MEMRA_DYNAMIC_SMEM(int32_t, count, 16);  // n_expert counts, then n_expert offsets
  int32_t* off = count + n_expert;
  for (int e = threadIdx.x; e < n_expert; e += blockDim.x) count[e] = 0;
  __syncthreads();
  for (int64_t f = threadIdx.x; f < n_sel; f += blockDim.x) atomicAdd(&count[sel[f]], 1);  // exact
  __syncthreads();
  if (threadIdx.x == 0) {
    int32_t at = 0, z = 0;
    for (int e = 0; e < n_expert; ++e) {
      off[e] = at;
      if (count[e] > 0) {
        grp_expert[z] = e;
        grp_off[z] = at;
        ++z;
      }
      at += count[e];
    }
    for (; z <= groups; ++z) {
      grp_off[z] = at;
      if (z < groups) grp_expert[z] = 0;
    }
  }
  __syncthreads();
  // Expert e's selections in flat order (thread per expert: no atomics decide positions).
  for (int e = threadIdx.x; e < n_expert; e += blockDim.x) {
    if (count[e] == 0) continue;
    int32_t at = off[e];
    for (int64_t f = 0; f < n_sel; ++f)
      if (sel[f] == e) {
        pos[f] = at;
        act_row[at] = static_cast<int32_t>(f / k);
        ++at;
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
  if (rows == 0) return;
  const size_t route_smem = static_cast<size_t>(n_expert) * (sizeof(double) + 1);
  static size_t route_configured = 0;
  if (route_smem > route_configured) {
    CUDA_CHECK(cudaFuncSetAttribute(route_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(route_smem)));
    route_configured = route_smem;
  }
  launch(route_kernel, static_cast<unsigned>(rows), kRouteThreads, route_smem, stream, logits, n_expert, k,
         norm_topk ? 1 : 0, r.sel, r.weight);
  CUDA_LAUNCH_CHECK();
  launch(group_kernel, 1u, 1024u, static_cast<size_t>(n_expert) * 2 * sizeof(int32_t), stream,
         static_cast<const int32_t*>(r.sel), rows * k, k, n_expert, r.groups, r.pos, r.grp_off, r.grp_expert,
         r.act_row);
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
