// Quantized-weight matmul for many activation rows on the int8 tensor cores (mma.sync), giving
// exactly the bits of the GEMV (k_matmul_q8.cu) under the canonical order of matmul_order.h.
//
// Integer part. A block's integer sums (codes x int8 activations over 32 elements, or over each
// 16-element half for Q6_K) are exact in any order, so the tensor core computes them:
// A = decoded weight codes (16 outputs x 32 elements), B = int8 activations (32 elements x 8
// rows), C = 0x4B400000, the bits of M = 1.5 * 2^23. D read as a float is then exactly M + dot
// (|dot| < 2^22 for every type: at most 32 * 31 * 128).
//
// Float part. block_term (matmul_terms.cuh) turns an exact integer n (|n| <= 2^24, so
// __int2float_rn(n) is exact) into a float and applies __fmul_rn / __fsub_rn. Here n comes from
// D by operations whose exact result is n, so each rounds to the same float, and the scale
// products that follow are the same __fmul_rn sequence:
//   Q4_0  n = dot - 8 xs   = (M + dot) + -(M + 8 xs)        (Sterbenz: an exact difference)
//   Q8_0  n = dot          = (M + dot) + -M
//   Q4_K/Q5_K  sc*dot      = fma(sc, M + dot, -sc*M)        (sc*M exact; result |n| < 2^23)
//              m*xs        = m * xs                          (product < 2^24, exact)
//   Q6_K  sc0*d0 + sc1*d1  = fma(sc0, M + d0, -sc0*M) + fma(sc1, M + d1, -sc1*M)
// A zero n may come out as -0 where __int2float_rn gives +0; that never shows: a term only enters
// P_c = P_c + term, and P_c (from +0.0f, round-to-nearest) is never -0, so P + (+-0) = P.
// I2F runs at 1/8 of the FADD rate, hence the magic-number forms.
//
// Order. A CTA walks its blocks in increasing b (cp.async pipeline of kStages stages of kKB
// blocks), each lane adding block terms into its accumulators P (one per output element) with
// __fadd_rn. At the last block of chunk c the P values are closed into a binary-counter stack
// (levels 0-1 in registers, 2-4 in shared memory) that forms the pairwise tree over P_0..P_31
// exactly as the GEMV's butterfly does; empty trailing chunks close +0.0f. Small grids split the
// chunk range over a cluster of ks CTAs (ks = 2, 4: aligned subtrees), whose roots are combined
// through distributed shared memory in the same tree.
//
// Activations are first re-laid (act_tiles_kernel) in natural block order per row tile, with the
// per-block float data the epilogue needs; weights are read in place (weight_layout.h).
//
// Cost (SASS, sm_90). CTA = 128 outputs x 64 rows, 8 warps of 32 x 32 (2 x 4 m16n8 tiles, 32
// accumulators a lane); 224-242 registers, no spills; 180-213 KB shared memory, so 1 CTA (8
// warps) per SM. Per block and warp, Q4_0: 8 IMMA.16832 + 128 FP32 ops (4 an output: the
// magic-number FADD, scale FMUL, term FMUL, accumulate FADD) + ~45 others (decode, 3 ldmatrix,
// 6 LDS, addressing, loop) = ~181, plus ~30 for the stage (copies, scale table, barriers). The
// FP32 epilogue bounds it, not the tensor cores. K-quants: 8 FP32 ops an output, Q6_K 6 (two
// m16n8k16 MMAs). tools/mma_emu runs this file on the host against the canonical order.
#include <cooperative_groups.h>

#include <algorithm>
#include <cmath>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/matmul_order.h"
#include "backend/cuda/matmul_terms.cuh"
#include "backend/cuda/weight_layout.h"

