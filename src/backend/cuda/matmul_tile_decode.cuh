// Per-type decoding of one lane's share of a weight tile (weight_layout.h) into the A fragments
// of the two m16n8k16 products of a 32-element block, and the block's epilogue (matmul_order.h).
// Both kernels copy a weight tile verbatim into shared memory (weight_layout.h's layout): the
// lane's code pieces at wl + i * 512 (piece i, wl = tile + lane * 16), its rows' section at rp.
#pragma once

#include <cstdint>
#include <utility>

#include "backend/cuda/common.cuh"
#include "backend/cuda/mma_f16.cuh"
#include "backend/cuda/weight_layout.h"

namespace memra::cuda {

template <GgmlType T>
struct TileSpec {
  static constexpr TileFormat f = tile_format(T);
  // Bytes of one row g's share of the tile's per-row section (at row_data_off + g * kRowBytes):
  // BF16 / F32 one 16-byte piece (the block exponents), the quantized types two (Q6_K's two d
  // values sit apart, at d_off + g * 4); F16 has no section.
  static constexpr int kRowBytes = (T == GgmlType::BF16 || T == GgmlType::F32) ? 16 : 32;
  // Q4_K / Q5_K: the k-tile's min term is one more tensor-core product, of the rows' mins and the
  // activations' block-sum fragments (F16Act::sums; matmul_order.h).
  static constexpr bool kUsesSums = T == GgmlType::Q4_K || T == GgmlType::Q5_K;
  // Float weights also multiply the activations' low f16 parts (F16Act::frag_lo).
  static constexpr bool kUsesLo = T == GgmlType::F16 || T == GgmlType::BF16 || T == GgmlType::F32;
};

template <typename V>
__device__ __forceinline__ V lds(const uint8_t* p) {
  return *reinterpret_cast<const V*>(p);
}

// A block's A fragments for both halves (A[0]: elements 0-15, A[1]: 16-31) of one m-tile.
struct BlockFrags {
  uint32_t a[2][4];
};

// Fragments from two float-value pieces: each piece is one A fragment (weight_layout.h).
__device__ __forceinline__ void pieces_to_frags(const uint4& f0, const uint4& f1, BlockFrags& fr) {
  fr.a[0][0] = f0.x;
  fr.a[0][1] = f0.y;
  fr.a[0][2] = f0.z;
  fr.a[0][3] = f0.w;
  fr.a[1][0] = f1.x;
  fr.a[1][1] = f1.y;
  fr.a[1][2] = f1.z;
  fr.a[1][3] = f1.w;
}

// The tile state a lane keeps per k-tile and m-tile besides the pieces (decoded once per k-tile).
template <GgmlType T>
struct TileRegs {
  uint4 row[2];  // per-row data pieces of rows g, g+8 (Q4_K/Q5_K meta, Q6_K scales; unused otherwise)
  uint4 extra[2];
  // Q4_K / Q5_K: the min term's A fragment words of rows g, g + 8 (the f16 pair (m_t, m_t+4),
  // matmul_order.h) and its scale -32 dmin of each row.
  uint32_t min_a[2];
  float min_scale[2];
};

// The shift that brings a lane's min fields to the low bits of the meta words (z, w) read as one
// 64-bit value: fields 8 + t (bit 48 + 6t of the 96-bit field string, which starts at word y)
// and 12 + t (24 bits above it). t = lane % 4: a constant of the lane.
__device__ __forceinline__ int min_field_shift(int t) { return 16 + 6 * t; }

// The min term's A fragment word of one row: the f16 pair (m_t, m_t+4) of its meta (matmul_order.h).
// The two fields are 24 bits apart; a byte permute brings the upper one to bit 16, one LOP3 masks
// both and sets the exponent of 1024 (1024 + m, exact), and 1024 comes off in f16 (exact).
__device__ __forceinline__ uint32_t min_pair_f16(const uint4& m, int shift) {
  const uint32_t v = static_cast<uint32_t>((static_cast<uint64_t>(m.w) << 32 | m.z) >> shift);
  return sub_f16x2(and_or<0x003F003Fu, 0x64006400u>(__byte_perm(v, 0u, 0x4340u)), 0x64006400u);
}

// Where a lane finds its rows' data (the per-row section, weight_layout.h): piece k (16 bytes) of
// row g at rp + k * kRowStride (the verbatim tile: rp = tile + row_data_off + g * kRowBytes), and
// Q6_K's d pair at dp (tile + d_off + g * 4). t: the lane's index in its quad (lane % 4).
constexpr int kRowStride = 16;
template <GgmlType T>
__device__ __forceinline__ void load_tile_regs(const uint8_t* wl, const uint8_t* rp, int t, TileRegs<T>& r) {
  if constexpr (T == GgmlType::Q4_K || T == GgmlType::Q5_K || T == GgmlType::Q6_K) {
    r.row[0] = lds<uint4>(rp);
    r.row[1] = lds<uint4>(rp + kRowStride);
  }
  if constexpr (TileSpec<T>::kUsesSums) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      r.min_a[h] = min_pair_f16(r.row[h], min_field_shift(t));
      r.min_scale[h] = __fmul_rn(f16_bits_to_float(static_cast<uint16_t>(r.row[h].x >> 16)), -32.0f);  // exact
    }
  }
  if constexpr (T == GgmlType::Q5_K) r.extra[0] = lds<uint4>(wl + 4 * 512);
  if constexpr (T == GgmlType::Q6_K) {
    r.extra[0] = lds<uint4>(wl + 4 * 512);
    r.extra[1] = lds<uint4>(wl + 5 * 512);
  }
}

