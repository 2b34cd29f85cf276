// Gated DeltaNet on the GPU: the causal depthwise conv + SiLU with its rolling window, and the
// fused core (l2norm, gates, delta rule, gated RMSNorm) over each sequence's rows in order.
// MATH.md states the math; backend/cpu/cpu_deltanet.cpp is the reference.
//
// Exactness: one thread per (sequence, channel) for the conv, one block per (sequence, value
// head) for the core. Every reduction runs inside its block in a fixed tree; nothing but the
// grid size depends on how many sequences share the step, so a sequence's bits never do.
#include <climits>
#include <cstdint>

#include "backend/cuda/common.cuh"
#include "backend/cuda/deltanet_args.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/kernels.h"

namespace memra::cuda {

namespace {

// ---------------------------------------------------------------- conv1d + SiLU ----

constexpr int kConvThreads = 128;

// Rows [t_begin, t_end) of one channel through its K-wide window (win[0..K-2]: the K-1 values
// before t_begin, oldest first; on return the K-1 values before t_end). Rows are read kAhead at a
// time before any of them is written: x may be out, so the compiler cannot move a load above the
// store before it, and a prompt's rows would each wait out a load's latency (H200, 9B Q4_0 pp512:
// 227 -> 80 us a call, 6,844 -> 7,150 tok/s, same bits). Each element is read before it is
// written and a thread touches its own channel only: in place stays safe. Both conv kernels run
// this loop, so an output's bits do not depend on which ran it.
template <int K>
__device__ __forceinline__ void conv_rows(const float* x, float* out, int64_t row0, int t_begin, int t_end,
                                          int channels, int ch, const float (&taps)[K], float (&win)[K]) {
  constexpr int kAhead = 8;
  for (int t0 = t_begin; t0 < t_end; t0 += kAhead) {
    float xs[kAhead];
#pragma unroll
    for (int u = 0; u < kAhead; ++u) xs[u] = t0 + u < t_end ? x[(row0 + t0 + u) * channels + ch] : 0.0f;
#pragma unroll
    for (int u = 0; u < kAhead; ++u) {
      if (t0 + u >= t_end) break;
      win[K - 1] = xs[u];
      float acc = 0.0f;
#pragma unroll
      for (int j = 0; j < K; ++j) acc = fmaf(taps[j], win[j], acc);  // tap order, as the spec sums
      out[(row0 + t0 + u) * channels + ch] = silu(acc);
#pragma unroll
      for (int j = 0; j < K - 1; ++j) win[j] = win[j + 1];
    }
  }
}

// Thread (ch, seq): the K-wide window of channel ch slides over the sequence's rows in
// registers: win[0..K-2] is the history (state rows, oldest first), win[K-1] the new row. Each
// thread reads x[row, ch] before it writes out[row, ch], so x == out is safe.
template <int K>
__global__ void __launch_bounds__(kConvThreads)
    conv1d_silu_kernel(int layer, const float* x, const float* __restrict__ w, float* out, int channels,
                       DeviceStep step) {
  pdl_enter();
  const int ch = static_cast<int>(blockIdx.x) * kConvThreads + static_cast<int>(threadIdx.x);
  const int seq = static_cast<int>(blockIdx.y);
  if (ch >= channels) return;
  const int n = step.seq_n_rows[seq];
  if (n == 0) return;
  const int64_t row0 = step.seq_row0[seq];
  float* state = step.conv[layer * step.n_seqs + seq];  // [K-1][channels]

  float taps[K];
#pragma unroll
  for (int j = 0; j < K; ++j) taps[j] = w[static_cast<int64_t>(ch) * K + j];
  float win[K];
#pragma unroll
  for (int j = 0; j < K - 1; ++j) win[j] = state[static_cast<int64_t>(j) * channels + ch];

  conv_rows<K>(x, out, row0, 0, n, channels, ch, taps, win);
  // The new state: the last K-1 rows of the window (state rows too when n < K-1).
#pragma unroll
  for (int j = 0; j < K - 1; ++j) state[static_cast<int64_t>(j) * channels + ch] = win[j];
}

// The same outputs with a prompt's rows cut into chunks of kConvChunkRows, one thread per (channel,
// chunk): a lone sequence's prompt gives the kernel above one thread per channel (8,192 threads
// for the 9B's 512-row prompt: 62 an SM). Out of place only (a chunk reads the K-1 rows before it
// from x). A chunk's window starts from those rows (from the state for the first chunk); each
// output takes the same window values and taps in the same order, so the bits are the kernel
// above's. The first chunk's thread, which alone reads the state, writes the new one: the last
// K-1 rows of x (copies, as the kernel above leaves them). H200, 9B Q4_0 (2026-12-03, same logits):
// conv1d_silu at pp512 81.5 -> 31.5 us a call, pp512 8,916 / 8,904 -> 9,131 / 9,151 tok/s.
constexpr int kConvChunkRows = 32;

template <int K>
__global__ void __launch_bounds__(kConvThreads)
    conv1d_silu_chunk_kernel(int layer, const float* __restrict__ x, const float* __restrict__ w,
                             float* __restrict__ out, int channels, DeviceStep step) {
  pdl_enter();
  const int ch = static_cast<int>(blockIdx.x) * kConvThreads + static_cast<int>(threadIdx.x);
  const int t_begin = static_cast<int>(blockIdx.y) * kConvChunkRows;
  const int seq = static_cast<int>(blockIdx.z);
  if (ch >= channels) return;
  const int n = step.seq_n_rows[seq];
  if (t_begin >= n) return;
  const int t_end = min(n, t_begin + kConvChunkRows);
  const int64_t row0 = step.seq_row0[seq];
  float* state = step.conv[layer * step.n_seqs + seq];  // [K-1][channels]
  static_assert(kConvChunkRows >= K - 1, "a chunk's history lies in the sequence's rows or the state");

  float taps[K];
#pragma unroll
  for (int j = 0; j < K; ++j) taps[j] = w[static_cast<int64_t>(ch) * K + j];
  float win[K];
#pragma unroll
  for (int j = 0; j < K - 1; ++j)
    win[j] = t_begin == 0 ? state[static_cast<int64_t>(j) * channels + ch]
                          : x[(row0 + t_begin - (K - 1) + j) * channels + ch];

  conv_rows<K>(x, out, row0, t_begin, t_end, channels, ch, taps, win);
  if (t_begin != 0) return;
  if (t_end == n) {  // one chunk: the window is the new state (state rows too when n < K-1)
#pragma unroll
    for (int j = 0; j < K - 1; ++j) state[static_cast<int64_t>(j) * channels + ch] = win[j];
  } else {  // n > kConvChunkRows >= K-1: the new state is x's last K-1 rows
#pragma unroll
    for (int j = 0; j < K - 1; ++j)
      state[static_cast<int64_t>(j) * channels + ch] = x[(row0 + n - (K - 1) + j) * channels + ch];
  }
}

template <int K>
void launch_conv(int layer, const float* x, const float* w, float* out, int channels, const DeviceStep& step,
                 cudaStream_t stream) {
  if (x != out && step.max_seq_rows > kConvChunkRows) {
    const dim3 grid(div_up(channels, kConvThreads), div_up(step.max_seq_rows, kConvChunkRows),
                    static_cast<unsigned>(step.n_seqs));
    launch(conv1d_silu_chunk_kernel<K>, grid, kConvThreads, 0, stream, layer, x, w, out, channels, step);
    return;
  }
  const dim3 grid(div_up(channels, kConvThreads), static_cast<unsigned>(step.n_seqs));
  launch(conv1d_silu_kernel<K>, grid, kConvThreads, 0, stream, layer, x, w, out, channels, step);
}

// ------------------------------------------------------------------ delta rule ----

constexpr int kThreads = kGdnThreads;  // deltanet_args.cuh: the reductions' tree
constexpr int kWarps = kGdnWarps;

__device__ __forceinline__ float4 fma4(float a, float4 b, float4 c) {
  return make_float4(fmaf(a, b.x, c.x), fmaf(a, b.y, c.y), fmaf(a, b.z, c.z), fmaf(a, b.w, c.w));
}

// One block per (value head h = blockIdx.x, sequence = blockIdx.y), kThreads threads.
//
// The head's state S (D x D, row i = key dim, column j = value dim, row-major) is processed in
// NT column tiles of TW columns; each value column evolves independently under the delta rule,
// so a tile is carried through all of the sequence's rows in registers before the next tile is
// loaded. Thread tid owns the 4 consecutive columns 4*cg.. of the tile (cg = tid % CG, so a warp
// reads whole 16-byte pieces of a row) and the RPT consecutive key rows rg*RPT.. (rg = tid / CG).
// D = 128 is one tile of 128 columns: 64 state floats per thread, the state read and written
// once per step.
//
// Per row, with S' = S * exp(g):
//   a = S'^T k, b = S'^T q (one pass, one reduction), delta = beta * (v - a),
//   S = S' + k delta^T, o = S^T q = b + delta * (k . q).
// The last identity saves a second pass and barrier over the state; it is the same math as
// o = S^T q after the update, rounded differently (float32 either way).
//
// Barriers per row: S1 (norm sums), S2 (q, k in shared), S3 (column partials), S4 (delta),
// S5 (RMSNorm sum, one-tile case). Reuse of each shared buffer is ordered by them: red1 is read
// between S1 and S2 and rewritten before the next S1; s_q/s_k are rewritten after the next S1,
// when every thread has finished the state update of the previous row; red2 is written after
// S2 and read before S4; s_delta is written between S3 and S4 and read after S4; red3 is read
// after S5 and rewritten only after the next row's S1.
template <int D, int TW, bool BF16>
__global__ void __launch_bounds__(kThreads, D == 256 ? 1 : 2) deltanet_kernel(CoreArgs p, DeviceStep step) {
  pdl_enter();
  constexpr int NT = D / TW;          // column tiles
  constexpr int CG = TW / 4;          // float4 column groups per tile
  constexpr int RG = kThreads / CG;   // key-row groups
  constexpr int RPT = D / RG;         // key rows per thread
  static_assert(D % 32 == 0 && D <= kThreads && D % TW == 0, "head size");
  static_assert(CG <= kWarp && kWarp % CG == 0 && RG * RPT == D, "tile shape");

  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid % kWarp, warp = tid / kWarp;
  const int cg = tid % CG, rg = tid / CG;
  const int h = static_cast<int>(blockIdx.x), seq = static_cast<int>(blockIdx.y);
  const int n = step.seq_n_rows[seq];
  if (n == 0) return;  // uniform per block
  const int64_t row0 = step.seq_row0[seq];
  void* const S_g = step.ssm[p.layer * step.n_seqs + seq];
  const int64_t S_at = static_cast<int64_t>(h) * D * D;  // the head's first element

  __shared__ __align__(16) float s_q[D];
  __shared__ __align__(16) float s_k[D];
  __shared__ __align__(16) float s_red2[kWarps][2][TW];
  __shared__ __align__(16) float s_delta[TW];
  __shared__ float s_red1[kWarps][3];
  __shared__ float s_red3[kWarps][1];

  const int kh = key_head_of(p, h);
  const int64_t C = static_cast<int64_t>(2 * p.n_k + p.n_v) * D;
  const int64_t Y = static_cast<int64_t>(p.n_v) * D;  // z and y row stride
  const int64_t q_off = static_cast<int64_t>(kh) * D;
  const int64_t k_off = static_cast<int64_t>(p.n_k + kh) * D;
  const int64_t v_off = static_cast<int64_t>(2 * p.n_k + h) * D;
  const float nw = tid < D ? p.norm_w[tid] : 0.0f;  // thread tid < D normalizes column tid

  for (int tile = 0; tile < NT; ++tile) {
    const int col0 = tile * TW + cg * 4;  // the thread's first state column
    float4 S[RPT];
#pragma unroll
    for (int m = 0; m < RPT; ++m)
      S[m] = load_state4<BF16>(S_g, S_at + static_cast<int64_t>(rg * RPT + m) * D + col0);

    for (int t = 0; t < n; ++t) {
      const int64_t row = row0 + t;
      const float* crow = p.conv_out + row * C;
      float qx = 0.0f, kx = 0.0f, vj = 0.0f, zj = 0.0f;
      if (tid < D) {
        qx = crow[q_off + tid];
        kx = crow[k_off + tid];
        if constexpr (NT == 1) zj = p.z[row * Y + static_cast<int64_t>(h) * D + tid];
      }
      if (tid < TW) vj = crow[v_off + tile * TW + tid];
      float beta, decay;
      gdn_gates(p, row, h, beta, decay);

      // l2norm(x) = x * rsqrt(sum(x^2) + 1e-6); q also scaled by 1/sqrt(D). k.q from the raw dot.
      const QkNorms nrm = qk_norms<D>(qx, kx, s_red1);  // S1
      const float kq = nrm.kq;
      if (tid < D) {
        s_q[tid] = qx * nrm.qn;
        s_k[tid] = kx * nrm.kn;
      }
      __syncthreads();  // S2

      float ki[RPT], qi[RPT];
      load_rows(s_k + rg * RPT, ki);
      load_rows(s_q + rg * RPT, qi);
      float4 pk = make_float4(0.0f, 0.0f, 0.0f, 0.0f), pq = pk;
#pragma unroll
      for (int m = 0; m < RPT; ++m) {
        S[m] = make_float4(S[m].x * decay, S[m].y * decay, S[m].z * decay, S[m].w * decay);
        pk = fma4(ki[m], S[m], pk);
        pq = fma4(qi[m], S[m], pq);
      }
      // Row groups sharing a warp (CG < 32): butterfly over the lane bits above cg.
#pragma unroll
      for (int o = kWarp / 2; o >= CG; o >>= 1) {
        pk.x = __fadd_rn(pk.x, __shfl_xor_sync(0xffffffffu, pk.x, o));
        pk.y = __fadd_rn(pk.y, __shfl_xor_sync(0xffffffffu, pk.y, o));
        pk.z = __fadd_rn(pk.z, __shfl_xor_sync(0xffffffffu, pk.z, o));
        pk.w = __fadd_rn(pk.w, __shfl_xor_sync(0xffffffffu, pk.w, o));
        pq.x = __fadd_rn(pq.x, __shfl_xor_sync(0xffffffffu, pq.x, o));
        pq.y = __fadd_rn(pq.y, __shfl_xor_sync(0xffffffffu, pq.y, o));
        pq.z = __fadd_rn(pq.z, __shfl_xor_sync(0xffffffffu, pq.z, o));
        pq.w = __fadd_rn(pq.w, __shfl_xor_sync(0xffffffffu, pq.w, o));
      }
      if (lane < CG) {  // here lane == cg
        *reinterpret_cast<float4*>(&s_red2[warp][0][cg * 4]) = pk;
        *reinterpret_cast<float4*>(&s_red2[warp][1][cg * 4]) = pq;
      }
      __syncthreads();  // S3

      // Thread tid < TW finishes tile column tid: warp partials in warp order.
      float o = 0.0f;
      if (tid < TW) {
        float sk = s_red2[0][0][tid], sq = s_red2[0][1][tid];
#pragma unroll
        for (int w = 1; w < kWarps; ++w) {
          sk = __fadd_rn(sk, s_red2[w][0][tid]);
          sq = __fadd_rn(sq, s_red2[w][1][tid]);
        }
        const float delta = beta * (vj - sk);
        s_delta[tid] = delta;
        o = fmaf(delta, kq, sq);
      }
      __syncthreads();  // S4

      const float4 dl = *reinterpret_cast<const float4*>(&s_delta[cg * 4]);
#pragma unroll
      for (int m = 0; m < RPT; ++m) {
        S[m].x = fmaf(ki[m], dl.x, S[m].x);
        S[m].y = fmaf(ki[m], dl.y, S[m].y);
        S[m].z = fmaf(ki[m], dl.z, S[m].z);
        S[m].w = fmaf(ki[m], dl.w, S[m].w);
        S[m] = round_state<BF16>(S[m]);
      }

      if constexpr (NT == 1) {
        // Gated RMSNorm over the head: threads tid >= D hold o = 0.
        const float yv = gated_rms_norm<D>(o, zj, nw, p.eps, s_red3);  // S5
        if (tid < D) p.y[row * Y + static_cast<int64_t>(h) * D + tid] = yv;  // whole warps (D % 32 == 0)
      } else {
        if (tid < TW) p.y[row * Y + static_cast<int64_t>(h) * D + tile * TW + tid] = o;  // raw o for now
      }
    }

#pragma unroll
    for (int m = 0; m < RPT; ++m)
      store_state4<BF16>(S_g, S_at + static_cast<int64_t>(rg * RPT + m) * D + col0, S[m]);
  }

  if constexpr (NT > 1) {
    // Several tiles: the raw o of every column is in y (written by this block); normalize now.
    __syncthreads();
    for (int t = 0; t < n; ++t) {
      const int64_t at = (row0 + t) * Y + static_cast<int64_t>(h) * D + tid;
      float o = 0.0f, zj = 0.0f;
      if (tid < D) {
        o = p.y[at];
        zj = p.z[at];
      }
      const float yv = gated_rms_norm<D>(o, zj, nw, p.eps, s_red3);
      if (tid < D) p.y[at] = yv;  // whole warps
      __syncthreads();  // s_red3 is rewritten by the next row
    }
  }
}

// Column tile per head size: the widest of 128/64/32 that divides D and keeps the state slice at
// most 64 floats per thread (D * TW / kThreads).
template <int D>
constexpr int tile_width() {
  if (D % 128 == 0 && D * 128 / kThreads <= 64) return 128;
  if (D % 64 == 0 && D * 64 / kThreads <= 64) return 64;
  return 32;
}

template <int D>
void launch_core(const CoreArgs& args, const DeviceStep& step, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(args.n_v), static_cast<unsigned>(step.n_seqs));
  if (step.ssm_bf16)
    launch(deltanet_kernel<D, tile_width<D>(), true>, grid, kThreads, 0, stream, args, step);
  else
    launch(deltanet_kernel<D, tile_width<D>(), false>, grid, kThreads, 0, stream, args, step);
}

}  // namespace

