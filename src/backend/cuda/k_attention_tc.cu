// The split step of causal attention on the tensor cores (f16 cache): for each (row, query head)
// and 128-key split (one KV block), the split's partial (max, sum of exp, unnormalised weighted V
// sum), merged by attention_combine_kernel (k_attention.cu) exactly as the CUDA-core split kernel's.
//
// One order for every row, decode and prefill alike (prefix reuse needs a row's bits to be the
// same however its sequence was cut into steps, step/prefix_cache.h), so one kernel: a block is
// (R rows of one sequence, KV head, split), its (row, head) pairs the MMAs' n side (8 a tile,
// NT tiles), the split's keys (scores) and the head's dims (P.V) the m side. Per (row, head) and
// split, with t0 = 128 split and n = min(128, pos + 1 - t0) keys:
//   q_hi = f16_rn(q), q_lo = f16_rn(q - q_hi)
//   s_k  = mma chain over the head's dims, 32 at a time in increasing order, each 32 as two k16
//          MMAs (c = 0, 1) with k-slot 2t + e <-> dim 8t + 4c + e, slot 2t + 8 + e <-> dim
//          8t + 4c + 2 + e (t = 0..3, e = 0..1): C = +0; per k16: C = mma(K, q_hi, C); C = mma(K, q_lo, C)
//   x_k  = fmul_rn(s_k, 1/sqrt(HD)) for k < n
//   m    = max_k x_k (exact, so in any order)
//   p_k  = expf(x_k - m); p_hi = f16_rn(p), p_lo = f16_rn(p - p_hi); p = 0 for k >= n
//   l    = sum of p_k: lane j adds keys j, j + 32, .. in order, then warp_sum's butterfly
//   O_d  = mma chain over the split's keys, 16 at a time in increasing order (k-slot s <-> key
//          16c + s): C = +0; per k16: C = mma(V, p_hi, C); C = mma(V, p_lo, C)
// The MMA's result is a fixed function of its 16 product pairs (exact: f16 x f16) and C, whatever
// the fragment position (bench/probes/wgmma_vs_mma.cu; matmul_order.h relies on the same), so a
// (row, head)'s bits do not depend on which other pairs share its n-tile or block. Keys past a
// row's position inside the block's range add +0 products (p = 0, V finite: those rows were
// appended in this step or before); K and V rows past the block's last key are loaded as zeros
// (the cache there may hold anything). Products of p = 0 leave C as it was, so a chain that runs
// longer for a longer row of the same block gives the shorter row its own bits.
//
// Accuracy: K and V are exact in f16, q and p carry ~22 bits as hi + lo, products are exact and
// the tensor core's sums are float (truncating): the CUDA-core kernel's error budget (kAttnTol).
#include <cmath>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/mma_f16.cuh"
#include "step/kv_blocks.h"

