// The row codecs of F32 / F16 / BF16 (the scalar conversions: float_convert.h).
#include <bit>
#include <cstring>

#include "quant/codec.h"
#include "quant/quant.h"

namespace memra::quant {

namespace detail {
namespace {

// Plain float types are "blocks" of one element.
struct BlockF32 {
  float v;
};
struct BlockF16 {
  uint16_t v;
};
struct BlockBF16 {
  uint16_t v;
};

void decode_f32(const BlockF32& b, float* y) { y[0] = b.v; }
void encode_f32(const float* x, BlockF32& b) { b.v = x[0]; }
void decode_f16(const BlockF16& b, float* y) { y[0] = f16_to_f32(b.v); }
void encode_f16(const float* x, BlockF16& b) { b.v = f32_to_f16(x[0]); }
void decode_bf16(const BlockBF16& b, float* y) { y[0] = bf16_to_f32(b.v); }
void encode_bf16(const float* x, BlockBF16& b) { b.v = f32_to_bf16(x[0]); }

// F32 rows are copied whole rather than one element at a time.
void dequant_f32(const uint8_t* src, float* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}
void quant_f32(const float* src, uint8_t* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

}  // namespace

RowCodec codec_f32() {
  RowCodec c = make_codec<BlockF32, 1, decode_f32, encode_f32>();
  c.dequant = dequant_f32;
  c.quant = quant_f32;
  return c;
}
RowCodec codec_f16() { return make_codec<BlockF16, 1, decode_f16, encode_f16>(); }
RowCodec codec_bf16() { return make_codec<BlockBF16, 1, decode_bf16, encode_bf16>(); }

}  // namespace detail
}  // namespace memra::quant
