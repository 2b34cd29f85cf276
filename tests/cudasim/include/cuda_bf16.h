// cudasim: bfloat16 storage. The kernels include cuda_bf16.h but only the type is named.
#pragma once

#include <cstdint>

struct __nv_bfloat16 {
  uint16_t bits;
};
