// Legacy 32-element block formats: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 (decode and encode).
//
// The encoders follow ggml's reference quantizers step by step (same scale choice, same float
// operations, same rounding), so their output matches llama.cpp's bit for bit on finite input:
// - Q4_0 / Q5_0: the element of largest magnitude (first one on ties) maps to code 0, so
//   d = that element / -8 (or / -16), codes = trunc(x / d + 8.5) (or + 16.5), capped at 15 (31).
// - Q4_1 / Q5_1: m = block minimum, d = (max - min) / 15 (31), codes = trunc((x - m) / d + 0.5).
// - Q8_0: d = max |x| / 127, codes = roundf(x / d).
// Division is by multiplication with 1 / d computed in float before d is rounded to f16.
#include <cmath>
#include <cfloat>

#include "quant/codec.h"
#include "quant/quant.h"

namespace memra::quant::detail {
namespace {

// Truncates v toward zero into 0..hi; NaN and negatives give 0 (they only occur for data the
// format cannot represent, where any code is as good as another but UB is not).
inline int trunc_code(float v, int hi) {
  if (!(v > 0.0f)) return 0;
  if (v >= static_cast<float>(hi)) return hi;
  return static_cast<int>(v);
}

inline uint32_t load_qh(const uint8_t qh[4]) {
  return static_cast<uint32_t>(qh[0]) | static_cast<uint32_t>(qh[1]) << 8 | static_cast<uint32_t>(qh[2]) << 16 |
         static_cast<uint32_t>(qh[3]) << 24;
}

inline void store_qh(uint32_t v, uint8_t qh[4]) {
  for (int i = 0; i < 4; ++i) qh[i] = static_cast<uint8_t>(v >> (8 * i));
}

inline void min_max(const float* x, const char* type, float& lo, float& hi) {
  lo = FLT_MAX;
  hi = -FLT_MAX;
  for (int j = 0; j < kQK; ++j) {
    const float v = x[j];
    if (!std::isfinite(v)) fail_non_finite(type, v);
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
}

// ---- Q4_0 ----

void decode_q4_0(const BlockQ4_0& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int j = 0; j < kQK / 2; ++j) {
    y[j] = static_cast<float>((b.qs[j] & 0x0F) - 8) * d;
    y[j + kQK / 2] = static_cast<float>((b.qs[j] >> 4) - 8) * d;
  }
}

void encode_q4_0(const float* x, BlockQ4_0& b) {
  const float d = signed_absmax(x, kQK, "q4_0") / -8.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  b.d = f32_to_f16(d);
  for (int j = 0; j < kQK / 2; ++j) {
    const int lo = trunc_code(x[j] * id + 8.5f, 15);
    const int hi = trunc_code(x[j + kQK / 2] * id + 8.5f, 15);
    b.qs[j] = static_cast<uint8_t>(lo | (hi << 4));
  }
}

// ---- Q4_1 ----

void decode_q4_1(const BlockQ4_1& b, float* y) {
  const float d = f16_to_f32(b.d);
  const float m = f16_to_f32(b.m);
  for (int j = 0; j < kQK / 2; ++j) {
    y[j] = static_cast<float>(b.qs[j] & 0x0F) * d + m;
    y[j + kQK / 2] = static_cast<float>(b.qs[j] >> 4) * d + m;
  }
}

void encode_q4_1(const float* x, BlockQ4_1& b) {
  float lo, hi;
  min_max(x, "q4_1", lo, hi);
  const float d = (hi - lo) / 15.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  b.d = f32_to_f16(d);
  b.m = f32_to_f16(lo);
  for (int j = 0; j < kQK / 2; ++j) {
    const int q0 = trunc_code((x[j] - lo) * id + 0.5f, 15);
    const int q1 = trunc_code((x[j + kQK / 2] - lo) * id + 0.5f, 15);
    b.qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
  }
}

// ---- Q5_0 ----

void decode_q5_0(const BlockQ5_0& b, float* y) {
  const float d = f16_to_f32(b.d);
  const uint32_t qh = load_qh(b.qh);
  for (int j = 0; j < kQK / 2; ++j) {
    const int h0 = static_cast<int>((qh >> j) & 1) << 4;
    const int h1 = static_cast<int>((qh >> (j + kQK / 2)) & 1) << 4;
    y[j] = static_cast<float>(((b.qs[j] & 0x0F) | h0) - 16) * d;
    y[j + kQK / 2] = static_cast<float>(((b.qs[j] >> 4) | h1) - 16) * d;
  }
}

void encode_q5_0(const float* x, BlockQ5_0& b) {
  const float d = signed_absmax(x, kQK, "q5_0") / -16.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  b.d = f32_to_f16(d);
  uint32_t qh = 0;
  for (int j = 0; j < kQK / 2; ++j) {
    const int q0 = trunc_code(x[j] * id + 16.5f, 31);
    const int q1 = trunc_code(x[j + kQK / 2] * id + 16.5f, 31);
    b.qs[j] = static_cast<uint8_t>((q0 & 0x0F) | ((q1 & 0x0F) << 4));
    qh |= static_cast<uint32_t>(q0 >> 4) << j;
    qh |= static_cast<uint32_t>(q1 >> 4) << (j + kQK / 2);
  }
  store_qh(qh, b.qh);
}

// ---- Q5_1 ----

void decode_q5_1(const BlockQ5_1& b, float* y) {
  const float d = f16_to_f32(b.d);
  const float m = f16_to_f32(b.m);
  const uint32_t qh = load_qh(b.qh);
  for (int j = 0; j < kQK / 2; ++j) {
    const int h0 = static_cast<int>((qh >> j) & 1) << 4;
    const int h1 = static_cast<int>((qh >> (j + kQK / 2)) & 1) << 4;
    y[j] = static_cast<float>((b.qs[j] & 0x0F) | h0) * d + m;
    y[j + kQK / 2] = static_cast<float>((b.qs[j] >> 4) | h1) * d + m;
  }
}

void encode_q5_1(const float* x, BlockQ5_1& b) {
  float lo, hi;
  min_max(x, "q5_1", lo, hi);
  const float d = (hi - lo) / 31.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  b.d = f32_to_f16(d);
  b.m = f32_to_f16(lo);
  uint32_t qh = 0;
  for (int j = 0; j < kQK / 2; ++j) {
    const int q0 = trunc_code((x[j] - lo) * id + 0.5f, 31);
    const int q1 = trunc_code((x[j + kQK / 2] - lo) * id + 0.5f, 31);
    b.qs[j] = static_cast<uint8_t>((q0 & 0x0F) | ((q1 & 0x0F) << 4));
    qh |= static_cast<uint32_t>(q0 >> 4) << j;
    qh |= static_cast<uint32_t>(q1 >> 4) << (j + kQK / 2);
  }
  store_qh(qh, b.qh);
}

// ---- Q8_0 ----

void decode_q8_0(const BlockQ8_0& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(b.qs[j]) * d;
}

void encode_q8_0(const float* x, BlockQ8_0& b) {
  float amax = 0.0f;
  for (int j = 0; j < kQK; ++j) {
    if (!std::isfinite(x[j])) fail_non_finite("q8_0", x[j]);
    const float a = std::fabs(x[j]);
    amax = a > amax ? a : amax;
  }
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  b.d = f32_to_f16(d);
  // |x * id| <= 127 up to a few roundings; the clamp only matters when d underflows into the
  // subnormal range and 1 / d is coarse.
  for (int j = 0; j < kQK; ++j) {
    float v = x[j] * id;
    v = v > -127.0f ? v : -127.0f;
    v = v < 127.0f ? v : 127.0f;
    b.qs[j] = static_cast<int8_t>(round_half_away(v));
  }
}

}  // namespace

RowCodec codec_q4_0() { return make_codec<BlockQ4_0, kQK, decode_q4_0, encode_q4_0>(); }
RowCodec codec_q4_1() { return make_codec<BlockQ4_1, kQK, decode_q4_1, encode_q4_1>(); }
RowCodec codec_q5_0() { return make_codec<BlockQ5_0, kQK, decode_q5_0, encode_q5_0>(); }
RowCodec codec_q5_1() { return make_codec<BlockQ5_1, kQK, decode_q5_1, encode_q5_1>(); }
RowCodec codec_q8_0() { return make_codec<BlockQ8_0, kQK, decode_q8_0, encode_q8_0>(); }

}  // namespace memra::quant::detail
