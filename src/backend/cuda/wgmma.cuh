// Warpgroup tensor-core products (sm_90a wgmma) for the batched matmul (matmul_wg_kernel.cuh):
// A from registers (one m16 fragment per warp, the layout of mma_16816's A), B from shared memory
// in the K-major layout without swizzle, f32 accumulators. On the GPU, PTX; on the CPU emulation
// (tests/cudasim) a C++ model with mma_16816's rounding (each element's dot in double, rounded
// once), so the two kernels agree there as the hardware's do.
//
// Bits. wgmma and the mma.sync chain of matmul_order.h give identical results for the same
// operands: H200, 2026-12-03, bench/probes/wgmma_vs_mma.cu, 33.5 million outputs of random
// Q4 / Q8 / Q6 codes and f16 values against activations of 25 binades: 0 differ.
//
// B layout (one k16 slice of N activation rows): core matrices of 8 rows x 8 halves (16 bytes a
// row, 128 bytes each); row n's halves k .. k + 7 (k = 0 or 8) at (n / 8) * 256 + (k / 8) * 128 +
// (n % 8) * 16. Descriptor: leading (K) byte offset 128, stride (N) byte offset 256 (the probe
// checked this reading against a float64 sum; swapped, every output is wrong).
#pragma once

#include <cstdint>
#include <cstring>

#include "backend/cuda/common.cuh"

namespace memra::cuda {

constexpr int kWgThreads = 128;  // one warpgroup

// Byte offset of row n's halves k .. k + 7 (k a multiple of 8, < 16) within a k16 slice.
__host__ __device__ constexpr int wg_b_offset(int n, int k) { return (n / 8) * 256 + (k / 8) * 128 + (n % 8) * 16; }

// Orders this thread's earlier register and shared-memory writes before the warpgroup's next wgmma.
__device__ __forceinline__ void wgmma_fence() {
#ifndef MEMRA_CUDASIM
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#ifndef MEMRA_CUDASIM
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
// Waits until at most N committed wgmma groups of this warpgroup are in flight.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
#ifndef MEMRA_CUDASIM
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}
// Generic-proxy writes of shared memory (cp.async, st.shared) made visible to wgmma's reads.
__device__ __forceinline__ void fence_proxy_async() {
#ifndef MEMRA_CUDASIM
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}
// A register a wgmma reads or writes asynchronously: the compiler must neither reuse it nor move
// its uses across this point (after the wait: the asynchronous write has landed).
__device__ __forceinline__ void reg_fence(float& r) {
#ifndef MEMRA_CUDASIM
  asm volatile("" : "+f"(r)::"memory");
#else
  (void)r;
#endif
}
__device__ __forceinline__ void reg_fence(uint32_t& r) {
#ifndef MEMRA_CUDASIM
  asm volatile("" : "+r"(r)::"memory");
#else
  (void)r;
#endif
}

#ifndef MEMRA_CUDASIM
__device__ __forceinline__ uint64_t wg_desc(const void* slice) {
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(slice));
  return static_cast<uint64_t>((a & 0x3FFFF) >> 4) | (uint64_t{128 >> 4} << 16) | (uint64_t{256 >> 4} << 32);
}
#endif

// d (+)= A (64 x 16: this warp's rows 16 w .. 16 w + 15 as mma_16816's a) * B (16 x N at `slice`).
// d[4 j + e] is row g + 8 (e / 2), column 8 j + 2 t + e % 2 of the warp's rows (mma_16816's c of
// n-tile j). Every thread of the warpgroup calls it; `accumulate` false starts from +0.
template <int N>
__device__ __forceinline__ void wgmma_f16(float (&d)[N / 2], const uint32_t (&a)[4], const uint8_t* slice,
                                          bool accumulate) {
  static_assert(N == 16 || N == 32 || N == 64, "wgmma_f16: N of 16, 32 or 64");
#ifdef MEMRA_CUDASIM
  struct Slot {
    uint32_t a[kWgThreads][4];
  };
  static Slot slots[8];  // one per block of a cluster (they run together); a block is one warpgroup
  Slot& slot = slots[cudasim::cluster_rank()];
  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32;
  for (int i = 0; i < 4; ++i) slot.a[tid][i] = a[i];
  __syncthreads();
  auto half_of = [](uint32_t word, int k) { return cudasim::half_to_float(static_cast<uint16_t>(word >> (16 * (k & 1)))); };
  auto A = [&](int i, int k) { return half_of(slot.a[warp * 32 + (i % 8) * 4 + (k % 8) / 2][(i >= 8) + 2 * (k >= 8)], k); };
  auto B = [&](int k, int n) {
    uint16_t h;
    std::memcpy(&h, slice + wg_b_offset(n, k - k % 8) + (k % 8) * 2, 2);
    return cudasim::half_to_float(h);
  };
  const int g = lane / 4, t = lane % 4;
  float out[N / 2];
  for (int j = 0; j < N / 8; ++j)
    for (int e = 0; e < 4; ++e) {
      const int i = g + 8 * (e >> 1), n = 8 * j + 2 * t + (e & 1);
      double acc = accumulate ? d[4 * j + e] : 0.0;
      for (int k = 0; k < 16; ++k) acc += static_cast<double>(A(i, k)) * static_cast<double>(B(k, n));
      out[4 * j + e] = static_cast<float>(acc);
    }
  __syncthreads();
  for (int i = 0; i < N / 2; ++i) d[i] = out[i];
#else
  const uint64_t desc = wg_desc(slice);
  const uint32_t acc = accumulate ? 1u : 0u;
  if constexpr (N == 16) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %13, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 {%0,%1,%2,%3,%4,%5,%6,%7}, {%8,%9,%10,%11}, %12, p, 1, 1, "
        "0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(acc));
  } else if constexpr (N == 32) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, "
        "{%16,%17,%18,%19}, %20, p, 1, 1, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
          "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(acc));
  } else {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
        "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, {%32,%33,%34,%35}, %36, p, 1, 1, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
          "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
          "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
          "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(acc));
  }
#endif
}

}  // namespace memra::cuda
