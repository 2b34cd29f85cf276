// cudasim: the int8 tensor-core GEMM (k_matmul_mma.cu, PTX mma.sync) is not emulated. The GEMV
// takes every row count in this build (MEMRA_HAVE_MMA in k_matmul_q8.cu), so this never runs.
#include <cstdio>
#include <cstdlib>

#include "backend/cuda/kernels.h"

namespace memra::cuda {
void matmul_q8_mma(const DevWeight&, int64_t, const Q8Act&, float*, int64_t, bool, cudaStream_t) {
  std::fprintf(stderr, "cudasim: the tensor-core matmul is not emulated (tests GpuMatmulMma* need a GPU)\n");
  std::abort();
}
}  // namespace memra::cuda
