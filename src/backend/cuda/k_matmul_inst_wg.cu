// Instantiations of the matmul family's warpgroup kernel (matmul_wg_kernel.cuh) for the types it decodes.
#include "backend/cuda/matmul_wg_kernel.cuh"

namespace memra::cuda::matmul_impl {

template void launch_wg_type<GgmlType::Q4_0>(const Args&, int, int, int64_t, cudaStream_t);
template void launch_wg_type<GgmlType::Q8_0>(const Args&, int, int, int64_t, cudaStream_t);
template void launch_wg_type<GgmlType::Q6_K>(const Args&, int, int, int64_t, cudaStream_t);

}  // namespace memra::cuda::matmul_impl
