// Quantized-weight matmul against 8-bit activations (Q8Act), one warp per output row, all rows of
// the launch at once (each weight block is read once per group of up to 8 activation rows).
// Block terms come from exact integer dot products (dp4a); the float reduction follows the
// canonical order of matmul_order.h, so results are bit-identical for any number of rows.
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/matmul_order.h"
#include "backend/cuda/weight_layout.h"

namespace memra::cuda {
namespace {

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

template <GgmlType T>
__device__ __forceinline__ void load_block(const uint8_t* row, const DevWeight& w, int64_t b, int (&wq)[8],
                                           BlockScales& sc) {
  if constexpr (T == GgmlType::Q4_0) {
    nibbles_to_words(__ldg(reinterpret_cast<const int4*>(row + 16 * b)), wq);
    sc.a = half_at(row + w.off_b + 2 * b);
  } else if constexpr (T == GgmlType::Q8_0) {
    const int4 q0 = __ldg(reinterpret_cast<const int4*>(row + 32 * b));
    const int4 q1 = __ldg(reinterpret_cast<const int4*>(row + 32 * b + 16));
    wq[0] = q0.x; wq[1] = q0.y; wq[2] = q0.z; wq[3] = q0.w;
    wq[4] = q1.x; wq[5] = q1.y; wq[6] = q1.z; wq[7] = q1.w;
    sc.a = half_at(row + w.off_b + 2 * b);
  } else if constexpr (T == GgmlType::Q4_K || T == GgmlType::Q5_K) {
    nibbles_to_words(__ldg(reinterpret_cast<const int4*>(row + 16 * b)), wq);
    const uint32_t meta_off = T == GgmlType::Q5_K ? w.off_c : w.off_b;
    const int4 meta = __ldg(reinterpret_cast<const int4*>(row + meta_off + 16 * (b / 8)));
    const uint8_t* mb = reinterpret_cast<const uint8_t*>(&meta);
    sc.a = half_at(mb);
    sc.b = half_at(mb + 2);
    k_scale_min(static_cast<int>(b % 8), mb + 4, sc.i0, sc.i1);
    if constexpr (T == GgmlType::Q5_K) {
      const uint32_t qh = __ldg(reinterpret_cast<const uint32_t*>(row + w.off_b + 4 * b));
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        wq[k] |= spread4_bit4(qh >> (4 * k));
        wq[4 + k] |= spread4_bit4(qh >> (16 + 4 * k));
      }
    }
  } else if constexpr (T == GgmlType::Q6_K) {
    nibbles_to_words(__ldg(reinterpret_cast<const int4*>(row + 16 * b)), wq);
    const uint2 hh = __ldg(reinterpret_cast<const uint2*>(row + w.off_b + 8 * b));
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      wq[k] = __vsubss4(wq[k] | static_cast<int>(((hh.x >> (2 * k)) & 0x03030303u) << 4), 0x20202020);
      wq[4 + k] = __vsubss4(wq[4 + k] | static_cast<int>(((hh.y >> (2 * k)) & 0x03030303u) << 4), 0x20202020);
    }
    const int8_t* scp = reinterpret_cast<const int8_t*>(row + w.off_c + 2 * b);
    sc.i0 = scp[0];
    sc.i1 = scp[1];
    sc.a = half_at(row + w.off_c + 2 * w.nb + 2 * (b / 8));
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

constexpr int kRowsPerBlock = 8;  // warps per thread block, one output row each

template <GgmlType T, int NB>
__global__ void __launch_bounds__(kRowsPerBlock * kWarp)
    matmul_q8_kernel(const DevWeight w, const uint8_t* __restrict__ mat, const int8_t* __restrict__ xq,
                     const float* __restrict__ xd, const int32_t* __restrict__ xs, int64_t rows,
                     float* __restrict__ out, int64_t out_stride, bool accumulate) {
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + warp;
  if (j >= w.n_out) return;
  const uint8_t* row = mat + j * w.row_stride;
  const int64_t nb = w.nb, cols = w.n_in;
  const int c = bitrev5(lane);
  for (int64_t r0 = 0; r0 < rows; r0 += NB) {
    float P[NB];
#pragma unroll
    for (int i = 0; i < NB; ++i) P[i] = 0.0f;
    const int64_t cs = chunk_blocks(nb), b_end = min(nb, (c + 1) * cs);
    // Four blocks' weights are loaded before any is used: independent loads in flight.
    for (int64_t b0 = c * cs; b0 < b_end; b0 += 4) {
      int wq[4][8];
      BlockScales sc[4];
#pragma unroll
      for (int u = 0; u < 4; ++u)
        if (b0 + u < b_end) load_block<T>(row, w, b0 + u, wq[u], sc[u]);
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int64_t b = b0 + u;
        if (b >= b_end) break;
#pragma unroll
        for (int i = 0; i < NB; ++i) {
          const int64_t r = r0 + i;
          if (r < rows) {
            const int4* xp = reinterpret_cast<const int4*>(xq + r * cols + 32 * b);
            const int4 x0 = __ldg(xp), x1 = __ldg(xp + 1);
            const int xv[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
            P[i] = __fadd_rn(P[i], block_term<T>(wq[u], sc[u], xv, __ldg(xd + r * nb + b), __ldg(xs + r * nb + b)));
          }
        }
      }
    }
#pragma unroll
    for (int i = 0; i < NB; ++i) P[i] = warp_sum(P[i]);
    if (lane == 0) {
#pragma unroll
      for (int i = 0; i < NB; ++i) {
        const int64_t r = r0 + i;
        if (r < rows) {
          float* o = out + r * out_stride + j;
          *o = accumulate ? __fadd_rn(*o, P[i]) : P[i];
        }
      }
    }
  }
}

template <GgmlType T>
void launch_type(const DevWeight& w, const uint8_t* mat, const Q8Act& x, float* out, int64_t out_stride,
                 bool accumulate, cudaStream_t stream) {
  const unsigned grid = div_up(w.n_out, kRowsPerBlock);
  const unsigned threads = kRowsPerBlock * kWarp;
  const int64_t rows = x.rows;
#define MEMRA_MATMUL_Q8(NB) \
  matmul_q8_kernel<T, NB><<<grid, threads, 0, stream>>>(w, mat, x.q, x.d, x.s, rows, out, out_stride, accumulate)
  if (rows >= 8) MEMRA_MATMUL_Q8(8);
  else if (rows >= 3) MEMRA_MATMUL_Q8(4);
  else if (rows == 2) MEMRA_MATMUL_Q8(2);
  else MEMRA_MATMUL_Q8(1);
#undef MEMRA_MATMUL_Q8
  CUDA_LAUNCH_CHECK();
}

}  // namespace

void matmul_q8(const DevWeight& w, int64_t mat, const Q8Act& x, float* out, int64_t out_stride, bool accumulate,
               cudaStream_t stream) {
  MEMRA_ASSERT(x.cols == w.n_in && w.n_in % 32 == 0 && mat >= 0 && mat < w.n_mat && out_stride >= w.n_out);
  if (x.rows == 0) return;
  // The warp sum in matmul_order.h's tree: the butterfly 16, 8, 4, 2, 1 of warp_sum (common.cuh).
  const uint8_t* base = w.data + w.mat_stride * static_cast<size_t>(mat);
  switch (w.type) {
    case GgmlType::Q4_0: launch_type<GgmlType::Q4_0>(w, base, x, out, out_stride, accumulate, stream); break;
    case GgmlType::Q8_0: launch_type<GgmlType::Q8_0>(w, base, x, out, out_stride, accumulate, stream); break;
    case GgmlType::Q4_K: launch_type<GgmlType::Q4_K>(w, base, x, out, out_stride, accumulate, stream); break;
    case GgmlType::Q5_K: launch_type<GgmlType::Q5_K>(w, base, x, out, out_stride, accumulate, stream); break;
    case GgmlType::Q6_K: launch_type<GgmlType::Q6_K>(w, base, x, out, out_stride, accumulate, stream); break;
    default: MEMRA_ASSERT(false, "matmul_q8: not a quantized device type");
  }
}

}  // namespace memra::cuda
