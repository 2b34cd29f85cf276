// The non-linear 4-bit formats IQ4_NL and IQ4_XS (decode and encode). A code is an index into
// kIq4Values (blocks.h), so a weight takes one of 16 unevenly spaced values times its scale.
//
// Decoding follows ggml's float operations (IQ4_XS: the sub-block scale d * (scale - 32) first,
// then times the table value), so decoded values match llama.cpp's bit for bit
// (tests/quant_golden_test.cpp). The encoders are simple round-to-nearest ones, not ggml's
// (which searches the scale with importance weights): they exist for `memra synth` and the
// tests. IQ4_NL maps the block's largest magnitude to the table's -127; IQ4_XS does the same per
// sub-block and then fits the super-block's d so the largest sub-block scale is -32 d; every
// element takes the table value nearest to it (the lower index on a tie).
#include <cmath>

#include "quant/codec.h"
#include "quant/quant.h"

namespace memra::quant::detail {
namespace {

// Index of the table value nearest to t (the lower one on a tie); NaN gives the index of 1.
int nearest_index(float t) {
  int best = 8;
  float best_err = std::fabs(t - static_cast<float>(kIq4Values[8]));
  for (int i = 0; i < 16; ++i) {
    const float err = std::fabs(t - static_cast<float>(kIq4Values[i]));
    if (err < best_err || (err == best_err && i < best)) {
      best = i;
      best_err = err;
    }
  }
  return best;
}

// Codes of 32 elements with the scale `scale` (float), in Q4_0's nibble order.
void encode_codes(const float* x, float scale, uint8_t qs[kQK / 2]) {
  const float id = scale != 0.0f ? 1.0f / scale : 0.0f;
  for (int j = 0; j < kQK / 2; ++j) {
    const int lo = nearest_index(x[j] * id), hi = nearest_index(x[j + kQK / 2] * id);
    qs[j] = static_cast<uint8_t>(lo | (hi << 4));
  }
}

// ---- IQ4_NL ----

void decode_iq4_nl(const BlockIQ4_NL& b, float* y) {
  const float d = f16_to_f32(b.d);
  int8_t v[kQK];
  iq4_values(b.qs, v);
  for (int j = 0; j < kQK; ++j) y[j] = d * static_cast<float>(v[j]);
}

void encode_iq4_nl(const float* x, BlockIQ4_NL& b) {
  b.d = f32_to_f16(signed_absmax(x, kQK, "iq4_nl") / static_cast<float>(kIq4Values[0]));
  encode_codes(x, f16_to_f32(b.d), b.qs);
}

// ---- IQ4_XS ----

void decode_iq4_xs(const BlockIQ4_XS& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int s = 0; s < kQK_K / kQK; ++s) {
    const float dl = d * static_cast<float>(iq4xs_scale(b, s) - 32);
    int8_t v[kQK];
    iq4_values(b.qs + 16 * s, v);
    for (int j = 0; j < kQK; ++j) y[kQK * s + j] = dl * static_cast<float>(v[j]);
  }
}

void encode_iq4_xs(const float* x, BlockIQ4_XS& b) {
  constexpr int kSubs = kQK_K / kQK;
  float ideal[kSubs];  // each sub-block's own scale: its largest magnitude maps to -127
  float top = 0.0f;    // the ideal scale of largest magnitude (the first on ties)
  for (int s = 0; s < kSubs; ++s) {
    ideal[s] = signed_absmax(x + kQK * s, kQK, "iq4_xs") / static_cast<float>(kIq4Values[0]);
    if (std::fabs(ideal[s]) > std::fabs(top)) top = ideal[s];
  }
  b.d = f32_to_f16(top / -32.0f);
  const float d = f16_to_f32(b.d);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  b.scales_h = 0;
  for (int s = 0; s < kSubs; ++s) {
    int l = round_half_away(ideal[s] * id);
    l = l < -32 ? -32 : (l > 31 ? 31 : l);
    const int stored = l + 32;
    if (s % 2 == 0) b.scales_l[s / 2] = static_cast<uint8_t>(stored & 0x0F);
    else b.scales_l[s / 2] = static_cast<uint8_t>(b.scales_l[s / 2] | (stored & 0x0F) << 4);
    b.scales_h = static_cast<uint16_t>(b.scales_h | (stored >> 4) << (2 * s));
    encode_codes(x + kQK * s, d * static_cast<float>(l), b.qs + 16 * s);
  }
}

}  // namespace

RowCodec codec_iq4_nl() { return make_codec<BlockIQ4_NL, kQK, decode_iq4_nl, encode_iq4_nl>(); }
RowCodec codec_iq4_xs() { return make_codec<BlockIQ4_XS, kQK_K, decode_iq4_xs, encode_iq4_xs>(); }

}  // namespace memra::quant::detail