__device__ __forceinline__ uint32_t word_of(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}
__device__ __forceinline__ int byte_of(const uint4& v, int i) { return static_cast<int>((word_of(v, i / 4) >> (8 * (i % 4))) & 0xFFu); }

// Six-bit field F of a Q4_K / Q5_K meta's repacked scales (words y, z, w: weight_layout.h k_field)
// as the float 2^23 + field: the field shifted down (a funnel shift for fields 5 and 10, which
// straddle words) and one LOP3 that masks it and sets the exponent of 2^23.
template <int F>
__device__ __forceinline__ float k_field_plus_2p23(const uint4& m) {
  constexpr int kBit = 6 * F, kWord = 1 + kBit / 32, kShift = kBit % 32;
  uint32_t v = word_of(m, kWord);
  if constexpr (kShift + 6 > 32) v = shr_pair<kShift>(v, word_of(m, kWord + 1));
  else if constexpr (kShift > 0) v >>= kShift;
  return __uint_as_float(and_or<63u, 0x4B000000u>(v));
}

// Block scales of rows g (index 0) and g + 8 (index 1): what the epilogue multiplies D by.
struct BlockScales {
  float s[2];       // Q4_0, Q8_0: d; K-quants: d*sc; Q6_K: d*sc of elements 0-15; F16: unused
  float s2[2];      // Q6_K: d*sc of elements 16-31
};