namespace memra::cuda {
namespace {

constexpr int kTcSplit = kKvBlock;  // keys a split (attention_combine_kernel's unit)
constexpr int kTcWarps = kTcSplit / 16;  // one 16-key m-tile of scores a warp
constexpr int kTcThreads = kTcWarps * kWarp;
static_assert(kTcWarps == 8, "the score phase gives each warp one 16-key m-tile");

// Shared-memory layout of a block (bytes), NT n-tiles of 8 (row, head) pairs.
template <int HD, int NT>
struct TcLayout {
  static constexpr int kPairs = NT * 8;
  // q as f16 hi / lo rows; the 64-byte pad makes the 8 rows of a fragment load hit 8 different
  // 16-byte bank groups. After the scores the same bytes hold p as f16 hi / lo rows.
  static constexpr int kQRow = HD + 32;         // halves
  static constexpr int kPRow = kTcSplit + 8;    // halves: 272 bytes, lanes (g, t) on distinct banks
  static constexpr int kScRow = kTcSplit + 4;   // floats: rows 2t + e on distinct banks
  static constexpr int kQBytes = kPairs * kQRow * 2 * 2;
  static constexpr int kPBytes = kPairs * kPRow * 2 * 2;
  static constexpr int kQpBytes = kQBytes > kPBytes ? kQBytes : kPBytes;
  static constexpr int kScBytes = kPairs * kScRow * 4;
  static constexpr int kBytes = kQpBytes + kScBytes + kPairs * 2 * 4;
};

__device__ __forceinline__ void split_f16(float x, __half& hi, __half& lo) {
  hi = __float2half_rn(x);
  lo = __float2half_rn(__fsub_rn(x, __half2float(hi)));
}

// Two halves into one fragment register: `lo_src`'s half `sel` in the low 16 bits, `hi_src`'s in the high.
__device__ __forceinline__ uint32_t pair_halves(uint32_t lo_src, uint32_t hi_src, int sel) {
  return sel == 0 ? (lo_src & 0xFFFFu) | (hi_src << 16) : (lo_src >> 16) | (hi_src & 0xFFFF0000u);
}

template <int HD, int NT>
__global__ void __launch_bounds__(kTcThreads, 2)
    attention_tc_split_kernel(int layer, const float* __restrict__ q, const DeviceStep step, int64_t row0,
                              int64_t rows, int n_head, int n_head_kv, int q_head_stride, int hp, int rows_per_block,
                              int tiles, int max_splits, float scale, float* __restrict__ part_o,
                              float* __restrict__ part_ml) {
  pdl_enter();
  using L = TcLayout<HD, NT>;
  constexpr int kPairs = L::kPairs;
  MEMRA_DYNAMIC_SMEM(uint8_t, smem, 16);
  __half* const q_hi = reinterpret_cast<__half*>(smem);  // [kPairs][kQRow], then q_lo
  __half* const q_lo = q_hi + kPairs * L::kQRow;
  __half* const p_hi = reinterpret_cast<__half*>(smem);  // after the scores: [kPairs][kPRow], then p_lo
  __half* const p_lo = p_hi + kPairs * L::kPRow;
  float* const sc = reinterpret_cast<float*>(smem + L::kQpBytes);  // [kPairs][kScRow]
  float* const stat = sc + kPairs * L::kScRow;                     // [kPairs][2]: max, sum
  __shared__ int s_n[kPairs];                                      // keys of the split a pair sees (<= 0: none)
  __shared__ int s_last;

  const int warp = static_cast<int>(threadIdx.x) / kWarp, lane = static_cast<int>(threadIdx.x) % kWarp;
  const int g = lane / 4, t = lane % 4;
  const int64_t bx = blockIdx.x;
  const int tile = static_cast<int>(bx % tiles);
  const int64_t seq_split = bx / tiles;
  const int split = static_cast<int>(seq_split % max_splits);
  const int seq = static_cast<int>(seq_split / max_splits);
  const int kvh = static_cast<int>(blockIdx.y);
  const int64_t srow0 = step.seq_row0[seq];
  const int64_t b_first = srow0 + static_cast<int64_t>(tile) * rows_per_block;
  const int64_t lo_row = b_first > row0 ? b_first : row0;
  int64_t hi_row = srow0 + step.seq_n_rows[seq];
  if (hi_row > b_first + rows_per_block) hi_row = b_first + rows_per_block;
  if (hi_row > row0 + rows) hi_row = row0 + rows;
  if (lo_row >= hi_row) return;  // uniform per block
  const int t0 = split * kTcSplit;

  // Pair i: row b_first + i / hp, head kvh * hp + i % hp (pairs past the block's rows: padding).
  static_assert(kPairs <= kWarp);
  if (warp == 0) {
    const int i = lane;
    const int64_t row = b_first + i / hp;
    int n = 0, pos = -1;
    if (i < kPairs && i / hp < rows_per_block && row >= lo_row && row < hi_row) {
      pos = step.positions[row];
      n = min(kTcSplit, pos + 1 - t0);
    }
    if (i < kPairs) s_n[i] = n;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) pos = max(pos, __shfl_xor_sync(0xffffffffu, pos, o));
    if (lane == 0) s_last = pos;
  }
  __syncthreads();
  if (s_last < t0) return;  // no row of the block reaches this split
  const int nk = min(kTcSplit, s_last + 1 - t0);  // keys of the split the block reads

