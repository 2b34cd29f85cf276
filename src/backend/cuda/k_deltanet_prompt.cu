// Gated DeltaNet core, the prompt form: the fused kernel's arithmetic (k_deltanet.cu) in three
// launches, so that only the recurrence itself runs row after row.
//
//   1. prep  (rows x key heads):   l2norm of q and k, k.q, and the gates of the value heads that
//                                  read that key head; every row at once.
//   2. rows  (value heads x 4 column slices x sequences): the delta rule over the sequence's rows,
//                                  raw o into y. A row's inputs come through a cp.async ring
//                                  kRing rows ahead; one barrier a row.
//   3. norm  (rows x value heads): the gated RMSNorm of o with z, every row at once.
//
// Same bits as the fused kernel (tests/gpu_deltanet_test.cpp cuts a prompt both ways): the norms,
// gates and RMSNorm are deltanet_args.cuh's functions over the same 256-thread tree, and each
// state column takes the fused kernel's operations in its order. The fused kernel's D = 128
// layout gives thread tid the 16 key rows 16 * (tid / 32).. of its columns and sums the 8 warps'
// partials in warp order; here lane = column and warp = key-row group, the same partials summed
// the same way, so a 32-column slice of a head needs no other slice: four blocks a head.
// Why (H200, 9B Q4_0 pp512, session 15): the fused kernel spent ~1.6 us a prompt row (32 blocks
// on 132 SMs, five barriers, global loads, divisions and exp on every row's path).
#include <cstdint>

#include "backend/cuda/common.cuh"
#include "backend/cuda/deltanet_args.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/mma_f16.cuh"

