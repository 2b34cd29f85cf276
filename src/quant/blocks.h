// Packed block layouts of the ggml quantized types memra decodes and encodes.
//
// Every struct mirrors the bytes ggml writes to a GGUF file: little-endian, packed, no padding
// (the static_asserts pin each size to the block_bytes of the type table; a test checks them
// against type_info() too). Half-precision fields are raw IEEE binary16 bits. Blocks are read
// with memcpy into a local struct (load_block), so file data needs no alignment.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

namespace memra::quant {

static_assert(std::endian::native == std::endian::little, "block layouts assume a little-endian host");

inline constexpr int kQK = 32;    // elements per block of the legacy types (Q4_0 .. Q8_0)
inline constexpr int kQK_K = 256;  // elements per super-block of the K-quants

// Q4_0: value = (q - 8) * d, q in 0..15. Element j (< 16) is the low nibble of qs[j], element
// j + 16 the high nibble of qs[j].
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockQ4_0) == 18);

// Q4_1: value = q * d + m, q in 0..15, nibble order as Q4_0.
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockQ4_1) == 20);

// Q5_0: value = (q - 16) * d, q in 0..31. Low 4 bits as Q4_0; bit 4 of element j is bit j of
// the little-endian 32-bit word qh.
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockQ5_0) == 22);

// Q5_1: value = q * d + m, q in 0..31, bits as Q5_0.
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockQ5_1) == 24);

// Q8_0: value = qs[j] * d.
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK];
};
static_assert(sizeof(BlockQ8_0) == 34);

// Q2_K: 16 sub-blocks of 16. scales[s] = scale (low nibble) | min (high nibble);
// value = d * scale * q - dmin * min, q in 0..3. Element e lives in byte (e / 128) * 32 + e % 32
// of qs, at bit 2 * ((e / 32) % 4).
struct BlockQ2_K {
  uint8_t scales[kQK_K / 16];
  uint8_t qs[kQK_K / 4];
  uint16_t d;
  uint16_t dmin;
};
static_assert(sizeof(BlockQ2_K) == 84);

// Q3_K: 16 sub-blocks of 16 with signed 6-bit scales (stored + 32) packed into 12 bytes:
// bits 0..3 of scale s are the low (s < 8) or high (s >= 8) nibble of scales[s % 8]; bits 4..5
// are bits 2 * (s / 4) of scales[8 + s % 4]. value = d * (scale - 32) * q, q in -4..3, stored
// as 2 low bits (placed like Q2_K) and a high bit in hmask[e % 32] bit e / 32 that is set when
// q >= 0 (a clear bit subtracts 4).
struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];
  uint8_t qs[kQK_K / 4];
  uint8_t scales[12];
  uint16_t d;
};
static_assert(sizeof(BlockQ3_K) == 110);

// Q4_K: 8 sub-blocks of 32 with 6-bit scale and min packed into 12 bytes (see k_scale_min).
// value = d * scale * q - dmin * min, q in 0..15. Element e lives in byte (e / 64) * 32 + e % 32
// of qs: low nibble for even sub-blocks (e / 32), high nibble for odd ones.
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ4_K) == 144);

// Q5_K: as Q4_K plus a fifth bit: bit (e / 32) of qh[e % 32]. q in 0..31.
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ5_K) == 176);

// Q6_K: 16 sub-blocks of 16 with int8 scales; value = d * scale * (q - 32), q in 0..63.
// In each half h (128 elements) with r = e % 128: the low 4 bits are in ql[h * 64 + r % 64]
// (low nibble for r < 64, high nibble otherwise); the high 2 bits are bits 2 * (r / 32) of
// qh[h * 32 + r % 32].
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  uint16_t d;
};
static_assert(sizeof(BlockQ6_K) == 210);

// IQ4_NL: value = d * kIq4Values[q], q in 0..15 (an index into a fixed non-linear table, not a
// linear code), nibble order as Q4_0.
struct BlockIQ4_NL {
  uint16_t d;
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockIQ4_NL) == 18);

// IQ4_XS: 8 sub-blocks of 32 with signed 6-bit scales (stored + 32): the low 4 bits of sub-block
// s's scale are the low (even s) or high (odd s) nibble of scales_l[s / 2], its top 2 bits are
// bits 2 s of scales_h. value = d * (scale - 32) * kIq4Values[q]; sub-block s's codes are
// qs[16 s .. 16 s + 15] in Q4_0's nibble order.
struct BlockIQ4_XS {
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[kQK_K / 64];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockIQ4_XS) == 136);