  const int64_t kv_dim = static_cast<int64_t>(n_head_kv) * HD;
  const uint8_t* kc = step.kv_blocks[static_cast<int64_t>(layer) * step.n_seqs + seq][split];
  const __half* kcache = reinterpret_cast<const __half*>(kc) + static_cast<int64_t>(kvh) * HD;
  const __half* vcache = reinterpret_cast<const __half*>(kc + int64_t{kTcSplit} * 2 * kv_dim) + static_cast<int64_t>(kvh) * HD;

  // ---- q of every pair as f16 hi / lo (zeros for padding pairs)
  for (int i = static_cast<int>(threadIdx.x); i < kPairs * HD / 4; i += kTcThreads) {
    const int pair = i / (HD / 4), d = (i % (HD / 4)) * 4;
    float4 x = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (s_n[pair] > 0) {
      const int64_t row = b_first + pair / hp;
      const int head = kvh * hp + pair % hp;
      x = *reinterpret_cast<const float4*>(q + (row * n_head + head) * q_head_stride + d);
    }
    __half h[4], l[4];
    split_f16(x.x, h[0], l[0]);
    split_f16(x.y, h[1], l[1]);
    split_f16(x.z, h[2], l[2]);
    split_f16(x.w, h[3], l[3]);
    __half* dh = q_hi + pair * L::kQRow + d;
    __half* dl = q_lo + pair * L::kQRow + d;
#pragma unroll
    for (int e = 0; e < 4; ++e) dh[e] = h[e], dl[e] = l[e];
  }
  __syncthreads();