namespace memra::cuda {
namespace {

namespace cg = cooperative_groups;

constexpr int kTJ = 128;                    // outputs per CTA tile
constexpr int kTR = 64;                     // activation rows per CTA tile
constexpr int kWarpsJ = 4;                  // warps along outputs (each 32 outputs x 32 rows)
constexpr int kThreads = 256;
constexpr int kMT = 2, kNT = 4;             // m16 tiles x n8 tiles per warp
constexpr int kElems = kMT * kNT * 4;       // accumulator elements per lane
constexpr int kKB = 8;                      // blocks per pipeline stage (stages start at multiples of 8)
constexpr int kStages = 2;
constexpr int kMagicBits = 0x4B400000;      // 1.5 * 2^23
constexpr float kMagic = 12582912.0f;

static_assert(kThreads == 32 * kWarpsJ * (kTR / 32) && kThreads % kTJ == 0, "tile shape");

// Activation data per (block, row) besides the codes: the scale d and the type's second float.
enum AuxMode : int { kAuxNone = 0, kAuxQ4_0 = 1, kAuxSum = 2 };

template <GgmlType T>
struct Cfg {
  static constexpr bool kQ8 = T == GgmlType::Q8_0;
  static constexpr bool kKq = T == GgmlType::Q4_K || T == GgmlType::Q5_K;
  static constexpr bool kQ6 = T == GgmlType::Q6_K;
  static constexpr int kHalves = kQ8 ? 2 : 1;  // 16-byte pieces of a block's codes
  static constexpr int kNF = (kKq || kQ6) ? 5 : 1;  // floats per (block, output) in the scale table
  // One pipeline stage (byte offsets). Weight codes [kb][half][j][16]; per-(block, output) small
  // data: the 4-byte word holding the f16 scale (Q4_0, Q8_0), qh (Q5_K 4 bytes, Q6_K 8 bytes,
  // stored at pair index jp so rows g and g+8 are adjacent); Q6_K scale-pair words; per-output
  // data of the stage's super-block (K-quant meta 16 bytes, Q6_K word holding d); activation
  // codes [kb][half][r][16]; activation aux [kb][r] float2.
  static constexpr int kSm1Each = kQ6 ? 8 : (T == GgmlType::Q4_K ? 0 : 4);
  static constexpr int kWq = 0;
  static constexpr int kSm1 = kWq + kKB * kHalves * kTJ * 16;
  static constexpr int kSm2 = kSm1 + kKB * kTJ * kSm1Each;
  static constexpr int kMeta = kSm2 + (kQ6 ? kKB * kTJ * 4 : 0);
  static constexpr int kAq = kMeta + (kKq ? kTJ * 16 : kQ6 ? kTJ * 4 : 0);
  static constexpr int kAx = kAq + kKB * 2 * kTR * 16;
  static constexpr int kStageBytes = kAx + kKB * kTR * 8;
  // The CTA: stages, the decoded scale table [kb][field][jp], the slots of the blocks of the last
  // kStages + 1 stages (a ring), stack levels 2-4.
  static constexpr int kTab = kStages * kStageBytes;
  static constexpr int kSlots = kTab + kKB * kNF * kTJ * 4;
  static constexpr int kLev = kSlots + ((kStages + 1) * kKB * 4 + 15) / 16 * 16;
  static constexpr int kSmem = kLev + 3 * kElems * kThreads * 4;
  static_assert(kStageBytes % 16 == 0 && kTab % 16 == 0 && kLev % 16 == 0, "16-byte sections");
  static_assert(kStages * kStageBytes >= kElems * kThreads * 4, "cluster partials reuse the stages");
};

struct MmaArgs {
  const uint8_t* w;     // matrix base (device layout)
  int64_t row_stride;
  uint32_t off_b, off_c;
  int nb, ns, cs;       // blocks, slots, blocks per chunk
  int64_t n_out, rows;
  int64_t R;            // rows of the re-laid activations (rows rounded up to kTR)
  const int4* aq;       // [nb][R][2] 16-byte halves of each block's codes
  const float2* aux;    // [nb][R] {d, type's second float}
  float* out;
  int64_t out_stride;
  int accumulate;
  int ks;               // CTAs per cluster splitting the chunk range
};

// ---- small device helpers ----

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_addr(dst)), "l"(src));
}

// L1-allocating copies for the small weight sections (their 32-byte sectors hold other slots'
// data, which later stages may find in L1).
template <int N>
__device__ __forceinline__ void cp_async_ca(void* dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(smem_addr(dst)), "l"(src), "n"(N));
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void ldsm_x4(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}

// D = A(16x32 s8) * B(32x8 s8) + M_bits.
__device__ __forceinline__ void mma_k32(int (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%10,%11,%12,%13};\n"
      : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(kMagicBits), "r"(kMagicBits),
        "r"(kMagicBits), "r"(kMagicBits));
}

// D = A(16x16 s8) * B(16x8 s8) + M_bits.
__device__ __forceinline__ void mma_k16(int (&d)[4], uint32_t a0, uint32_t a1, uint32_t b0) {
  asm("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%7,%8,%9,%10};\n"
      : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
      : "r"(a0), "r"(a1), "r"(b0), "r"(kMagicBits), "r"(kMagicBits), "r"(kMagicBits), "r"(kMagicBits));
}