namespace memra::cuda {

namespace {

constexpr int kD = 128;                        // the head size this form serves (Qwen3.5, Qwen3-Next)
constexpr int kSliceCols = kWarp;              // state columns a block carries (lane = column)
constexpr int kSlices = kD / kSliceCols;       // blocks a head
constexpr int kRowsPerWarp = kD / kGdnWarps;   // key rows per thread: the fused kernel's RPT
constexpr int kRing = 8;                       // rows of inputs in flight
static_assert(kRowsPerWarp == 16 && kRowsPerWarp % 4 == 0, "the fused kernel's D = 128 layout");

// One prompt row's inputs for one block, staged by cp.async: q_hat and k_hat of the key head,
// the block's 32 values of v, and (beta, decay, k.q, 0).
struct RowSlot {
  float q[kD];
  float k[kD];
  float v[kSliceCols];
  float4 gate;
};
constexpr int kSlotChunks = static_cast<int>(sizeof(RowSlot) / 16);
static_assert(sizeof(RowSlot) % 16 == 0 && kSlotChunks <= kGdnThreads, "one 16-byte copy a thread");

// Step scratch: q_hat | k_hat per (row, key head), then the gates per (row, value head).
struct RowsWork {
  float* qk;      // rows x n_k x 2 x D
  float4* gates;  // rows x n_v
};
RowsWork rows_work(float* work, int64_t rows, int n_k) {
  return {work, reinterpret_cast<float4*>(work + rows * n_k * 2 * kD)};
}

__global__ void __launch_bounds__(kGdnThreads) deltanet_prep_kernel(CoreArgs p, RowsWork w) {
  pdl_enter();
  const int tid = static_cast<int>(threadIdx.x);
  const int64_t row = blockIdx.x;
  const int kh = static_cast<int>(blockIdx.y);
  __shared__ float s_red[kGdnWarps][3];
  const float* crow = p.conv_out + row * static_cast<int64_t>(2 * p.n_k + p.n_v) * kD;
  float qx = 0.0f, kx = 0.0f;
  if (tid < kD) {
    qx = crow[static_cast<int64_t>(kh) * kD + tid];
    kx = crow[static_cast<int64_t>(p.n_k + kh) * kD + tid];
  }
  const QkNorms nrm = qk_norms<kD>(qx, kx, s_red);
  float* out = w.qk + (row * p.n_k + kh) * 2 * kD;
  if (tid < kD) {
    out[tid] = qx * nrm.qn;
    out[kD + tid] = kx * nrm.kn;
  }
  const int r = p.n_v / p.n_k;  // value heads reading this key head (key_head_of's inverse)
  if (tid < r) {
    const int h = p.head_map == GdnHeadMap::Tiled ? kh + tid * p.n_k : kh * r + tid;
    float beta, decay;
    gdn_gates(p, row, h, beta, decay);
    w.gates[row * p.n_v + h] = make_float4(beta, decay, nrm.kq, 0.0f);
  }
}

// Block (value head h, column slice c) of a sequence: thread (warp, lane) carries state rows
// 16 warp .. 16 warp + 15 of column 32 c + lane in registers through the sequence's rows.
// Shared memory reuse: slot t % kRing is refilled (for row t + kRing - 1) at the top of row t,
// after every thread passed row t - 1's barrier and so finished reading it; red[t & 1] is read
// after row t's barrier and rewritten only after row t + 1's.
template <bool BF16>
__global__ void __launch_bounds__(kGdnThreads) deltanet_rows_kernel(CoreArgs p, RowsWork w, DeviceStep step) {
  pdl_enter();
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid % kWarp, warp = tid / kWarp;
  const int h = static_cast<int>(blockIdx.x) / kSlices, slice = static_cast<int>(blockIdx.x) % kSlices;
  const int seq = static_cast<int>(blockIdx.y);
  const int n = step.seq_n_rows[seq];
  if (n == 0) return;  // uniform per block
  const int64_t row0 = step.seq_row0[seq];
  const int kh = key_head_of(p, h);
  const int col = slice * kSliceCols + lane;
  const int64_t C = static_cast<int64_t>(2 * p.n_k + p.n_v) * kD;
  const int64_t Y = static_cast<int64_t>(p.n_v) * kD;
  void* const S_g = step.ssm[p.layer * step.n_seqs + seq];
  const int64_t S_at = static_cast<int64_t>(h) * kD * kD;  // the head's first element

  __shared__ __align__(16) RowSlot s_ring[kRing];
  __shared__ float s_red[2][kGdnWarps][2][kSliceCols];

  // Row t's inputs into its slot, one 16-byte piece a thread; a commit group every call (empty
  // past the last row) so that the wait below counts rows.
  auto stage = [&](int t) {
    if (t < n && tid < kSlotChunks) {
      const int64_t row = row0 + t;
      float* dst = reinterpret_cast<float*>(&s_ring[t % kRing]) + 4 * tid;
      const float* src;
      if (tid < 2 * kD / 4)
        src = w.qk + (row * p.n_k + kh) * 2 * kD + 4 * tid;
      else if (tid < (2 * kD + kSliceCols) / 4)
        src = p.conv_out + row * C + static_cast<int64_t>(2 * p.n_k + h) * kD + slice * kSliceCols + 4 * tid - 2 * kD;
      else
        src = reinterpret_cast<const float*>(w.gates + row * p.n_v + h);
      cp_async16(dst, src);
    }
    cp_async_commit();
  };

  float S[kRowsPerWarp];
#pragma unroll
  for (int m = 0; m < kRowsPerWarp; ++m) S[m] = load_state1<BF16>(S_g, S_at + static_cast<int64_t>(warp * kRowsPerWarp + m) * kD + col);

  for (int t = 0; t < kRing - 1; ++t) stage(t);
  cp_async_wait<kRing - 2>();  // row 0 landed
  __syncthreads();

  for (int t = 0; t < n; ++t) {
    stage(t + kRing - 1);
    const RowSlot& slot = s_ring[t % kRing];
    float ki[kRowsPerWarp], qi[kRowsPerWarp];
    load_rows(slot.k + warp * kRowsPerWarp, ki);
    load_rows(slot.q + warp * kRowsPerWarp, qi);
    const float vj = slot.v[lane];
    const float4 g = slot.gate;  // beta, decay, k.q
    float pk = 0.0f, pq = 0.0f;
#pragma unroll
    for (int m = 0; m < kRowsPerWarp; ++m) {
      S[m] = S[m] * g.y;
      pk = fmaf(ki[m], S[m], pk);
      pq = fmaf(qi[m], S[m], pq);
    }
    float(*red)[2][kSliceCols] = s_red[t & 1];
    red[warp][0][lane] = pk;
    red[warp][1][lane] = pq;
    cp_async_wait<kRing - 2>();  // row t + 1 landed (this thread's pieces; the barrier shows all)
    __syncthreads();

    // Every warp finishes its 32 columns itself (the same sums in every warp): no second barrier.
    float sk = red[0][0][lane], sq = red[0][1][lane];
#pragma unroll
    for (int v = 1; v < kGdnWarps; ++v) {
      sk = __fadd_rn(sk, red[v][0][lane]);
      sq = __fadd_rn(sq, red[v][1][lane]);
    }
    const float delta = g.x * (vj - sk);
    if (warp == 0) p.y[(row0 + t) * Y + static_cast<int64_t>(h) * kD + col] = fmaf(delta, g.z, sq);  // raw o
#pragma unroll
    for (int m = 0; m < kRowsPerWarp; ++m) S[m] = round_state<BF16>(fmaf(ki[m], delta, S[m]));
  }

#pragma unroll
  for (int m = 0; m < kRowsPerWarp; ++m) store_state1<BF16>(S_g, S_at + static_cast<int64_t>(warp * kRowsPerWarp + m) * kD + col, S[m]);
}

__global__ void __launch_bounds__(kGdnThreads) deltanet_norm_kernel(CoreArgs p) {
  pdl_enter();
  const int tid = static_cast<int>(threadIdx.x);
  const int64_t row = blockIdx.x;
  const int h = static_cast<int>(blockIdx.y);
  __shared__ float s_red[kGdnWarps][1];
  const int64_t at = row * p.n_v * kD + static_cast<int64_t>(h) * kD + tid;
  float o = 0.0f, zj = 0.0f, nw = 0.0f;
  if (tid < kD) {
    o = p.y[at];
    zj = p.z[at];
    nw = p.norm_w[tid];
  }
  const float yv = gated_rms_norm<kD>(o, zj, nw, p.eps, s_red);
  if (tid < kD) p.y[at] = yv;
}

}  // namespace

bool deltanet_prompt_form(const DeviceStep& step, const GdnShape& s) {
  return s.d == kD && step.max_seq_rows >= kGdnPromptFormMinRows;
}

int64_t deltanet_work_floats(const DeviceStep& step, const GdnShape& s) {
  if (!deltanet_prompt_form(step, s)) return 0;
  return int64_t{step.n_rows} * (int64_t{s.n_k} * 2 * kD + int64_t{s.n_v} * 4);
}

void deltanet_prompt(const CoreArgs& args, float* work, const DeviceStep& step, cudaStream_t stream) {
  MEMRA_ASSERT(work != nullptr && reinterpret_cast<uintptr_t>(work) % 16 == 0, "deltanet: prompt form needs aligned scratch");
  MEMRA_ASSERT(step.n_rows > 0);
  const RowsWork w = rows_work(work, step.n_rows, args.n_k);
  launch(deltanet_prep_kernel, dim3(static_cast<unsigned>(step.n_rows), static_cast<unsigned>(args.n_k)), kGdnThreads,
         0, stream, args, w);
  CUDA_LAUNCH_CHECK();
  const dim3 rows_grid(static_cast<unsigned>(args.n_v * kSlices), static_cast<unsigned>(step.n_seqs));
  if (step.ssm_bf16)
    launch(deltanet_rows_kernel<true>, rows_grid, kGdnThreads, 0, stream, args, w, step);
  else
    launch(deltanet_rows_kernel<false>, rows_grid, kGdnThreads, 0, stream, args, w, step);
  CUDA_LAUNCH_CHECK();
  launch(deltanet_norm_kernel, dim3(static_cast<unsigned>(step.n_rows), static_cast<unsigned>(args.n_v)), kGdnThreads,
         0, stream, args);
  CUDA_LAUNCH_CHECK();
}

}  // namespace memra::cuda