  // ---- scores: warp w's 16 keys (m) against every pair (n), over the head's dims
  const int kb = warp * 16;
  if (kb < nk) {
    float s[NT][4];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[nt][e] = 0.0f;
    const bool ok0 = kb + g < nk, ok1 = kb + g + 8 < nk;
    const __half* k0 = kcache + static_cast<int64_t>(kb + g) * kv_dim + 8 * t;
    const __half* k1 = k0 + 8 * kv_dim;
    // Every load of the warp's keys before the first MMA: one round trip a block, not one a 32 dims.
    uint4 ka[HD / 32], kz[HD / 32];
#pragma unroll
    for (int G = 0; G < HD / 32; ++G) {
      ka[G] = ok0 ? __ldg(reinterpret_cast<const uint4*>(k0 + 32 * G)) : make_uint4(0, 0, 0, 0);
      kz[G] = ok1 ? __ldg(reinterpret_cast<const uint4*>(k1 + 32 * G)) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int G = 0; G < HD / 32; ++G) {
      const uint32_t a0[4] = {ka[G].x, kz[G].x, ka[G].y, kz[G].y};
      const uint32_t a1[4] = {ka[G].z, kz[G].z, ka[G].w, kz[G].w};
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const int pr = nt * 8 + g;
        const uint4 qh = *reinterpret_cast<const uint4*>(q_hi + pr * L::kQRow + 32 * G + 8 * t);
        const uint4 ql = *reinterpret_cast<const uint4*>(q_lo + pr * L::kQRow + 32 * G + 8 * t);
        mma_16816(s[nt], a0, qh.x, qh.y, s[nt]);
        mma_16816(s[nt], a0, ql.x, ql.y, s[nt]);
        mma_16816(s[nt], a1, qh.z, qh.w, s[nt]);
        mma_16816(s[nt], a1, ql.z, ql.w, s[nt]);
      }
    }
    // C fragment: s[nt][e] = S[key kb + g + 8 (e / 2)][pair nt * 8 + 2t + e % 2].
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        sc[(nt * 8 + 2 * t + (e & 1)) * L::kScRow + kb + g + 8 * (e >> 1)] = __fmul_rn(s[nt][e], scale);
  }
  // The V rows this warp multiplies, loaded now so their round trip overlaps the softmax. Lane (g, t)
  // holds dims base + 2 MT g + 2j + h as row g + 8h of m-tile j (a dim permutation only places
  // outputs), as 2 MT consecutive halves of the keys 2t, 2t + 1, 2t + 8, 2t + 9 of each 16.
  constexpr int MT = HD >= 256 ? 2 : 1;
  constexpr int kPvWarps = HD / (16 * MT);
  constexpr int kChunks = kTcSplit / 16;
  static_assert(kPvWarps <= kTcWarps);
  const int base = warp * 16 * MT;
  const int chunks = (nk + 15) / 16;
  uint32_t v[kChunks][4][MT];  // chunk c, key kk's halves 2j, 2j + 1 in v[c][kk][j]
  if (warp < kPvWarps) {
    const __half* vl = vcache + base + 2 * MT * g;
#pragma unroll
    for (int c = 0; c < kChunks; ++c)
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        const int key = 16 * c + 2 * t + (kk & 1) + 8 * (kk >> 1);
        const __half* src = vl + static_cast<int64_t>(key) * kv_dim;
        if constexpr (MT == 2) {
          const uint2 x = key < nk ? __ldg(reinterpret_cast<const uint2*>(src)) : make_uint2(0, 0);
          v[c][kk][0] = x.x;
          v[c][kk][MT - 1] = x.y;
        } else {
          v[c][kk][0] = key < nk ? __ldg(reinterpret_cast<const unsigned int*>(src)) : 0u;
        }
      }
  }
  __syncthreads();  // every score written; q is dead, its bytes become p

  // ---- softmax of each pair over its own keys: max, p = exp(x - max) as hi / lo, sum
  for (int i = warp; i < kPairs; i += kTcWarps) {
    const int n = s_n[i];
    float m = -INFINITY;
    for (int k = lane; k < n; k += kWarp) m = fmaxf(m, sc[i * L::kScRow + k]);
    m = warp_max(m);
    float l = 0.0f;
#pragma unroll
    for (int j = 0; j < kTcSplit / kWarp; ++j) {
      const int k = lane + kWarp * j;
      float p = 0.0f;
      if (k < n) {
        p = expf(__fsub_rn(sc[i * L::kScRow + k], m));
        l = __fadd_rn(l, p);
      }
      __half h, lo;
      split_f16(p, h, lo);
      p_hi[i * L::kPRow + k] = h;
      p_lo[i * L::kPRow + k] = lo;
    }
    l = warp_sum(l);
    if (lane == 0) {
      stat[2 * i] = m;
      stat[2 * i + 1] = l;
    }
  }
  __syncthreads();

  // ---- O^T = V^T P^T: warp w's MT m-tiles of 16 dims (m) against every pair (n), over the keys
  if (warp < kPvWarps) {
    float o[MT][NT][4];
#pragma unroll
    for (int j = 0; j < MT; ++j)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) o[j][nt][e] = 0.0f;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      if (c >= chunks) break;
      uint32_t bh[NT][2], bl[NT][2];
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const int pr = nt * 8 + g;
        bh[nt][0] = *reinterpret_cast<const uint32_t*>(p_hi + pr * L::kPRow + 16 * c + 2 * t);
        bh[nt][1] = *reinterpret_cast<const uint32_t*>(p_hi + pr * L::kPRow + 16 * c + 2 * t + 8);
        bl[nt][0] = *reinterpret_cast<const uint32_t*>(p_lo + pr * L::kPRow + 16 * c + 2 * t);
        bl[nt][1] = *reinterpret_cast<const uint32_t*>(p_lo + pr * L::kPRow + 16 * c + 2 * t + 8);
      }