// Position of output j (0..kTJ-1) in tables laid out so that rows g and g+8 of a 16-row tile sit
// side by side (one 8-byte load gives a lane both of its rows).
__device__ __forceinline__ int pair_index(int j) { return (j & ~15) | ((j & 7) << 1) | ((j >> 3) & 1); }

// Bits 0-3 of x moved to bit 4 of bytes 0-3 (Q5_K fifth bits): the partial products of the
// multiply land on disjoint bits, so no carries.
__device__ __forceinline__ uint32_t fifth_bits(uint32_t x) { return ((x & 0xFu) * 0x02040810u) & 0x10101010u; }

// Q6_K codes minus 32 per byte from four low nibbles (0..15 per byte) and their two high bits
// (bits 0-1 of each byte): (q + 96) ^ 0x80 is q - 32 in two's complement, with no carry between
// bytes since q + 96 <= 159.
__device__ __forceinline__ uint32_t q6_codes(uint32_t nib, uint32_t hi2) {
  return ((nib | 0x60606060u) + (hi2 << 4)) ^ 0x80808080u;
}

// ---- the kernel ----

template <GgmlType T>
__global__ void __launch_bounds__(kThreads, 1) matmul_mma_kernel(const MmaArgs a) {
  using C = Cfg<T>;
  extern __shared__ __align__(128) uint8_t smem[];
  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32;
  const int g = lane / 4, t = lane % 4;
  const int wj0 = (warp % kWarpsJ) * 32, wr0 = (warp / kWarpsJ) * 32;
  const int ks = a.ks, rank = static_cast<int>(blockIdx.x) % ks;
  const int64_t j0 = static_cast<int64_t>(blockIdx.x / ks) * kTJ, r0 = static_cast<int64_t>(blockIdx.y) * kTR;
  const int nb = a.nb, cs = a.cs, nc = 32 / ks, c_lo = rank * nc;
  const int b_lo = min(nb, c_lo * cs), b_hi = min(nb, (c_lo + nc) * cs);
  const int n_stages = (b_hi - b_lo + kKB - 1) / kKB;
  const bool active = j0 + wj0 < a.n_out && r0 + wr0 < a.rows;  // warp-uniform
  float* tab = reinterpret_cast<float*>(smem + C::kTab);
  int* slots = reinterpret_cast<int*>(smem + C::kSlots);
  float* lev = reinterpret_cast<float*>(smem + C::kLev) + tid;

  // Loads. Thread tid copies, for output jl and the blocks kb = kb0 + 2i of each stage, the weight
  // pieces (rows past n_out read the last row; their results are never stored) and the
  // activation halves (row ra, half ha) of those blocks, and one 16-byte piece of activation aux.
  constexpr int kPer = kKB * kTJ / kThreads;  // blocks of a stage per thread
  const int jl = tid % kTJ, kb0 = tid / kTJ;
  const uint8_t* wrow = a.w + (j0 + jl < a.n_out ? j0 + jl : a.n_out - 1) * a.row_stride;
  const int ra = (tid % kTJ) / 2, ha = tid % 2;
  static_assert(kTJ == 2 * kTR, "activation halves per thread match the weight blocks");
  const int4* aq_src = a.aq + ((b_lo + kb0) * a.R + r0 + ra) * 2 + ha;  // advanced a stage at a time
  const int kbx = tid / (kTR / 2), rx = 2 * (tid % (kTR / 2));
  static_assert(kKB * kTR / 2 == kThreads, "one aux piece per thread");
  const float2* ax_src = a.aux + (b_lo + kbx) * a.R + r0 + rx;
  // Slots of stage st's blocks: slots[(st % (kStages + 1)) * kKB + kb], written by threads kb < kKB
  // one stage ahead of the copies that use them (so a barrier always lies between).
  auto put_slots = [&](int st) {
    if (tid < kKB) {
      const int b = b_lo + st * kKB + tid, c = b / cs;
      slots[(st % (kStages + 1)) * kKB + tid] = (b - c * cs) * 32 + bitrev5(c);
    }
  };
  auto issue = [&](int st) {
    uint8_t* buf = smem + (st % kStages) * C::kStageBytes;
    const int bs0 = b_lo + st * kKB;
    const int* sl = slots + (st % (kStages + 1)) * kKB;
    put_slots(st + 1);
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int kb = kb0 + 2 * i;
      if (bs0 + kb >= b_hi) break;
      const int64_t slot = sl[kb];
#pragma unroll
      for (int h = 0; h < C::kHalves; ++h)
        cp_async16(buf + C::kWq + ((kb * C::kHalves + h) * kTJ + jl) * 16, wrow + (C::kHalves * 16) * slot + 16 * h);
      if constexpr (T == GgmlType::Q4_0 || T == GgmlType::Q8_0) {
        cp_async_ca<4>(buf + C::kSm1 + (kb * kTJ + jl) * 4, wrow + a.off_b + 4 * (slot >> 1));
      } else if constexpr (T == GgmlType::Q5_K) {
        cp_async_ca<4>(buf + C::kSm1 + (kb * kTJ + pair_index(jl)) * 4, wrow + a.off_b + 4 * slot);
      } else if constexpr (T == GgmlType::Q6_K) {
        cp_async_ca<8>(buf + C::kSm1 + (kb * kTJ + pair_index(jl)) * 8, wrow + a.off_b + 8 * slot);
        cp_async_ca<4>(buf + C::kSm2 + (kb * kTJ + jl) * 4, wrow + a.off_c + 4 * (slot >> 1));
      }
      cp_async16(buf + C::kAq + ((kb * 2 + ha) * kTR + ra) * 16, aq_src + 2 * i * (2 * a.R));
    }
    if (bs0 + kbx < b_hi) cp_async16(buf + C::kAx + (kbx * kTR + rx) * 8, ax_src);
    if (tid < kTJ && bs0 < b_hi) {  // the stage's super-block (stages start at multiples of 8)
      const int sb = bs0 / 8;
      if constexpr (C::kKq)
        cp_async_ca<16>(buf + C::kMeta + jl * 16, wrow + (T == GgmlType::Q5_K ? a.off_c : a.off_b) + 16 * sb);
      else if constexpr (C::kQ6)
        cp_async_ca<4>(buf + C::kMeta + jl * 4, wrow + a.off_c + 2 * static_cast<int64_t>(a.ns) + 4 * (sb >> 1));
    }
    aq_src += kKB * 2 * a.R;
    ax_src += kKB * a.R;
  };

  // Scale table of stage st: the per-(block, output) floats of the epilogue, decoded once per CTA.
  auto prep = [&](int st) {
    const uint8_t* buf = smem + (st % kStages) * C::kStageBytes;
    const int bs0 = b_lo + st * kKB;
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int kb = kb0 + 2 * i, b = bs0 + kb;
      if (b >= b_hi) break;
      float* f = tab + kb * C::kNF * kTJ + pair_index(jl);
      const int p = slots[(st % (kStages + 1)) * kKB + kb] & 1;
      if constexpr (T == GgmlType::Q4_0 || T == GgmlType::Q8_0) {
        const uint32_t w = *reinterpret_cast<const uint32_t*>(buf + C::kSm1 + (kb * kTJ + jl) * 4);
        f[0] = half_bits(w >> (16 * p));
      } else if constexpr (C::kKq) {
        const uint8_t* meta = buf + C::kMeta + jl * 16;
        const uint32_t dd = *reinterpret_cast<const uint32_t*>(meta);
        int sc, m;
        k_scale_min(b % 8, meta + 4, sc, m);
        const float scf = static_cast<float>(sc);
        f[0] = half_bits(dd);
        f[kTJ] = scf;
        f[2 * kTJ] = __fmul_rn(-scf, kMagic);
        f[3 * kTJ] = half_bits(dd >> 16);
        f[4 * kTJ] = static_cast<float>(m);
      } else {  // Q6_K
        const uint32_t sw = *reinterpret_cast<const uint32_t*>(buf + C::kSm2 + (kb * kTJ + jl) * 4) >> (16 * p);
        const uint32_t dw = *reinterpret_cast<const uint32_t*>(buf + C::kMeta + jl * 4);
        const float s0 = static_cast<float>(static_cast<int8_t>(sw & 0xFF));
        const float s1 = static_cast<float>(static_cast<int8_t>((sw >> 8) & 0xFF));
        f[0] = half_bits(dw >> (16 * ((b / 8) & 1)));
        f[kTJ] = s0;
        f[2 * kTJ] = __fmul_rn(-s0, kMagic);
        f[3 * kTJ] = s1;
        f[4 * kTJ] = __fmul_rn(-s1, kMagic);
      }
    }
  };

  // Accumulators: element e = (mt * kNT + nt) * 4 + i is output wj0 + 16 mt + g + 8 (i >> 1),
  // row wr0 + 8 nt + 2 t + (i & 1) of the tile (the m16n8 C fragment).
  float P[kElems], L0[kElems], L1[kElems];
