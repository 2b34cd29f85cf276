// The warp-level tensor-core and async-copy instructions the matmul family uses, as inline
// functions: PTX on the GPU, and on the CPU emulation (tests/cudasim) a C++ model of the same
// data movement. The emulated mma is a fixed function of the element's own operands, as the
// hardware's is, but not the hardware's bits: a pessimistic model of its accumulation (below), so
// the op tests' bounds, which the emulation checks in CI, also hold where the hardware truncates.
#pragma once

#include <cstdint>
#include <cstring>

#include "backend/cuda/common.cuh"

#ifndef MEMRA_CUDASIM
#include <cooperative_groups.h>
#else
#include <algorithm>
#include <cmath>
#endif

namespace memra::cuda {

// D = A(16x16 f16, row) * B(16x8 f16, col) + C (float). Fragments of lane (g = lane/4, t = lane%4):
// a0 = A[g][2t..2t+1], a1 = A[g+8][2t..], a2 = A[g][2t+8..], a3 = A[g+8][2t+8..];
// b0 = B[2t..2t+1][g], b1 = B[2t+8..][g]; c0, c1 = C[g][2t], C[g][2t+1]; c2, c3 = C[g+8][2t..].
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1,
                                          const float (&c)[4]) {
#ifdef MEMRA_CUDASIM
  // One warp's operands meet in a per-warp slot of a static table (blocks run one at a time).
  struct Slot {
    uint32_t a[32][4], b[32][2];
  };
  static Slot slots[8 * 32];  // up to 8 blocks of a cluster run together, 32 warps each
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  Slot& s = slots[cudasim::cluster_rank() * 32 + warp];
  for (int i = 0; i < 4; ++i) s.a[lane][i] = a[i];
  s.b[lane][0] = b0;
  s.b[lane][1] = b1;
  __syncwarp();
  auto half_of = [](uint32_t word, int k) { return cudasim::half_to_float(static_cast<uint16_t>(word >> (16 * (k & 1)))); };
  auto A = [&](int i, int k) { return half_of(s.a[(i % 8) * 4 + (k % 8) / 2][(i >= 8) + 2 * (k >= 8)], k); };
  auto B = [&](int k, int j) { return half_of(s.b[j * 4 + (k % 8) / 2][k >= 8], k); };
  const int g = lane / 4, t = lane % 4;
  float out[4];
  // The tensor core adds C and the 16 exact products after aligning them to the largest, and
  // truncates (NVIDIA documents neither the width nor the rounding; published measurements of earlier
  // GPUs found truncation with a few guard bits). Modelled with none: every term truncated toward
  // zero to 24 bits below the largest term's leading bit, the truncated terms summed exactly (17
  // multiples of one power of two below 2^24 each: 29 bits, exact in double), the sum truncated
  // toward zero to float's 24 bits. Non-finite operands add in double.
  auto biased_exp = [](double v) {  // 0 for zero; every nonzero term is a normal double
    uint64_t u;
    std::memcpy(&u, &v, 8);
    return static_cast<int>((u >> 52) & 0x7ff);
  };
  for (int e = 0; e < 4; ++e) {
    const int i = g + 8 * (e >> 1), j = 2 * t + (e & 1);
    double terms[17];
    terms[0] = c[e];
    int emax = 0;
    bool finite = std::isfinite(terms[0]);
    for (int k = 0; k < 16; ++k) terms[k + 1] = static_cast<double>(A(i, k)) * static_cast<double>(B(k, j));
    for (double v : terms) {
      finite = finite && std::isfinite(v);
      emax = std::max(emax, biased_exp(v));
    }
    if (!finite || emax == 0) {
      double acc = 0.0;
      for (double v : terms) acc += v;
      out[e] = static_cast<float>(acc);
      continue;
    }
    // Units of 2^(E - 23), E the largest term's exponent: each term's integer part, summed exactly.
    // (Scalings by powers of two are exact: the operands are floats and f16 products, far from
    // double's range ends.)
    const int unit_exp = emax - 1023 - 23;
    const double per_unit = std::ldexp(1.0, -unit_exp);
    double n = 0.0;
    for (double v : terms) n += std::trunc(v * per_unit);
    if (n == 0.0) {
      out[e] = 0.0f;
      continue;
    }
    const double sum = std::ldexp(n, unit_exp);  // exact: |n| < 17 * 2^24
    const int lead = std::ilogb(sum);
    out[e] = static_cast<float>(std::ldexp(std::trunc(std::ldexp(sum, 23 - lead)), lead - 23));
  }
  __syncwarp();
  for (int e = 0; e < 4; ++e) d[e] = out[e];
#else
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%10,%11,%12,%13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
#endif
}

