// Instantiations of the matmul family for q8_0 weights (matmul_kernel.cuh, matmul_stream_kernel.cuh).
#include "backend/cuda/matmul_kernel.cuh"
#include "backend/cuda/matmul_stream_kernel.cuh"

namespace memra::cuda::matmul_impl {

template void launch_type<GgmlType::Q8_0>(const Args&, const Config&, int64_t, cudaStream_t);

template void launch_stream_type<GgmlType::Q8_0>(const Args&, int, int, int, cudaStream_t);

}  // namespace memra::cuda::matmul_impl