#pragma unroll
  for (int e = 0; e < kElems; ++e) P[e] = L0[e] = L1[e] = 0.0f;

  // One block's terms added into P. Per-lane shared-memory offsets are fixed; a block adds the
  // stage buffer's and the block's.
  const uint32_t s_base = smem_addr(smem);
  const int ldm_m = lane / 8;  // ldmatrix matrix fed by this lane's row address
  const int wq_lane = (wj0 + lane) * 16;
  const int aq_lane = ((ldm_m & 1) * kTR + wr0 + (ldm_m >> 1) * 8 + lane % 8) * 16;
  const int ax_lane = (wr0 + 2 * t) * 8;
  const int tab_lane = wj0 + 2 * g;  // pair index of rows g, g+8 of m-tile 0
  auto compute_block = [&](int buf_off, int kb) {
    uint32_t wr[C::kHalves][4];
#pragma unroll
    for (int h = 0; h < C::kHalves; ++h)
      ldsm_x4(s_base + buf_off + C::kWq + (kb * C::kHalves + h) * kTJ * 16 + wq_lane, wr[h][0], wr[h][1], wr[h][2],
              wr[h][3]);
    uint32_t bq[kNT][2];  // n-tiles 2p, 2p+1: matrices (half 0, 1) x (n-tile 2p, 2p+1)
#pragma unroll
    for (int p = 0; p < kNT / 2; ++p)
      ldsm_x4(s_base + buf_off + C::kAq + kb * 2 * kTR * 16 + p * 16 * 16 + aq_lane, bq[2 * p][0], bq[2 * p][1],
              bq[2 * p + 1][0], bq[2 * p + 1][1]);
    const uint8_t* bufp = smem + buf_off;
    float4 ax[kNT];  // {d, aux} of rows 2t, 2t+1
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt)
      ax[nt] = *reinterpret_cast<const float4*>(bufp + C::kAx + kb * kTR * 8 + nt * 64 + ax_lane);
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
      const int jp = tab_lane + 16 * mt;
      float2 F[C::kNF];