// kLop3: Q4_0/Q4_K nibbles in one LOP3 per pair (and_or) instead of the compiler's AND + OR: the same
// bits, fewer instructions; the small shapes take it (H200, 9B Q4_0, 2026-12-02: part of tg B = 1
// 330 -> 354 tok/s), the 4- and 8-n-tile shapes keep the AND + OR (with and_or ptxas gave the
// 4-n-tile kernel 150 registers instead of 116, one block per SM instead of two).
template <GgmlType T, int B, bool kLop3>
__device__ __forceinline__ void decode_block(const uint8_t* wl, const uint8_t* rp, const uint8_t* dp,
                                             const TileRegs<T>& r, BlockFrags& fr, BlockScales& sc) {
  if constexpr (T == GgmlType::Q4_0 || T == GgmlType::Q4_K || T == GgmlType::Q5_K || T == GgmlType::Q6_K) {
    // Nibble pairs in few instructions: pairs 0 and 2 sit under the exponent of 1024 as they are
    // (1024 + c), pairs 1 and 3 stay four bits up (1024 + 16 c) and one fused multiply-add scales
    // and unbiases them. Q5_K / Q6_K's high bits are stored where a rotation of the block's word
    // puts them right above each pair's nibbles (weight_layout.h: high_bit_pos), one LOP3 a pair.
    // Every step is exact (small integers in f16): the fragments are the codes minus the bias.
    constexpr bool kHigh = T == GgmlType::Q5_K || T == GgmlType::Q6_K;
    constexpr uint32_t kBias = T == GgmlType::Q4_0 ? 0x64086408u : T == GgmlType::Q6_K ? 0x64206420u : 0x64006400u;
    constexpr uint32_t kSixteenth = 0x2C002C00u;  // 1/16
    // -(64 + bias): Q4_0 -72, Q6_K -96, Q4_K / Q5_K -64.
    constexpr uint32_t kHighBias = T == GgmlType::Q4_0 ? 0xD480D480u : T == GgmlType::Q6_K ? 0xD600D600u : 0xD400D400u;
    // The high bits of an even pair at bits 4 and 20 (odd: 8 and 24) once rotated.
    constexpr uint32_t kEvenHigh = T == GgmlType::Q6_K ? 0x00300030u : 0x00100010u;
    constexpr uint32_t kOddHigh = T == GgmlType::Q6_K ? 0x03000300u : 0x01000100u;
    const uint2 uw = lds<uint2>(wl + (B / 2) * 512 + (B % 2) * 8);
    uint32_t hw = 0;
    if constexpr (T == GgmlType::Q5_K) hw = word_of(r.extra[0], B / 2);
    if constexpr (T == GgmlType::Q6_K) hw = word_of(r.extra[B / 4], B % 4);
    auto merge = [&](uint32_t even_or_odd, uint32_t rotated, auto odd) {
      if constexpr (!kHigh) return even_or_odd;
      else return or_and<decltype(odd)::value ? kOddHigh : kEvenHigh>(even_or_odd, rotated);
    };
    auto pairs = [&](auto w, auto half) {
      constexpr int kW = decltype(w)::value, kHalf = decltype(half)::value;
      const uint32_t u = kW == 0 ? uw.x : uw.y;
      const uint32_t v = kHalf == 0 ? u : u >> 8;
      constexpr int kRot = T == GgmlType::Q6_K ? q6k_high_rot(kW, 2 * kHalf) : q5k_high_rot(B, kW, 2 * kHalf);
      const uint32_t hr = kHigh ? rotr<kRot>(hw) : 0u;
      uint32_t even, odd;
      if constexpr (kLop3) {
        even = and_or<0x000F000Fu, 0x64006400u>(v);
        odd = and_or<0x00F000F0u, 0x64006400u>(v);
      } else {
        even = (v & 0x000F000Fu) | 0x64006400u;
        odd = (v & 0x00F000F0u) | 0x64006400u;
      }
      fr.a[kHalf][kW] = sub_f16x2(merge(even, hr, std::false_type{}), kBias);
      fr.a[kHalf][2 + kW] = fma_f16x2(merge(odd, hr, std::true_type{}), kSixteenth, kHighBias);
    };
    pairs(std::integral_constant<int, 0>{}, std::integral_constant<int, 0>{});
    pairs(std::integral_constant<int, 0>{}, std::integral_constant<int, 1>{});
    pairs(std::integral_constant<int, 1>{}, std::integral_constant<int, 0>{});
    pairs(std::integral_constant<int, 1>{}, std::integral_constant<int, 1>{});
  } else if constexpr (T == GgmlType::Q8_0) {
    const uint4 w = lds<uint4>(wl + B * 512);  // x, y: row g's words, z, w: row g + 8's
    fr.a[0][0] = int8_pair(w.x, 0);
    fr.a[0][1] = int8_pair(w.z, 0);
    fr.a[0][2] = int8_pair(w.x, 1);
    fr.a[0][3] = int8_pair(w.z, 1);
    fr.a[1][0] = int8_pair(w.y, 0);
    fr.a[1][1] = int8_pair(w.w, 0);
    fr.a[1][2] = int8_pair(w.y, 1);
    fr.a[1][3] = int8_pair(w.w, 1);
  } else if constexpr (T == GgmlType::F16 || T == GgmlType::BF16) {
    pieces_to_frags(lds<uint4>(wl + (2 * B) * 512), lds<uint4>(wl + (2 * B + 1) * 512), fr);
  }

  // Scales.
  if constexpr (T == GgmlType::Q4_0 || T == GgmlType::Q8_0) {
    const uint32_t dd = lds<uint32_t>(rp + (B / 4) * kRowStride + (B % 4) * 4);
    sc.s[0] = f16_bits_to_float(static_cast<uint16_t>(dd & 0xFFFFu));
    sc.s[1] = f16_bits_to_float(static_cast<uint16_t>(dd >> 16));
  } else if constexpr (T == GgmlType::Q4_K || T == GgmlType::Q5_K) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint4& m = r.row[h];
      // The scale of sub-block B is field B (its min, field 8 + B, is in the k-tile's min term:
      // min_term). d * sc without an int-to-float conversion: fma(d, 2^23 + sc, -d 2^23) = d sc
      // exactly (d has 11 significant bits, d sc 17: no rounding; d 2^23 is exact), the same float
      // as d * float(sc).
      const float d = f16_bits_to_float(static_cast<uint16_t>(m.x & 0xFFFFu));
      const float scf = k_field_plus_2p23<B>(m);
      sc.s[h] = __fmaf_rn(d, scf, -(d * 8388608.0f));
    }
  } else if constexpr (T == GgmlType::Q6_K) {
    const uint32_t dd = lds<uint32_t>(dp);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      // Scales 2B, 2B + 1 of the row's 16, from the registers load_tile_regs filled (one 16-byte
      // load a row and k-tile instead of a 2-byte load a row and block).
      const float d = f16_bits_to_float(static_cast<uint16_t>(dd >> (16 * h)));
      sc.s[h] = __fmul_rn(d, static_cast<float>(static_cast<int8_t>(byte_of(r.row[h], 2 * B))));
      sc.s2[h] = __fmul_rn(d, static_cast<float>(static_cast<int8_t>(byte_of(r.row[h], 2 * B + 1))));
    }
  } else if constexpr (T == GgmlType::BF16 || T == GgmlType::F32) {
    const uint16_t ee = lds<uint16_t>(rp + 2 * B);
    sc.s[0] = exp2_int(static_cast<int8_t>(ee & 0xFF));
    sc.s[1] = exp2_int(static_cast<int8_t>(ee >> 8));
  }
}

