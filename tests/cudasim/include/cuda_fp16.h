// cudasim: half precision storage and its conversions (round to nearest even, subnormals kept).
#pragma once

#include <cstdint>
#include <cstring>

#include "cuda_runtime.h"

struct __half {
  uint16_t bits;
};
struct __align__(4) __half2 {
  __half x, y;
};

namespace cudasim {
inline float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ffu, bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  } else if (man == 0) {
    bits = sign;
  } else {  // subnormal: normalise
    int e = -1;
    do {
      man <<= 1;
      ++e;
    } while ((man & 0x400u) == 0);
    bits = sign | (static_cast<uint32_t>(112 - e) << 23) | ((man & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
inline uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0));
  if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds past the largest half
  if (ax < 0x38800000u) {  // below the smallest normal half: scale into the subnormal grid
    if (ax < 0x33000000u) return sign;  // under half of the smallest subnormal (ties handled below)
    const uint32_t man = (ax & 0x7fffffu) | 0x800000u;
    const int shift = 126 - static_cast<int>(ax >> 23);  // 14 .. 24
    const uint32_t q = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
    const uint32_t r = q + ((rem > half || (rem == half && (q & 1))) ? 1 : 0);
    return static_cast<uint16_t>(sign | r);
  }
  const uint32_t rounded = ax + 0xfffu + ((ax >> 13) & 1);
  return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
}
}  // namespace cudasim

inline float __half2float(__half h) { return cudasim::half_to_float(h.bits); }
inline __half __float2half_rn(float f) { return __half{cudasim::float_to_half(f)}; }
inline __half __ushort_as_half(unsigned short u) { return __half{u}; }
inline unsigned short __half_as_ushort(__half h) { return h.bits; }
inline __half2 __halves2half2(__half a, __half b) { return __half2{a, b}; }
inline float2 __half22float2(__half2 h) { return float2{__half2float(h.x), __half2float(h.y)}; }