// Two f16 lanes minus two f16 constants (exact here: small integers).
__device__ __forceinline__ uint32_t sub_f16x2(uint32_t x, uint32_t k) {
#ifdef MEMRA_CUDASIM
  uint32_t r = 0;
  for (int h = 0; h < 2; ++h) {
    const float v = cudasim::half_to_float(static_cast<uint16_t>(x >> (16 * h))) -
                    cudasim::half_to_float(static_cast<uint16_t>(k >> (16 * h)));
    r |= static_cast<uint32_t>(cudasim::float_to_half(v)) << (16 * h);
  }
  return r;
#else
  uint32_t r;
  asm("sub.rn.f16x2 %0, %1, %2;\n" : "=r"(r) : "r"(x), "r"(k));
  return r;
#endif
}

// Bytes 2q, 2q+1 (q = 0, 1) of w, codes stored as code + 128 (weight_layout.h; int8 codes ^ 0x80),
// to two f16 values: each byte placed under the f16 exponent of 1024, then 1024 + 128 taken off
// (exact).
__device__ __forceinline__ uint32_t int8_pair(uint32_t w_biased, int q) {
  // The constant as the first source and the selector a literal: ptxas then keeps 0x64646464 in
  // one register and encodes the selector in the PRMT (the other way round it re-made the selector
  // registers, ~4 moves a block: SASS, 2026-12-04).
  return sub_f16x2(__byte_perm(0x64646464u, w_biased, q == 0 ? 0x0504u : 0x0706u), 0x64806480u);
}

// Two f16 lanes times an f16 constant plus another, rounded once (exact here: small integers).
__device__ __forceinline__ uint32_t fma_f16x2(uint32_t x, uint32_t m, uint32_t k) {
#ifdef MEMRA_CUDASIM
  uint32_t r = 0;
  for (int h = 0; h < 2; ++h) {
    const double v = static_cast<double>(cudasim::half_to_float(static_cast<uint16_t>(x >> (16 * h)))) *
                         cudasim::half_to_float(static_cast<uint16_t>(m >> (16 * h))) +
                     cudasim::half_to_float(static_cast<uint16_t>(k >> (16 * h)));
    r |= static_cast<uint32_t>(cudasim::float_to_half(static_cast<float>(v))) << (16 * h);
  }
  return r;
#else
  uint32_t r;
  asm("fma.rn.f16x2 %0, %1, %2, %3;\n" : "=r"(r) : "r"(x), "r"(m), "r"(k));
  return r;
#endif
}

// (x & mask) | bits in one LOP3: written as C++ the compiler emits an AND and an OR (a LOP3 takes
// one immediate operand), so the nibble decode spent two instructions per f16 pair here.
template <uint32_t kMask, uint32_t kBits>
__device__ __forceinline__ uint32_t and_or(uint32_t x) {
#ifdef MEMRA_CUDASIM
  return (x & kMask) | kBits;
#else
  uint32_t r;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;\n" : "=r"(r) : "r"(x), "n"(kMask), "n"(kBits));  // 0xEA: (a & b) | c
  return r;
#endif
}

// x | (y & mask) in one LOP3 (the high bits of a Q5_K / Q6_K pair merged into its nibbles).
template <uint32_t kMask>
__device__ __forceinline__ uint32_t or_and(uint32_t x, uint32_t y) {
#ifdef MEMRA_CUDASIM
  return x | (y & kMask);
#else
  uint32_t r;
  asm("lop3.b32 %0, %1, %2, %3, 0xF8;\n" : "=r"(r) : "r"(x), "r"(y), "n"(kMask));  // 0xF8: a | (b & c)
  return r;
#endif
}

// The 64-bit hi:lo shifted right by N (N in 1..31), low word: one SHF.R.
template <int N>
__device__ __forceinline__ uint32_t shr_pair(uint32_t lo, uint32_t hi) {
  static_assert(N > 0 && N < 32, "a shift within a word");
#ifdef MEMRA_CUDASIM
  return (lo >> N) | (hi << (32 - N));
#else
  return __funnelshift_r(lo, hi, N);
#endif
}

// x rotated right by N bits (one SHF.R.W; N in 0..31).
template <int N>
__device__ __forceinline__ uint32_t rotr(uint32_t x) {
  static_assert(N >= 0 && N < 32, "rotation within a word");
  if constexpr (N == 0) return x;
  else return shr_pair<N>(x, x);
}

// ---- asynchronous global -> shared copies (cp.async, sm_80+) ----

__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
#ifdef MEMRA_CUDASIM
  std::memcpy(dst, src, 16);
#else
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(static_cast<uint32_t>(__cvta_generic_to_shared(dst))),
               "l"(src));
#endif
}

// The L2 policy of weight copies: evict_first. A step reads each weight byte once, so its lines are
// the right ones to lose first; what stays is what the step reads again (activations, the
// recurrent state, KV). H200, 9B Q4_0 tg32 @ d512: B = 1 +2.6%, B = 16 +1.3%, B = 64 +2.2%, bits
// unchanged (bench/results/2026-12-05-0540-h200-s28-l2-prefetch.log, "off EF" vs "off").
__device__ __forceinline__ uint64_t weight_read_policy() {
  uint64_t pol = 0;
#ifndef MEMRA_CUDASIM
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));
#endif
  return pol;
}
// Per-lane copies (cp_async16) take no L2 policy: with `cp.async ... L2::cache_hint`, ptxas (CUDA
// 13.0) gave the one-row streaming kernels of Q4_0 / Q4_K (their lane-copied rings) an LDGSTS
// whose cache-policy descriptor shares a uniform register with the shared-memory offset (a UMOV
// into the descriptor's low word right before it); once that offset was not 0 (session 29's
// staged sums moved the ring), the descriptor was invalid: "illegal instruction" on the H100 at
// the first 9B Q4_0 decode step (compute-sanitizer, 2026-12-05). Bulk copies keep the policy.

