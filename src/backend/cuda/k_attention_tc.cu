// The split step of causal attention on the tensor cores (f16 or 8-bit cache): for each (row, query head)
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
// The 8-bit cache (kv_cache_q8.h: K = code d_g per 32-dim group g) runs the same chains with the
// codes (exact in f16) and its scales outside them:
//   s_k  = sum over groups in increasing order, from +0: s = fma_rn(d_kg, C_g, s), C_g the group's two
//          k16 steps (q_hi, q_lo each) from C = +0
//   O_d  = the chain above with p replaced by fmul_rn(p_k, d_kg(d)) (hi / lo), d's group's scale of V
// The MMA's result is a fixed function of its 16 product pairs (exact: f16 x f16) and C, whatever
// the fragment position (bench/probes/wgmma_vs_mma.cu; matmul_order.h relies on the same), so a
// (row, head)'s bits do not depend on which other pairs share its n-tile or block. Keys past a
// row's position inside the block's range add +0 products (p = 0, V finite: those rows were
// appended in this step or before); K and V rows past the block's last key are loaded as zeros
// (the cache there may hold anything). Products of p = 0 leave C as it was, so a chain that runs
// longer for a longer row of the same block gives the shorter row its own bits.
//
// Accuracy: K and V are exact in f16 (8-bit codes too), q and p carry ~22 bits as hi + lo, products are exact and
// the tensor core's sums are float (truncating): the CUDA-core kernel's error budget (kAttnTol).
#include <algorithm>
#include <cmath>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/kv_cache_q8.h"
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
template <int HD, int NT, bool Q8>
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
  static constexpr int kHeadBytes = kQpBytes + kScBytes + kPairs * 2 * 4;
  // One-n-tile (decode) blocks copy the split's V rows of their KV head into shared memory by
  // cp.async at the start, so V's round trip overlaps q's conversion and the scores instead of
  // following them (same values, so the same bits as V from global memory). A row is the head's
  // HD values (f16, or 8-bit codes) plus 16 bytes: lanes (g, t) read keys 2t apart, which then
  // fall on distinct banks. Four-n-tile (prefill) blocks would need a block an SM: they load V
  // into registers after the scores.
  static constexpr int kVRow = HD * (Q8 ? 1 : 2) + 16;
  static constexpr int kVBytes = kTcSplit * kVRow;
  static constexpr int kStagedBytes = kHeadBytes + kVBytes;
  static_assert(kHeadBytes % 16 == 0, "the staged V rows start on a 16-byte boundary");
};

__device__ __forceinline__ void split_f16(float x, __half& hi, __half& lo) {
  hi = __float2half_rn(x);
  lo = f16_lo_part(x, hi);
}

// Two halves into one fragment register: `lo_src`'s half `sel` in the low 16 bits, `hi_src`'s in the high.
__device__ __forceinline__ uint32_t pair_halves(uint32_t lo_src, uint32_t hi_src, int sel) {
  return sel == 0 ? (lo_src & 0xFFFFu) | (hi_src << 16) : (lo_src >> 16) | (hi_src & 0xFFFF0000u);
}

// 8-bit cache codes (int8, 4 a word) 2 half, 2 half + 1 as f16 (exact: |code| <= 127).
__device__ __forceinline__ uint32_t codes_f16x2(uint32_t codes, int half) {
  return int8_pair(codes ^ 0x80808080u, half);
}

// A word of V: by __ldg from the cache, or from the block's staged rows in shared memory.
template <typename W, bool Shared>
__device__ __forceinline__ W load_v_word(const uint8_t* p) {
  if constexpr (Shared) return *reinterpret_cast<const W*>(p);
  else return __ldg(reinterpret_cast<const W*>(p));
}

