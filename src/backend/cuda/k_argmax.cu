// Greedy token per row, two passes (segment winners, then the row winner). The rule matches the
// host argmax (step/sampling.cpp): largest value, lowest id on ties, NaN and -inf never win,
// -1 if nothing qualifies. "Better" is a total order, so the result does not depend on the
// reduction shape.
#include "backend/cuda/common.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/kernels.h"

namespace memra::cuda {
namespace {

constexpr int kThreads = 256;
// Logits a block of the first pass reads: 243 blocks for a 248,320-token vocabulary, about two an
// SM, 4 loads a thread in flight. 8,192 gave 31 blocks, 18 us a row on an H100 (Nsight, 55 GB/s:
// ~0.7% of a 9B B = 1 step) for a 1 MB read. 1,024 against 8,192, H100, 9B Q4_0 tg32 @ d512, two
// alternations in one call: B = 1 371.5 / 369.5 -> 376.4 / 372.1 tok/s, B = 16 4,014 / 4,018 -> 4,040 /
// 4,059 (bench/results/2026-12-07-0753-h100-s46-a.log).
constexpr int64_t kSegment = 1024;

struct Best {
  float v;
  int32_t i;
};

__device__ __forceinline__ bool better(Best a, Best b) {
  return a.i >= 0 && (b.i < 0 || a.v > b.v || (a.v == b.v && a.i < b.i));
}

__device__ Best block_best(Best mine, Best* shared) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    Best other{__shfl_xor_sync(0xffffffffu, mine.v, o), __shfl_xor_sync(0xffffffffu, mine.i, o)};
    if (better(other, mine)) mine = other;
  }
  if (lane == 0) shared[warp] = mine;
  __syncthreads();
  if (warp == 0) {
    mine = lane < kThreads / kWarp ? shared[lane] : Best{0.0f, -1};
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      Best other{__shfl_xor_sync(0xffffffffu, mine.v, o), __shfl_xor_sync(0xffffffffu, mine.i, o)};
      if (better(other, mine)) mine = other;
    }
  }
  return mine;
}

__global__ void argmax_segments(const float* __restrict__ logits, int64_t n, int n_segments, Best* __restrict__ part) {
  pdl_enter();
  __shared__ Best shared[kThreads / kWarp];
  const int64_t r = blockIdx.y;
  const int64_t begin = blockIdx.x * kSegment, end = min(n, begin + kSegment);
  Best mine{0.0f, -1};
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) {
    const float v = logits[r * n + i];
    Best c{v, static_cast<int32_t>(i)};
    if (v > -INFINITY && better(c, mine)) mine = c;  // NaN fails the comparison
  }
  mine = block_best(mine, shared);
  if (threadIdx.x == 0) part[r * n_segments + blockIdx.x] = mine;
}

__global__ void argmax_final(const Best* __restrict__ part, int n_segments, int32_t* __restrict__ out) {
  pdl_enter();
  __shared__ Best shared[kThreads / kWarp];
  Best mine{0.0f, -1};
  for (int i = threadIdx.x; i < n_segments; i += kThreads) {
    Best c = part[blockIdx.x * n_segments + i];
    if (better(c, mine)) mine = c;
  }
  mine = block_best(mine, shared);
  if (threadIdx.x == 0) out[blockIdx.x] = mine.i;
}

}  // namespace

size_t argmax_work_bytes(int64_t rows, int64_t n) {
  return static_cast<size_t>(rows) * div_up(n, kSegment) * sizeof(Best);
}

void argmax_rows(const float* logits, int64_t rows, int64_t n, int32_t* out, void* work, cudaStream_t stream) {
  MEMRA_ASSERT(n > 0 && n < (int64_t{1} << 31));
  if (rows == 0) return;
  const int n_segments = static_cast<int>(div_up(n, kSegment));
  launch(argmax_segments, dim3(n_segments, static_cast<unsigned>(rows)), kThreads, 0, stream, logits, n, n_segments,
         static_cast<Best*>(work));
  CUDA_LAUNCH_CHECK();
  launch(argmax_final, static_cast<unsigned>(rows), kThreads, 0, stream, static_cast<Best*>(work), n_segments, out);
  CUDA_LAUNCH_CHECK();
}

}  // namespace memra::cuda
