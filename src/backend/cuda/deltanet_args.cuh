// The arguments of the Gated DeltaNet core kernel (k_deltanet.cu: the recurrent form, one row
// after another) and its gate math. (A chunked form for prompts measured slower on the H200,
// pp512 -2% and -4% in two sessions, and was removed: git show c29548b:src/backend/cuda/k_deltanet_chunked.cu.)
#pragma once

#include <cstdint>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"

namespace memra::cuda {

struct CoreArgs {
  int layer;
  const float* conv_out;  // rows x (2*n_k*d + n_v*d): q | k | v
  const float* z;         // rows x n_v*d
  const float* beta_raw;  // Separate: rows x n_v; GroupedBA: rows x 2*n_v (b and a)
  const float* alpha_raw; // Separate: rows x n_v; unused for GroupedBA
  const float* ssm_a;     // n_v
  const float* dt_bias;   // n_v
  const float* norm_w;    // d
  float* y;               // rows x n_v*d
  int n_k, n_v;
  GdnHeadMap head_map;
  GdnGateLayout gate_layout;
  float eps;
};

__device__ __forceinline__ float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

// Raw gate inputs (b, a) of value head h at a row, for either gate layout.
__device__ __forceinline__ void gate_inputs(const CoreArgs& p, int64_t row, int h, float& b, float& a) {
  if (p.gate_layout == GdnGateLayout::Separate) {
    b = p.beta_raw[row * p.n_v + h];
    a = p.alpha_raw[row * p.n_v + h];
  } else {
    const int r = p.n_v / p.n_k;
    const float* ba = p.beta_raw + row * 2 * p.n_v + static_cast<int64_t>(h / r) * 2 * r;
    b = ba[h % r];
    a = ba[r + h % r];
  }
}

// The key head that value head h reads q and k from.
__device__ __forceinline__ int key_head_of(const CoreArgs& p, int h) {
  return p.head_map == GdnHeadMap::Tiled ? h % p.n_k : h / (p.n_v / p.n_k);
}

}  // namespace memra::cuda
