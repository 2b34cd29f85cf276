// Device layout of weight matrices: tiles in the order the tensor-core matmul (k_matmul.cu)
// consumes them. Repacked on the host at upload; the bytes of a quantized type are the file's
// (no padding besides whole row groups and k-tiles), so the bandwidth floor is the file's.
//
// A matrix of n_out rows x n_in columns is cut into row groups of 16 rows (matmul_order.h) and
// k-tiles of 256 columns, zero-padded at the ends. Tile (row group rg, k-tile kt) of matrix e
// starts at data + e * mat_stride + rg * group_stride + kt * tile_bytes.
//
// Inside a tile, a warp lane l (g = l / 4, t = l % 4) owns rows g and g + 8 (h = 0, 1) of the
// group and, in each 32-element block b (0..7), the elements 32b + 8p + 2t + s for pair p (0..3)
// and s (0, 1): exactly the A fragments of two mma.m16n8k16 (pairs 0-1: elements 0-15 of the
// block, pairs 2-3: elements 16-31). Sections (offsets within the tile):
//   "pieces" [i][lane][16 bytes]: 512 contiguous bytes per i, so a warp's 16-byte loads of one
//   piece index are contiguous. Per type:
//   Q4_0, Q4_K, Q5_K, Q6_K codes (low 4 bits), pieces 0-3: piece i = words
//       [u(2i, 0), u(2i, 1), u(2i+1, 0), u(2i+1, 1)], u(b, h): bits 4p + 16s = low 4 bits of the
//       code of element (p, s) of row g + 8h, block b.
//   Q8_0 codes, pieces 0-7: piece b = words [v(b,0,0), v(b,0,1), v(b,1,0), v(b,1,1)],
//       v(b, h, q): bytes = int8 codes of elements (2q, 0), (2q, 1), (2q+1, 0), (2q+1, 1), each
//       stored as code + 128 (the byte XOR 0x80: the decode puts it under an f16 exponent as is).
//   F16 / BF16 values, pieces 0-15: piece 2b + j = A fragment j of block b as the mma takes it:
//       the half2 pairs [(g, 2j), (g + 8, 2j), (g, 2j + 1), (g + 8, 2j + 1)] as (row, p), so one
//       16-byte load is one fragment (rows in separate pieces cost ~8 register moves a block:
//       half of an F16 k-tile's instructions, SASS 2026-12-04).
//       BF16 is stored as f16(w * 2^-p) with a per-(row, block) exponent (matmul_order.h).
//   F32 values, pieces 0-31: piece 4b + 2 part + j, fragment j as above, part 0 = hi, 1 = lo
//       (matmul_order.h).
//   Q5_K fifth bits, 1 piece at 2048: word b / 2, bit high_bit_pos(q5k_high_rot(b, h, p), p, s).
//   Q6_K high 2 bits, 2 pieces at 2048: piece b / 4, word b % 4, bits high_bit_pos(q6k_high_rot(h, p),
//       p, s) (+1).
// Per-row data, indexed by g (a lane loads the 32 bytes of its own g):
//   Q4_0, Q8_0 scales: [g][b][h] f16, 256 bytes after the codes.
//   Q4_K, Q5_K meta:   [g][h][16 bytes] = the super-block's {f16 d, f16 dmin, 12 bytes of scales and
//       mins repacked as 16 six-bit fields (k_field)}.
//   Q6_K scales:       [g][h][16] int8 at 3072; d: [g][h] f16 at 3328.
//   BF16, F32 block exponents: [g][b][h] int8 after the values.
// Types without a tile format run as another type, and the loader says so: Q3_K as Q6_K, Q5_0 and
// IQ4_NL as Q8_0 (the same values: quant.h lossless_wider_type), IQ4_XS as Q8_0 with each block's
// scale rounded to f16 (rounded_wider_type); the others (Q4_1, Q5_1, Q2_K) are widened to F16 on
// upload.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cuda/matmul_order.h"
#include "common/ggml_type.h"
#include "quant/quant.h"

