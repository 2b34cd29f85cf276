// The bandwidth floor's denominator: a read-only streaming kernel (16-byte loads, grid-stride,
// results folded into one word so the loads cannot be elided), timed with CUDA events.
#include <algorithm>
#include <vector>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"

namespace memra::cuda {
namespace {

__global__ void read_kernel(const int4* __restrict__ p, size_t n, int* __restrict__ sink) {
  int4 acc = make_int4(0, 0, 0, 0);
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const int4 v = __ldg(p + i);
    acc.x ^= v.x;
    acc.y ^= v.y;
    acc.z ^= v.z;
    acc.w ^= v.w;
  }
  if ((acc.x ^ acc.y ^ acc.z ^ acc.w) == 0x7eadbeef) *sink = 1;
}

}  // namespace

double measure_read_bandwidth(size_t bytes, int reps, cudaStream_t stream) {
  void* buf = nullptr;
  int* sink = nullptr;
  CUDA_CHECK(cudaMalloc(&buf, bytes));
  CUDA_CHECK(cudaMalloc(&sink, sizeof(int)));
  CUDA_CHECK(cudaMemsetAsync(buf, 0x5a, bytes, stream));
  int sms = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaEvent_t a, b;
  CUDA_CHECK(cudaEventCreate(&a));
  CUDA_CHECK(cudaEventCreate(&b));
  std::vector<float> ms;
  for (int r = 0; r <= reps; ++r) {
    CUDA_CHECK(cudaEventRecord(a, stream));
    launch_plain(read_kernel, sms * 8, 512, 0, stream, static_cast<const int4*>(buf), bytes / 16, sink);
    CUDA_LAUNCH_CHECK();
    CUDA_CHECK(cudaEventRecord(b, stream));
    CUDA_CHECK(cudaEventSynchronize(b));
    float t = 0;
    CUDA_CHECK(cudaEventElapsedTime(&t, a, b));
    if (r > 0) ms.push_back(t);  // the first run warms up
  }
  std::sort(ms.begin(), ms.end());
  CUDA_CHECK(cudaEventDestroy(a));
  CUDA_CHECK(cudaEventDestroy(b));
  CUDA_CHECK(cudaFree(buf));
  CUDA_CHECK(cudaFree(sink));
  return static_cast<double>(bytes) / (ms[ms.size() / 2] * 1e-3);
}

}  // namespace memra::cuda
