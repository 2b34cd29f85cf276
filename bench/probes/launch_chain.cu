// Probe (H200): what one kernel boundary costs in a recorded decode step. A chain of N dependent
// kernels is captured in a CUDA graph and replayed; each kernel reads what the one before it wrote
// (so the chain is a real dependency chain) and does almost nothing else. The time per kernel is
// the floor a step of N launches pays before any of its bytes move: the 9B Q4_0 step at B = 1 is
// ~310 launches (session 27), ~2.46 ms a token against ~1.06 ms of weight bytes.
//
// Rows: grid size (1 block, 2-32 like the row-wise ops, 132-528 like the matmuls) x block size x
// programmatic dependent launch (off; on with the wait at the kernel's start; on with a prologue
// of independent loads before the wait, as the matmuls prefetch their weights) x bytes each
// block moves (0 or a 16 KB row: the norm / act_f16 shape).
// Build and run (on the device; nvcc is there):
//   nvcc -O3 -arch=sm_90 -std=c++17 bench/probes/launch_chain.cu -o /tmp/launch_chain && /tmp/launch_chain
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "probe_check.h"

enum Pdl : int { kNoPdl = 0, kPdlWaitFirst = 1, kPdlPrefetch = 2 };

// One link: block b reads word b of `in` (written by the previous link), reads `row_floats`
// floats of `row` (a 16 KB row, as a norm reads its input), and writes word b of `out` (the
// sum, so nothing is dead). With kPdlPrefetch the block first reads `weights` (never written),
// as a matmul reads its weights before waiting for its input.
template <int kMode>
__global__ void link_kernel(const float* __restrict__ in, float* __restrict__ out, const float* __restrict__ row,
                            int row_floats, const float* __restrict__ weights) {
  float acc = 0.0f;
  if constexpr (kMode == kPdlPrefetch) acc += weights[blockIdx.x * blockDim.x + threadIdx.x];
#if __CUDA_ARCH__ >= 900
  if constexpr (kMode != kNoPdl) asm volatile("griddepcontrol.wait;" ::: "memory");
  if constexpr (kMode != kNoPdl) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  acc += in[blockIdx.x];
  for (int i = threadIdx.x; i < row_floats; i += blockDim.x) acc += row[i];
  // One value a block: thread 0 after a block reduction would add a barrier; a warp sum is enough.
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if (threadIdx.x == 0) out[blockIdx.x] = acc * 0.5f;
}

template <int kMode>
void launch_link(cudaStream_t s, int blocks, int threads, const float* in, float* out, const float* row, int row_floats,
                 const float* weights) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(blocks);
  cfg.blockDim = dim3(threads);
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  if (kMode != kNoPdl) {
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
  }
  CK(cudaLaunchKernelEx(&cfg, link_kernel<kMode>, in, out, row, row_floats, weights));
}

// Microseconds per link of an N-link chain, median of 9 timed replays of 10 graph launches each.
template <int kMode>
double chain_us(cudaStream_t s, int n, int blocks, int threads, int row_floats, float* a, float* b, const float* row,
                const float* weights) {
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < n; ++i) launch_link<kMode>(s, blocks, threads, i % 2 ? b : a, i % 2 ? a : b, row, row_floats, weights);
  CK(cudaStreamEndCapture(s, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  for (int i = 0; i < 3; ++i) CK(cudaGraphLaunch(ge, s));
  CK(cudaStreamSynchronize(s));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::vector<float> t;
  for (int r = 0; r < 9; ++r) {
    CK(cudaEventRecord(e0, s));
    for (int i = 0; i < 10; ++i) CK(cudaGraphLaunch(ge, s));
    CK(cudaEventRecord(e1, s));
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    t.push_back(ms);
  }
  std::sort(t.begin(), t.end());
  CK(cudaGraphExecDestroy(ge));
  CK(cudaGraphDestroy(g));
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  return t[t.size() / 2] * 1000.0 / (10.0 * n);
}

int main() {
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s, %d SMs\n", prop.name, prop.multiProcessorCount);
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const int max_blocks = 4 * prop.multiProcessorCount;
  float *a, *b, *row, *weights;
  CK(cudaMalloc(&a, max_blocks * sizeof(float)));
  CK(cudaMalloc(&b, max_blocks * sizeof(float)));
  CK(cudaMalloc(&row, 4096 * sizeof(float)));
  CK(cudaMalloc(&weights, static_cast<size_t>(max_blocks) * 1024 * sizeof(float)));
  CK(cudaMemset(a, 0, max_blocks * sizeof(float)));
  CK(cudaMemset(b, 0, max_blocks * sizeof(float)));
  CK(cudaMemset(row, 0, 4096 * sizeof(float)));
  CK(cudaMemset(weights, 0, static_cast<size_t>(max_blocks) * 1024 * sizeof(float)));
  const int n = 300;
  std::printf("| blocks | threads | row bytes a block | us a link, no PDL | PDL, wait first | PDL, loads before the wait |\n");
  std::printf("| ---: | ---: | ---: | ---: | ---: | ---: |\n");
  for (int blocks : {1, 2, 32, prop.multiProcessorCount, 2 * prop.multiProcessorCount, 4 * prop.multiProcessorCount}) {
    for (int threads : {256, 1024}) {
      if (threads == 1024 && blocks > prop.multiProcessorCount) continue;
      for (int row_floats : {0, 4096}) {
        const double t0 = chain_us<kNoPdl>(s, n, blocks, threads, row_floats, a, b, row, weights);
        const double t1 = chain_us<kPdlWaitFirst>(s, n, blocks, threads, row_floats, a, b, row, weights);
        const double t2 = chain_us<kPdlPrefetch>(s, n, blocks, threads, row_floats, a, b, row, weights);
        std::printf("| %d | %d | %d | %.2f | %.2f | %.2f |\n", blocks, threads, row_floats * 4, t0, t1, t2);
      }
    }
  }
  return 0;
}
