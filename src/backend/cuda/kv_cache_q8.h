// The 8-bit KV cache row (MEMRA_CUDA_KV=q8_0): kv_dim int8 codes, then one f16 scale per 32
// consecutive values. Same size as a GGUF Q8_0 row (34 bytes per 32 values), laid out so a lane's
// 8 codes are contiguous (4-byte aligned when kv_dim % 64 == 0). Values are code * scale: codes
// round(x * 127 / max|x|) over the block, the scale max|x| / 127 rounded
// to f16.
#pragma once

#include <cstdint>

namespace memra::cuda {

#ifdef __CUDACC__
__host__ __device__
#endif
inline constexpr int64_t kv_q8_row_bytes(int64_t kv_dim) {
  return kv_dim + 2 * (kv_dim / 32);
}

}  // namespace memra::cuda
