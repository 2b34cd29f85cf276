// An architecture is one file, model/<arch>.cpp, that declares it and registers itself: its
// traits (which hyperparameters it has and how the shared trunk reads and runs it), its tensor
// binding, and the released shapes `memra synth` writes. Adding an architecture touches that
// file and its tests; the trunk (config.cpp, model.cpp, binder.cpp) branches on traits only.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"

namespace memra {

class Model;
class TensorBinder;

// Which FFN a layer has.
enum class FfnKind : uint8_t {
  Dense,     // SwiGLU (feed_forward_length)
  Moe,       // routed experts + shared expert (expert_* keys)
  PerLayer,  // routed experts where the file has a router for the layer, dense elsewhere
};

struct ArchTraits {
  // Gated DeltaNet layers (the ssm.* hyperparameters) with full attention every
  // full_attention_interval layers; otherwise full attention in every layer.
  bool hybrid = false;
  bool attn_gated = false;  // the q projection carries a per-head output gate: [q_h | gate_h]
  GdnHeadMap gdn_head_map = GdnHeadMap::Tiled;
  GdnGateLayout gdn_gate_layout = GdnGateLayout::Separate;
  FfnKind ffn = FfnKind::Dense;
  const char* post_norm = "post_attention_norm";  // tensor blk.N.<post_norm>.weight, after the mixer
  // Conventions of llama.cpp's converter for this architecture, which synth writes:
  const char* tokenizer_pre = "qwen2";  // tokenizer.ggml.pre
  bool rope_sections = false;           // rope.dimension_sections is written
};

// A released size of an architecture: the hyperparameters `memra synth` writes for it.
struct ArchShape {
  const char* name;  // CLI name: "9b", "35b-a3b", "tiny"
  int64_t hidden;
  int64_t n_layers;
  int64_t n_head, n_head_kv, head_dim;
  int64_t n_rot;  // rope dims
  int64_t ffn;    // dense FFN width (written as feed_forward_length where the arch has one)
  // Gated DeltaNet (0 when not hybrid). Key and value head sizes are equal (ssm.state_size).
  int64_t lin_k_heads, lin_v_heads, lin_head_dim, conv_kernel;
  // Experts (0 for dense).
  int64_t n_expert, n_expert_used, expert_ffn, shared_ffn;
  int64_t vocab;
  bool tied_embeddings;
  float rope_theta;
  uint32_t context_length;
  uint32_t full_attention_interval;  // 1 when not hybrid (every layer)
};

struct Arch {
  const char* name;  // GGUF general.architecture
  ArchTraits traits;
  // Binds every tensor the architecture has (model/binder.h has the shared pieces).
  void (*bind)(TensorBinder& b, Model& m);
  std::span<const ArchShape> shapes;
};

// The registered architecture called `name`, or null.
const Arch* find_arch(std::string_view name);
// Every registered architecture, hybrids first (the project's focus), each group by name.
std::vector<const Arch*> registered_archs();
// "a, b, c": the names of registered_archs() (for messages).
std::string arch_names();

// Registers an architecture; model/<arch>.cpp holds one at namespace scope, beside the Arch
// constant it registers (the registry keeps its address).
struct ArchRegistrar {
  explicit ArchRegistrar(const Arch& arch);
  explicit ArchRegistrar(const Arch&& arch) = delete;
};

}  // namespace memra
