// Re-encodings of a row into a wider block format: lossless ones (quant.h: lossless_wider_type)
// and IQ4_XS's, which rounds each block's scale to f16 (rounded_wider_type).
//
// Q3_K -> Q6_K: both formats are 16 sub-blocks of 16 with one f16 d a super-block and a signed
// integer scale a sub-block; a Q3_K code v (-4..3) becomes the Q6_K code v + 32 and its scale
// (-32..31, stored + 32) the int8 scale. Both decoders form d * scale first and then multiply by
// the code, so every value comes out bit for bit the same.
// Q5_0 -> Q8_0: value (q - 16) * d becomes the int8 code q - 16 with the same d.
// IQ4_NL -> Q8_0: value d * kIq4Values[q] becomes the int8 code kIq4Values[q] with the same d
// (one float product either way).
// IQ4_XS -> Q8_0: sub-block s's values d * (scale_s - 32) * kIq4Values[q] become the int8 code
// kIq4Values[q] with the scale f16(d * (scale_s - 32)) (the product is exact in float: an f16
// times a 6-bit integer; its f16 rounding is the one inexact step).
#include <cstring>

#include "common/error.h"
#include "quant/blocks.h"
#include "quant/quant.h"

namespace memra::quant {
namespace {

void q3_k_to_q6_k(const uint8_t* src, uint8_t* dst) {
  const BlockQ3_K in = load_block<BlockQ3_K>(src);
  BlockQ6_K out;
  for (int s = 0; s < 16; ++s) out.scales[s] = static_cast<int8_t>(q3k_scale(in.scales, s));
  out.d = in.d;
  int8_t q[kQK_K];
  for (int e = 0; e < kQK_K; ++e) q[e] = static_cast<int8_t>(q3k_code(in, e));
  q6k_pack_codes(q, out);
  std::memcpy(dst, &out, sizeof out);
}

void q5_0_to_q8_0(const uint8_t* src, uint8_t* dst) {
  const BlockQ5_0 in = load_block<BlockQ5_0>(src);
  uint32_t qh;
  std::memcpy(&qh, in.qh, 4);
  BlockQ8_0 out;
  out.d = in.d;
  for (int j = 0; j < kQK / 2; ++j) {
    out.qs[j] = static_cast<int8_t>(((in.qs[j] & 0x0F) | ((qh >> j) & 1) << 4) - 16);
    out.qs[j + kQK / 2] = static_cast<int8_t>(((in.qs[j] >> 4) | ((qh >> (j + kQK / 2)) & 1) << 4) - 16);
  }
  std::memcpy(dst, &out, sizeof out);
}

// One Q8_0 block of table values (IQ4_NL's and each IQ4_XS sub-block's) with scale bits d.
void iq4_to_q8_0(const uint8_t* qs, uint16_t d, uint8_t* dst) {
  BlockQ8_0 out;
  out.d = d;
  iq4_values(qs, out.qs);
  std::memcpy(dst, &out, sizeof out);
}

void iq4_nl_to_q8_0(const uint8_t* src, uint8_t* dst) {
  const BlockIQ4_NL in = load_block<BlockIQ4_NL>(src);
  iq4_to_q8_0(in.qs, in.d, dst);
}

// One super-block to eight Q8_0 blocks.
void iq4_xs_to_q8_0(const uint8_t* src, uint8_t* dst) {
  const BlockIQ4_XS in = load_block<BlockIQ4_XS>(src);
  const float d = f16_to_f32(in.d);
  for (int s = 0; s < kQK_K / kQK; ++s)
    iq4_to_q8_0(in.qs + 16 * s, f32_to_f16(d * static_cast<float>(iq4xs_scale(in, s) - 32)),
                dst + s * sizeof(BlockQ8_0));
}

}  // namespace

std::optional<GgmlType> lossless_wider_type(GgmlType type) {
  switch (type) {
    case GgmlType::Q3_K: return GgmlType::Q6_K;
    case GgmlType::Q5_0: return GgmlType::Q8_0;
    case GgmlType::IQ4_NL: return GgmlType::Q8_0;
    default: return std::nullopt;
  }
}

std::optional<GgmlType> rounded_wider_type(GgmlType type) {
  if (type == GgmlType::IQ4_XS) return GgmlType::Q8_0;
  return std::nullopt;
}

void transcode_row(GgmlType from, GgmlType to, const void* src, void* dst, int64_t n) {
  MEMRA_ASSERT(lossless_wider_type(from) == to || rounded_wider_type(from) == to, "transcode_row: {} has no form as {}",
               type_name(from), type_name(to));
  const TypeInfo& in = type_info(from);
  const TypeInfo& out = type_info(to);
  // Each input block becomes in / out blocks of the wider type (IQ4_XS: eight; the others: one).
  MEMRA_ASSERT(in.block_elems % out.block_elems == 0 && n % in.block_elems == 0);
  void (*const block_to)(const uint8_t*, uint8_t*) = from == GgmlType::Q3_K   ? q3_k_to_q6_k
                                                     : from == GgmlType::Q5_0 ? q5_0_to_q8_0
                                                     : from == GgmlType::IQ4_NL ? iq4_nl_to_q8_0
                                                                                : iq4_xs_to_q8_0;
  const size_t wide_bytes = static_cast<size_t>(in.block_elems / out.block_elems) * out.block_bytes;
  const auto* s = static_cast<const uint8_t*>(src);
  auto* d = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / in.block_elems; ++b) block_to(s + b * in.block_bytes, d + b * wide_bytes);
}

}  // namespace memra::quant
