// Writing one position's K or V row into a sequence's KV cache (step/kv_blocks.h: row p % kKvBlock
// of block p / kKvBlock, V rows kKvBlock rows after the K rows), f16 or 8-bit (kv_cache_q8.h). The
// append kernel (k_attention_kv_append.cu) and the norm + rope kernel that appends its own k rows
// (k_attention_qk_norm_rope.cu) both write through these, so the cache's bytes do not depend on
// which of them wrote a row.
#pragma once

#include <cstdint>

#include "backend/cuda/common.cuh"
#include "backend/cuda/device_step.h"
#include "backend/cuda/kv_cache_q8.h"
#include "step/kv_blocks.h"

namespace memra::cuda {

// The cache row of step row r (its sequence and position) in `layer`'s K (is_v false) or V rows.
__device__ __forceinline__ uint8_t* kv_cache_row(const DeviceStep& step, int layer, int64_t r, bool is_v,
                                                 int64_t row_bytes) {
  const int64_t slot = static_cast<int64_t>(layer) * step.n_seqs + step.row_seq[r];
  const int32_t p = step.positions[r];
  uint8_t* block = step.kv_blocks[slot][p / kKvBlock];
  return block + ((is_v ? kKvBlock : 0) + p % kKvBlock) * row_bytes;
}

// f16 rows: element i, rounded to nearest even.
__device__ __forceinline__ __half kv_f16(float x) { return __float2half_rn(x); }

// 8-bit rows: 32-value block b of a row of kv_dim values, one value a lane (the whole warp calls
// it): the codes round(x * 127 / max|x|) and, from lane 0, the block's f16 scale max|x| / 127.
__device__ __forceinline__ void kv_q8_block(uint8_t* row, int64_t kv_dim, int64_t b, float x) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const float amax = warp_max(fabsf(x));
  const float inv = amax > 0.0f ? __fdiv_rn(127.0f, amax) : 0.0f;
  const int code = max(-127, min(127, __float2int_rn(__fmul_rn(x, inv))));
  row[b * 32 + lane] = static_cast<uint8_t>(static_cast<int8_t>(code));
  if (lane == 0) reinterpret_cast<__half*>(row + kv_dim)[b] = __float2half_rn(__fdiv_rn(amax, 127.0f));
}

}  // namespace memra::cuda
