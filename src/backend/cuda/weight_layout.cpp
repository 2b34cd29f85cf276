// Repacking GGUF weight rows into the device tiles (weight_layout.h), on the host at load time.
#include "backend/cuda/weight_layout.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "common/error.h"
#include "quant/quant.h"

namespace memra::cuda {

GgmlType device_type(GgmlType t) {
  switch (t) {
    case GgmlType::F32: case GgmlType::F16: case GgmlType::BF16: case GgmlType::Q4_0: case GgmlType::Q8_0:
    case GgmlType::Q4_K: case GgmlType::Q5_K: case GgmlType::Q6_K:
      return t;
    default:
      // Q3_K, Q5_0 and IQ4_NL run as the wider format that holds their values exactly (quant.h:
      // lossless_wider_type), IQ4_XS as Q8_0 with its block scales rounded to f16
      // (rounded_wider_type); the other types are widened to f16.
      if (auto wide = quant::lossless_wider_type(t)) return *wide;
      return quant::rounded_wider_type(t).value_or(GgmlType::F16);
  }
}

DevWeight plan_layout(GgmlType file_type, int64_t n_in, int64_t n_out, int64_t n_mat) {
  DevWeight w;
  w.file_type = file_type;
  w.type = device_type(file_type);
  w.n_in = n_in;
  w.n_out = n_out;
  w.n_mat = n_mat;
  w.n_kt = k_tiles(n_in);
  w.n_rg = row_groups(n_out);
  w.tile_bytes = tile_format(w.type).tile_bytes;
  MEMRA_ASSERT(w.tile_bytes > 0 && w.tile_bytes % 16 == 0);
  w.group_stride = w.n_kt * w.tile_bytes;
  w.mat_stride = static_cast<size_t>(w.n_rg) * static_cast<size_t>(w.group_stride);
  return w;
}

namespace {

// Q4_K / Q5_K / Q6_K super-block sizes (ggml).
constexpr int kK4Bytes = 144, kK5Bytes = 176, kK6Bytes = 210;

// Repacking writes each row's k-tile straight into the tile: the quantized types a 32-bit word at
// a time from the GGUF blocks, the float types from the row decoded once, with inline f16
// conversions. (Decoding each element to a type-neutral tile and placing it one by one took ~6 ns
// an element, 0.1 GB/s of Q4_0 file a thread: it set the load rate of every model, 0.42 GB/s for
// 122B-A10B on the H200's 16 host cores; tests/cuda_layout_test.cpp keeps that path as the
// reference these writers equal byte for byte.)

uint16_t u16_at(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
void put_u32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }
void or_u32(uint8_t* p, uint32_t v) { put_u32(p, load_u32(p) | v); }
// Bytes q[0], q[8], q[16], q[24] as a word (byte p = q[8p]): elements 8p + 2t + s of a block.
uint32_t gather_stride8(const uint8_t* q) {
  return static_cast<uint32_t>(q[0]) | static_cast<uint32_t>(q[8]) << 8 | static_cast<uint32_t>(q[16]) << 16 |
         static_cast<uint32_t>(q[24]) << 24;
}
// The low nibble of byte p of x at bits 4p (16 bits).
uint32_t nibbles_of_bytes(uint32_t x) {
  x &= 0x0F0F0F0Fu;
  x = (x | x >> 4) & 0x00FF00FFu;
  return (x | x >> 8) & 0xFFFFu;
}
// u(b, h) of lane t (weight_layout.h) from a block whose element e's code is the nibble at `shift`
// of q[e] (K-quants: q is the block's 32 bytes).
uint32_t code_word_k(const uint8_t* q, int t, int shift) {
  return nibbles_of_bytes(gather_stride8(q + 2 * t) >> shift) |
         nibbles_of_bytes(gather_stride8(q + 2 * t + 1) >> shift) << 16;
}
// The same for a Q4_0 block's 16 bytes: element e < 16 is qs[e]'s low nibble, e >= 16 qs[e - 16]'s high.
uint32_t code_word_q4_0(const uint8_t* qs, int t) {
  uint32_t u = 0;
  for (int s = 0; s < 2; ++s) {
    const uint32_t x = static_cast<uint32_t>(qs[2 * t + s]) | static_cast<uint32_t>(qs[8 + 2 * t + s]) << 8;
    u |= nibbles_of_bytes((x & 0x0F0Fu) | ((x >> 4) & 0x0F0Fu) << 16) << (16 * s);
  }
  return u;
}

// Row rho's k-tile of a quantized type, written straight into the tile (zeroed before).
void write_quant_row_tile(const DevWeight& w, const uint8_t* row, int64_t kt, int rho, uint8_t* tile) {
  const TileFormat f = tile_format(w.type);
  const int g = rho % 8, h = rho / 8;
  uint8_t* lanes = tile + 4 * g * 16;  // lane 4g + t at lanes + 16 t
  switch (w.type) {
    case GgmlType::Q4_0: {
      const int64_t n_blocks = std::min<int64_t>(kTileBlocks, w.n_in / 32 - kt * kTileBlocks);
      for (int b = 0; b < kTileBlocks; ++b) {
        uint8_t* words = lanes + (b / 2) * 512 + 4 * (2 * (b % 2) + h);
        if (b >= n_blocks) {  // padding: code 8 is the value 0 (zero scale anyway)
          for (int t = 0; t < 4; ++t) put_u32(words + 16 * t, 0x88888888u);
          continue;
        }
        const uint8_t* blk = row + 18 * (kt * kTileBlocks + b);
        std::memcpy(tile + f.row_data_off + g * 32 + (b * 2 + h) * 2, blk, 2);
        for (int t = 0; t < 4; ++t) put_u32(words + 16 * t, code_word_q4_0(blk + 2, t));
      }
      break;
    }
    case GgmlType::Q8_0: {
      const int64_t n_blocks = std::min<int64_t>(kTileBlocks, w.n_in / 32 - kt * kTileBlocks);
      // Codes stored as code + 128 (weight_layout.h); padding blocks hold code 0 (byte 0x80).
      for (int b = 0; b < kTileBlocks; ++b) {
        if (b >= n_blocks) {
          for (int t = 0; t < 4; ++t) {
            put_u32(lanes + b * 512 + 16 * t + 8 * h, 0x80808080u);
            put_u32(lanes + b * 512 + 16 * t + 8 * h + 4, 0x80808080u);
          }
          continue;
        }
        const uint8_t* blk = row + 34 * (kt * kTileBlocks + b);
        std::memcpy(tile + f.row_data_off + g * 32 + (b * 2 + h) * 2, blk, 2);
        const uint8_t* qs = blk + 2;
        for (int t = 0; t < 4; ++t) {
          uint8_t* v = lanes + b * 512 + 16 * t + 8 * h;
          put_u32(v, (u16_at(qs + 2 * t) | static_cast<uint32_t>(u16_at(qs + 8 + 2 * t)) << 16) ^ 0x80808080u);
          put_u32(v + 4, (u16_at(qs + 16 + 2 * t) | static_cast<uint32_t>(u16_at(qs + 24 + 2 * t)) << 16) ^ 0x80808080u);
        }
      }
      break;
    }
    case GgmlType::Q4_K:
    case GgmlType::Q5_K: {
      const bool five = w.type == GgmlType::Q5_K;
      const uint8_t* blk = row + (five ? kK5Bytes : kK4Bytes) * kt;
      std::memcpy(tile + f.row_data_off + g * 32 + h * 16, blk, 4);  // d, dmin
      k_fields_from_file(blk + 4, tile + f.row_data_off + g * 32 + h * 16 + 4);
      const uint8_t* qs = blk + (five ? 48 : 16);
      for (int b = 0; b < kTileBlocks; ++b) {
        uint8_t* words = lanes + (b / 2) * 512 + 4 * (2 * (b % 2) + h);
        for (int t = 0; t < 4; ++t) put_u32(words + 16 * t, code_word_k(qs + 32 * (b / 2), t, 4 * (b % 2)));
      }
      if (five) {  // fifth bits: word b / 2 of the lane's piece at 2048 (weight_layout.h: high_bit_pos)
        const uint8_t* qh = blk + 16;
        for (int t = 0; t < 4; ++t) {
          uint8_t* bits = tile + 2048 + (4 * g + t) * 16;
          for (int b = 0; b < kTileBlocks; ++b) {
            uint32_t v = 0;
            for (int p = 0; p < 4; ++p)
              for (int s = 0; s < 2; ++s)
                v |= static_cast<uint32_t>((qh[8 * p + 2 * t + s] >> b) & 1) << high_bit_pos(q5k_high_rot(b, h, p), p, s);
            or_u32(bits + 4 * (b / 2), v);
          }
        }
      }
      break;
    }
    case GgmlType::Q6_K: {
      const uint8_t* blk = row + kK6Bytes * kt;
      const uint8_t* ql = blk;
      const uint8_t* qh = blk + 128;
      std::memcpy(tile + f.row_data_off + g * 32 + h * 16, blk + 192, 16);
      std::memcpy(tile + f.d_off + g * 4 + h * 2, blk + 208, 2);
      for (int b = 0; b < kTileBlocks; ++b) {
        const int half = b / 4, k = b % 4;
        const uint8_t* lq = ql + 64 * half + (k % 2 == 1 ? 32 : 0);
        const uint8_t* hq = qh + 32 * half;
        uint8_t* words = lanes + (b / 2) * 512 + 4 * (2 * (b % 2) + h);
        uint8_t* high = tile + 2048 + (b / 4) * 512 + 4 * g * 16 + 4 * (b % 4);
        for (int t = 0; t < 4; ++t) {
          put_u32(words + 16 * t, code_word_k(lq, t, k < 2 ? 0 : 4));
          // 2-bit high parts of elements 8p + 2t + s (weight_layout.h: high_bit_pos).
          uint32_t v = 0;
          for (int p = 0; p < 4; ++p)
            for (int s = 0; s < 2; ++s)
              v |= static_cast<uint32_t>((hq[8 * p + 2 * t + s] >> (2 * k)) & 3) << high_bit_pos(q6k_high_rot(h, p), p, s);
          or_u32(high + 16 * t, v);
        }
      }
      break;
    }
    default: MEMRA_ASSERT(false, "write_quant_row_tile: not a quantized device type");
  }
}

// Row rho's k-tile of a float device type (F16, BF16, F32) from the row decoded to float
// (`v`, n_in values; F16 files: `row` itself, copied bit for bit), written straight into the tile.
void write_float_row_tile(const DevWeight& w, const uint8_t* row, const float* v, int64_t kt, int rho,
                          uint8_t* tile) {
  const TileFormat f = tile_format(w.type);
  const int g = rho % 8, h = rho / 8;
  const int64_t k0 = kt * kTileK, n = std::min<int64_t>(kTileK, w.n_in - k0);
  uint16_t hi[kTileK] = {}, lo[kTileK] = {};
  if (w.type == GgmlType::F16) {
    if (w.file_type == GgmlType::F16)
      std::memcpy(hi, row + 2 * k0, static_cast<size_t>(n) * 2);
    else
      for (int64_t i = 0; i < n; ++i) hi[i] = quant::f32_to_f16(v[k0 + i]);
  } else {
    for (int b = 0; b < kTileBlocks && 32 * b < n; ++b) {
      const int m = static_cast<int>(std::min<int64_t>(32, n - 32 * b));
      const float* vb = v + k0 + 32 * b;
      float amax = 0.0f;
      for (int i = 0; i < m; ++i) amax = std::max(amax, std::fabs(vb[i]));
      const int e = scale_exponent(amax);
      tile[f.row_data_off + g * 16 + b * 2 + h] = static_cast<uint8_t>(static_cast<int8_t>(e));
      const float inv = exp2_int(-e);
      for (int i = 0; i < m; ++i) {
        const float x = vb[i] * inv;  // exact: a power of two
        hi[32 * b + i] = quant::f32_to_f16(x);
        if (w.type == GgmlType::F32) lo[32 * b + i] = quant::f32_to_f16(x - quant::f16_to_f32(hi[32 * b + i]));
      }
    }
  }
  // Lane 4g + t, block b: the 8 values 32b + 8p + 2t + s (p = 0..3, s = 0, 1) as 4 pairs, pair p
  // in fragment piece p / 2 at word 2 (p % 2) + h (weight_layout.h).
  const int parts = w.type == GgmlType::F32 ? 4 : 2;
  for (int b = 0; b < kTileBlocks; ++b)
    for (int t = 0; t < 4; ++t)
      for (int p = 0; p < 4; ++p) {
        uint8_t* dst = tile + (4 * g + t) * 16 + (parts * b + p / 2) * 512 + 4 * (2 * (p % 2) + h);
        std::memcpy(dst, hi + 32 * b + 8 * p + 2 * t, 4);
        if (parts == 4) std::memcpy(dst + 2 * 512, lo + 32 * b + 8 * p + 2 * t, 4);
      }
}

bool has_quant_writer(GgmlType t) {
  return t == GgmlType::Q4_0 || t == GgmlType::Q8_0 || t == GgmlType::Q4_K || t == GgmlType::Q5_K ||
         t == GgmlType::Q6_K;
}

}  // namespace

void repack_group(const DevWeight& w, const uint8_t* src, int64_t src_row_bytes, int64_t rows, uint8_t* dst) {
  MEMRA_ASSERT(rows >= 1 && rows <= kGroupRows);
  std::memset(dst, 0, static_cast<size_t>(w.group_stride));
  if (has_quant_writer(w.type) && w.file_type != w.type) {  // transcoded a row at a time, then written
    std::vector<uint8_t> row(quant::row_bytes(w.type, w.n_in));
    for (int64_t rho = 0; rho < rows; ++rho) {
      quant::transcode_row(w.file_type, w.type, src + rho * src_row_bytes, row.data(), w.n_in);
      for (int64_t kt = 0; kt < w.n_kt; ++kt)
        write_quant_row_tile(w, row.data(), kt, static_cast<int>(rho), dst + kt * w.tile_bytes);
    }
    return;
  }
  if (!has_quant_writer(w.type)) {
    std::vector<float> v(w.file_type == GgmlType::F16 && w.type == GgmlType::F16 ? 0 : static_cast<size_t>(w.n_in));
    for (int64_t rho = 0; rho < rows; ++rho) {
      const uint8_t* row = src + rho * src_row_bytes;
      if (!v.empty()) quant::dequantize_row(w.file_type, row, v.data(), w.n_in);
      for (int64_t kt = 0; kt < w.n_kt; ++kt)
        write_float_row_tile(w, row, v.data(), kt, static_cast<int>(rho), dst + kt * w.tile_bytes);
    }
    return;
  }
  for (int64_t rho = 0; rho < rows; ++rho)
    for (int64_t kt = 0; kt < w.n_kt; ++kt)
      write_quant_row_tile(w, src + rho * src_row_bytes, kt, static_cast<int>(rho), dst + kt * w.tile_bytes);
}

void unpack_row(const DevWeight& w, const uint8_t* data, int64_t mat, int64_t j, float* out) {
  const uint8_t* m = data + static_cast<size_t>(mat) * w.mat_stride;
  for (int64_t k = 0; k < w.n_in; ++k) out[k] = decode_weight(w, m, j, k);
}

}  // namespace memra::cuda
