// The CUDA emulation (tests/cudasim) itself: warp collectives, barriers, dynamic shared memory
// limits, graph capture and replay, and the misuse it must stop on. Built only against the
// emulation (-DMEMRA_CUDASIM=ON), where the GPU tests rely on these semantics.
#if __has_include(<cudasim_device.h>)
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "backend/cuda/common.cuh"
#include "backend/cuda/mma_f16.cuh"

namespace {

__global__ void shuffle_kernel(int* out) {
  const int lane = threadIdx.x % 32, t = threadIdx.x;
  const int v = 10 * t;
  out[4 * t + 0] = __shfl_xor_sync(0xffffffffu, v, 1);
  out[4 * t + 1] = __shfl_sync(0xffffffffu, v, 3);
  out[4 * t + 2] = __reduce_add_sync(0xffffffffu, lane);
  float f = static_cast<float>(lane);
  for (int o = 16; o > 0; o >>= 1) f += __shfl_xor_sync(0xffffffffu, f, o);
  out[4 * t + 3] = static_cast<int>(f);
}

TEST(CudaSimWarp, ShufflesAndReductionsPerWarp) {
  std::vector<int> out(4 * 64, -1);
  int* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, out.size() * sizeof(int)), cudaSuccess);
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(1);
  cfg.blockDim = dim3(64);
  ASSERT_EQ(cudaLaunchKernelEx(&cfg, shuffle_kernel, d), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(out.data(), d, out.size() * sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
  for (int t = 0; t < 64; ++t) {
    const int warp_base = t / 32 * 32;
    EXPECT_EQ(out[4 * t + 0], 10 * (t ^ 1)) << t;
    EXPECT_EQ(out[4 * t + 1], 10 * (warp_base + 3)) << t;
    EXPECT_EQ(out[4 * t + 2], 31 * 32 / 2) << t;
    EXPECT_EQ(out[4 * t + 3], 31 * 32 / 2) << t;
  }
  cudaFree(d);
}

// Every thread reads what its neighbour wrote before the barrier; with 2 blocks, each block's
// static shared array is its own while it runs.
__global__ void barrier_kernel(int* out) {
  __shared__ int s[128];
  const int t = threadIdx.x;
  s[t] = 1000 * static_cast<int>(blockIdx.x) + t;
  __syncthreads();
  out[blockIdx.x * blockDim.x + t] = s[(t + 1) % blockDim.x];
}

TEST(CudaSimBlock, BarrierOrdersSharedMemory) {
  int* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, 256 * sizeof(int)), cudaSuccess);
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(2);
  cfg.blockDim = dim3(128);
  ASSERT_EQ(cudaLaunchKernelEx(&cfg, barrier_kernel, d), cudaSuccess);
  std::vector<int> out(256);
  cudaMemcpy(out.data(), d, 256 * sizeof(int), cudaMemcpyDeviceToHost);
  for (int b = 0; b < 2; ++b)
    for (int t = 0; t < 128; ++t) EXPECT_EQ(out[b * 128 + t], 1000 * b + (t + 1) % 128);
  cudaFree(d);
}

__global__ void add_kernel(int* x, int v) { x[threadIdx.x] += v; }

TEST(CudaSimRuntime, CaptureRecordsAndGraphReplays) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  int* d = nullptr;
  cudaMalloc(&d, 32 * sizeof(int));
  cudaMemsetAsync(d, 0, 32 * sizeof(int), s);
  cudaLaunchConfig_t cfg{};
  cfg.blockDim = dim3(32);
  cfg.stream = s;
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  ASSERT_EQ(cudaLaunchKernelEx(&cfg, add_kernel, d, 5), cudaSuccess);
  cudaGraph_t g;
  ASSERT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
  int h = -1;
  cudaMemcpy(&h, d, sizeof(int), cudaMemcpyDeviceToHost);
  EXPECT_EQ(h, 0) << "a captured launch ran during capture";
  cudaGraphExec_t e;
  ASSERT_EQ(cudaGraphInstantiate(&e, g, 0), cudaSuccess);
  cudaGraphLaunch(e, s);
  cudaGraphLaunch(e, s);
  cudaStreamSynchronize(s);
  cudaMemcpy(&h, d + 31, sizeof(int), cudaMemcpyDeviceToHost);
  EXPECT_EQ(h, 10);
  cudaGraphExecDestroy(e);
  cudaGraphDestroy(g);
  cudaFree(d);
  cudaStreamDestroy(s);
}

