// Checked CUDA runtime calls (host code): a failure aborts with the call, file:line and the
// CUDA error string. Used by .cu and .cpp files alike.
#pragma once

#include <cuda_runtime.h>

#include "common/error.h"

#define CUDA_CHECK(call)                                                                              \
  do {                                                                                                \
    cudaError_t err_ = (call);                                                                        \
    if (err_ != cudaSuccess) [[unlikely]]                                                             \
      ::memra::assert_failed(#call, __FILE__, __LINE__, cudaGetErrorString(err_));                    \
  } while (0)

// After every launch: configuration errors surface here, at the launcher's file:line.
#define CUDA_LAUNCH_CHECK() CUDA_CHECK(cudaGetLastError())