#pragma unroll
      for (int j = 0; j < MT; ++j) {
        // a0 = (dim row g: keys 2t, 2t+1), a1 = (row g + 8: same keys), a2 / a3 = keys 2t + 8, 2t + 9.
        const uint32_t a[4] = {pair_halves(v[c][0][j], v[c][1][j], 0), pair_halves(v[c][0][j], v[c][1][j], 1),
                               pair_halves(v[c][2][j], v[c][3][j], 0), pair_halves(v[c][2][j], v[c][3][j], 1)};
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          mma_16816(o[j][nt], a, bh[nt][0], bh[nt][1], o[j][nt]);
          mma_16816(o[j][nt], a, bl[nt][0], bl[nt][1], o[j][nt]);
        }
      }
    }
    // C fragment: o[j][nt][e] = O[dim base + 2 MT g + 2j + (e / 2)][pair nt * 8 + 2t + e % 2].
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int pair = nt * 8 + 2 * t + e;
        if (s_n[pair] <= 0) continue;
        const int64_t lrow = b_first + pair / hp - row0;
        const int head = kvh * hp + pair % hp;
        float* dst = part_o + ((lrow * n_head + head) * max_splits + split) * HD + base + 2 * MT * g;
        if constexpr (MT == 2) {
          *reinterpret_cast<float4*>(dst) = make_float4(o[0][nt][e], o[0][nt][2 + e], o[1][nt][e], o[1][nt][2 + e]);
        } else {
          *reinterpret_cast<float2*>(dst) = make_float2(o[0][nt][e], o[0][nt][2 + e]);
        }
      }
  }
  if (threadIdx.x < kPairs && s_n[threadIdx.x] > 0) {
    const int pair = static_cast<int>(threadIdx.x);
    const int64_t lrow = b_first + pair / hp - row0;
    const int head = kvh * hp + pair % hp;
    float* ml = part_ml + ((lrow * n_head + head) * max_splits + split) * 2;
    ml[0] = stat[2 * pair];
    ml[1] = stat[2 * pair + 1];
  }
}

template <int HD, int NT>
void launch_tc(const AttnTcLaunch& a) {
  constexpr int bytes = TcLayout<HD, NT>::kBytes;
  static bool configured = false;  // one device per process (the backend's)
  if (!configured && bytes > 48 * 1024) {
    CUDA_CHECK(cudaFuncSetAttribute(attention_tc_split_kernel<HD, NT>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  }
  configured = true;
  const int hp = a.s->n_head / a.s->n_head_kv;
  const int rows_per_block = NT * 8 / hp;
  const int64_t tiles = (int64_t{a.step->max_seq_rows} + rows_per_block - 1) / rows_per_block;
  const int64_t blocks = tiles * a.step->n_seqs * a.max_splits;
  MEMRA_ASSERT(blocks >= 1 && blocks <= int64_t{0x7fffffff}, "attention (tensor cores): grid x");
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(HD)));
  launch(attention_tc_split_kernel<HD, NT>, dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(a.s->n_head_kv)),
         kTcThreads, bytes, a.stream, a.layer, a.q, *a.step, a.row0, a.rows, a.s->n_head, a.s->n_head_kv,
         a.s->q_head_stride, hp, rows_per_block, static_cast<int>(tiles), a.max_splits, scale, a.part_o, a.part_ml);
  CUDA_LAUNCH_CHECK();
}

template <int HD>
void launch_tc_hd(const AttnTcLaunch& a) {
  // One n-tile holds a decode row's query heads; prefill blocks take 4 (8 rows at 4 heads a KV head).
  if (a.step->max_seq_rows > 1) return launch_tc<HD, 4>(a);
  return launch_tc<HD, 1>(a);
}

}  // namespace

bool attention_tc_supported(const AttnShape& s, GgmlType kv_type) {
  const int hp = s.n_head / s.n_head_kv;
  return kv_type == GgmlType::F16 && (s.head_dim == 64 || s.head_dim == 128 || s.head_dim == 256) && hp >= 1 &&
         hp <= 8 && s.q_head_stride % 4 == 0;
}

void attention_tc_split(const AttnTcLaunch& a) {
  switch (a.s->head_dim) {
    case 64: return launch_tc_hd<64>(a);
    case 128: return launch_tc_hd<128>(a);
    default: return launch_tc_hd<256>(a);
  }
}

}  // namespace memra::cuda