#pragma unroll
      for (int f = 0; f < C::kNF; ++f) F[f] = *reinterpret_cast<const float2*>(tab + (kb * C::kNF + f) * kTJ + jp);
      const uint32_t lo = wr[0][2 * mt], hi = wr[0][2 * mt + 1];  // word t of rows g, g+8
      uint32_t A[4];
      uint32_t A6[2][2];
      if constexpr (C::kQ8) {
        A[0] = lo;
        A[1] = hi;
        A[2] = wr[C::kHalves - 1][2 * mt];
        A[3] = wr[C::kHalves - 1][2 * mt + 1];
      } else if constexpr (C::kQ6) {
        const uint4 qh = *reinterpret_cast<const uint4*>(bufp + C::kSm1 + (kb * kTJ + jp) * 8);
        A6[0][0] = q6_codes(lo & 0x0F0F0F0Fu, (qh.x >> (2 * t)) & 0x03030303u);
        A6[0][1] = q6_codes(hi & 0x0F0F0F0Fu, (qh.z >> (2 * t)) & 0x03030303u);
        A6[1][0] = q6_codes((lo >> 4) & 0x0F0F0F0Fu, (qh.y >> (2 * t)) & 0x03030303u);
        A6[1][1] = q6_codes((hi >> 4) & 0x0F0F0F0Fu, (qh.w >> (2 * t)) & 0x03030303u);
      } else {
        A[0] = lo & 0x0F0F0F0Fu;
        A[1] = hi & 0x0F0F0F0Fu;
        A[2] = (lo >> 4) & 0x0F0F0F0Fu;
        A[3] = (hi >> 4) & 0x0F0F0F0Fu;
        if constexpr (T == GgmlType::Q5_K) {
          const uint2 qh = *reinterpret_cast<const uint2*>(bufp + C::kSm1 + (kb * kTJ + jp) * 4);
          A[0] |= fifth_bits(qh.x >> (4 * t));
          A[1] |= fifth_bits(qh.y >> (4 * t));
          A[2] |= fifth_bits(qh.x >> (16 + 4 * t));
          A[3] |= fifth_bits(qh.y >> (16 + 4 * t));
        }
      }
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
        int D[4], D1[4];
        if constexpr (C::kQ6) {
          mma_k16(D, A6[0][0], A6[0][1], bq[nt][0]);
          mma_k16(D1, A6[1][0], A6[1][1], bq[nt][1]);
        } else {
          mma_k32(D, A, bq[nt][0], bq[nt][1]);
        }
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const bool jr = i >= 2, rr = i & 1;
          const float dx = rr ? ax[nt].z : ax[nt].x, xe = rr ? ax[nt].w : ax[nt].y;
          const float f0 = jr ? F[0].y : F[0].x;
          const float df = __int_as_float(D[i]);
          float term;
          if constexpr (T == GgmlType::Q4_0) {
            term = __fmul_rn(__fmul_rn(f0, dx), __fadd_rn(df, xe));
          } else if constexpr (C::kQ8) {
            term = __fmul_rn(__fmul_rn(f0, dx), __fadd_rn(df, -kMagic));
          } else if constexpr (C::kKq) {
            const float scf = jr ? F[1].y : F[1].x, kf = jr ? F[2].y : F[2].x;
            const float dmin = jr ? F[3].y : F[3].x, mf = jr ? F[4].y : F[4].x;
            term = __fsub_rn(__fmul_rn(__fmul_rn(f0, dx), __fmaf_rn(scf, df, kf)),
                             __fmul_rn(__fmul_rn(dmin, dx), __fmul_rn(mf, xe)));
          } else {  // Q6_K
            const float s0 = jr ? F[1].y : F[1].x, k0 = jr ? F[2].y : F[2].x;
            const float s1 = jr ? F[3].y : F[3].x, k1 = jr ? F[4].y : F[4].x;
            const float n = __fadd_rn(__fmaf_rn(s0, df, k0), __fmaf_rn(s1, __int_as_float(D1[i]), k1));
            term = __fmul_rn(__fmul_rn(f0, dx), n);
          }
          float& acc = P[(mt * kNT + nt) * 4 + i];
          acc = __fadd_rn(acc, term);
        }
      }
    }
  };

  // Chunk cr (relative to c_lo) is complete: fold P into the stack. Level k holds the sum of the
  // 2^k chunks left of the current subtree; the root (the whole range) stays in P.
  auto close = [&](int cr) {
    if (!(cr & 1)) {
#pragma unroll
      for (int e = 0; e < kElems; ++e) {
        L0[e] = P[e];
        P[e] = 0.0f;
      }
      return;
    }
#pragma unroll
    for (int e = 0; e < kElems; ++e) P[e] = __fadd_rn(L0[e], P[e]);
    if (!(cr & 2)) {
      if (nc == 2) return;
#pragma unroll
      for (int e = 0; e < kElems; ++e) {
        L1[e] = P[e];
        P[e] = 0.0f;
      }
      return;
    }
#pragma unroll
    for (int e = 0; e < kElems; ++e) P[e] = __fadd_rn(L1[e], P[e]);
#pragma unroll 1
    for (int k = 2; k < 5; ++k) {
      float* Lk = lev + (k - 2) * kElems * kThreads;
      if (!(cr & (1 << k))) {
        if (nc == (1 << k)) return;
#pragma unroll
        for (int e = 0; e < kElems; ++e) {
          Lk[e * kThreads] = P[e];
          P[e] = 0.0f;
        }
        return;
      }
#pragma unroll
      for (int e = 0; e < kElems; ++e) P[e] = __fadd_rn(Lk[e * kThreads], P[e]);
    }
  };

  put_slots(0);
  __syncthreads();
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < n_stages) issue(s);
    cp_async_commit();
  }
  // Chunk by chunk (empty trailing chunks enter the tree as +0.0f); a new stage begins every
  // kKB blocks: its copies have landed (wait + barrier, which also frees the oldest buffer for
  // the next issue and the table for prep), then the table is decoded (barrier).
  int b = b_lo, st = 0, kb = 0, buf_off = 0;
