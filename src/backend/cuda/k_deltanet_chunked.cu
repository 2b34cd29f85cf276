// The Gated DeltaNet core over a prompt in chunks (MATH.md, chunked form; the CPU reference is
// chunk_step in backend/cpu/cpu_deltanet.cpp): within a chunk of L <= 32 rows the delta rule
// becomes small dense products (k k^T, a unit-lower triangular solve, products with the state),
// so a prompt costs one state round trip per 32 rows instead of one per row.
//
// Chunk grid: a chunk is the positions [32m, 32m + 32) of the sequence (the first and last chunk
// of a step may be partial), so the state reached at a multiple of 32 is the same bits however
// the prompt was cut into steps. One block per (value head h, sequence); the block's arithmetic
// depends only on that sequence's rows, never on the other sequences of the step. float32
// throughout but the running gate sums (the CPU computes a chunk in float64 and rounds the
// state at each boundary).
//
// Per chunk, with gam_i = g_1 + ... + g_i (g = log of the decay, <= 0), beta_i the write gate,
// q and k l2-normalized (q also by 1/sqrt(D)), S the state at the chunk start (S[x][c]: key row
// x, value column c):
//   A  = strictly_lower(beta_i (k_i . k_j) e^(gam_i - gam_j))
//   KK = lower_incl_diag((q_i . k_j) e^(gam_i - gam_j))
//   U  = (I + A)^-1 (beta v),  W = (I + A)^-1 (beta k e^gam)      (forward substitution)
//   V' = U - W S
//   o  = e^gam (Q S) + KK V'                                        (then the gated RMSNorm)
//   S  = e^gam_L S + (k e^(gam_L - gam))^T V'
#include <cstdint>

#include "backend/cuda/common.cuh"
#include "backend/cuda/deltanet_args.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"

namespace memra::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / kWarp;
constexpr int kL = 32;  // chunk length

// Shared memory of one block, in floats. Row-major [kL][D + 1] tiles: the padding puts element
// (j, x) of consecutive rows j in distinct banks, so a warp reading one column of 32 rows (the
// k_i . k_j products) is conflict-free.
template <int D>
struct ChunkSmem {
  static constexpr int kRow = D + 1;
  static constexpr int kLL = kL + 1;
  static constexpr int kS = 0;                // D x D state, row-major, 16-byte aligned
  static constexpr int kK = kS + D * D;       // k rows (normalized)
  static constexpr int kQ = kK + kL * kRow;   // q rows (normalized), then the outputs o
  static constexpr int kV = kQ + kL * kRow;   // v rows, then U, then V'
  static constexpr int kW = kV + kL * kRow;   // W
  static constexpr int kA = kW + kL * kRow;   // A, [kL][kLL]
  static constexpr int kKK = kA + kL * kLL;   // KK, [kL][kLL]
  static constexpr int kGam = kKK + kL * kLL; // gam_i
  static constexpr int kBeta = kGam + kL;     // beta_i
  static constexpr int kG = kBeta + kL;       // g_i
  static constexpr int kGamD = kG + kL;       // gam_i in float64, 2 floats each
  static constexpr int kFloats = kGamD + 2 * kL;
  static_assert(kGamD % 2 == 0, "the float64 sums need 8-byte alignment");
  static constexpr size_t kBytes = sizeof(float) * kFloats;
};

