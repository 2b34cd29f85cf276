// cudasim: the kernel language. Qualifiers vanish, built-in indices read the running fiber's
// coordinates, barriers and warp collectives switch fibers (fibers.cpp), and the intrinsics do
// in C++ what the hardware does: IEEE round-to-nearest arithmetic (the sim is compiled without
// FMA contraction), exact integer dot products, plain loads for every cache hint.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
// Blocks run one after another on one host thread, so a function-static array is exactly one
// block's shared memory (its contents are not cleared between blocks, as on the GPU).
#define __shared__ static

struct __align__(8) float2 { float x, y; };
struct __align__(16) float4 { float x, y, z, w; };
struct __align__(16) int4 { int x, y, z, w; };
struct __align__(8) uint2 { unsigned x, y; };
struct __align__(16) uint4 { unsigned x, y, z, w; };
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline float2 make_float2(float x, float y) { return {x, y}; }
inline int4 make_int4(int x, int y, int z, int w) { return {x, y, z, w}; }
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
inline uint2 make_uint2(unsigned x, unsigned y) { return {x, y}; }

namespace cudasim {
void* dynamic_smem();
void sync_block();
// Thread block clusters: the block's rank, a barrier over every thread of the cluster, and the
// address in block `rank`'s shared memory of what `p` addresses in this block's.
int cluster_rank();
void sync_cluster();
void* cluster_map(void* p, int rank);
// Waits for the lanes of `mask` in the calling warp; every one of them gets the `value` that
// lane `src_lane` brought (its own if src_lane is outside the mask).
uint64_t warp_exchange(unsigned mask, uint64_t value, int src_lane);
// The sum over the lanes of `mask` of the values they bring.
uint64_t warp_sum(unsigned mask, uint64_t value);
int lane_id();
// mbarriers (sm_90 shared-memory barriers with a transaction count), kept in the barrier's own
// 64-bit word: a phase completes when all `count` arrivals of the phase came and every announced
// byte was copied; waiting threads block until the phase they wait for completed. A phase that
// can never complete (too few arrivals, announced bytes never copied) stops the process as a
// deadlock instead of passing silently. (Arrivals past the count open the next phase, as on the GPU.)
void mbarrier_init(uint64_t* bar, uint32_t count);
void mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t bytes);
void mbarrier_complete_tx(uint64_t* bar, uint32_t bytes);
void mbarrier_wait_parity(uint64_t* bar, uint32_t parity);

template <typename T>
uint64_t to_bits(T v) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "warp exchange of a value over 8 bytes");
  uint64_t b = 0;
  std::memcpy(&b, &v, sizeof(T));
  return b;
}
template <typename T>
T from_bits(uint64_t b) {
  T v;
  std::memcpy(&v, &b, sizeof(T));
  return v;
}
}  // namespace cudasim


inline void __syncthreads() { cudasim::sync_block(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) { cudasim::warp_exchange(mask, 0, -1); }
inline void __threadfence() {}

template <typename T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  const int lane = cudasim::lane_id(), base = lane & ~(width - 1);
  const int src = base + ((lane - base) ^ lane_mask);
  return cudasim::from_bits<T>(cudasim::warp_exchange(mask, cudasim::to_bits(v), src < base + width ? src : lane));
}
template <typename T>
T __shfl_sync(unsigned mask, T v, int src_lane, int width = 32) {
  const int base = cudasim::lane_id() & ~(width - 1);
  return cudasim::from_bits<T>(cudasim::warp_exchange(mask, cudasim::to_bits(v), base + (src_lane & (width - 1))));
}
// The lanes of `mask` that bring the same value as this lane (every lane of the mask must call it).
template <typename T>
unsigned __match_any_sync(unsigned mask, T v) {
  unsigned same = 0;
  for (int j = 0; j < 32; ++j) {
    if (!((mask >> j) & 1u)) continue;
    if (__shfl_sync(mask, v, j) == v) same |= 1u << j;
  }
  return same;
}
inline int __reduce_add_sync(unsigned mask, int v) {
  return static_cast<int>(static_cast<int64_t>(cudasim::warp_sum(mask, static_cast<uint64_t>(static_cast<int64_t>(v)))));
}
inline unsigned __reduce_add_sync(unsigned mask, unsigned v) { return static_cast<unsigned>(cudasim::warp_sum(mask, v)); }