#pragma unroll 1
  for (int c = c_lo; c < c_lo + nc; ++c) {
    const int b_end = min(nb, (c + 1) * cs);
#pragma unroll 1
    for (; b < b_end; ++b) {
      if (kb == 0) {
        cp_async_wait<kStages - 2>();
        __syncthreads();
        if (st + kStages - 1 < n_stages) issue(st + kStages - 1);
        cp_async_commit();
        prep(st);
        __syncthreads();
        buf_off = (st % kStages) * C::kStageBytes;
      }
      if (active) compute_block(buf_off, kb);
      if (++kb == kKB) {
        kb = 0;
        ++st;
      }
    }
    if (active) close(c - c_lo);
  }
  cp_async_wait<0>();
  __syncthreads();

  auto store = [&](int e, float v) {
    const int mt = e / (4 * kNT), nt = (e / 4) % kNT, i = e % 4;
    const int64_t j = j0 + wj0 + 16 * mt + g + 8 * (i >> 1), r = r0 + wr0 + 8 * nt + 2 * t + (i & 1);
    if (j < a.n_out && r < a.rows) {
      float* o = a.out + r * a.out_stride + j;
      *o = a.accumulate ? __fadd_rn(*o, v) : v;
    }
  };
  if (ks == 1) {
    if (active)
#pragma unroll
      for (int e = 0; e < kElems; ++e) store(e, P[e]);
    return;
  }
  // Cluster: rank q holds the root of chunks [q nc, (q+1) nc); element e is finished by rank
  // e % ks, which combines the ks roots pairwise (the top levels of the same tree).
  float* part = reinterpret_cast<float*>(smem) + tid;