template <int D>
__global__ void __launch_bounds__(kThreads, 1) deltanet_chunked_kernel(const CoreArgs p, const DeviceStep step) {
  pdl_enter();
  using M = ChunkSmem<D>;
  constexpr int R = M::kRow, LL = M::kLL;
  constexpr int G = kThreads / D;  // threads per state column
  constexpr int RI = kL / G;       // chunk rows per thread in the column-parallel phases
  static_assert(kThreads % D == 0 && kL % G == 0 && 2 * D <= kThreads && D % kWarp == 0, "head size");

  MEMRA_DYNAMIC_SMEM(float, smem, 16);
  float* const S = smem + M::kS;
  float* const K = smem + M::kK;
  float* const Q = smem + M::kQ;
  float* const V = smem + M::kV;
  float* const W = smem + M::kW;
  float* const A = smem + M::kA;
  float* const KK = smem + M::kKK;
  float* const Gam = smem + M::kGam;
  float* const Beta = smem + M::kBeta;
  float* const Gl = smem + M::kG;
  // gam is a running sum that reaches hundreds within a chunk: the decay between two rows,
  // e^(gam_i - gam_j), takes the difference of the float64 sums (in float32 the difference
  // keeps ~1e-5 relative error, ten times the recurrent kernel's; review of 2026-12-01).
  double* const GamD = reinterpret_cast<double*>(smem + M::kGamD);

  const int tid = static_cast<int>(threadIdx.x), lane = tid % kWarp, warp = tid / kWarp;
  const int h = static_cast<int>(blockIdx.x), seq = static_cast<int>(blockIdx.y);
  const int n = step.seq_n_rows[seq];
  if (n <= p.recurrent_max_rows) return;  // uniform per block: the recurrent kernel's sequence
  const int64_t row0 = step.seq_row0[seq];
  const int pos0 = step.seq_pos0[seq];
  float* const S_g = step.ssm[p.layer * step.n_seqs + seq] + static_cast<int64_t>(h) * D * D;

  const int kh = key_head_of(p, h);
  const int64_t C = static_cast<int64_t>(2 * p.n_k + p.n_v) * D;
  const int64_t Y = static_cast<int64_t>(p.n_v) * D;
  const int64_t q_off = static_cast<int64_t>(kh) * D;
  const int64_t k_off = static_cast<int64_t>(p.n_k + kh) * D;
  const int64_t v_off = static_cast<int64_t>(2 * p.n_k + h) * D;
  const float q_scale = 1.0f / sqrtf(static_cast<float>(D));
  const float a_h = p.ssm_a[h], dtb_h = p.dt_bias[h];
  const int c = tid % D, grp = tid / D;  // state column c; row group grp of the column phases

  for (int e = tid; e < D * D / 4; e += kThreads)
    reinterpret_cast<float4*>(S)[e] = reinterpret_cast<const float4*>(S_g)[e];

  for (int t0 = 0; t0 < n;) {
    const int L = min(kL - (pos0 + t0) % kL, n - t0);  // rows in this chunk; rows L.. are zero

    // Load the chunk's q, k, v rows and gates.
    for (int e = tid; e < kL * D; e += kThreads) {
      const int i = e / D, x = e % D;
      float q = 0.0f, k = 0.0f, v = 0.0f;
      if (i < L) {
        const float* crow = p.conv_out + (row0 + t0 + i) * C;
        q = crow[q_off + x];
        k = crow[k_off + x];
        v = crow[v_off + x];
      }
      Q[i * R + x] = q;
      K[i * R + x] = k;
      V[i * R + x] = v;
    }
    if (tid < kL) {
      float beta = 0.0f, g = 0.0f;
      if (tid < L) {
        float b, a;
        gate_inputs(p, row0 + t0 + tid, h, b, a);
        beta = sigmoid(b);
        g = a_h * softplus(a + dtb_h);
      }
      Beta[tid] = beta;
      Gl[tid] = g;
    }
    __syncthreads();  // B1: raw rows and gates in shared memory

    // l2norm(x) = x * rsqrt(sum(x^2) + 1e-6), one warp per row; gam by one thread.
    for (int i = warp; i < L; i += kWarps) {
      float sq = 0.0f, sk = 0.0f;
      for (int x = lane; x < D; x += kWarp) {
        sq = fmaf(Q[i * R + x], Q[i * R + x], sq);
        sk = fmaf(K[i * R + x], K[i * R + x], sk);
      }
      sq = warp_sum(sq);
      sk = warp_sum(sk);
      const float qn = __fdiv_rn(1.0f, sqrtf(sq + 1e-6f)) * q_scale;
      const float kn = __fdiv_rn(1.0f, sqrtf(sk + 1e-6f));
      for (int x = lane; x < D; x += kWarp) {
        Q[i * R + x] *= qn;
        K[i * R + x] *= kn;
      }
    }
    if (tid == 0) {
      double acc = 0.0;
      for (int i = 0; i < kL; ++i) {
        GamD[i] = acc = __dadd_rn(acc, static_cast<double>(Gl[i]));
        Gam[i] = static_cast<float>(acc);
      }
    }
    __syncthreads();  // B2: normalized rows, gam

    // A and KK: element (i, j) per thread; a warp shares i (broadcast) and spans j (padded rows).
    for (int e = tid; e < kL * kL; e += kThreads) {
      const int i = e / kL, j = e % kL;
      float a = 0.0f, kk = 0.0f;
      if (i < L && j <= i) {
        float dk = 0.0f, dq = 0.0f;
#pragma unroll 8
        for (int x = 0; x < D; ++x) {
          const float kj = K[j * R + x];
          dk = fmaf(K[i * R + x], kj, dk);
          dq = fmaf(Q[i * R + x], kj, dq);
        }
        const float decay = expf(static_cast<float>(GamD[i] - GamD[j]));
        if (j < i) a = Beta[i] * dk * decay;
        kk = dq * decay;
      }
      A[i * LL + j] = a;
      KK[i * LL + j] = kk;
    }
    __syncthreads();  // B3: A, KK

    // Forward substitution, one column of [U | W] per thread (2D columns), rows in registers.
    if (tid < 2 * D) {
      const bool is_w = tid >= D;
      float xs[kL];
#pragma unroll
      for (int i = 0; i < kL; ++i) {
        float acc = is_w ? Beta[i] * K[i * R + c] * expf(Gam[i]) : Beta[i] * V[i * R + c];
#pragma unroll
        for (int j = 0; j < i; ++j) acc = fmaf(-A[i * LL + j], xs[j], acc);
        xs[i] = acc;
      }
      float* const dst = is_w ? W : V;  // U replaces v: each thread reads only its own column
#pragma unroll
      for (int i = 0; i < kL; ++i) dst[i * R + c] = xs[i];
    }
    __syncthreads();  // B4: U (in V), W

    // Q S and W S with the chunk-start state; thread (c, grp) takes rows grp, grp + G, ...
    float P[RI], WS[RI];
#pragma unroll
    for (int m = 0; m < RI; ++m) P[m] = WS[m] = 0.0f;
    for (int x = 0; x < D; ++x) {
      const float sx = S[x * D + c];
#pragma unroll
      for (int m = 0; m < RI; ++m) {
        const int i = grp + m * G;
        P[m] = fmaf(Q[i * R + x], sx, P[m]);
        WS[m] = fmaf(W[i * R + x], sx, WS[m]);
      }
    }
#pragma unroll
    for (int m = 0; m < RI; ++m) {
      const int i = grp + m * G;
      V[i * R + c] -= WS[m];  // V' = U - W S (each element has one owner)
    }
    __syncthreads();  // B5: V' complete; Q no longer read

    // o = e^gam (Q S) + KK V', stored over Q.
#pragma unroll
    for (int m = 0; m < RI; ++m) {
      const int i = grp + m * G;
      float o = expf(Gam[i]) * P[m];
      for (int j = 0; j <= i; ++j) o = fmaf(KK[i * LL + j], V[j * R + c], o);
      Q[i * R + c] = o;
    }
    __syncthreads();  // B6: outputs complete

    // Gated RMSNorm of each row's output (one warp per row) ...
    for (int i = warp; i < L; i += kWarps) {
      const int64_t row = row0 + t0 + i;
      float ss = 0.0f;
      for (int x = lane; x < D; x += kWarp) ss = fmaf(Q[i * R + x], Q[i * R + x], ss);
      ss = warp_sum(ss);
      const float inv = __fdiv_rn(1.0f, sqrtf(__fdiv_rn(ss, static_cast<float>(D)) + p.eps));
      for (int x = lane; x < D; x += kWarp) {
        const int64_t at = row * Y + static_cast<int64_t>(h) * D + x;
        const float yv = Q[i * R + x] * inv * p.norm_w[x] * silu(p.z[at]);
        p.y[at] = yv;
      }
    }
    // ... and the state update (reads K and V', writes only S elements this thread owns).
    const double gam_last = GamD[kL - 1];  // rows past L have g = 0: gam_L of the last real row
    const float decay_all = expf(Gam[kL - 1]);
    float vw[kL];
#pragma unroll
    for (int j = 0; j < kL; ++j) vw[j] = V[j * R + c] * expf(static_cast<float>(gam_last - GamD[j]));
    for (int x = grp; x < D; x += G) {
      float acc = S[x * D + c] * decay_all;
#pragma unroll
      for (int j = 0; j < kL; ++j) acc = fmaf(K[j * R + x], vw[j], acc);
      S[x * D + c] = acc;
    }
    __syncthreads();  // B7: the next chunk overwrites the row tiles; S is final for this chunk
    t0 += L;
  }

  for (int e = tid; e < D * D / 4; e += kThreads)
    reinterpret_cast<float4*>(S_g)[e] = reinterpret_cast<const float4*>(S)[e];
}