#ifdef __CUDACC__
#include <cuda_fp16.h>
#endif

namespace memra::cuda {

// Section geometry of one tile, per device type.
struct TileFormat {
  int code_pieces = 0;   // 16-byte pieces per lane holding codes / values
  int code_bytes = 0;    // 512 * code_pieces
  int extra_lane_pieces = 0;  // per-lane pieces after the codes (Q5_K, Q6_K high bits)
  int row_data_off = 0;  // per-row section (indexed by g), 32 bytes per g (16 for exponents)
  int row_data_bytes = 0;
  int d_off = 0;         // Q6_K: the f16 d pairs
  int tile_bytes = 0;
};

MEMRA_ORDER_HD constexpr TileFormat tile_format(GgmlType t) {
  TileFormat f;
  switch (t) {
    case GgmlType::Q4_0: f = {4, 2048, 0, 2048, 256, 0, 2304}; break;
    case GgmlType::Q8_0: f = {8, 4096, 0, 4096, 256, 0, 4352}; break;
    case GgmlType::Q4_K: f = {4, 2048, 0, 2048, 256, 0, 2304}; break;
    case GgmlType::Q5_K: f = {4, 2048, 1, 2560, 256, 0, 2816}; break;
    case GgmlType::Q6_K: f = {4, 2048, 2, 3072, 256, 3328, 3360}; break;
    case GgmlType::F16: f = {16, 8192, 0, 8192, 0, 0, 8192}; break;
    case GgmlType::BF16: f = {16, 8192, 0, 8192, 128, 0, 8320}; break;
    case GgmlType::F32: f = {32, 16384, 0, 16384, 128, 0, 16512}; break;
    default: break;
  }
  return f;
}

// Where a code's high bits sit in its lane's word (Q5_K one bit, Q6_K two): element (p, s) of row
// g + 8h at bit (4 + 4 (p % 2) + 16 s + rot) mod 32, so that the word rotated right by `rot` has pair
// p's high bits right above the pair's nibbles where the decode puts them (matmul_tile_decode.cuh:
// bits 4 and 20 for an even p, whose nibbles it takes at bits 0 and 16; bits 8 and 24 for an odd p,
// nibbles at 4 and 20). One rotation per row and half-block and one LOP3 per f16 pair then merge
// them (the layout before 2026-12-04 took ~4 shifts and masks per pair: H200 Nsight, the Q6_K head
// decoded in 813 instructions a k-tile). The rotations tile the 32 bits exactly: Q6_K's 2h + 8 (p / 2)
// one word a block (16 two-bit fields), Q5_K's h + 2 (p / 2) + 8 (b % 2) one word a pair of blocks
// (32 one-bit fields).
MEMRA_ORDER_HD constexpr int q6k_high_rot(int h, int p) { return 2 * h + 8 * (p / 2); }
MEMRA_ORDER_HD constexpr int q5k_high_rot(int b, int h, int p) { return h + 2 * (p / 2) + 8 * (b % 2); }
MEMRA_ORDER_HD constexpr int high_bit_pos(int rot, int p, int s) { return (4 + 4 * (p % 2) + 16 * s + rot) & 31; }

struct DevWeight {
  GgmlType type = GgmlType::F32;       // device type (after any widening)
  GgmlType file_type = GgmlType::F32;  // the GGUF's type
  int64_t n_in = 0, n_out = 0, n_mat = 1;
  int64_t n_kt = 0;          // k-tiles per row
  int64_t n_rg = 0;          // row groups per matrix
  int64_t tile_bytes = 0;
  int64_t group_stride = 0;  // bytes of one row group (n_kt tiles)
  size_t mat_stride = 0;     // bytes of one matrix (n_rg row groups)
  const uint8_t* data = nullptr;
};

// Whether one matrix of `a` and one of `b` have the same device type and tile geometry (a grouped
// launch can take either as a slot's matrix).
inline bool same_matrix_geometry(const DevWeight& a, const DevWeight& b) {
  return a.type == b.type && a.n_in == b.n_in && a.n_out == b.n_out && a.group_stride == b.group_stride;
}

// Device type a file type is stored as (F16 for types without a tile format).
GgmlType device_type(GgmlType file_type);
// Fills geometry (not data) for a matrix of `file_type` [n_in, n_out, n_mat].
DevWeight plan_layout(GgmlType file_type, int64_t n_in, int64_t n_out, int64_t n_mat);
// Repacks the 16 GGUF rows of one row group (fewer at the end of a matrix: `rows`, the rest
// zero) into the group's n_kt tiles at dst (host memory, group_stride bytes).
void repack_group(const DevWeight& w, const uint8_t* src, int64_t src_row_bytes, int64_t rows, uint8_t* dst);
// Decodes row j of matrix `mat` (host copy of the device bytes at `data`) to float (tests).
void unpack_row(const DevWeight& w, const uint8_t* data, int64_t mat, int64_t j, float* out);

// ---- element decode, shared by the host (unpack_row) and the embedding kernel ----

MEMRA_ORDER_HD inline float f16_bits_to_float(uint16_t h) {
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(h));  // the conversion instruction
#else
  return quant::f16_to_f32(h);
#endif
}

