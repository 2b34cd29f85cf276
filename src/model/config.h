// Model hyperparameters, read from GGUF metadata alone (nothing tuned to particular sizes), as
// the architecture's traits say (model/arch.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "step/cache_shape.h"

namespace memra::gguf { class File; }

namespace memra {

struct Arch;

struct ModelConfig {
  const Arch* arch = nullptr;  // the registered architecture (model/arch.h): its traits
  std::string arch_str;
  int n_layer = 0;
  int n_embd = 0;
  int n_vocab = 0;
  int n_ctx_train = 0;
  float rms_eps = 1e-6f;
  // full attention
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim = 0;
  int n_rot = 0;
  float rope_theta = 10000.0f;
  bool attn_gated = false;  // q projection carries a per-head output gate
  // Gated DeltaNet
  int ssm_n_k = 0;       // group_count: key heads
  int ssm_n_v = 0;       // time_step_rank: value heads
  int ssm_d = 0;         // state_size: head size
  int ssm_conv_kernel = 0;
  int full_attention_interval = 0;
  // FFN
  int n_ff = 0;          // dense FFN width (0 if every layer is MoE)
  int n_expert = 0;
  int n_expert_used = 0;
  int n_ff_expert = 0;
  int n_ff_shexp = 0;
  bool moe_norm_topk = true;

  std::vector<MixerKind> layer_mixer;  // per layer
  bool is_moe() const { return n_expert > 0; }
  bool has_ssm() const { return ssm_n_v > 0; }
  int ssm_conv_channels() const { return 2 * ssm_n_k * ssm_d + ssm_n_v * ssm_d; }
  // The caches a sequence of this model needs: K and V rows of `kv_type`, recurrent states of `ssm_type`.
  CacheShape cache_shape(GgmlType kv_type, GgmlType ssm_type = GgmlType::F32) const;

  // Throws memra::Error naming the missing/invalid key for unsupported or inconsistent files.
  static ModelConfig from_gguf(const gguf::File& f);
  std::string summary() const;
};

}  // namespace memra