// CUDA's overloads of min and max for every pair of arithmetic types.
template <typename A, typename B>
std::common_type_t<A, B> min(A a, B b) {
  using C = std::common_type_t<A, B>;
  return static_cast<C>(b) < static_cast<C>(a) ? static_cast<C>(b) : static_cast<C>(a);
}
template <typename A, typename B>
std::common_type_t<A, B> max(A a, B b) {
  using C = std::common_type_t<A, B>;
  return static_cast<C>(a) < static_cast<C>(b) ? static_cast<C>(b) : static_cast<C>(a);
}

template <typename T>
T __ldg(const T* p) { return *p; }
template <typename T>
T __ldcg(const T* p) { return *p; }

// One host thread runs every fiber, so atomics are plain read-modify-writes.
template <typename T, typename U>
T atomicAdd(T* p, U v) {
  const T old = *p;
  *p = static_cast<T>(old + static_cast<T>(v));
  return old;
}
template <typename T, typename U>
T atomicOr(T* p, U v) {
  const T old = *p;
  *p = static_cast<T>(old | static_cast<T>(v));
  return old;
}

inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline float __frsqrt_rn(float x) { return static_cast<float>(1.0 / std::sqrt(static_cast<double>(x))); }
inline float __int2float_rn(int x) { return static_cast<float>(x); }
inline int __float2int_rn(float x) { return static_cast<int>(std::nearbyint(x)); }
inline float __int_as_float(int x) { return std::bit_cast<float>(x); }
inline float __uint_as_float(unsigned x) { return std::bit_cast<float>(x); }
inline unsigned __float_as_uint(float x) { return std::bit_cast<unsigned>(x); }
inline long long __double_as_longlong(double x) { return std::bit_cast<long long>(x); }
inline double __longlong_as_double(long long x) { return std::bit_cast<double>(x); }
inline int __popc(unsigned x) { return std::popcount(x); }
inline int __ffs(int x) { return __builtin_ffs(x); }

// Byte i of the result is byte (s >> 4i) & 7 of the pair {x (bytes 0-3), y (bytes 4-7)}.
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  const uint64_t pool = static_cast<uint64_t>(x) | static_cast<uint64_t>(y) << 32;
  unsigned r = 0;
  for (int i = 0; i < 4; ++i) r |= static_cast<unsigned>((pool >> (8 * ((s >> (4 * i)) & 7))) & 0xffu) << (8 * i);
  return r;
}

// Four signed 8-bit products summed into c.
inline int __dp4a(int a, int b, int c) {
  for (int k = 0; k < 4; ++k)
    c += static_cast<int>(static_cast<int8_t>(a >> (8 * k))) * static_cast<int>(static_cast<int8_t>(b >> (8 * k)));
  return c;
}
inline int __dp4a(unsigned a, unsigned b, unsigned c) { return __dp4a(static_cast<int>(a), static_cast<int>(b), static_cast<int>(c)); }
// Per-byte signed subtraction, saturated to [-128, 127].
inline int __vsubss4(int a, int b) {
  unsigned r = 0;
  for (int k = 0; k < 4; ++k) {
    int d = static_cast<int>(static_cast<int8_t>(a >> (8 * k))) - static_cast<int>(static_cast<int8_t>(b >> (8 * k)));
    d = d < -128 ? -128 : (d > 127 ? 127 : d);
    r |= (static_cast<unsigned>(d) & 0xffu) << (8 * k);
  }
  return static_cast<int>(r);
}
