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

// A block's bytes as loaded (fetch_block), before decoding (decode_block): a kernel issues the
// fetches of several blocks first so their loads are in flight together.
struct RawBlock {
  int4 q;          // qs / ql (Q8_0: first half)
  int4 aux;        // Q8_0: second half; Q4_K / Q5_K: super-block meta
  uint2 hi;        // Q5_K: qh in .x; Q6_K: the two high-bit words
  uint32_t small;  // f16 d (Q4_0, Q8_0, Q6_K: low 16 bits); Q6_K: the int8 scale pair in the high 16
  int64_t b;       // natural block index (selects the K-quant sub-scale)
};

// Block b of a weight row, stored in slot k = slot_of_block(b): the slot indexes the per-block
// sections, b (natural order) the per-super-block ones.
template <GgmlType T>
__device__ __forceinline__ RawBlock fetch_block(const uint8_t* row, const DevWeight& w, int64_t k, int64_t b) {
  RawBlock r;
  r.b = b;
  if constexpr (T == GgmlType::Q4_0) {
    r.q = __ldg(reinterpret_cast<const int4*>(row + 16 * k));
    r.small = __ldg(reinterpret_cast<const uint16_t*>(row + w.off_b + 2 * k));
  } else if constexpr (T == GgmlType::Q8_0) {
    r.q = __ldg(reinterpret_cast<const int4*>(row + 32 * k));
    r.aux = __ldg(reinterpret_cast<const int4*>(row + 32 * k + 16));
    r.small = __ldg(reinterpret_cast<const uint16_t*>(row + w.off_b + 2 * k));
  } else if constexpr (T == GgmlType::Q4_K || T == GgmlType::Q5_K) {
    r.q = __ldg(reinterpret_cast<const int4*>(row + 16 * k));
    const uint32_t meta_off = T == GgmlType::Q5_K ? w.off_c : w.off_b;
    r.aux = __ldg(reinterpret_cast<const int4*>(row + meta_off + 16 * (b / 8)));
    if constexpr (T == GgmlType::Q5_K) r.hi.x = __ldg(reinterpret_cast<const uint32_t*>(row + w.off_b + 4 * k));
  } else if constexpr (T == GgmlType::Q6_K) {
    r.q = __ldg(reinterpret_cast<const int4*>(row + 16 * k));
    r.hi = __ldg(reinterpret_cast<const uint2*>(row + w.off_b + 8 * k));
    const uint32_t scales = __ldg(reinterpret_cast<const uint16_t*>(row + w.off_c + 2 * k));
    const uint32_t d = __ldg(reinterpret_cast<const uint16_t*>(row + w.off_c + 2 * w.ns + 2 * (b / 8)));
    r.small = d | (scales << 16);
  }
  return r;
}

// The bulk bytes of block slot k (its quants) into L2, for a fetch_block soon after.
template <GgmlType T>
__device__ __forceinline__ void prefetch_block_l2(const uint8_t* row, int64_t k) {
  const uint8_t* p = row + (T == GgmlType::Q8_0 ? 32 : 16) * k;
#if defined(__CUDA_ARCH__)
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
#else
  (void)p;  // host compilation pass, or the CPU emulation (tests/cudasim)
#endif
}

__device__ __forceinline__ float half_bits(uint32_t bits) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(bits & 0xFFFF)));
}

template <GgmlType T>
__device__ __forceinline__ void decode_block(const RawBlock& r, int (&wq)[8], BlockScales& sc) {
  if constexpr (T == GgmlType::Q4_0) {
    nibbles_to_words(r.q, wq);
    sc.a = half_bits(r.small);
  } else if constexpr (T == GgmlType::Q8_0) {
    wq[0] = r.q.x; wq[1] = r.q.y; wq[2] = r.q.z; wq[3] = r.q.w;
    wq[4] = r.aux.x; wq[5] = r.aux.y; wq[6] = r.aux.z; wq[7] = r.aux.w;
    sc.a = half_bits(r.small);
  } else if constexpr (T == GgmlType::Q4_K || T == GgmlType::Q5_K) {
    nibbles_to_words(r.q, wq);
    const uint32_t m0 = static_cast<uint32_t>(r.aux.x), m1 = static_cast<uint32_t>(r.aux.y),
                   m2 = static_cast<uint32_t>(r.aux.z), m3 = static_cast<uint32_t>(r.aux.w);
    sc.a = half_bits(m0);
    sc.b = half_bits(m0 >> 16);
    // scales[0..11] are bytes 4..15 of the meta: scales[i] = byte (i+4) of (m1, m2, m3).
    const uint32_t sw[3] = {m1, m2, m3};
    const int j = static_cast<int>(r.b % 8);
    auto byte = [&](int i) -> int { return static_cast<int>((sw[i >> 2] >> (8 * (i & 3))) & 0xFF); };
    if (j < 4) {
      sc.i0 = byte(j) & 63;
      sc.i1 = byte(j + 4) & 63;
    } else {
      sc.i0 = (byte(j + 4) & 0xF) | ((byte(j - 4) >> 6) << 4);
      sc.i1 = (byte(j + 4) >> 4) | ((byte(j) >> 6) << 4);
    }
    if constexpr (T == GgmlType::Q5_K) {
      const uint32_t qh = r.hi.x;
#pragma unroll
      for (int t = 0; t < 4; ++t) {
        wq[t] |= spread4_bit4(qh >> (4 * t));
        wq[4 + t] |= spread4_bit4(qh >> (16 + 4 * t));
      }
    }
  } else if constexpr (T == GgmlType::Q6_K) {
    nibbles_to_words(r.q, wq);
#pragma unroll
    for (int t = 0; t < 4; ++t) {
      wq[t] = __vsubss4(wq[t] | static_cast<int>(((r.hi.x >> (2 * t)) & 0x03030303u) << 4), 0x20202020);
      wq[4 + t] = __vsubss4(wq[4 + t] | static_cast<int>(((r.hi.y >> (2 * t)) & 0x03030303u) << 4), 0x20202020);
    }
    sc.i0 = static_cast<int8_t>((r.small >> 16) & 0xFF);
    sc.i1 = static_cast<int8_t>((r.small >> 24) & 0xFF);
    sc.a = half_bits(r.small);
  }
}

template <GgmlType T>
__device__ __forceinline__ void load_block(const uint8_t* row, const DevWeight& w, int64_t k, int64_t b, int (&wq)[8],
                                           BlockScales& sc) {
  decode_block<T>(fetch_block<T>(row, w, k, b), wq, sc);
}

// Slot k of activation row r (Q8Act arrays, ns slots a row): its 32 codes as 8 packed words,
// its scale and its code sum.
struct ActBlock {
  int q[8];
  float d;
  int s;
};

__device__ __forceinline__ ActBlock load_act_block(const int8_t* __restrict__ xq, const float* __restrict__ xd,
                                                   const int32_t* __restrict__ xs, int64_t r, int64_t ns, int64_t k) {
  const int4* xp = reinterpret_cast<const int4*>(xq + (r * ns + k) * 32);
  const int4 x0 = __ldg(xp), x1 = __ldg(xp + 1);
  return ActBlock{{x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w}, __ldg(xd + r * ns + k), __ldg(xs + r * ns + k)};
}

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