// Lane (g, t)'s V halves of one key for the P.V phase (src: the key's row at the lane's first dim;
// zeros where !in, since the cache past the block's last key may hold anything): MT words, dims
// 2j, 2j + 1 of the lane's 2 MT in word j, as f16 (8-bit codes converted exactly).
template <bool Q8, int MT, bool Shared>
__device__ __forceinline__ void load_v_key(const uint8_t* src, bool in, uint32_t (&out)[MT]) {
  if constexpr (Q8 && MT == 2) {
    const uint32_t x = in ? load_v_word<unsigned int, Shared>(src) : 0u;
    out[0] = codes_f16x2(x, 0);
    out[MT - 1] = codes_f16x2(x, 1);
  } else if constexpr (Q8) {
    out[0] = codes_f16x2(in ? load_v_word<unsigned short, Shared>(src) : 0u, 0);
  } else if constexpr (MT == 2) {
    const uint2 x = in ? load_v_word<uint2, Shared>(src) : make_uint2(0, 0);
    out[0] = x.x;
    out[MT - 1] = x.y;
  } else {
    out[0] = in ? load_v_word<unsigned int, Shared>(src) : 0u;
  }
}

// Two floats as the f16 pairs of their hi parts and of their lo parts (a first, in the low halves).
__device__ __forceinline__ void split_pair(float a, float b, uint32_t& hi, uint32_t& lo) {
  __half ha, la, hb, lb;
  split_f16(a, ha, la);
  split_f16(b, hb, lb);
  hi = f16_pair(__half_as_ushort(ha), __half_as_ushort(hb));
  lo = f16_pair(__half_as_ushort(la), __half_as_ushort(lb));
}