// f(std::integral_constant<int, B>{}) for the blocks B = 0 .. 7 of a k-tile, in that order (the
// canonical order's; B a constant so each block's decode resolves its offsets at compile time).
template <typename F, int... B>
__device__ __forceinline__ void each_block_in(F& f, std::integer_sequence<int, B...>) {
  (f(std::integral_constant<int, B>{}), ...);
}
template <typename F>
__device__ __forceinline__ void for_each_block(F&& f) {
  each_block_in(f, std::make_integer_sequence<int, kTileBlocks>{});
}

// The K segments' partials p(0) .. p(segs - 1) of one output in matmul_order.h's tree:
// P0 + P1 (2 segments), ((P0 + P1) + (P2 + P3)) + ((P4 + P5) + (P6 + P7)) (8; k_segments gives
// no other count above 1).
template <typename Partial>
__device__ __forceinline__ float segment_tree(int segs, const Partial& p) {
  auto pair = [&](int s) { return __fadd_rn(p(s), p(s + 1)); };
  const float p01 = pair(0);
  if (segs == 2) return p01;
  return __fadd_rn(__fadd_rn(p01, pair(2)), __fadd_rn(pair(4), pair(6)));
}

// F32: the hi and lo fragments of block B (four products chained).
__device__ __forceinline__ void decode_block_f32(const uint8_t* wl, int B, int part, BlockFrags& fr) {
  pieces_to_frags(lds<uint4>(wl + (4 * B + 2 * part) * 512), lds<uint4>(wl + (4 * B + 2 * part + 1) * 512), fr);
}