#pragma unroll
  for (int e = 0; e < kElems; ++e) part[e * kThreads] = P[e];
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();
  if (active) {
#pragma unroll
    for (int e = 0; e < kElems; ++e) {
      if (e % ks != rank) continue;
      float v[8] = {};
#pragma unroll
      for (int q = 0; q < 8; ++q)
        if (q < ks) v[q] = *cluster.map_shared_rank(part + e * kThreads, q);
#pragma unroll
      for (int w = 1; w < 8; w *= 2)
#pragma unroll
        for (int q = 0; q + w < 8; q += 2 * w)
          if (q + w < ks) v[q] = __fadd_rn(v[q], v[q + w]);
      store(e, v[0]);
    }
  }
  cluster.sync();  // keep this CTA's shared memory alive until every rank has read it
}

// Activations re-laid for the tiles: block b of row r at b * R + r (natural block order, rows
// padded to R with zeros), with {d, aux}: aux = -(M + 8 s) (Q4_0), s as a float (K-quants).
__global__ void act_tiles_kernel(const int8_t* __restrict__ q, const float* __restrict__ d,
                                 const int32_t* __restrict__ s, int64_t rows, int nb, int64_t ns, int64_t R, int mode,
                                 int4* __restrict__ tq, float2* __restrict__ aux) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<int64_t>(nb) * R * 2) return;
  const int h = static_cast<int>(i & 1);
  const int64_t br = i >> 1, b = br / R, r = br % R;
  int4 v = make_int4(0, 0, 0, 0);
  float dv = 0.0f;
  int sv = 0;
  if (r < rows) {
    const int64_t k = r * ns + slot_of_block(b, nb);
    v = reinterpret_cast<const int4*>(q + k * 32)[h];
    if (h == 0) {
      dv = d[k];
      sv = s[k];
    }
  }
  tq[i] = v;
  if (h == 0) {
    float e = 0.0f;  // both exact: |s| <= 32 * 127
    if (mode == kAuxQ4_0) e = -__int2float_rn(12582912 + 8 * sv);
    else if (mode == kAuxSum) e = __int2float_rn(sv);
    aux[br] = make_float2(dv, e);
  }
}

int sm_count() {
  static const int n = [] {
    int dev = 0, v = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev));
    return v;
  }();
  return n;
}

// Cluster size: the split of the chunk range that finishes the grid soonest (waves of CTAs,
// each doing 1/ks of the blocks), with a small charge for the combine; only for rows of at
// least 32 blocks (every CTA gets blocks). ks <= 4 keeps each CTA's first block c_lo * cs a
// multiple of 8, so stages (kKB = 8) never straddle a K-quant super-block.
int pick_split(int64_t tiles, int nb) {
  const int64_t sms = sm_count();
  int best = 1;
  double best_cost = static_cast<double>((tiles + sms - 1) / sms);
  if (nb < 32) return best;
  for (int ks : {2, 4}) {
    const double cost = static_cast<double>((tiles * ks + sms - 1) / sms) / ks + 0.1 * std::log2(ks);
    if (cost < best_cost) {
      best = ks;
      best_cost = cost;
    }
  }
  return best;
}

template <GgmlType T>
void launch(const MmaArgs& args, dim3 grid, cudaStream_t stream) {
  using C = Cfg<T>;
  static const bool configured = [] {
    CUDA_CHECK(cudaFuncSetAttribute(matmul_mma_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmem));
    return true;
  }();
  (void)configured;
  if (args.ks == 1) {
    matmul_mma_kernel<T><<<grid, kThreads, C::kSmem, stream>>>(args);
  } else {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = dim3(kThreads);
    cfg.dynamicSmemBytes = C::kSmem;
    cfg.stream = stream;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = static_cast<unsigned>(args.ks);
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    CUDA_CHECK(cudaLaunchKernelEx(&cfg, matmul_mma_kernel<T>, args));
  }
  CUDA_LAUNCH_CHECK();
}