__global__ void smem_kernel(float* out) {
  float* smem = static_cast<float*>(::cudasim::dynamic_smem());
  smem[threadIdx.x] = 1.0f;
  __syncthreads();
  out[threadIdx.x] = smem[(threadIdx.x + 1) % blockDim.x];
}

TEST(CudaSimRuntime, DynamicSharedMemoryNeedsTheAttributeAbove48K) {
  float* d = nullptr;
  cudaMalloc(&d, 64 * sizeof(float));
  cudaLaunchConfig_t cfg{};
  cfg.blockDim = dim3(64);
  cfg.dynamicSmemBytes = 100 * 1024;
  EXPECT_EQ(cudaLaunchKernelEx(&cfg, smem_kernel, d), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaFuncSetAttribute(smem_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 100 * 1024), cudaSuccess);
  EXPECT_EQ(cudaLaunchKernelEx(&cfg, smem_kernel, d), cudaSuccess);
  float h = 0;
  cudaMemcpy(&h, d + 63, sizeof(float), cudaMemcpyDeviceToHost);
  EXPECT_EQ(h, 1.0f);
  cudaFree(d);
}

// A cluster of 4 blocks along y: each writes its rank into its shared memory, and after the
// cluster barrier reads its neighbour's through the cluster mapping.
__global__ void cluster_kernel(int* out) {
  int* smem = static_cast<int*>(::cudasim::dynamic_smem());
  const int rank = ::cudasim::cluster_rank();
  smem[threadIdx.x] = 100 * rank + static_cast<int>(threadIdx.x);
  ::cudasim::sync_cluster();
  const int* other = static_cast<int*>(::cudasim::cluster_map(smem, (rank + 1) % 4));
  out[(blockIdx.y * gridDim.x + blockIdx.x) * blockDim.x + threadIdx.x] = other[threadIdx.x] + 1000 * rank;
  ::cudasim::sync_cluster();
}

