// cudasim: bfloat16 storage (round to nearest even).
#pragma once

#include <cstdint>
#include <cstring>

#include "cuda_runtime.h"

struct __nv_bfloat16 {
  uint16_t bits;
};

inline float __bfloat162float(__nv_bfloat16 h) {
  const uint32_t b = static_cast<uint32_t>(h.bits) << 16;
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
