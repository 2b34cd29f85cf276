// The canonical computation of every CUDA matmul, for every row count (1 decode row or 512
// prompt rows, alone or batched): one kernel family (k_matmul.cu) produces it, so a row's result
// never depends on how many other rows share the launch, nor on which tile shape ran it.
//
// Activations (act_f16, k_act_f16.cu). Row r of x (n_in floats) is scaled by a power of two and
// rounded to f16:
//   e_r   = ilogb(max_k |x_rk|) - 14, clamped to [-100, 113]; 0 for an all-zero or non-finite max
//   x'_rk = f16_rn(x_rk * 2^-e_r)            (|x'| < 2^15: no f16 overflow, full f16 precision)
//   s_rb  = the float sum of x'_r,32b .. x'_r,32b+31 in common.cuh warp_sum's butterfly, element
//           32b + l in lane l (K-quants), kept as two f16 parts of s_rb 2^-5: hi = f16_rn(s_rb 2^-5),
//           lo = f16_rn(s_rb 2^-5 - hi)
// e_r depends on row r alone, so the scaling is per sequence and batch-invariant.
//
// Weights. Row j's blocks of 32 elements give integer codes c (or f16 values) and float scales:
//   Q4_0  c = q - 8            D_b = dot(c, x')          acc = fma(d_b, D_b, acc)
//   Q8_0  c = q                D_b = dot(c, x')          acc = fma(d_b, D_b, acc)
//   Q4_K  c = q (5-bit: Q5_K)  D_b = dot(c, x')          acc = fma(d*sc_b, D_b, acc)
//         after the k-tile's 8 blocks, its min term:  M = dot(m, (hi, lo))   acc = fma(-32 dmin, M, acc)
//   Q6_K  c = q - 32           D_b0, D_b1 = dot over each 16-element half
//                                                        acc = fma(d*sc_b0, D_b0, acc)
//                                                        acc = fma(d*sc_b1, D_b1, acc)
//   F16   c = w                D_b = dot(c, x') + dot(c, x'lo)         acc = acc + D_b
//   BF16  c = f16(w * 2^-p_b)  D_b = dot(c, x') + dot(c, x'lo)         acc = fma(2^p_b, D_b, acc)
//   F32   c = hi + lo, hi = f16(w * 2^-p_b), lo = f16(w * 2^-p_b - hi):
//                              D_b = dot(hi, x') + dot(hi, x'lo) + dot(lo, x')
//                                                                     acc = fma(2^p_b, D_b, acc)
// where x'lo = f16_rn(x * 2^-e_r - x'): the float types see ~22 bits of each activation (their
// weights carry more than the 11 bits x' keeps; quantized codes do not, and x' alone serves them).
// Q3_K runs as Q6_K (c = its code -4..3, d*sc_b its signed scale), Q5_0 as Q8_0 (c = q - 16) and
// IQ4_NL as Q8_0 (c = its table value): the same values (quant.h lossless_wider_type), the order of
// the type they run as. IQ4_XS runs as Q8_0 too, its sub-block scales d * (scale - 32) rounded to
// f16 (quant.h rounded_wider_type: 2^-11 relative a weight on top of the activations' rounding).
// (d*sc is an exact float product: 11-bit times 6- or 7-bit integers.) The K-quants' min term is
// one tensor-core product a k-tile and row: its 16 K slots hold blocks t and t + 4 (t = 0..3) at
// 2t, 2t + 1 with the hi parts and at 2t + 8, 2t + 9 with the lo parts, A the row's mins m_b (6-bit
// integers, exact in f16) in both halves, so M = sum_b m_b (hi_b + lo_b) = sum_b m_b s_rb 2^-5 up
// to the ~2^-22 the parts leave out and the tensor core's sum; -32 dmin is exact. p_b is the
// block's exponent chosen at upload (the same rule as e_r over the block's 32 weights of one row).
// dot() is the tensor core's: mma.sync m16n8k16 with f16 inputs and float accumulation, over
// elements 0-15 of the block from C = +0, then elements 16-31 with C = that result (Q6_K: each
// half from +0); a sum of dots continues the same chain in the order written. Its products are exact and its sum is a fixed function of the 16 product pairs
// and C: the same instruction on the same operands gives the same bits in any fragment position.
//
// Order. The row's k-tiles (8 blocks, 256 columns, zero-padded) are cut into S segments, S =
// k_segments(n_kt) (8 from 32 k-tiles on, 2 from 4, else 1): segment s holds k-tiles
// [floor(s n_kt / S), floor((s+1) n_kt / S)). Within a segment acc starts at +0 and takes its
// blocks in increasing b, one after another; padding blocks (zero codes, zero activations) add
// exact zeros. The segments meet in a fixed pairwise tree: P0 + P1 (S = 2),
// ((P0 + P1) + (P2 + P3)) + ((P4 + P5) + (P6 + P7)) (S = 8).
// Then result = sum * 2^e_r (exact), and the op's epilogue: out = result, out = out + result
// (accumulate), or silu(result_gate) * result_up (SwiGLU). The segments are what lets a single
// decode row spread over the GPU (k_matmul.cu runs them as a cluster of blocks); they depend on
// n_in only.
//
// The CPU backend computes the same products in float64 from unrounded activations: the
// difference is the f16 rounding of x' (relative 2^-11 per element; ~2^-22 for the float types)
// and float accumulation, so |gpu - cpu| <= 2^-10 * sum_k |w_jk x_rk| is the bound the op tests
// hold for every type (tests/gpu_ops_test.cpp), 2^-16 for the float types (their products also see
// the activations' low parts, ~2^-22 each: what is left is float accumulation).
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define MEMRA_ORDER_HD __host__ __device__
#else
#define MEMRA_ORDER_HD
#endif