// Where element (row rho of the group, column k of the k-tile) of a tile lives.
struct TileSlot {
  int lane, h, b, p, s;
};
MEMRA_ORDER_HD inline TileSlot tile_slot(int rho, int k) {
  TileSlot q;
  q.h = rho / 8;
  q.b = k / 32;
  q.p = (k % 32) / 8;
  q.s = k % 2;
  q.lane = 4 * (rho % 8) + (k % 8) / 2;
  return q;
}

MEMRA_ORDER_HD inline uint32_t load_u32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}
MEMRA_ORDER_HD inline uint16_t load_u16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | p[1] << 8);
}

// Q4_K / Q5_K 6-bit scale and min of sub-block j (0..7) from the 12 packed scale bytes.
MEMRA_ORDER_HD inline void k_scale_min(int j, const uint8_t* q, int& sc, int& m) {
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Q4_K / Q5_K on the device: the 12 scale bytes repacked (same size) as 16 six-bit fields, field f
// at bits 6f .. 6f + 5 of the 96-bit little-endian string: f = b the scale of sub-block b, f = 8 + b
// its min. Each field is then one shift (a funnel shift for fields 5 and 10, which straddle words)
// and one AND away; the file's packing (k_scale_min) took ~4-5 instructions for sub-blocks 4-7.
MEMRA_ORDER_HD inline int k_field(const uint8_t* q12, int f) {
  const int bit = 6 * f;
  const uint32_t two = static_cast<uint32_t>(q12[bit / 8]) | static_cast<uint32_t>(bit / 8 + 1 < 12 ? q12[bit / 8 + 1] : 0) << 8;
  return static_cast<int>((two >> (bit % 8)) & 63);
}
// The 12 repacked bytes from the file's 12 (the upload's writer; host only).
inline void k_fields_from_file(const uint8_t* file12, uint8_t* out12) {
  unsigned __int128 bits = 0;  // the 96-bit string, field f at bit 6f
  for (int b = 0; b < 8; ++b) {
    int sc, m;
    k_scale_min(b, file12, sc, m);
    bits |= static_cast<unsigned __int128>(sc) << (6 * b) | static_cast<unsigned __int128>(m) << (6 * (8 + b));
  }
  for (int i = 0; i < 12; ++i) out12[i] = static_cast<uint8_t>(bits >> (8 * i));
}

// Element (j, k) of matrix `mat` (a pointer to its first byte), decoded exactly as the CPU's
// dequantize_row does for the quantized types (the embedding lookup must equal the CPU's);
// F32 gives its hi + lo form.
MEMRA_ORDER_HD inline float decode_weight(const DevWeight& w, const uint8_t* mat, int64_t j, int64_t k) {
  const uint8_t* tile = mat + (j / kGroupRows) * w.group_stride + (k / kTileK) * w.tile_bytes;
  const TileSlot q = tile_slot(static_cast<int>(j % kGroupRows), static_cast<int>(k % kTileK));
  const int g = q.lane / 4;
  const TileFormat f = tile_format(w.type);
  auto nibble = [&]() -> int {
    const uint8_t* piece = tile + (q.b / 2) * 512 + q.lane * 16;
    const uint32_t u = load_u32(piece + 4 * (2 * (q.b % 2) + q.h));
    return static_cast<int>((u >> (4 * q.p + 16 * q.s)) & 0xF);
  };
  auto row_f16 = [&](int off) { return f16_bits_to_float(load_u16(tile + off)); };
  switch (w.type) {
    case GgmlType::Q4_0: {
      const float d = row_f16(f.row_data_off + g * 32 + (q.b * 2 + q.h) * 2);
      return static_cast<float>(nibble() - 8) * d;
    }
    case GgmlType::Q8_0: {
      const uint8_t* piece = tile + q.b * 512 + q.lane * 16 + 8 * q.h + 4 * (q.p / 2);
      const int code = static_cast<int>(piece[2 * (q.p % 2) + q.s]) - 128;
      return static_cast<float>(code) * row_f16(f.row_data_off + g * 32 + (q.b * 2 + q.h) * 2);
    }
    case GgmlType::Q4_K:
    case GgmlType::Q5_K: {
      const uint8_t* meta = tile + f.row_data_off + g * 32 + q.h * 16;
      const int sc = k_field(meta + 4, q.b), m = k_field(meta + 4, 8 + q.b);
      const float dl = f16_bits_to_float(load_u16(meta)) * static_cast<float>(sc);
      const float ml = f16_bits_to_float(load_u16(meta + 2)) * static_cast<float>(m);
      int v = nibble();
      if (w.type == GgmlType::Q5_K) {
        const uint32_t hw = load_u32(tile + 2048 + q.lane * 16 + 4 * (q.b / 2));
        v |= static_cast<int>((hw >> high_bit_pos(q5k_high_rot(q.b, q.h, q.p), q.p, q.s)) & 1) << 4;
      }
      return dl * static_cast<float>(v) - ml;
    }
    case GgmlType::Q6_K: {
      const uint32_t hw = load_u32(tile + 2048 + (q.b / 4) * 512 + q.lane * 16 + 4 * (q.b % 4));
      const int v = nibble() | static_cast<int>(((hw >> high_bit_pos(q6k_high_rot(q.h, q.p), q.p, q.s)) & 3) << 4);
      const int sub = 2 * q.b + q.p / 2;  // the 16-element sub-block of the super-block
      const int sc = static_cast<int8_t>(tile[3072 + g * 32 + q.h * 16 + sub]);
      const float d = row_f16(3328 + g * 4 + q.h * 2);
      return d * static_cast<float>(sc) * static_cast<float>(v - 32);
    }
    case GgmlType::F16:
    case GgmlType::BF16:
    case GgmlType::F32: {
      const bool f32 = w.type == GgmlType::F32;
      const int piece_i = (f32 ? 4 * q.b : 2 * q.b) + q.p / 2;
      auto value = [&](int part) {
        const uint8_t* piece = tile + (piece_i + 2 * part) * 512 + q.lane * 16;
        return f16_bits_to_float(load_u16(piece + 4 * (2 * (q.p % 2) + q.h) + 2 * q.s));
      };
      if (w.type == GgmlType::F16) return value(0);
      const int e = static_cast<int8_t>(tile[f.row_data_off + g * 16 + q.b * 2 + q.h]);
      const float v = f32 ? value(0) + value(1) : value(0);
      return v * exp2_int(e);
    }
    default: return 0.0f;
  }
}

}  // namespace memra::cuda
