// What the probes share: every CUDA call checked, with file:line, exiting on the first error.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CK(x)                                                                                   \
  do {                                                                                          \
    cudaError_t e_ = (x);                                                                       \
    if (e_ != cudaSuccess) {                                                                    \
      std::printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));                    \
      std::exit(1);                                                                             \
    }                                                                                           \
  } while (0)
