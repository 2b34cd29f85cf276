// Block formats: geometry of every ggml type, and CPU decode (and encode, for the writer and
// `memra synth`) of the ones memra runs.
//
// A row of n elements of a block type is n / block_elems blocks of block_bytes each, laid out
// exactly as ggml writes them (little-endian, packed, no padding between blocks).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/ggml_type.h"
#include "quant/float_convert.h"

namespace memra::quant {

struct TypeInfo {
  const char* name;     // "q4_0", "f16", ... (lower case, as in llama.cpp's file-type names)
  int64_t block_elems;  // elements per block (1 for plain floats)
  size_t block_bytes;   // bytes per block
  bool decodable;       // memra can dequantize it on the CPU
  bool encodable;       // memra can quantize to it (writer / synth)
};

// Geometry for any id < kGgmlTypeCount that ggml defines; nullptr for unknown / removed ids.
const TypeInfo* type_info(uint32_t type_id);
const TypeInfo& type_info(GgmlType type);  // asserts the type is known
const char* type_name(GgmlType type);
// The names of the types memra decodes, comma-separated in id order (for messages).
std::string decodable_type_names();
// Parses "q4_0", "Q4_0", "bf16", ... ; nullopt if unknown.
std::optional<GgmlType> parse_type_name(std::string_view name);

// Bytes of a row of n elements; asserts n is a multiple of the block size.
size_t row_bytes(GgmlType type, int64_t n);

// Decode n elements (a multiple of the block size) from src into dst (float32).
// Throws memra::Error for types memra cannot decode.
void dequantize_row(GgmlType type, const void* src, float* dst, int64_t n);

// Encode n float32 values into blocks of `type`. Round-to-nearest quantizers with the same
// block layout ggml uses: Q4_0 .. Q8_0 reproduce ggml's reference quantizer bit for bit; the
// K-quants use a simple least-squares scale search (not ggml's importance-weighted one).
// Throws memra::Error for types memra cannot encode, and for NaN / infinite input to the
// integer formats (F16 / BF16 / F32 carry them through).
void quantize_row(GgmlType type, const float* src, void* dst, int64_t n);

// A wider block format that holds every value of `type` exactly (Q3_K -> Q6_K, Q5_0 -> Q8_0,
// IQ4_NL -> Q8_0; nullopt for the others), for backends that run the wider format but not
// `type`; transcode_row rewrites n elements (a multiple of the block size) of a row into it, and
// dequantize_row of the result equals dequantize_row of the source bit for bit.
std::optional<GgmlType> lossless_wider_type(GgmlType type);
// A wider block format that holds `type`'s values up to one f16 rounding of each 32-element
// block's scale (IQ4_XS -> Q8_0: the code is the table value, the scale f16(d * (scale - 32)):
// at most 2^-11 relative a weight, what widening each value to f16 would cost, in 8.5 bits a
// weight instead of 16; a scale past f16's range becomes infinite, as those values would);
// nullopt for the others. transcode_row writes it too.
std::optional<GgmlType> rounded_wider_type(GgmlType type);
void transcode_row(GgmlType from, GgmlType to, const void* src, void* dst, int64_t n);

// Scalar conversions (IEEE binary16 round-to-nearest-even; bfloat16 round-to-nearest-even):
// quant/float_convert.h, included above.

// Decode n_rows consecutive rows of n_cols elements (rows are row_bytes(type, n_cols) apart in
// src, n_cols floats apart in dst). Throws memra::Error for types memra cannot decode.
void dequantize_rows(GgmlType type, const void* src, float* dst, int64_t n_rows, int64_t n_cols);

// Dot product of one row of n elements of `type` with x, decoded block by block (the row is
// never materialised). Accumulates double(value) * double(x[i]) into one double in element
// order, so the result is bit-identical to the sequential double dot product of
// dequantize_row's output with x. Throws memra::Error for types memra cannot decode.
double dot_row(GgmlType type, const void* row, const float* x, int64_t n);

}  // namespace memra::quant