TEST(CudaSimRuntime, ClustersRunTogetherAndShareMemory) {
  int* d = nullptr;
  const int n = 2 * 8 * 32;
  cudaMalloc(&d, n * sizeof(int));
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(2, 8);
  cfg.blockDim = dim3(32);
  cfg.dynamicSmemBytes = 32 * sizeof(int);
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = 1;
  attr.val.clusterDim.y = 4;
  attr.val.clusterDim.z = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  ASSERT_EQ(cudaLaunchKernelEx(&cfg, cluster_kernel, d), cudaSuccess);
  std::vector<int> out(n);
  cudaMemcpy(out.data(), d, n * sizeof(int), cudaMemcpyDeviceToHost);
  for (int y = 0; y < 8; ++y)
    for (int x = 0; x < 2; ++x)
      for (int t = 0; t < 32; ++t) {
        const int rank = y % 4;
        EXPECT_EQ(out[(y * 2 + x) * 32 + t], 100 * ((rank + 1) % 4) + t + 1000 * rank) << x << "," << y << "," << t;
      }
  attr.val.clusterDim.y = 3;  // does not divide the grid
  EXPECT_EQ(cudaLaunchKernelEx(&cfg, cluster_kernel, d), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  cudaFree(d);
}

// Warp 1 waits on each round's mbarrier phase before warp 0 arrives (warp 0 first meets in a warp
// collective, so the emulation runs warp 1 into its wait): the wait must block until both
// arrivals and the announced bytes came, then see the round's copy.
__global__ void mbarrier_kernel(const int* src, int* out) {
  namespace mc = memra::cuda;
  MEMRA_DYNAMIC_SMEM(uint8_t, smem, 16);
  uint64_t* bar = reinterpret_cast<uint64_t*>(smem);
  int* data = reinterpret_cast<int*>(smem + 16);
  const int t = static_cast<int>(threadIdx.x);
  if (t == 0) mc::mbarrier_init(bar, 2);
  __syncthreads();
  for (int round = 0; round < 3; ++round) {
    if (t >= 32) {
      mc::mbarrier_wait(bar, static_cast<uint32_t>(round & 1));
      out[round * 32 + t - 32] = data[t - 32];
    } else {
      __syncwarp();
      if (t == 0) {
        mc::mbarrier_arrive_expect(bar, 32 * sizeof(int));
        mc::bulk_copy(data, src + round * 32, 32 * sizeof(int), bar);
      } else if (t == 1) {
        mc::mbarrier_arrive_expect(bar, 0);
      }
    }
    __syncthreads();  // every read of `data` before the next round's copy
  }
}

TEST(CudaSimBlock, MbarrierWaitsForItsArrivalsAndBytes) {
  std::vector<int> src(96);
  for (int i = 0; i < 96; ++i) src[i] = 7 * i + 1;
  int *d_src = nullptr, *d_out = nullptr;
  ASSERT_EQ(cudaMalloc(&d_src, src.size() * sizeof(int)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d_out, src.size() * sizeof(int)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(d_src, src.data(), src.size() * sizeof(int), cudaMemcpyHostToDevice), cudaSuccess);
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(1);
  cfg.blockDim = dim3(64);
  cfg.dynamicSmemBytes = 16 + 32 * sizeof(int);
  ASSERT_EQ(cudaLaunchKernelEx(&cfg, mbarrier_kernel, static_cast<const int*>(d_src), d_out), cudaSuccess);
  std::vector<int> out(96, -1);
  ASSERT_EQ(cudaMemcpy(out.data(), d_out, out.size() * sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(out, src);
  cudaFree(d_src);
  cudaFree(d_out);
}

// A phase announced 256 bytes of which 128 are copied: it never completes (a hang on the GPU).
__global__ void mbarrier_short_copy_kernel(const int* src) {
  namespace mc = memra::cuda;
  MEMRA_DYNAMIC_SMEM(uint8_t, smem, 16);
  uint64_t* bar = reinterpret_cast<uint64_t*>(smem);
  if (threadIdx.x == 0) {
    mc::mbarrier_init(bar, 1);
    mc::mbarrier_arrive_expect(bar, 256);
    mc::bulk_copy(smem + 16, src, 128, bar);
  }
  __syncthreads();
  mc::mbarrier_wait(bar, 0);
}

// Half the block waits at __syncthreads while the other half waits in a warp collective that
// names the first half's lanes: on a GPU this hangs; the emulation stops with a message.
__global__ void deadlock_kernel() {
  if (threadIdx.x < 16) __syncthreads();
  else __syncwarp(0xffffffffu);
}

__global__ void exited_lane_kernel(int* out) {
  if (threadIdx.x == 5) return;
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, static_cast<int>(threadIdx.x), 1);
}

TEST(CudaSimDeathTest, HangsAndUndefinedCollectivesStop) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  cudaLaunchConfig_t cfg{};
  cfg.blockDim = dim3(32);
  EXPECT_DEATH(cudaLaunchKernelEx(&cfg, deadlock_kernel), "deadlock");
  int* d = nullptr;
  cudaMalloc(&d, 32 * sizeof(int));
  EXPECT_DEATH(cudaLaunchKernelEx(&cfg, exited_lane_kernel, d), "lane (that )?has exited|lane exited");
  cfg.dynamicSmemBytes = 16 + 256;
  EXPECT_DEATH(cudaLaunchKernelEx(&cfg, mbarrier_short_copy_kernel, static_cast<const int*>(d)),
               "deadlock.*mbarrier");
  cudaFree(d);
}

}  // namespace
#endif
