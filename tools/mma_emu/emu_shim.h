// Host shims so that the kernel source compiles as plain C++ and runs on cooperative fibers.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

using std::max;
using std::min;

namespace emu {
struct Dim3 {
  unsigned x, y, z;
};
uint8_t* smem();
uint32_t smem_addr(const void* p);
void cp_async(void* dst, const void* src, int n);
void cp_commit();
void cp_wait(int n);
void ldsm_x4(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3);
void mma(int (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1, int k);
void syncthreads();
Dim3 thread_idx();
Dim3 block_idx();
Dim3 block_dim();
void cluster_sync();
void* map_rank(void* p, int rank);
}  // namespace emu

#define threadIdx (emu::thread_idx())
#define blockIdx (emu::block_idx())
#define blockDim (emu::block_dim())
#define __syncthreads() emu::syncthreads()

inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fmaf_rn(float a, float b, float c) { return std::fmaf(a, b, c); }
inline float __int_as_float(int i) {
  float f;
  std::memcpy(&f, &i, 4);
  return f;
}
inline float __int2float_rn(int i) { return static_cast<float>(i); }
inline float __fdiv_rn(float a, float b) { return a / b; }
template <class T>
T __ldg(const T* p) {
  return *p;
}
inline int __dp4a(int a, int b, int c) {
  for (int k = 0; k < 4; ++k) c += static_cast<int8_t>(a >> (8 * k)) * static_cast<int8_t>(b >> (8 * k));
  return c;
}
inline unsigned __vsubss4(unsigned a, unsigned b) {
  unsigned r = 0;
  for (int k = 0; k < 4; ++k) {
    int v = static_cast<int8_t>(a >> (8 * k)) - static_cast<int8_t>(b >> (8 * k));
    v = std::max(-128, std::min(127, v));
    r |= (static_cast<unsigned>(v) & 0xFF) << (8 * k);
  }
  return r;
}
inline int __vsubss4(int a, int b) { return static_cast<int>(__vsubss4(static_cast<unsigned>(a), static_cast<unsigned>(b))); }
inline float __shfl_xor_sync(unsigned, float v, int) { return v; }
inline int __reduce_add_sync(unsigned, int v) { return v; }

namespace cg {
struct cluster_group {
  void sync() { emu::cluster_sync(); }
  template <class T>
  T* map_shared_rank(T* p, int rank) {
    return static_cast<T*>(emu::map_rank(const_cast<void*>(static_cast<const void*>(p)), rank));
  }
};
inline cluster_group this_cluster() { return {}; }
}  // namespace cg