namespace memra::cuda {

// A k-tile is 8 blocks of 32 elements: the unit of the weight layout, of the pipeline, and one
// K-quant super-block.
constexpr int kTileK = 256;
constexpr int kTileBlocks = 8;
// A row group is the 16 weight rows of one tensor-core m-tile.
constexpr int kGroupRows = 16;

MEMRA_ORDER_HD constexpr int64_t k_tiles(int64_t n_in) { return (n_in + kTileK - 1) / kTileK; }
MEMRA_ORDER_HD constexpr int64_t row_groups(int64_t n_out) { return (n_out + kGroupRows - 1) / kGroupRows; }
// Two segments below 32 k-tiles (was four from 8: H200, 9B Q4_0, 2026-12-02, the 4096-column
// matrices at 2 instead of 4 segments gave tg B = 16 3,471 -> 3,870 tok/s and pp512 5,342 -> 6,202;
// 8 segments there, or 16 from 32 k-tiles on, were slower at every B, and 4 from 32 on slower at B = 1).
MEMRA_ORDER_HD constexpr int k_segments(int64_t n_kt) { return n_kt >= 32 ? 8 : n_kt >= 4 ? 2 : 1; }

// The power-of-two exponent of a row (or weight block) whose largest magnitude is `amax`.
MEMRA_ORDER_HD inline int scale_exponent(float amax) {
  if (!(amax > 0.0f) || !(amax <= 3.4028234663852886e38f)) return 0;  // zero, NaN or infinite
  // ilogb without libm: the float's biased exponent (subnormals have ilogb < -126, so clamp).
  union {
    float f;
    uint32_t u;
  } v{amax};
  const int biased = static_cast<int>((v.u >> 23) & 0xff);
  const int e = (biased == 0 ? -127 : biased - 127) - 14;
  return e < -100 ? -100 : (e > 113 ? 113 : e);
}

// 2^e as a float, for e in [-126, 127].
MEMRA_ORDER_HD inline float exp2_int(int e) {
  union {
    uint32_t u;
    float f;
  } v{static_cast<uint32_t>(e + 127) << 23};
  return v.f;
}

}  // namespace memra::cuda
