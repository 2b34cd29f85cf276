// Launcher of the CUDA sampler (k_sample.cu): every row's token from device logits, with
// step/sampling.h's semantics bit for bit. The per-row logic is in sample_row.h; the host
// side (validation, patch lists, uploads) is cuda_sampling.cpp.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/sample_row.h"

namespace memra::cuda {

// Everything in device memory. Row lists hold row indices (ascending) of the rows a phase
// concerns: temperature rows (the Gumbel pass), rows with a top-k cut, rows with top-p < 1.
struct SampleBatch {
  const SampleRowDesc* desc = nullptr;  // rows entries
  int64_t rows = 0;
  int64_t n = 0;   // vocabulary size, < 2^23
  int seg = 0;     // ids per block: sample_segment(rows, n)
  // Patched (biased / penalised) ids of all rows, sorted by (row, id); values written here.
  const SamplePatchOp* ops = nullptr;
  int32_t n_ops = 0;
  const float* bias_values = nullptr;
  float* patch_values = nullptr;  // n_ops floats, what SampleRowDesc::patch_val points into
  const int32_t* temp_rows = nullptr;
  int32_t n_temp = 0;
  const int32_t* topk_rows = nullptr;
  int32_t n_topk = 0;
  const int32_t* topp_rows = nullptr;
  int32_t n_topp = 0;
  int32_t* tokens = nullptr;  // rows ids out (-1: no candidate)
};

// Ids per block for a batch: large segments when there are rows enough to fill the GPU, small
// ones for a single row. Any choice gives the same tokens (all reductions are exact).
int sample_segment(int64_t rows, int64_t n);
// Bytes of `work` sample_rows needs (device scratch, 256-byte aligned).
size_t sample_work_bytes(int64_t rows, int64_t n, int seg);
// Launches the sampling kernels on `stream`; the tokens are ready when the stream gets there.
void sample_rows(const SampleBatch& b, void* work, cudaStream_t stream);

}  // namespace memra::cuda
