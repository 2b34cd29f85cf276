// K-quant decoders (Q2_K .. Q6_K, 256-element super-blocks) and their row codecs. The encoders
// live in q_k_encode.cpp. Element placement is documented on the block structs in blocks.h.
//
// Float operations follow ggml's order so decoded values match llama.cpp's bit for bit: the
// sub-block scale is formed first (d * scale, dmin * min), then value = scale * q - min.
#include "quant/codec.h"
#include "quant/quant.h"

namespace memra::quant::detail {
namespace {

void decode_q2_k(const BlockQ2_K& b, float* y) {
  const float d = f16_to_f32(b.d);
  const float dmin = f16_to_f32(b.dmin);
  // Sub-block s covers elements 16 s .. 16 s + 15; group g = e / 32 selects bits 2 (g % 4).
  for (int s = 0; s < 16; ++s) {
    const float dl = d * static_cast<float>(b.scales[s] & 0x0F);
    const float ml = dmin * static_cast<float>(b.scales[s] >> 4);
    const int g = s / 2;
    const uint8_t* q = b.qs + (g / 4) * 32 + (s % 2) * 16;
    const int shift = 2 * (g % 4);
    for (int l = 0; l < 16; ++l) y[16 * s + l] = dl * static_cast<float>((q[l] >> shift) & 3) - ml;
  }
}

void decode_q3_k(const BlockQ3_K& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int s = 0; s < 16; ++s) {
    const float dl = d * static_cast<float>(q3k_scale(b.scales, s));
    for (int l = 0; l < 16; ++l) y[16 * s + l] = dl * static_cast<float>(q3k_code(b, 16 * s + l));
  }
}

void decode_q4_k(const BlockQ4_K& b, float* y) {
  const float d = f16_to_f32(b.d);
  const float dmin = f16_to_f32(b.dmin);
  for (int s = 0; s < 8; ++s) {
    const ScaleMin sm = k_scale_min(b.scales, s);
    const float dl = d * static_cast<float>(sm.scale);
    const float ml = dmin * static_cast<float>(sm.min);
    const uint8_t* q = b.qs + (s / 2) * 32;
    const int shift = 4 * (s % 2);
    for (int l = 0; l < 32; ++l) y[32 * s + l] = dl * static_cast<float>((q[l] >> shift) & 0x0F) - ml;
  }
}

void decode_q5_k(const BlockQ5_K& b, float* y) {
  const float d = f16_to_f32(b.d);
  const float dmin = f16_to_f32(b.dmin);
  for (int s = 0; s < 8; ++s) {
    const ScaleMin sm = k_scale_min(b.scales, s);
    const float dl = d * static_cast<float>(sm.scale);
    const float ml = dmin * static_cast<float>(sm.min);
    const uint8_t* q = b.qs + (s / 2) * 32;
    const int shift = 4 * (s % 2);
    for (int l = 0; l < 32; ++l) {
      const int v = ((q[l] >> shift) & 0x0F) | (((b.qh[l] >> s) & 1) << 4);
      y[32 * s + l] = dl * static_cast<float>(v) - ml;
    }
  }
}

void decode_q6_k(const BlockQ6_K& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int s = 0; s < 16; ++s) {
    const float dl = d * static_cast<float>(b.scales[s]);
    const int h = s / 8;           // half of the super-block
    const int r0 = (s % 8) * 16;   // first position within the half
    const int quarter = r0 / 32;   // which 2-bit field of qh
    const uint8_t* ql = b.ql + h * 64 + r0 % 64;
    const uint8_t* qh = b.qh + h * 32 + r0 % 32;
    const int lshift = 4 * (r0 / 64);
    for (int l = 0; l < 16; ++l) {
      const int v = ((ql[l] >> lshift) & 0x0F) | (((qh[l] >> (2 * quarter)) & 3) << 4);
      y[16 * s + l] = dl * static_cast<float>(v - 32);
    }
  }
}

}  // namespace

RowCodec codec_q2_k() { return make_codec<BlockQ2_K, kQK_K, decode_q2_k, encode_q2_k>(); }
RowCodec codec_q3_k() { return make_codec<BlockQ3_K, kQK_K, decode_q3_k, encode_q3_k>(); }
RowCodec codec_q4_k() { return make_codec<BlockQ4_K, kQK_K, decode_q4_k, encode_q4_k>(); }
RowCodec codec_q5_k() { return make_codec<BlockQ5_K, kQK_K, decode_q5_k, encode_q5_k>(); }
RowCodec codec_q6_k() { return make_codec<BlockQ6_K, kQK_K, decode_q6_k, encode_q6_k>(); }

}  // namespace memra::quant::detail
