// KV append: row r of k and v (f32, n_rows x kv_dim) goes to position positions[r] of its
// sequence's caches, through its block table (step/kv_blocks.h: row p % kKvBlock of block
// p / kKvBlock, V rows kKvBlock rows after the K rows): f16 (kv_dim halves, rounded to nearest
// even) or 8-bit rows (kv_cache_q8.h). The host checked that every block written is owned by
// its sequence alone (SequenceCache::check_writable).
// One launch for every row of the step: block (row, k|v).
#include "backend/cuda/common.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/kv_append.cuh"

namespace memra::cuda {
namespace {

constexpr int kAppendThreads = 256;

// Block (r, k|v): the source row and its cache row (`row_bytes` bytes per position).
struct AppendRow {
  const float* src;
  uint8_t* dst;
};

__device__ __forceinline__ AppendRow append_row(int layer, const float* k, const float* v, const DeviceStep& step,
                                                int kv_dim, int64_t row_bytes) {
  const int64_t r = blockIdx.x;
  const bool is_v = blockIdx.y != 0;
  return AppendRow{(is_v ? v : k) + r * kv_dim, kv_cache_row(step, layer, r, is_v, row_bytes)};
}

__global__ void __launch_bounds__(kAppendThreads)
    kv_append_kernel(int layer, const float* __restrict__ k, const float* __restrict__ v, const DeviceStep step,
                     int kv_dim) {
  pdl_enter();
  const AppendRow a = append_row(layer, k, v, step, kv_dim, 2 * static_cast<int64_t>(kv_dim));
  const float* src = a.src;
  __half* dst = reinterpret_cast<__half*>(a.dst);
  if (kv_dim % 2 == 0) {
    // Pairs: 8-byte loads, 4-byte stores (rows of an even width keep both aligned).
    const float2* s2 = reinterpret_cast<const float2*>(src);
    __half2* d2 = reinterpret_cast<__half2*>(dst);
    for (int i = threadIdx.x; i < kv_dim / 2; i += kAppendThreads) {
      const float2 x = s2[i];
      d2[i] = __halves2half2(kv_f16(x.x), kv_f16(x.y));
    }
  } else {
    for (int i = threadIdx.x; i < kv_dim; i += kAppendThreads) dst[i] = kv_f16(src[i]);
  }
}

// The 8-bit cache (kv_cache_q8.h): one warp per 32-value block of the row.
__global__ void __launch_bounds__(kAppendThreads)
    kv_append_q8_kernel(int layer, const float* __restrict__ k, const float* __restrict__ v, const DeviceStep step,
                        int kv_dim) {
  pdl_enter();
  const AppendRow a = append_row(layer, k, v, step, kv_dim, kv_q8_row_bytes(kv_dim));
  const float* src = a.src;
  uint8_t* row = a.dst;
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  for (int b = warp; b < kv_dim / 32; b += kAppendThreads / kWarp)  // warp-uniform
    kv_q8_block(row, kv_dim, b, src[b * 32 + lane]);
}

}  // namespace

void kv_append(int layer, const float* k, const float* v, const DeviceStep& step, int64_t n_rows, int kv_dim,
               GgmlType kv_type, cudaStream_t stream) {
  MEMRA_ASSERT(layer >= 0 && n_rows >= 0 && kv_dim > 0);
  MEMRA_ASSERT(n_rows <= step.n_rows);
  MEMRA_ASSERT(reinterpret_cast<uintptr_t>(k) % 8 == 0 && reinterpret_cast<uintptr_t>(v) % 8 == 0);
  MEMRA_ASSERT(kv_type == GgmlType::F16 || (kv_type == GgmlType::Q8_0 && kv_dim % 64 == 0), "CUDA KV cache type");
  if (n_rows == 0) return;
  const dim3 grid(static_cast<unsigned>(n_rows), 2);
  if (kv_type == GgmlType::Q8_0) launch(kv_append_q8_kernel, grid, kAppendThreads, 0, stream, layer, k, v, step, kv_dim);
  else launch(kv_append_kernel, grid, kAppendThreads, 0, stream, layer, k, v, step, kv_dim);
  CUDA_LAUNCH_CHECK();
}

}  // namespace memra::cuda
