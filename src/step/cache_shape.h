// What a sequence's caches hold, layer by layer. The model derives it from its configuration
// (ModelConfig::cache_shape) and the backend's KV element type; the step core allocates by it.
#pragma once

#include <cstddef>
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
  int64_t conv_values = 0;             // conv window per Gated DeltaNet layer: (kernel - 1) x channels
  int64_t ssm_values = 0;              // recurrent state per Gated DeltaNet layer: n_v x d_k x d_v
  // Element type of the recurrent state between tokens: F32, or BF16 (MEMRA_SSM_STATE; rounded
  // to nearest even after every token, whatever the step, so a prompt's state does not depend on
  // how it is cut into steps; the arithmetic stays float).
  GgmlType ssm_type = GgmlType::F32;
  size_t ssm_bytes() const { return static_cast<size_t>(ssm_values) * (ssm_type == GgmlType::BF16 ? 2 : 4); }
  size_t conv_bytes() const { return static_cast<size_t>(conv_values) * sizeof(float); }
  // A sequence's conv windows and recurrent states, every Gated DeltaNet layer.
  size_t recurrent_bytes() const {
    size_t n = 0;
    for (MixerKind m : layer_mixer) n += m == MixerKind::GatedDeltaNet;
    return n * (conv_bytes() + ssm_bytes());
  }
  bool operator==(const CacheShape&) const = default;
};

}  // namespace memra
