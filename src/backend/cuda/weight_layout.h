// Device layout of weight matrices. On upload every row is repacked so that each 32-element
// block's quant bits sit in aligned 16-byte pieces (the GGUF block structs are 18, 34, 144, 176
// or 210 bytes and would force unaligned loads), with the block's scales in a separate section
// of the same row. The bytes per row are unchanged (plus padding to 16), so the bandwidth floor
// is the file's.
//
// Sections, per row of nb = n_in/32 blocks, ns = n_slots(nb) block slots (matmul_order.h: block
// b sits in slot slot_of_block(b)), nsb = n_in/256 super-blocks for K-quants (natural order):
//   Q4_0: qs[ns][16] (Q4_0 nibble order: byte i = elem i | elem i+16 << 4), d f16[ns]
//   Q8_0: qs[ns][32] int8, d f16[ns]
//   Q4_K: qs[ns][16] (same nibble order), meta[nsb][16] = {f16 d, f16 dmin, u8 scales[12]}
//   Q5_K: qs[ns][16], qh[ns] u32 (bit i = 5th bit of elem i), meta[nsb][16]
//   Q6_K: ql[ns][16] (nibble order), qh[ns][2] u32 (word w: elem 16w+4k+p's 2 bits at bit
//         8p+2k), sc[ns][2] int8 (elems 0-15, 16-31), d f16[nsb]
//   F32 / F16 / BF16: the plain row.
// Types without a device kernel (Q4_1, Q5_x, Q2_K, Q3_K) are converted to F16 on upload.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/ggml_type.h"

namespace memra::cuda {

struct DevWeight {
  GgmlType type = GgmlType::F32;  // device type (after any conversion)
  int64_t n_in = 0, n_out = 0, n_mat = 1;
  int64_t nb = 0;           // 32-element blocks per row
  int64_t ns = 0;           // block slots per row (quantized types), n_slots(nb)
  size_t row_stride = 0;    // bytes between rows (multiple of 16)
  size_t mat_stride = 0;    // bytes between matrices
  uint32_t off_a = 0;       // section offsets within a row (see the table above)
  uint32_t off_b = 0;
  uint32_t off_c = 0;
  const uint8_t* data = nullptr;
};

// Device type a file type is stored as.
GgmlType device_type(GgmlType file_type);
// Fills geometry (not data) for a matrix of `file_type` [n_in, n_out, n_mat].
DevWeight plan_layout(GgmlType file_type, int64_t n_in, int64_t n_out, int64_t n_mat);
// Repacks `rows` GGUF rows (file_type) into device layout `w` rows at dst (host memory).
void repack_rows(const DevWeight& w, GgmlType file_type, const uint8_t* src, int64_t rows, uint8_t* dst);
// Decodes one device-layout row back to float (tests; and the embedding lookup's reference).
void unpack_row(const DevWeight& w, const uint8_t* row, float* out);

}  // namespace memra::cuda
