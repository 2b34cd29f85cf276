// What a sequence's caches hold, layer by layer. The model derives it from its configuration
// (ModelConfig::cache_shape) and the backend's KV element type; the step core allocates by it.
#pragma once

#include <cstdint>
#include <vector>

#include "common/ggml_type.h"

namespace memra {

// The two token mixers, by the state a layer carries per sequence: full attention keeps K and V
// rows per position; Gated DeltaNet keeps a conv window and a fixed-size recurrent state.
enum class MixerKind : uint8_t { FullAttention, GatedDeltaNet };

struct CacheShape {
  std::vector<MixerKind> layer_mixer;  // per layer
  GgmlType kv_type = GgmlType::F32;    // element type of K and V rows
  int64_t kv_dim = 0;                  // values per position per full-attention layer, K (same for V)
  int64_t conv_floats = 0;             // conv window per Gated DeltaNet layer: (kernel - 1) x channels
  int64_t ssm_floats = 0;              // recurrent state per Gated DeltaNet layer: n_v x d_k x d_v
  bool operator==(const CacheShape&) const = default;
};

}  // namespace memra