// Block B's tensor-core dots for one m-tile and one n-tile in matmul_order.h's order: the decoded
// fragments `fr` (F32: decoded here from the lane's pieces at wl) with the activation fragment bf
// (bl: its low f16 parts, float types). d: the block's dot (Q6_K: of elements 0-15; d2 of 16-31).
template <GgmlType T>
__device__ __forceinline__ void block_dots(const uint8_t* wl, int B, BlockFrags fr, const uint4& bf,
                                           const uint4& bl, float (&d)[4], float (&d2)[4]) {
  const float zero[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  if constexpr (T == GgmlType::F32) {  // w_hi x_hi, w_hi x_lo, w_lo x_hi
    decode_block_f32(wl, B, 0, fr);
    mma_16816(d, fr.a[0], bf.x, bf.y, zero);
    mma_16816(d, fr.a[1], bf.z, bf.w, d);
    mma_16816(d, fr.a[0], bl.x, bl.y, d);
    mma_16816(d, fr.a[1], bl.z, bl.w, d);
    decode_block_f32(wl, B, 1, fr);
    mma_16816(d, fr.a[0], bf.x, bf.y, d);
    mma_16816(d, fr.a[1], bf.z, bf.w, d);
  } else if constexpr (TileSpec<T>::kUsesLo) {  // F16, BF16: w x_hi, w x_lo
    mma_16816(d, fr.a[0], bf.x, bf.y, zero);
    mma_16816(d, fr.a[1], bf.z, bf.w, d);
    mma_16816(d, fr.a[0], bl.x, bl.y, d);
    mma_16816(d, fr.a[1], bl.z, bl.w, d);
  } else if constexpr (T == GgmlType::Q6_K) {
    mma_16816(d, fr.a[0], bf.x, bf.y, zero);
    mma_16816(d2, fr.a[1], bf.z, bf.w, zero);
  } else {
    mma_16816(d, fr.a[0], bf.x, bf.y, zero);
    mma_16816(d, fr.a[1], bf.z, bf.w, d);
  }
}

// How many floats a block's epilogue reads per output (the streaming kernel's split form stores
// them): F16 the dot; one-scale types the scale and the dot; Q6_K two (scale, dot) pairs.
MEMRA_ORDER_HD constexpr int fold_terms(GgmlType type) {
  return type == GgmlType::F16 ? 1 : type == GgmlType::Q6_K ? 4 : 2;
}
template <GgmlType T>
constexpr int kFoldTerms = fold_terms(T);
// How many epilogues a k-tile folds per output: its blocks, and the K-quants' min term after them
// (a (scale, value) pair like a block's).
MEMRA_ORDER_HD constexpr int fold_slots(GgmlType type) {
  return kTileBlocks + (type == GgmlType::Q4_K || type == GgmlType::Q5_K ? 1 : 0);
}
template <GgmlType T>
constexpr int kFoldSlots = fold_slots(T);
static_assert(kFoldTerms<GgmlType::Q4_K> == 2 && kFoldSlots<GgmlType::Q4_K> == kTileBlocks + 1 &&
                  TileSpec<GgmlType::Q4_K>::kUsesSums && !TileSpec<GgmlType::Q4_0>::kUsesSums,
              "the K-quants fold their min term as one more (scale, value) slot");

// The block's epilogue for one output: c takes the block's terms in matmul_order.h's order.
// s, v: the first scale and dot; s2, v2: the second pair (Q6_K: d*sc of 16-31 and that half's dot).
template <GgmlType T>
__device__ __forceinline__ void fold_block(float& c, float s, float v, float s2, float v2) {
  if constexpr (T == GgmlType::F16) {
    c = __fadd_rn(c, v);
  } else if constexpr (kFoldTerms<T> == 4) {
    c = __fmaf_rn(s, v, c);
    c = __fmaf_rn(s2, v2, c);
  } else {
    c = __fmaf_rn(s, v, c);
  }
}

// Block B's products for one m-tile and one n-tile, added to the lane's four outputs `acc` in
// matmul_order.h's order: block_dots, then the block's epilogue. kOddCols false: the launch has one
// activation row (column 0 of the n-tile), so outputs 1 and 3 (the lane's odd columns, padding in
// every lane) are left unfolded; the even ones get the same bits either way.
template <GgmlType T, bool kOddCols = true>
__device__ __forceinline__ void block_products(const uint8_t* wl, int B, BlockFrags fr, const BlockScales& sc,
                                               const uint4& bf, const uint4& bl, float (&acc)[4]) {
  float d[4];
  [[maybe_unused]] float d2[4];
  block_dots<T>(wl, B, fr, bf, bl, d, d2);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if (!kOddCols && (i & 1)) continue;
    const int h = i >> 1;
    if constexpr (kFoldTerms<T> == 4) {
      fold_block<T>(acc[i], sc.s[h], d[i], sc.s2[h], d2[i]);
    } else {
      fold_block<T>(acc[i], sc.s[h], d[i], 0.0f, 0.0f);
    }
  }
}

// The K-quants' min term of a k-tile for one m-tile and one n-tile (matmul_order.h): M, one
// tensor-core product of the rows' mins (A: (m_t, m_t+4) in both halves of K) and the columns'
// block-sum fragment sf (B: the hi parts of s_t, s_t+4 2^-5 in K 2t, 2t + 1, the lo parts in
// 2t + 8, 2t + 9: lane (g, t)'s F16Act::sums), from +0. Every product is exact (6-bit times
// 11-bit), so M is the tensor core's sum of sum_b m_b s_b 2^-5 over the k-tile's blocks.
template <GgmlType T>
__device__ __forceinline__ void min_dots(const TileRegs<T>& r, uint2 sf, float (&mm)[4]) {
  const float zero[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  const uint32_t a[4] = {r.min_a[0], r.min_a[1], r.min_a[0], r.min_a[1]};
  mma_16816(mm, a, sf.x, sf.y, zero);
}
// ... folded after the k-tile's blocks: acc = fma(-32 dmin, M, acc), the block epilogue's form
// (kOddCols: as block_products).
template <GgmlType T, bool kOddCols = true>
__device__ __forceinline__ void min_term(const TileRegs<T>& r, uint2 sf, float (&acc)[4]) {
  float mm[4];
  min_dots<T>(r, sf, mm);
#pragma unroll
  for (int i = 0; i < 4; ++i)
    if (kOddCols || !(i & 1)) fold_block<T>(acc[i], r.min_scale[i >> 1], mm[i], 0.0f, 0.0f);
}

}  // namespace memra::cuda
