// The type-neutral, per-element repack into the CUDA weight tiles (weight_layout.h): each element
// decoded to a code or value, then placed at tile_slot() one by one. It was the backend's own
// repack until the direct writers of weight_layout.cpp (10x faster) replaced it; it stays here as
// their reference, written from the layout description, not from the writers: the tests check
// every byte of the writers' tiles against it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cuda/weight_layout.h"
#include "common/error.h"
#include "quant/quant.h"

namespace memra::test::layout_ref {

using namespace memra::cuda;

// Q4_K / Q5_K / Q6_K super-block sizes (ggml).
constexpr int kK4Bytes = 144, kK5Bytes = 176, kK6Bytes = 210;

// One row's k-tile in a type-neutral form: the codes of its 256 elements and its scale data.
struct RowTile {
  int code[kTileK] = {};        // raw quant codes (Q4_0 0..15, Q8_0 -128..127, Q4_K 0..15, Q5_K 0..31, Q6_K 0..63)
  uint16_t value[kTileK] = {};  // f16 bits (F16, BF16); F32: hi
  uint16_t lo[kTileK] = {};     // F32: lo
  uint16_t d[kTileBlocks] = {};  // Q4_0 / Q8_0 block scales (f16 bits)
  uint8_t meta[16] = {};         // Q4_K / Q5_K super-block {d, dmin, scales[12]}
  int8_t sc6[16] = {};           // Q6_K sub-block scales
  uint16_t d6 = 0;               // Q6_K d
  int8_t exp[kTileBlocks] = {};  // BF16 / F32 block exponents
};

inline uint16_t f16_of(float v) { return quant::f32_to_f16(v); }

// Fills `t` from k-tile kt of one GGUF row (n_in elements of file_type), for device type w.type.
inline void read_row_tile(const DevWeight& w, const uint8_t* row, int64_t kt, std::vector<float>& scratch, RowTile& t) {
  const int64_t k0 = kt * kTileK, n = std::min<int64_t>(kTileK, w.n_in - k0);
  t = RowTile{};
  const GgmlType ft = w.file_type;
  if (w.type == GgmlType::F16 || w.type == GgmlType::BF16 || w.type == GgmlType::F32) {
    float v[kTileK] = {};
    if (ft == GgmlType::F16 && w.type == GgmlType::F16) {
      for (int64_t i = 0; i < n; ++i) std::memcpy(&t.value[i], row + 2 * (k0 + i), 2);
      return;
    }
    if (ft == GgmlType::F32) {
      std::memcpy(v, row + 4 * k0, static_cast<size_t>(n) * 4);
    } else if (ft == GgmlType::BF16) {
      for (int64_t i = 0; i < n; ++i) {
        uint16_t b;
        std::memcpy(&b, row + 2 * (k0 + i), 2);
        v[i] = quant::bf16_to_f32(b);
      }
    } else {  // a type widened to F16: decode the whole row once per row (kt == 0)
      if (kt == 0) {
        scratch.resize(static_cast<size_t>(w.n_in));
        quant::dequantize_row(ft, row, scratch.data(), w.n_in);
      }
      std::copy(scratch.begin() + k0, scratch.begin() + k0 + n, v);
    }
    if (w.type == GgmlType::F16) {
      for (int64_t i = 0; i < n; ++i) t.value[i] = f16_of(v[i]);
      return;
    }
    for (int b = 0; b < kTileBlocks; ++b) {
      float amax = 0.0f;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(v[32 * b + i]));
      const int e = scale_exponent(amax);
      t.exp[b] = static_cast<int8_t>(e);
      const float inv = exp2_int(-e);
      for (int i = 0; i < 32; ++i) {
        const float x = v[32 * b + i] * inv;  // exact: a power of two
        t.value[32 * b + i] = f16_of(x);
        if (w.type == GgmlType::F32) t.lo[32 * b + i] = f16_of(x - quant::f16_to_f32(t.value[32 * b + i]));
      }
    }
    return;
  }
  if (ft == GgmlType::Q3_K && w.type == GgmlType::Q6_K) {  // transcoded: code v + 32, scale as int8, same d
    const uint8_t* blk = row + 110 * kt;
    std::memcpy(&t.d6, blk + 108, 2);
    for (int s = 0; s < 16; ++s) {
      const uint8_t* sc = blk + 96;
      const int low = s < 8 ? (sc[s] & 0xF) : (sc[s - 8] >> 4), high = (sc[8 + s % 4] >> (2 * (s / 4))) & 3;
      t.sc6[s] = static_cast<int8_t>((low | high << 4) - 32);
    }
    for (int e = 0; e < kTileK; ++e) {
      const int low = (blk[32 + (e / 128) * 32 + e % 32] >> (2 * ((e / 32) % 4))) & 3;
      const int hbit = (blk[e % 32] >> (e / 32)) & 1;
      t.code[e] = low + 4 * hbit - 4 + 32;
    }
    return;
  }
  if (ft == GgmlType::Q5_0 && w.type == GgmlType::Q8_0) {  // transcoded: code q - 16, same d
    for (int64_t b = 0; b < n / 32; ++b) {
      const uint8_t* blk = row + 22 * (k0 / 32 + b);
      std::memcpy(&t.d[b], blk, 2);
      uint32_t qh;
      std::memcpy(&qh, blk + 2, 4);
      for (int i = 0; i < 16; ++i) {
        t.code[32 * b + i] = static_cast<int8_t>(((blk[6 + i] & 0xF) | ((qh >> i) & 1) << 4) - 16);
        t.code[32 * b + 16 + i] = static_cast<int8_t>(((blk[6 + i] >> 4) | ((qh >> (16 + i)) & 1) << 4) - 16);
      }
    }
    return;
  }
  static constexpr int8_t kValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  if (ft == GgmlType::IQ4_XS && w.type == GgmlType::Q8_0) {  // code = the table value, d = f16(d * (scale - 32))
    const uint8_t* blk = row + 136 * kt;  // one super-block a k-tile
    uint16_t d16;
    std::memcpy(&d16, blk, 2);
    const uint16_t scales_h = static_cast<uint16_t>(blk[2] | blk[3] << 8);
    for (int b = 0; b < 8; ++b) {
      const int ls = ((blk[4 + b / 2] >> (4 * (b % 2))) & 0xF) | (((scales_h >> (2 * b)) & 3) << 4);
      t.d[b] = quant::f32_to_f16(quant::f16_to_f32(d16) * static_cast<float>(ls - 32));
      for (int i = 0; i < 16; ++i) {
        t.code[32 * b + i] = kValues[blk[8 + 16 * b + i] & 0xF];
        t.code[32 * b + 16 + i] = kValues[blk[8 + 16 * b + i] >> 4];
      }
    }
    return;
  }
  if (ft == GgmlType::IQ4_NL && w.type == GgmlType::Q8_0) {  // transcoded: code = the table value, same d
    for (int64_t b = 0; b < n / 32; ++b) {
      const uint8_t* blk = row + 18 * (k0 / 32 + b);
      std::memcpy(&t.d[b], blk, 2);
      for (int i = 0; i < 16; ++i) {
        t.code[32 * b + i] = kValues[blk[2 + i] & 0xF];
        t.code[32 * b + 16 + i] = kValues[blk[2 + i] >> 4];
      }
    }
    return;
  }
  switch (w.type) {
    case GgmlType::Q4_0:
      for (int64_t b = 0; b < n / 32; ++b) {
        const uint8_t* blk = row + 18 * (k0 / 32 + b);
        std::memcpy(&t.d[b], blk, 2);
        for (int i = 0; i < 16; ++i) {
          t.code[32 * b + i] = blk[2 + i] & 0xF;
          t.code[32 * b + 16 + i] = blk[2 + i] >> 4;
        }
      }
      // Padding blocks: code 8 is the value 0 (zero scale anyway).
      for (int64_t i = n; i < kTileK; ++i) t.code[i] = 8;
      break;
    case GgmlType::Q8_0:
      for (int64_t b = 0; b < n / 32; ++b) {
        const uint8_t* blk = row + 34 * (k0 / 32 + b);
        std::memcpy(&t.d[b], blk, 2);
        for (int i = 0; i < 32; ++i) t.code[32 * b + i] = static_cast<int8_t>(blk[2 + i]);
      }
      break;
    case GgmlType::Q4_K:
    case GgmlType::Q5_K: {
      const bool five = w.type == GgmlType::Q5_K;
      const uint8_t* blk = row + (five ? kK5Bytes : kK4Bytes) * kt;
      std::memcpy(t.meta, blk, 16);
      const uint8_t* qh = blk + 16;
      const uint8_t* qs = blk + (five ? 48 : 16);
      for (int i = 0; i < 8; ++i)
        for (int l = 0; l < 32; ++l) {
          int v = (i % 2 == 0) ? (qs[32 * (i / 2) + l] & 0xF) : (qs[32 * (i / 2) + l] >> 4);
          if (five) v |= ((qh[l] >> i) & 1) << 4;
          t.code[32 * i + l] = v;
        }
      break;
    }
    case GgmlType::Q6_K: {
      const uint8_t* blk = row + kK6Bytes * kt;
      const uint8_t* ql = blk;
      const uint8_t* qh = blk + 128;
      std::memcpy(t.sc6, blk + 192, 16);
      std::memcpy(&t.d6, blk + 208, 2);
      for (int i = 0; i < 8; ++i) {
        const int h = i / 4, k = i % 4;
        for (int l = 0; l < 32; ++l) {
          const uint8_t lq = ql[64 * h + l + (k % 2 == 1 ? 32 : 0)];
          const int low = (k < 2) ? (lq & 0xF) : (lq >> 4);
          const int high = (qh[32 * h + l] >> (2 * k)) & 3;
          t.code[32 * i + l] = low | high << 4;
        }
      }
      break;
    }
    default: MEMRA_ASSERT(false, "repack: no tile format for this type");
  }
}