__device__ __forceinline__ void cp_async_commit() {
#ifndef MEMRA_CUDASIM
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}

// Waits until at most N of this thread's committed copy groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#ifndef MEMRA_CUDASIM
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

// ---- bulk copies (cp.async.bulk, sm_90): one thread moves a whole tile, completion on an mbarrier ----
// Why: per-lane cp.async of a tile is tile_bytes / 512 copies a lane plus their addresses and a
// group wait; a bulk copy is one instruction of one lane, and the wait is the barrier's phase
// (matmul_stream_kernel.cuh, kBulkRing: where it measured faster). The emulation copies at once
// and keeps the barriers' arrival and byte counts (tests/cudasim: a phase that cannot complete is
// a deadlock there, as it is a hang here).

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
#ifdef MEMRA_CUDASIM
  (void)p;
  return 0;
#else
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
#endif
}

// A barrier whose phase completes after `count` arrivals and the bytes they announced.
__device__ __forceinline__ void mbarrier_init(uint64_t* bar, uint32_t count) {
#ifdef MEMRA_CUDASIM
  cudasim::mbarrier_init(bar, count);
#else
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count) : "memory");
#endif
}

// Initialized barriers become visible to the bulk copies (the asynchronous proxy).
__device__ __forceinline__ void mbarrier_init_fence() {
#ifndef MEMRA_CUDASIM
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}

// Orders this thread's earlier shared-memory reads before a later bulk copy's writes.
__device__ __forceinline__ void fence_proxy_async() {
#ifndef MEMRA_CUDASIM
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

// One arrival that announces `bytes` of bulk copies completing on `bar` in this phase.
__device__ __forceinline__ void mbarrier_arrive_expect(uint64_t* bar, uint32_t bytes) {
#ifdef MEMRA_CUDASIM
  cudasim::mbarrier_arrive_expect_tx(bar, bytes);
#else
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
#endif
}

// `bytes` (a multiple of 16, both addresses 16-byte aligned) from global to this block's shared memory.
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
#ifdef MEMRA_CUDASIM
  std::memcpy(dst, src, bytes);
  cudasim::mbarrier_complete_tx(bar, bytes);
#else
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                   smem_addr(dst)),
               "l"(src), "r"(bytes), "r"(smem_addr(bar))
               : "memory");
#endif
}

// bulk_copy with an L2 policy (weight_read_policy).
__device__ __forceinline__ void bulk_copy_hint(void* dst, const void* src, uint32_t bytes, uint64_t* bar, uint64_t pol) {
#ifdef MEMRA_CUDASIM
  (void)pol;
  bulk_copy(dst, src, bytes, bar);
#else
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;\n" ::"r"(
          smem_addr(dst)),
      "l"(src), "r"(bytes), "r"(smem_addr(bar)), "l"(pol)
      : "memory");
#endif
}

// Returns once the barrier's phase of parity `parity` has completed (its copies are visible to the
// calling thread). A phase that never completes is a bug: trap (a launch error) instead of a hang.
__device__ __forceinline__ void mbarrier_wait(uint64_t* bar, uint32_t parity) {
#ifdef MEMRA_CUDASIM
  cudasim::mbarrier_wait_parity(bar, parity);
#else
  for (uint32_t spins = 0;; ++spins) {
    uint32_t done;
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(smem_addr(bar)), "r"(parity)
        : "memory");
    if (done) return;
    if (spins == (1u << 24)) __trap();
  }
#endif
}

// ---- thread block clusters (sm_90): rank, barrier, another block's shared memory ----

__device__ __forceinline__ int cluster_rank() {
#ifdef MEMRA_CUDASIM
  return cudasim::cluster_rank();
#else
  return static_cast<int>(cooperative_groups::this_cluster().block_rank());
#endif
}

// Every thread of every block of the cluster; also orders their shared-memory accesses.
__device__ __forceinline__ void cluster_sync() {
#ifdef MEMRA_CUDASIM
  cudasim::sync_cluster();
#else
  cooperative_groups::this_cluster().sync();
#endif
}

// What p addresses in this block's shared memory, in block `rank`'s.
template <typename T>
__device__ __forceinline__ T* cluster_map(T* p, int rank) {
#ifdef MEMRA_CUDASIM
  return static_cast<T*>(cudasim::cluster_map(p, rank));
#else
  return cooperative_groups::this_cluster().map_shared_rank(p, rank);
#endif
}

}  // namespace memra::cuda
