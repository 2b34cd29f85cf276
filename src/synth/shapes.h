// Hyperparameters of the model shapes `memra synth` can write (internal to src/synth).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace memra::synth {

enum class Arch : uint8_t { Qwen35, Qwen35Moe, Qwen3Next, Qwen3 };

struct ModelShape {
  Arch arch;
  const char* arch_name;     // GGUF general.architecture
  const char* shape_name;    // CLI name: "9b", "35b-a3b", "tiny"
  int64_t hidden;
  int64_t n_layers;
  int64_t n_head, n_head_kv, head_dim;
  int64_t n_rot;             // rope dims (qwen3: whole head)
  int64_t ffn;               // dense FFN width (qwen3next: written as feed_forward_length, unused)
  // Gated DeltaNet (0 for qwen3). Key and value head sizes are equal in GGUF (ssm.state_size).
  int64_t lin_k_heads, lin_v_heads, lin_head_dim, conv_kernel;
  // MoE (0 for dense).
  int64_t n_expert, n_expert_used, expert_ffn, shared_ffn;
  int64_t vocab;
  bool tied_embeddings;
  float rope_theta;
  uint32_t context_length;
  uint32_t full_attention_interval;  // qwen3: 1 (every layer)

  bool hybrid() const { return arch != Arch::Qwen3; }
  bool moe() const { return n_expert > 0; }
  bool full_attention(int64_t layer) const { return (layer + 1) % full_attention_interval == 0; }
};

// The shape of (arch, shape). Throws memra::Error listing the valid archs, or the valid shapes
// of that arch.
const ModelShape& find_shape(std::string_view arch, std::string_view shape);

// All shapes, table order.
const ModelShape* shapes_begin();
const ModelShape* shapes_end();

}  // namespace memra::synth