inline void or_u32(uint8_t* p, uint32_t v) {
  uint32_t o;
  std::memcpy(&o, p, 4);
  o |= v;
  std::memcpy(p, &o, 4);
}

// Writes row rho's tile data into the group's tile.
inline void write_row_tile(const DevWeight& w, const RowTile& t, int rho, uint8_t* tile) {
  const TileFormat f = tile_format(w.type);
  const int g = rho % 8, h = rho / 8;
  for (int k = 0; k < kTileK; ++k) {
    const TileSlot q = tile_slot(rho, k);
    uint8_t* lane_piece0 = tile + q.lane * 16;
    switch (w.type) {
      case GgmlType::Q4_0:
      case GgmlType::Q4_K:
      case GgmlType::Q5_K:
      case GgmlType::Q6_K: {
        uint8_t* word = lane_piece0 + (q.b / 2) * 512 + 4 * (2 * (q.b % 2) + q.h);
        or_u32(word, static_cast<uint32_t>(t.code[k] & 0xF) << (4 * q.p + 16 * q.s));
        // The high bits at (4 + 4 (p % 2) + 16 s + rotation) mod 32 of their word (weight_layout.h).
        if (w.type == GgmlType::Q5_K && (t.code[k] & 0x10)) {
          const int rot = q.h + 2 * (q.p / 2) + 8 * (q.b % 2);
          or_u32(tile + 2048 + q.lane * 16 + 4 * (q.b / 2), 1u << ((4 + 4 * (q.p % 2) + 16 * q.s + rot) % 32));
        }
        if (w.type == GgmlType::Q6_K) {
          const int rot = 2 * q.h + 8 * (q.p / 2);
          or_u32(tile + 2048 + (q.b / 4) * 512 + q.lane * 16 + 4 * (q.b % 4),
                 static_cast<uint32_t>((t.code[k] >> 4) & 3) << ((4 + 4 * (q.p % 2) + 16 * q.s + rot) % 32));
        }
        break;
      }
      case GgmlType::Q8_0:
        lane_piece0[q.b * 512 + 8 * q.h + 4 * (q.p / 2) + 2 * (q.p % 2) + q.s] = static_cast<uint8_t>(t.code[k] + 128);
        break;
      case GgmlType::F16:
      case GgmlType::BF16:
        std::memcpy(lane_piece0 + (2 * q.b + q.p / 2) * 512 + 4 * (2 * (q.p % 2) + q.h) + 2 * q.s, &t.value[k], 2);
        break;
      case GgmlType::F32:  // fragment j = p / 2 holds pairs 2j, 2j + 1 of rows g, g + 8 interleaved
        std::memcpy(lane_piece0 + (4 * q.b + q.p / 2) * 512 + 4 * (2 * (q.p % 2) + q.h) + 2 * q.s, &t.value[k], 2);
        std::memcpy(lane_piece0 + (4 * q.b + 2 + q.p / 2) * 512 + 4 * (2 * (q.p % 2) + q.h) + 2 * q.s, &t.lo[k], 2);
        break;
      default: break;
    }
  }
  switch (w.type) {
    case GgmlType::Q4_0:
    case GgmlType::Q8_0:
      for (int b = 0; b < kTileBlocks; ++b) std::memcpy(tile + f.row_data_off + g * 32 + (b * 2 + h) * 2, &t.d[b], 2);
      break;
    case GgmlType::Q4_K:
    case GgmlType::Q5_K: {
      // d and dmin as they are; then the 8 scales and the 8 mins (6 bits each, the file's packing
      // undone) one bit at a time: value f's bit i at bit 6f + i of the 12 bytes.
      uint8_t* meta = tile + f.row_data_off + g * 32 + h * 16;
      std::memcpy(meta, t.meta, 4);
      for (int j = 0; j < 8; ++j) {
        int sc, m;
        k_scale_min(j, t.meta + 4, sc, m);
        for (int i = 0; i < 6; ++i) {
          if ((sc >> i) & 1) meta[4 + (6 * j + i) / 8] |= static_cast<uint8_t>(1u << ((6 * j + i) % 8));
          if ((m >> i) & 1) meta[4 + (6 * (8 + j) + i) / 8] |= static_cast<uint8_t>(1u << ((6 * (8 + j) + i) % 8));
        }
      }
      break;
    }
    case GgmlType::Q6_K:
      std::memcpy(tile + f.row_data_off + g * 32 + h * 16, t.sc6, 16);
      std::memcpy(tile + f.d_off + g * 4 + h * 2, &t.d6, 2);
      break;
    case GgmlType::BF16:
    case GgmlType::F32:
      for (int b = 0; b < kTileBlocks; ++b) tile[f.row_data_off + g * 16 + b * 2 + h] = static_cast<uint8_t>(t.exp[b]);
      break;
    default: break;
  }
}

inline void repack_group_per_element(const DevWeight& w, const uint8_t* src, int64_t src_row_bytes, int64_t rows,
                              uint8_t* dst) {
  MEMRA_ASSERT(rows >= 1 && rows <= kGroupRows);
  std::memset(dst, 0, static_cast<size_t>(w.group_stride));
  std::vector<float> scratch;
  RowTile t;
  for (int64_t rho = 0; rho < rows; ++rho) {
    const uint8_t* row = src + rho * src_row_bytes;
    for (int64_t kt = 0; kt < w.n_kt; ++kt) {
      read_row_tile(w, row, kt, scratch, t);
      write_row_tile(w, t, static_cast<int>(rho), dst + kt * w.tile_bytes);
    }
  }
}

}  // namespace memra::test::layout_ref
