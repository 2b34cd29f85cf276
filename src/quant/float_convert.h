// IEEE binary16 and bfloat16 scalar conversions (round to nearest even), inline: the weight
// upload converts billions of values with them (CUDA backend, weight_layout.cpp).
#pragma once

#include <bit>
#include <cstdint>

namespace memra::quant {

inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t em = h & 0x7FFF;  // exponent (5 bits) and mantissa (10 bits)
  if (em >= 0x7C00)  // inf / NaN: widen the mantissa, keeping NaN payloads
    return std::bit_cast<float>(sign | 0x7F800000u | ((em & 0x3FF) << 13));
  if (em >= 0x0400)  // normal: rebias the exponent from 15 to 127
    return std::bit_cast<float>(sign | ((em << 13) + ((127 - 15) << 23)));
  // zero / subnormal: em * 2^-24, exact in float
  return std::bit_cast<float>(sign | std::bit_cast<uint32_t>(static_cast<float>(em) * 0x1p-24f));
}

inline uint16_t f32_to_f16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const auto sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  const uint32_t ax = x & 0x7FFFFFFF;
  if (ax > 0x7F800000)  // NaN: keep it a quiet NaN with the top payload bits
    return static_cast<uint16_t>(sign | 0x7E00 | ((ax >> 13) & 0x3FF));
  // 65520 = 0x477FF000 is halfway between the largest f16 (65504, odd mantissa) and 2^16: it and
  // everything above round to infinity.
  if (ax >= 0x477FF000) return static_cast<uint16_t>(sign | 0x7C00);
  if (ax < 0x38800000) {  // below 2^-14: result is subnormal (or zero) in units of 2^-24
    const int exp = static_cast<int>(ax >> 23);
    const int shift = 126 - exp;  // value = significand * 2^-shift in units of 2^-24
    if (shift > 24) return sign;  // below 2^-25: rounds to zero
    const uint32_t sig = (ax & 0x7FFFFF) | (exp ? 0x800000u : 0u);
    uint32_t q = sig >> shift;
    const uint32_t rem = sig & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1))) ++q;  // may carry into the smallest normal: correct
    return static_cast<uint16_t>(sign | q);
  }
  // Normal: rebias the exponent (-112 << 23) and round the 13 dropped bits to nearest even; a
  // mantissa carry propagates into the exponent, which is the right result.
  const uint32_t odd = (ax >> 13) & 1;
  const uint32_t r = ax - (112u << 23) + 0xFFF + odd;
  return static_cast<uint16_t>(sign | (r >> 13));
}

inline float bf16_to_f32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

inline uint16_t f32_to_bf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7FFFFFFF) > 0x7F800000)  // NaN: truncate and force the quiet bit so it stays NaN
    return static_cast<uint16_t>((x >> 16) | 0x40);
  // Round to nearest even on the 16 dropped bits; overflow carries into infinity as it should.
  return static_cast<uint16_t>((x + 0x7FFF + ((x >> 16) & 1)) >> 16);
}

}  // namespace memra::quant