// SV: V staged in shared memory (TcLayout::kVRow; the launcher picks it for one-n-tile blocks whose
// cache rows are 16-byte multiples). Either way a lane gets the same V values: the same bits.
// LISTED: a mixed-depth decode step's blocks walk its work list (DeviceStep::attn_items).
template <int HD, int NT, bool Q8, bool SV, bool LISTED = false>
__global__ void __launch_bounds__(kTcThreads, 2)
    attention_tc_split_kernel(int layer, const float* __restrict__ q, const DeviceStep step, int64_t row0,
                              int64_t rows, int n_head, int n_head_kv, int q_head_stride, int hp, int rows_per_block,
                              int tiles, int max_splits, float scale, float* __restrict__ part_o,
                              float* __restrict__ part_ml) {
  pdl_enter();
  using L = TcLayout<HD, NT, Q8>;
  constexpr int kPairs = L::kPairs;
  MEMRA_DYNAMIC_SMEM(uint8_t, smem, 16);
  __half* const q_hi = reinterpret_cast<__half*>(smem);  // [kPairs][kQRow], then q_lo
  __half* const q_lo = q_hi + kPairs * L::kQRow;
  __half* const p_hi = reinterpret_cast<__half*>(smem);  // after the scores: [kPairs][kPRow], then p_lo
  __half* const p_lo = p_hi + kPairs * L::kPRow;
  float* const sc = reinterpret_cast<float*>(smem + L::kQpBytes);  // [kPairs][kScRow]
  float* const stat = sc + kPairs * L::kScRow;                     // [kPairs][2]: max, sum
  uint8_t* const v_rows = smem + L::kHeadBytes;                    // SV: [kTcSplit][kVRow]
  __shared__ int s_n[kPairs];                                      // keys of the split a pair sees (<= 0: none)
  __shared__ int s_last;
  // 8-bit cache: the split's K and V scales of this KV head, [key][32-dim group] (0 past the block's keys).
  constexpr int kGroups = HD / 32;
  __shared__ __half k_scale[Q8 ? kTcSplit : 1][kGroups], v_scale[Q8 ? kTcSplit : 1][kGroups];

  const int warp = static_cast<int>(threadIdx.x) / kWarp, lane = static_cast<int>(threadIdx.x) % kWarp;
  const int g = lane / 4, t = lane % 4;
  // The KV heads of one split are adjacent in launch order, so the blocks reading the head slices
  // of the same cache rows run at the same time (9B, H100: +1% at depth 4096 B = 1 and pp512 @ d16384
  // against every split of head 0 first; bench/results/2026-12-06-0700-h100-session38.md).
  const int kvh = static_cast<int>(blockIdx.x % static_cast<unsigned>(n_head_kv));
  const unsigned bx = blockIdx.x / static_cast<unsigned>(n_head_kv);
  // One (tile, sequence, split) of this KV head; a return leaves that item.
  auto work = [&](const int tile, const int split, const int seq) {
  // The sequence's block table for the layer, read alongside its rows (it depends on neither); its
  // entry for this split is read once the split is known to hold keys of the block's rows.
  uint8_t* const* const kv_table = step.kv_blocks[static_cast<int64_t>(layer) * step.n_seqs + seq];
  // The block's rows: R = rows_per_block consecutive rows of the sequence inside the launch group
  // (tiles counted from the first such row: which rows share a block never changes a row's bits).
  const int64_t srow0 = step.seq_row0[seq];
  const int64_t s_lo = srow0 > row0 ? srow0 : row0;
  int64_t s_hi = srow0 + step.seq_n_rows[seq];
  if (s_hi > row0 + rows) s_hi = row0 + rows;
  const int64_t b_first = s_lo + static_cast<int64_t>(tile) * rows_per_block;
  int64_t hi_row = b_first + rows_per_block;
  if (hi_row > s_hi) hi_row = s_hi;
  if (b_first >= hi_row) return;  // uniform per block
  const int t0 = split * kTcSplit;

  // Pair i: row b_first + i / hp, head kvh * hp + i % hp (pairs past the block's rows: padding).
  static_assert(kPairs <= kWarp);
  if (warp == 0) {
    const int i = lane;
    const int64_t row = b_first + i / hp;
    int n = 0, pos = -1;
    if (i < kPairs && i / hp < rows_per_block && row < hi_row) {
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
  // A row of the block: kv_dim f16 values, or kv_dim int8 codes then kv_dim / 32 f16 scales.
  const int64_t row_bytes = Q8 ? kv_q8_row_bytes(kv_dim) : 2 * kv_dim;
  const int64_t col_bytes = static_cast<int64_t>(kvh) * HD * (Q8 ? 1 : 2);  // the head's first value
  const uint8_t* kc = kv_table[split];
  const uint8_t* vc = kc + int64_t{kTcSplit} * row_bytes;
  if constexpr (Q8) {
    for (int i = static_cast<int>(threadIdx.x); i < kTcSplit * kGroups; i += kTcThreads) {
      const int key = i / kGroups, G = i % kGroups;
      const int64_t at = key * row_bytes + kv_dim + 2 * (static_cast<int64_t>(kvh) * kGroups + G);
      const bool in = key < nk;
      k_scale[key][G] = __ushort_as_half(in ? __ldg(reinterpret_cast<const unsigned short*>(kc + at)) : 0);
      v_scale[key][G] = __ushort_as_half(in ? __ldg(reinterpret_cast<const unsigned short*>(vc + at)) : 0);
    }
  }

  // The warp's 16 keys of the scores' m side, every load before the first MMA: one round trip a
  // block, not one a 32 dims. f16: lane t's 8 values of a 32-dim group (16 bytes); 8-bit: its 8
  // codes (two words). SV blocks load them before q's conversion, whose round trip they then share.
  const int kb = warp * 16;
  uint4 ka[kGroups], kz[kGroups];
  auto load_k = [&] {
    const bool ok0 = kb + g < nk, ok1 = kb + g + 8 < nk;
    const uint8_t* k0 = kc + static_cast<int64_t>(kb + g) * row_bytes + col_bytes;
    const uint8_t* k1 = k0 + 8 * row_bytes;
#pragma unroll
    for (int G = 0; G < kGroups; ++G) {
      if constexpr (Q8) {
        // Staged-V blocks (rows of 16-byte multiples): one 8-byte load a lane, not two 4-byte
        // loads that each touch the same 8 sectors of the warp's rows (Nsight at depth 32000
        // counted 45% of this kernel's global sector requests as excess). Same values; H100, 9B
        // Q4_0, 8-bit cache: tg32 B = 1 @ d32000 331.7 / 330.8 -> 332.4 / 332.8 tok/s, B = 64 @
        // d4096 5,137 -> 5,169 (bench/results/2026-12-06-0840-h100-s39-merge-kwords.log).
        if constexpr (SV) {
          const uint2 a = ok0 ? __ldg(reinterpret_cast<const uint2*>(k0 + 32 * G + 8 * t)) : make_uint2(0, 0);
          const uint2 z = ok1 ? __ldg(reinterpret_cast<const uint2*>(k1 + 32 * G + 8 * t)) : make_uint2(0, 0);
          ka[G] = make_uint4(a.x, a.y, 0, 0);
          kz[G] = make_uint4(z.x, z.y, 0, 0);
        } else {
          const unsigned int* a = reinterpret_cast<const unsigned int*>(k0 + 32 * G + 8 * t);
          const unsigned int* z = reinterpret_cast<const unsigned int*>(k1 + 32 * G + 8 * t);
          ka[G] = ok0 ? make_uint4(__ldg(a), __ldg(a + 1), 0, 0) : make_uint4(0, 0, 0, 0);
          kz[G] = ok1 ? make_uint4(__ldg(z), __ldg(z + 1), 0, 0) : make_uint4(0, 0, 0, 0);
        }
      } else {
        ka[G] = ok0 ? __ldg(reinterpret_cast<const uint4*>(k0 + 2 * (32 * G + 8 * t))) : make_uint4(0, 0, 0, 0);
        kz[G] = ok1 ? __ldg(reinterpret_cast<const uint4*>(k1 + 2 * (32 * G + 8 * t))) : make_uint4(0, 0, 0, 0);
      }
    }
  };
  if constexpr (SV) {
    if (kb < nk) load_k();
    // The split's V rows of this KV head, in flight until the P.V phase.
    constexpr int kPieces = HD * (Q8 ? 1 : 2) / 16;  // 16-byte pieces of a key's row
    for (int i = static_cast<int>(threadIdx.x); i < nk * kPieces; i += kTcThreads) {
      const int key = i / kPieces, piece = i % kPieces;
      cp_async16(v_rows + key * L::kVRow + 16 * piece, vc + key * row_bytes + col_bytes + 16 * piece);
    }
    cp_async_commit();
  }

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
  if (kb < nk) {
    float s[NT][4] = {};  // +0
    if constexpr (!SV) load_k();
#pragma unroll
    for (int G = 0; G < kGroups; ++G) {
      if constexpr (Q8) {  // codes as f16 in the f16 layout: dims 8t + 2i, 8t + 2i + 1 in word i
        ka[G] = make_uint4(codes_f16x2(ka[G].x, 0), codes_f16x2(ka[G].x, 1), codes_f16x2(ka[G].y, 0),
                           codes_f16x2(ka[G].y, 1));
        kz[G] = make_uint4(codes_f16x2(kz[G].x, 0), codes_f16x2(kz[G].x, 1), codes_f16x2(kz[G].y, 0),
                           codes_f16x2(kz[G].y, 1));
      }
      const uint32_t a0[4] = {ka[G].x, kz[G].x, ka[G].y, kz[G].y};
      const uint32_t a1[4] = {ka[G].z, kz[G].z, ka[G].w, kz[G].w};
      float d[4];
      if constexpr (Q8) {
        d[0] = d[1] = __half2float(k_scale[kb + g][G]);
        d[2] = d[3] = __half2float(k_scale[kb + g + 8][G]);
      }
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const int pr = nt * 8 + g;
        const uint4 qh = *reinterpret_cast<const uint4*>(q_hi + pr * L::kQRow + 32 * G + 8 * t);
        const uint4 ql = *reinterpret_cast<const uint4*>(q_lo + pr * L::kQRow + 32 * G + 8 * t);
        float zero[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        float (&c)[4] = Q8 ? zero : s[nt];  // 8-bit: each group's dot from +0, then scaled into s
        mma_16816(c, a0, qh.x, qh.y, c);
        mma_16816(c, a0, ql.x, ql.y, c);
        mma_16816(c, a1, qh.z, qh.w, c);
        mma_16816(c, a1, ql.z, ql.w, c);
        if constexpr (Q8) {
#pragma unroll
          for (int e = 0; e < 4; ++e) s[nt][e] = __fmaf_rn(d[e], c[e], s[nt][e]);
        }
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
  const int v_dim_bytes = (base + 2 * MT * g) * (Q8 ? 1 : 2);  // the lane's first dim in a V row
  auto v_key = [&](int c, int kk) { return 16 * c + 2 * t + (kk & 1) + 8 * (kk >> 1); };
  uint32_t v[SV ? 1 : kChunks][4][MT];  // !SV: chunk c, key kk's halves 2j, 2j + 1 in v[c][kk][j]
  if constexpr (!SV) {
    if (warp < kPvWarps) {
#pragma unroll
      for (int c = 0; c < kChunks; ++c)
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
          const int key = v_key(c, kk);
          load_v_key<Q8, MT, false>(vc + col_bytes + v_dim_bytes + static_cast<int64_t>(key) * row_bytes, key < nk,
                                    v[c][kk]);
        }
    }
  } else {
    cp_async_wait<0>();  // this thread's V copies; the barrier below publishes everyone's
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
      if constexpr (Q8) {  // p in place: each P.V warp scales it by its V group's scales
        sc[i * L::kScRow + k] = p;
      } else {
        __half h, lo;
        split_f16(p, h, lo);
        p_hi[i * L::kPRow + k] = h;
        p_lo[i * L::kPRow + k] = lo;
      }
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
    float o[MT][NT][4] = {};  // +0
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      if (c >= chunks) break;
      uint32_t bh[NT][2], bl[NT][2];
      if constexpr (Q8) {  // p d_k of the warp's 32-dim group, as hi / lo
        const int G = base / 32;
        const int k0 = 16 * c + 2 * t;
        const float d0 = __half2float(v_scale[k0][G]), d1 = __half2float(v_scale[k0 + 1][G]);
        const float d8 = __half2float(v_scale[k0 + 8][G]), d9 = __half2float(v_scale[k0 + 9][G]);
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          const float* pr = sc + (nt * 8 + g) * L::kScRow + k0;
          const float x0 = __fmul_rn(pr[0], d0), x1 = __fmul_rn(pr[1], d1);
          const float x8 = __fmul_rn(pr[8], d8), x9 = __fmul_rn(pr[9], d9);
          split_pair(x0, x1, bh[nt][0], bl[nt][0]);
          split_pair(x8, x9, bh[nt][1], bl[nt][1]);
        }
      } else {
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          const int pr = nt * 8 + g;
          bh[nt][0] = *reinterpret_cast<const uint32_t*>(p_hi + pr * L::kPRow + 16 * c + 2 * t);
          bh[nt][1] = *reinterpret_cast<const uint32_t*>(p_hi + pr * L::kPRow + 16 * c + 2 * t + 8);
          bl[nt][0] = *reinterpret_cast<const uint32_t*>(p_lo + pr * L::kPRow + 16 * c + 2 * t);
          bl[nt][1] = *reinterpret_cast<const uint32_t*>(p_lo + pr * L::kPRow + 16 * c + 2 * t + 8);
        }
      }
      uint32_t vk[4][MT];  // key kk's halves of the chunk
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        if constexpr (SV) {
          const int key = v_key(c, kk);
          load_v_key<Q8, MT, true>(v_rows + key * L::kVRow + v_dim_bytes, key < nk, vk[kk]);
        } else {
#pragma unroll
          for (int j = 0; j < MT; ++j) vk[kk][j] = v[c][kk][j];
        }
      }
#pragma unroll
      for (int j = 0; j < MT; ++j) {
        // a0 = (dim row g: keys 2t, 2t+1), a1 = (row g + 8: same keys), a2 / a3 = keys 2t + 8, 2t + 9.
        const uint32_t a[4] = {pair_halves(vk[0][j], vk[1][j], 0), pair_halves(vk[0][j], vk[1][j], 1),
                               pair_halves(vk[2][j], vk[3][j], 0), pair_halves(vk[2][j], vk[3][j], 1)};
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
  };
  if constexpr (!LISTED) {  // the grid: every (tile, sequence, split); splits past a row's reach leave at once
    const int64_t seq_split = bx / tiles;
    work(static_cast<int>(bx % tiles), static_cast<int>(seq_split % max_splits), static_cast<int>(seq_split / max_splits));
  } else {
    // A mixed-depth decode step: the blocks walk the launch group's sequences' own splits (one
    // tile: one row a sequence; decode rows are the sequences in order).
    const int32_t i1 = step.attn_item_off[row0 + rows];
    for (int32_t it = step.attn_item_off[row0] + static_cast<int32_t>(bx); it < i1;
         it += static_cast<int32_t>(gridDim.x / static_cast<unsigned>(n_head_kv))) {
      const int32_t e = step.attn_items[it];
      __syncthreads();  // the previous item's readers of s_n, q / p, the scores and the staged rows are done
      work(0, e & 0xFFFF, e >> 16);
    }
  }
}

template <int HD, int NT, bool Q8, bool SV>
void launch_tc(const AttnTcLaunch& a) {
  auto* kernel = attention_tc_split_kernel<HD, NT, Q8, SV>;
  using L = TcLayout<HD, NT, Q8>;
  constexpr int bytes = SV ? L::kStagedBytes : L::kHeadBytes;
  // Always opted in: the 48 KiB a launch gets without it counts the static shared memory too (the
  // 8-bit scales' 4 KiB), so a dynamic size under 48 KiB can still need it (the staged 8-bit form).
  static bool configured = false;  // one device per process (the backend's)
  if (!configured) {
    CUDA_CHECK(cudaFuncSetAttribute(attention_tc_split_kernel<HD, NT, Q8, SV>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    if constexpr (NT == 1)
      CUDA_CHECK(cudaFuncSetAttribute(attention_tc_split_kernel<HD, NT, Q8, SV, true>,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  }
  configured = true;
  const int hp = a.s->n_head / a.s->n_head_kv;
  const int rows_per_block = NT * 8 / hp;
  // Tiles a sequence needs within the launch group [row0, row0 + rows).
  const int64_t seq_rows = std::min<int64_t>(a.step->max_seq_rows, a.rows);
  const int64_t tiles = (seq_rows + rows_per_block - 1) / rows_per_block;
  // A mixed-depth decode step walks its work list (DeviceStep::attn_items) on at most
  // kListItems blocks a KV head, a number fixed by the launch group and the KV length bucket (a
  // recorded graph replays it whatever the depths); otherwise a block for every (tile, sequence,
  // split), most of them empty when one sequence is much deeper than the others.
  constexpr int64_t kListItems = 1024;
  const bool listed = NT == 1 && a.step->attn_items != nullptr && tiles == 1 && a.step->max_seq_rows == 1;
  if constexpr (NT == 1)
    if (listed) kernel = attention_tc_split_kernel<HD, NT, Q8, SV, true>;
  const int64_t blocks = (listed ? std::min<int64_t>(a.rows * a.max_splits, kListItems)
                                 : tiles * a.step->n_seqs * a.max_splits) *
                         a.s->n_head_kv;
  MEMRA_ASSERT(blocks >= 1 && blocks <= int64_t{0x7fffffff}, "attention (tensor cores): grid x");
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(HD)));
  const dim3 grid(static_cast<unsigned>(blocks));
  launch(kernel, grid,
         kTcThreads, bytes, a.stream, a.layer, a.q, *a.step, a.row0, a.rows, a.s->n_head, a.s->n_head_kv,
         a.s->q_head_stride, hp, rows_per_block, static_cast<int>(tiles), a.max_splits, scale, a.part_o, a.part_ml);
  CUDA_LAUNCH_CHECK();
}

template <int HD>
void launch_tc_hd(const AttnTcLaunch& a) {
  // One n-tile holds a decode row's query heads; prefill blocks take 4 (8 rows at 4 heads a KV head).
  if (a.step->max_seq_rows > 1) return a.kv_q8 ? launch_tc<HD, 4, true, false>(a) : launch_tc<HD, 4, false, false>(a);
  // V is staged by 16-byte copies: rows (and so every key's first byte of the head) on 16-byte
  // boundaries. Block bases are multiples of the row (kv_blocks.h), and a head's first byte is
  // HD (8-bit) or 2 HD bytes into it.
  const int64_t kv_dim = static_cast<int64_t>(a.s->n_head_kv) * HD;
  if (a.kv_q8) return kv_q8_row_bytes(kv_dim) % 16 == 0 ? launch_tc<HD, 1, true, true>(a) : launch_tc<HD, 1, true, false>(a);
  return launch_tc<HD, 1, false, true>(a);
}

}  // namespace

bool attention_tc_supported(const AttnShape& s, GgmlType kv_type) {
  const int hp = s.n_head / s.n_head_kv;
  return (kv_type == GgmlType::F16 || kv_type == GgmlType::Q8_0) &&
         (s.head_dim == 64 || s.head_dim == 128 || s.head_dim == 256) && hp >= 1 &&
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