template <int D>
void launch_chunked(const CoreArgs& args, const DeviceStep& step, cudaStream_t stream) {
  constexpr size_t smem = ChunkSmem<D>::kBytes;
  static const bool attr_set = [] {
    CUDA_CHECK(cudaFuncSetAttribute(deltanet_chunked_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(smem)));
    return true;
  }();
  (void)attr_set;
  const dim3 grid(static_cast<unsigned>(args.n_v), static_cast<unsigned>(step.n_seqs));
  launch(deltanet_chunked_kernel<D>, grid, kThreads, smem, stream, args, step);
}

}  // namespace

bool deltanet_chunked_supported(int d) { return d == 32 || d == 64 || d == 128; }

void deltanet_chunked(const CoreArgs& args, int d, const DeviceStep& step, cudaStream_t stream) {
  MEMRA_ASSERT(deltanet_chunked_supported(d), "chunked GDN core built for head sizes 32, 64, 128, not {}", d);
  MEMRA_ASSERT(args.recurrent_max_rows >= 1, "the chunked core needs the recurrent kernel to take single rows");
  if (step.n_seqs == 0) return;
  switch (d) {
    case 32: launch_chunked<32>(args, step, stream); break;
    case 64: launch_chunked<64>(args, step, stream); break;
    default: launch_chunked<128>(args, step, stream); break;
  }
}

}  // namespace memra::cuda
