// Block terms of the quantized matmuls (matmul_order.h): how a 32-element block of each device
// weight type (weight_layout.h) is decoded into packed int8 words, and the exact float definition
// of its contribution. Shared by every kernel that must reproduce the canonical order bit for bit.
#pragma once

#include "backend/cuda/common.cuh"
#include "backend/cuda/matmul_order.h"
#include "backend/cuda/weight_layout.h"

namespace memra::cuda {


struct BlockScales {
  float a = 0, b = 0;
  int i0 = 0, i1 = 0;
};

__device__ __forceinline__ int dot8(const int (&w)[8], const int (&x)[8]) {
  int s = 0;
#pragma unroll
  for (int k = 0; k < 8; ++k) s = __dp4a(w[k], x[k], s);
  return s;
}

__device__ __forceinline__ void nibbles_to_words(const int4 q, int (&w)[8]) {
  const int v[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    w[k] = v[k] & 0x0F0F0F0F;
    w[4 + k] = (v[k] >> 4) & 0x0F0F0F0F;
  }
}

__device__ __forceinline__ float half_at(const uint8_t* p) { return __half2float(*reinterpret_cast<const __half*>(p)); }

// Q4_K / Q5_K 6-bit scale and min of sub-block j (0..7) from the 12 packed bytes.
__device__ __forceinline__ void k_scale_min(int j, const uint8_t* q, int& sc, int& m) {
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Spreads 4 bits (t & 0xF) to bit 4 of each byte.
__device__ __forceinline__ int spread4_bit4(uint32_t t) {
  return static_cast<int>(((t & 1u) << 4) | ((t & 2u) << 11) | ((t & 4u) << 18) | ((t & 8u) << 25));
}

// Block b of a weight row, stored in slot k = slot_of_block(b): the slot indexes the per-block
// sections, b (natural order) the per-super-block ones.
template <GgmlType T>
__device__ __forceinline__ void load_block(const uint8_t* row, const DevWeight& w, int64_t k, int64_t b, int (&wq)[8],
                                           BlockScales& sc) {
  if constexpr (T == GgmlType::Q4_0) {
    nibbles_to_words(__ldg(reinterpret_cast<const int4*>(row + 16 * k)), wq);
    sc.a = half_at(row + w.off_b + 2 * k);
  } else if constexpr (T == GgmlType::Q8_0) {
    const int4 q0 = __ldg(reinterpret_cast<const int4*>(row + 32 * k));
    const int4 q1 = __ldg(reinterpret_cast<const int4*>(row + 32 * k + 16));
    wq[0] = q0.x; wq[1] = q0.y; wq[2] = q0.z; wq[3] = q0.w;
    wq[4] = q1.x; wq[5] = q1.y; wq[6] = q1.z; wq[7] = q1.w;
    sc.a = half_at(row + w.off_b + 2 * k);
  } else if constexpr (T == GgmlType::Q4_K || T == GgmlType::Q5_K) {
    nibbles_to_words(__ldg(reinterpret_cast<const int4*>(row + 16 * k)), wq);
    const uint32_t meta_off = T == GgmlType::Q5_K ? w.off_c : w.off_b;
    const int4 meta = __ldg(reinterpret_cast<const int4*>(row + meta_off + 16 * (b / 8)));
    const uint8_t* mb = reinterpret_cast<const uint8_t*>(&meta);
    sc.a = half_at(mb);
    sc.b = half_at(mb + 2);
    k_scale_min(static_cast<int>(b % 8), mb + 4, sc.i0, sc.i1);
    if constexpr (T == GgmlType::Q5_K) {
      const uint32_t qh = __ldg(reinterpret_cast<const uint32_t*>(row + w.off_b + 4 * k));
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        wq[j] |= spread4_bit4(qh >> (4 * j));
        wq[4 + j] |= spread4_bit4(qh >> (16 + 4 * j));
      }
    }
  } else if constexpr (T == GgmlType::Q6_K) {
    nibbles_to_words(__ldg(reinterpret_cast<const int4*>(row + 16 * k)), wq);
    const uint2 hh = __ldg(reinterpret_cast<const uint2*>(row + w.off_b + 8 * k));
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      wq[j] = __vsubss4(wq[j] | static_cast<int>(((hh.x >> (2 * j)) & 0x03030303u) << 4), 0x20202020);
      wq[4 + j] = __vsubss4(wq[4 + j] | static_cast<int>(((hh.y >> (2 * j)) & 0x03030303u) << 4), 0x20202020);
    }
    const int8_t* scp = reinterpret_cast<const int8_t*>(row + w.off_c + 2 * k);
    sc.i0 = scp[0];
    sc.i1 = scp[1];
    sc.a = half_at(row + w.off_c + 2 * w.ns + 2 * (b / 8));
  }
}

// The canonical block term (matmul_order.h): integer sums are exact; the float operations and
// their order below are the definition every matmul kernel must reproduce.
template <GgmlType T>
__device__ __forceinline__ float block_term(const int (&wq)[8], const BlockScales& sc, const int (&xq)[8], float dx,
                                            int xs) {
  if constexpr (T == GgmlType::Q4_0) {
    return __fmul_rn(__fmul_rn(sc.a, dx), __int2float_rn(dot8(wq, xq) - 8 * xs));
  } else if constexpr (T == GgmlType::Q8_0) {
    return __fmul_rn(__fmul_rn(sc.a, dx), __int2float_rn(dot8(wq, xq)));
  } else if constexpr (T == GgmlType::Q4_K || T == GgmlType::Q5_K) {
    return __fsub_rn(__fmul_rn(__fmul_rn(sc.a, dx), __int2float_rn(sc.i0 * dot8(wq, xq))),
                     __fmul_rn(__fmul_rn(sc.b, dx), __int2float_rn(sc.i1 * xs)));
  } else {  // Q6_K: two 16-element sub-blocks with their own int8 scales
    int d0 = 0, d1 = 0;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      d0 = __dp4a(wq[k], xq[k], d0);
      d1 = __dp4a(wq[4 + k], xq[4 + k], d1);
    }
    return __fmul_rn(__fmul_rn(sc.a, dx), __int2float_rn(sc.i0 * d0 + sc.i1 * d1));
  }
}

}  // namespace memra::cuda