// The IQ4 formats' 16 values (ggml's kvalues_iq4nl), increasing.
inline constexpr int8_t kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// The table values of 32 elements whose codes are the nibbles of qs[0..16) (Q4_0's nibble order).
inline void iq4_values(const uint8_t* qs, int8_t out[32]) {
  for (int j = 0; j < 16; ++j) {
    out[j] = kIq4Values[qs[j] & 0x0F];
    out[j + 16] = kIq4Values[qs[j] >> 4];
  }
}

// Stored 6-bit scale (0..63) of IQ4_XS sub-block s.
inline int iq4xs_scale(const BlockIQ4_XS& b, int s) {
  return ((b.scales_l[s / 2] >> (4 * (s % 2))) & 0x0F) | (((b.scales_h >> (2 * s)) & 3) << 4);
}

template <class Block>
inline Block load_block(const uint8_t* p) {
  Block b;
  std::memcpy(&b, p, sizeof(Block));
  return b;
}

// 6-bit scale and min of sub-block j (0..7) of Q4_K / Q5_K. Sub-blocks 0..3 keep theirs in the
// low 6 bits of bytes j (scale) and j + 4 (min); sub-blocks 4..7 keep their low 4 bits in the
// nibbles of byte j + 4 (scale low, min high) and their top 2 bits in the top bits of bytes
// j - 4 (scale) and j (min).
struct ScaleMin {
  uint8_t scale;
  uint8_t min;
};
inline ScaleMin k_scale_min(const uint8_t* s, int j) {
  if (j < 4) return {static_cast<uint8_t>(s[j] & 63), static_cast<uint8_t>(s[j + 4] & 63)};
  return {static_cast<uint8_t>((s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4)),
          static_cast<uint8_t>((s[j + 4] >> 4) | ((s[j] >> 6) << 4))};
}

// Inverse of k_scale_min: packs eight 6-bit scales and mins into 12 bytes.
inline void k_pack_scale_min(const uint8_t scale[8], const uint8_t min[8], uint8_t out[12]) {
  for (int j = 0; j < 4; ++j) {
    out[j] = static_cast<uint8_t>((scale[j] & 63) | ((scale[j + 4] >> 4) << 6));
    out[j + 4] = static_cast<uint8_t>((min[j] & 63) | ((min[j + 4] >> 4) << 6));
    out[j + 8] = static_cast<uint8_t>((scale[j + 4] & 0x0F) | ((min[j + 4] & 0x0F) << 4));
  }
}

// Signed 6-bit scale s (0..15) of Q3_K, already minus 32.
inline int q3k_scale(const uint8_t* s, int i) {
  const int low = i < 8 ? (s[i] & 0x0F) : (s[i - 8] >> 4);
  const int high = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
  return (low | (high << 4)) - 32;
}

// Inverse of q3k_scale: packs 16 values in -32..31 into 12 bytes.
inline void q3k_pack_scales(const int8_t scale[16], uint8_t out[12]) {
  std::memset(out, 0, 12);
  for (int i = 0; i < 16; ++i) {
    const int u = scale[i] + 32;
    if (i < 8)
      out[i] |= static_cast<uint8_t>(u & 0x0F);
    else
      out[i - 8] |= static_cast<uint8_t>((u & 0x0F) << 4);
    out[8 + i % 4] |= static_cast<uint8_t>(((u >> 4) & 3) << (2 * (i / 4)));
  }
}

// Code of element e (-4..3) of a Q3_K block: 2 low bits in qs, minus 4 where its hmask bit is clear.
inline int q3k_code(const BlockQ3_K& b, int e) {
  const int g = e / 32;
  const int low = (b.qs[(e / 128) * 32 + e % 32] >> (2 * (g % 4))) & 3;
  return low - (((b.hmask[e % 32] >> g) & 1) ? 0 : 4);
}

// Packs 256 Q6_K codes q - 32 (-32..31) into ql and qh (see BlockQ6_K).
inline void q6k_pack_codes(const int8_t q[kQK_K], BlockQ6_K& b) {
  std::memset(b.ql, 0, sizeof b.ql);
  std::memset(b.qh, 0, sizeof b.qh);
  for (int e = 0; e < kQK_K; ++e) {
    const int u = q[e] + 32;  // 0..63
    const int h = e / 128, r = e % 128;
    b.ql[h * 64 + r % 64] |= static_cast<uint8_t>((u & 0x0F) << (4 * (r / 64)));
    b.qh[h * 32 + r % 32] |= static_cast<uint8_t>((u >> 4) << (2 * (r / 32)));
  }
}

}  // namespace memra::quant
