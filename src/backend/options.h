// What each backend can be asked at construction. Filled at the edge (the CLI parses the MEMRA_*
// knobs into them once, engine/options.h); tests set fields directly. Defaults here are the knobs'
// defaults (common/knobs.cpp), which a test checks.
#pragma once

#include <cstdint>

#include "common/ggml_type.h"

namespace memra {

struct CpuOptions {
  int32_t threads = 0;  // MEMRA_THREADS: OpenMP threads per op; 0: all cores
  bool operator==(const CpuOptions&) const = default;
};

struct CudaOptions {
  int64_t scratch_mb = 2048;         // MEMRA_CUDA_SCRATCH_MB: the arena for one step's activations
  bool graphs = true;                // MEMRA_CUDA_GRAPHS: record decode steps as graphs and replay them
  bool pdl = true;                   // MEMRA_CUDA_PDL: programmatic dependent launch
  int32_t stream_parts = 0;          // MEMRA_CUDA_STREAM_PARTS: warps a one-row matmul unit takes (0: rule)
  GgmlType kv_type = GgmlType::F16;  // MEMRA_CUDA_KV: F16, or Q8_0 (8-bit blocks, f16 scale per 32)
  // The attention's split step on the tensor cores where the shape allows (k_attention_tc.cu); not a knob:
  // tests turn it off to compare the two kernels.
  bool attn_tc = true;
  bool profile = false;              // MEMRA_CUDA_PROFILE: per-op GPU times at exit (no graphs)
  bool operator==(const CudaOptions&) const = default;
};

}  // namespace memra