void conv1d_silu(int layer, const float* x, const float* w, float* out, int channels, int kernel,
                 const DeviceStep& step, cudaStream_t stream) {
  MEMRA_ASSERT(kernel >= 1 && kernel <= kMaxConvKernel, "conv kernel out of range");
  MEMRA_ASSERT(channels > 0 && layer >= 0 && step.n_seqs >= 0 && step.n_seqs <= 65535);
  if (step.n_seqs == 0) return;
  switch (kernel) {
    case 1: launch_conv<1>(layer, x, w, out, channels, step, stream); break;
    case 2: launch_conv<2>(layer, x, w, out, channels, step, stream); break;
    case 3: launch_conv<3>(layer, x, w, out, channels, step, stream); break;
    case 4: launch_conv<4>(layer, x, w, out, channels, step, stream); break;
    case 5: launch_conv<5>(layer, x, w, out, channels, step, stream); break;
    case 6: launch_conv<6>(layer, x, w, out, channels, step, stream); break;
    case 7: launch_conv<7>(layer, x, w, out, channels, step, stream); break;
    default: launch_conv<8>(layer, x, w, out, channels, step, stream); break;
  }
  CUDA_LAUNCH_CHECK();
}

void deltanet_core(int layer, const float* conv_out, const float* z, const float* beta_raw, const float* alpha_raw,
                   const float* ssm_a, const float* dt_bias, const float* norm_w, float* y, const GdnShape& s,
                   float eps, const DeviceStep& step, float* work, cudaStream_t stream) {
  MEMRA_ASSERT(s.n_k > 0 && s.n_v > 0 && s.n_v % s.n_k == 0, "value heads must be a multiple of key heads");
  MEMRA_ASSERT(s.d >= 32 && s.d <= 256 && s.d % 32 == 0, "GDN head size must be a multiple of 32 up to 256");
  MEMRA_ASSERT(layer >= 0 && step.n_seqs >= 0 && step.n_seqs <= 65535);
  MEMRA_ASSERT(s.gate_layout == GdnGateLayout::GroupedBA || alpha_raw != nullptr);
  if (step.n_seqs == 0) return;
  CoreArgs args;
  args.layer = layer;
  args.conv_out = conv_out;
  args.z = z;
  args.beta_raw = beta_raw;
  args.alpha_raw = alpha_raw;
  args.ssm_a = ssm_a;
  args.dt_bias = dt_bias;
  args.norm_w = norm_w;
  args.y = y;
  args.n_k = s.n_k;
  args.n_v = s.n_v;
  args.head_map = s.head_map;
  args.gate_layout = s.gate_layout;
  args.eps = eps;
  if (deltanet_prompt_form(step, s)) {
    deltanet_prompt(args, work, step, stream);
    return;
  }
  switch (s.d) {
    case 32: launch_core<32>(args, step, stream); break;
    case 64: launch_core<64>(args, step, stream); break;
    case 96: launch_core<96>(args, step, stream); break;
    case 128: launch_core<128>(args, step, stream); break;
    case 160: launch_core<160>(args, step, stream); break;
    case 192: launch_core<192>(args, step, stream); break;
    case 224: launch_core<224>(args, step, stream); break;
    default: launch_core<256>(args, step, stream); break;
  }
  CUDA_LAUNCH_CHECK();
}

}  // namespace memra::cuda
