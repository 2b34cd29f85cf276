// Kernel launches with programmatic dependent launch (PDL, sm_90): a kernel launched through
// launch() may start while the kernel before it in the stream is still running, so its thread
// blocks are resident and its weight loads in flight when that kernel ends. The contract every
// kernel launched this way keeps:
//   - before pdl_wait(): read only memory no kernel writes (weights, kernel parameters); write
//     nothing;
//   - pdl_wait() returns once every earlier kernel of the stream has completed and its writes are
//     visible (transitively: each of them waited for its own predecessor);
//   - pdl_launch_dependents() right after pdl_wait() lets the next kernel start; calling it after
//     the wait keeps at most two kernels resident (the running one, the next one prefetching).
//   - every block reaches pdl_wait() in at least one thread before it ends (an early return
//     before it would let the kernel finish ahead of its predecessor, and the next kernel's wait
//     would no longer cover that predecessor);
//   - data written by the previous kernel is read after the wait; __ldg there relies on the
//     wait's visibility guarantee (if MEMRA_CUDA_PDL=1 ever differs from 0, try __ldcg first).
// With PDL off (MEMRA_CUDA_PDL=0) both calls are no-ops and launches serialize as usual.
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "backend/cuda/cuda_check.h"

namespace memra::cuda {

__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Both together: the first statement of a kernel that has nothing to prefetch.
__device__ __forceinline__ void pdl_enter() {
  pdl_wait();
  pdl_launch_dependents();
}

// Set once by the backend at start-up (MEMRA_CUDA_PDL, set_pdl_enabled in kernels.h).
bool pdl_enabled();

namespace detail {
// carveout: the launch's preferred shared-memory share of the unified L1 / shared memory, in
// percent (cudaLaunchAttributePreferredSharedMemoryCarveout); -1 leaves it to the driver.
template <typename... Params, typename... Args>
void launch_with(bool pdl, int carveout, void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                 cudaStream_t stream, Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[2];
  unsigned n_attr = 0;
  if (pdl) {
    attr[n_attr].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n_attr].val.programmaticStreamSerializationAllowed = 1;
    ++n_attr;
  }
  if (carveout >= 0) {
    attr[n_attr].id = cudaLaunchAttributePreferredSharedMemoryCarveout;
    attr[n_attr].val.sharedMemCarveout = static_cast<unsigned>(carveout);
    ++n_attr;
  }
  cfg.attrs = attr;
  cfg.numAttrs = n_attr;
  CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...));
}
}  // namespace detail

template <typename... Params, typename... Args>
void launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, Args&&... args) {
  detail::launch_with(pdl_enabled(), -1, kernel, grid, block, smem, stream, std::forward<Args>(args)...);
}

// launch() with a preferred shared-memory carveout (percent; -1: the driver's choice).
template <typename... Params, typename... Args>
void launch_carveout(int carveout, void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                     Args&&... args) {
  detail::launch_with(pdl_enabled(), carveout, kernel, grid, block, smem, stream, std::forward<Args>(args)...);
}

// A launch that never overlaps its predecessor (kernels without pdl_wait()).
template <typename... Params, typename... Args>
void launch_plain(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, Args&&... args) {
  detail::launch_with(false, -1, kernel, grid, block, smem, stream, std::forward<Args>(args)...);
}

}  // namespace memra::cuda