// Stream-ordered scratch for the re-laid activations; the device's default pool keeps its memory
// between calls (release threshold raised once) so steady-state calls do not map pages.
void* scratch_alloc(size_t bytes, cudaStream_t stream) {
  static const bool pool_ready = [] {
    int dev = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    cudaMemPool_t pool;
    CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, dev));
    uint64_t keep = UINT64_MAX;
    CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
    return true;
  }();
  (void)pool_ready;
  void* p = nullptr;
  CUDA_CHECK(cudaMallocAsync(&p, bytes, stream));
  return p;
}

}  // namespace

void matmul_q8_mma(const DevWeight& w, int64_t mat, const Q8Act& x, float* out, int64_t out_stride, bool accumulate,
                   cudaStream_t stream) {
  MEMRA_ASSERT(x.cols == w.n_in && x.slots == w.ns && mat >= 0 && mat < w.n_mat && out_stride >= w.n_out);
  if (x.rows == 0 || w.n_out == 0) return;
  const bool kquant = w.type == GgmlType::Q4_K || w.type == GgmlType::Q5_K || w.type == GgmlType::Q6_K;
  MEMRA_ASSERT(!kquant || w.nb % 8 == 0, "K-quant rows are whole super-blocks");
  MEMRA_ASSERT(w.nb <= (int64_t{1} << 24) && w.row_stride % 16 == 0);
  const int nb = static_cast<int>(w.nb);
  const int64_t R = (x.rows + kTR - 1) / kTR * kTR;
  const int mode = w.type == GgmlType::Q4_0 ? kAuxQ4_0
                   : (w.type == GgmlType::Q4_K || w.type == GgmlType::Q5_K) ? kAuxSum
                                                                              : kAuxNone;
  const size_t q_bytes = static_cast<size_t>(nb) * static_cast<size_t>(R) * 32;
  uint8_t* scratch = static_cast<uint8_t*>(scratch_alloc(q_bytes + static_cast<size_t>(nb) * R * 8, stream));
  MmaArgs args;
  args.w = w.data + w.mat_stride * static_cast<size_t>(mat);
  args.row_stride = static_cast<int64_t>(w.row_stride);
  args.off_b = w.off_b;
  args.off_c = w.off_c;
  args.nb = nb;
  args.ns = static_cast<int>(w.ns);
  args.cs = static_cast<int>(chunk_blocks(w.nb));
  args.n_out = w.n_out;
  args.rows = x.rows;
  args.R = R;
  args.aq = reinterpret_cast<const int4*>(scratch);
  args.aux = reinterpret_cast<const float2*>(scratch + q_bytes);
  args.out = out;
  args.out_stride = out_stride;
  args.accumulate = accumulate ? 1 : 0;

  const int64_t n_pieces = static_cast<int64_t>(nb) * R * 2;
  act_tiles_kernel<<<div_up(n_pieces, 256), 256, 0, stream>>>(x.q, x.d, x.s, x.rows, nb, x.slots, R, mode,
                                                                reinterpret_cast<int4*>(scratch),
                                                                reinterpret_cast<float2*>(scratch + q_bytes));
  CUDA_LAUNCH_CHECK();

  const int64_t tiles_j = (w.n_out + kTJ - 1) / kTJ, tiles_r = R / kTR;
  MEMRA_ASSERT(tiles_r <= 65535, "matmul_q8_mma: too many rows for one launch");
  args.ks = pick_split(tiles_j * tiles_r, nb);
  const dim3 grid(static_cast<unsigned>(tiles_j * args.ks), static_cast<unsigned>(tiles_r));
  switch (w.type) {
    case GgmlType::Q4_0: launch<GgmlType::Q4_0>(args, grid, stream); break;
    case GgmlType::Q8_0: launch<GgmlType::Q8_0>(args, grid, stream); break;
    case GgmlType::Q4_K: launch<GgmlType::Q4_K>(args, grid, stream); break;
    case GgmlType::Q5_K: launch<GgmlType::Q5_K>(args, grid, stream); break;
    case GgmlType::Q6_K: launch<GgmlType::Q6_K>(args, grid, stream); break;
    default: MEMRA_ASSERT(false, "matmul_q8_mma: not a quantized device type");
  }
  CUDA_CHECK(cudaFreeAsync(scratch, stream));
}

}  // namespace memra::cuda
