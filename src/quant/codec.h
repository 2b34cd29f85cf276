// Internal plumbing between the format files and dispatch.cpp: each format provides a block
// decoder and a block encoder; the row loops here turn them into whole-row kernels.
//
// dot_blocks decodes each block with the same function dequantize_row uses and accumulates
// double(value) * double(x) in element order into one double, so dot_row equals the sequential
// double dot product of dequantize_row's output bit for bit.
#pragma once

#include <cmath>
#include <cstdint>

#include "quant/blocks.h"

namespace memra::quant::detail {

// Row kernels of one type; every count is in blocks.
struct RowCodec {
  int block_elems = 0;
  void (*dequant)(const uint8_t* src, float* dst, int64_t n_blocks) = nullptr;
  double (*dot)(const uint8_t* src, const float* x, int64_t n_blocks) = nullptr;
  void (*quant)(const float* src, uint8_t* dst, int64_t n_blocks) = nullptr;
};

template <class Block, int QK, void (*Decode)(const Block&, float*)>
void dequant_blocks(const uint8_t* src, float* dst, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i) Decode(load_block<Block>(src + i * sizeof(Block)), dst + i * QK);
}

template <class Block, int QK, void (*Decode)(const Block&, float*)>
double dot_blocks(const uint8_t* src, const float* x, int64_t n_blocks) {
  double acc = 0.0;
  float buf[QK];
  for (int64_t i = 0; i < n_blocks; ++i) {
    Decode(load_block<Block>(src + i * sizeof(Block)), buf);
    const float* xb = x + i * QK;
    for (int j = 0; j < QK; ++j) acc += static_cast<double>(buf[j]) * static_cast<double>(xb[j]);
  }
  return acc;
}

template <class Block, int QK, void (*Encode)(const float*, Block&)>
void quant_blocks(const float* src, uint8_t* dst, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i) {
    Block b;
    Encode(src + i * QK, b);
    std::memcpy(dst + i * sizeof(Block), &b, sizeof(Block));
  }
}

template <class Block, int QK, void (*Decode)(const Block&, float*), void (*Encode)(const float*, Block&)>
constexpr RowCodec make_codec() {
  return {QK, &dequant_blocks<Block, QK, Decode>, &dot_blocks<Block, QK, Decode>, &quant_blocks<Block, QK, Encode>};
}

// Throws memra::Error when a value to encode is NaN or infinite (the integer formats cannot
// represent it, and converting it to an integer code would be undefined).
void fail_non_finite(const char* type_name, float value);

// The value of largest magnitude among x[0..n) (the first one on ties); fails (fail_non_finite)
// on a NaN or infinite one.
inline float signed_absmax(const float* x, int n, const char* type) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < n; ++j) {
    const float v = x[j];
    if (!std::isfinite(v)) fail_non_finite(type, v);
    if (amax < std::fabs(v)) {
      amax = std::fabs(v);
      max = v;
    }
  }
  return max;
}

// Nearest integer, halfway cases away from zero (C's roundf), for |v| well inside int range.
// Truncation plus an exact fractional-part test: v - trunc(v) is exact for any float.
inline int round_half_away(float v) {
  int t = static_cast<int>(v);
  const float frac = v - static_cast<float>(t);
  t += (frac >= 0.5f) - (frac <= -0.5f);
  return t;
}

// K-quant block encoders (q_k_encode.cpp), wired into their codecs by q_k.cpp.
void encode_q2_k(const float* x, BlockQ2_K& b);
void encode_q3_k(const float* x, BlockQ3_K& b);
void encode_q4_k(const float* x, BlockQ4_K& b);
void encode_q5_k(const float* x, BlockQ5_K& b);
void encode_q6_k(const float* x, BlockQ6_K& b);

RowCodec codec_f32();
RowCodec codec_f16();
RowCodec codec_bf16();
RowCodec codec_q4_0();
RowCodec codec_q4_1();
RowCodec codec_q5_0();
RowCodec codec_q5_1();
RowCodec codec_q8_0();
RowCodec codec_q2_k();
RowCodec codec_q3_k();
RowCodec codec_q4_k();
RowCodec codec_q5_k();
RowCodec codec_q6_k();
RowCodec codec_iq4_nl();
RowCodec codec_iq4_xs();

}  // namespace memra::quant::detail
