// A loaded model: configuration, weights bound to a backend, and the forward pass (written once
// against the Backend interface for the whole Qwen3 / Qwen3.5 family).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "model/config.h"

namespace memra::gguf { class File; }

namespace memra {

struct StepPlan;

struct AttentionWeights {
  WeightRef wq, wk, wv, wo;
  VecRef q_norm, k_norm;
};

struct DeltaNetWeights {
  WeightRef qkv;      // attn_qkv: H -> 2*n_k*d + n_v*d
  WeightRef z;        // attn_gate: H -> n_v*d
  WeightRef beta;     // ssm_beta (qwen35*) : H -> n_v
  WeightRef alpha;    // ssm_alpha (qwen35*): H -> n_v
  WeightRef ba;       // ssm_ba (qwen3next) : H -> 2*n_v, grouped [b.., a..] per key head
  WeightRef out;      // ssm_out: n_v*d -> H
  VecRef conv;        // ssm_conv1d: channels x kernel taps
  VecRef ssm_a;       // -exp(A_log), per value head
  VecRef dt_bias;     // per value head
  VecRef norm;        // ssm_norm: per-head gated RMSNorm weight (d)
};

struct FfnWeights {
  bool is_moe = false;
  WeightRef gate, up, down;  // dense SwiGLU
  MoeWeights moe;
};

struct LayerWeights {
  MixerKind mixer = MixerKind::FullAttention;
  VecRef attn_norm;
  VecRef post_norm;  // post_attention_norm (qwen35*), ffn_norm (qwen3)
  AttentionWeights attn;
  DeltaNetWeights gdn;
  FfnWeights ffn;
};

class Model {
 public:
  // Binds every tensor the architecture needs, checks its shape against the config, and uploads
  // it to `backend`. Throws memra::Error naming the tensor for missing / misshapen / unsupported.
  static std::unique_ptr<Model> load(const gguf::File& file, Backend& backend);
  ~Model();

  const ModelConfig& config() const { return cfg_; }
  Backend& backend() const { return *backend_; }
  // Bytes of weights a decode step reads for one token (routed experts counted at top-k, the
  // embedding table at one row).
  uint64_t decode_weight_bytes() const;
  uint64_t total_weight_bytes() const { return total_weight_bytes_; }

  // Runs `plan` through the model. Returns backend memory holding logits for the rows listed in
  // `logit_rows` (in that order), n_vocab floats each; valid until the next forward().
  const float* forward(const StepPlan& plan, const std::vector<int32_t>& logit_rows);

  // For architecture binders (model/<arch>.cpp).
  ModelConfig cfg_;
  WeightRef token_embd_;
  WeightRef output_;
  VecRef output_norm_;
  std::vector<LayerWeights> layers_;

 private:
  Model() = default;
  friend class TensorBinder;
  Backend* backend_ = nullptr;
  std::vector<void*> owned_;  // backend allocations made for converted vectors
  std::unordered_map<uint64_t, const float*> graph_logits_;  // logits buffer of each recorded step
  // MEMRA_BATCH_PHASE=1: synchronize at phase boundaries of decode steps and accumulate host time
  // per phase (the sync destroys launch overlap: shares rank the phases, totals are inflated).
  bool phase_on_ = false;
  bool phase_active_ = false;  // timing the current forward
  double phase_last_ = 0;
  double phase_seconds_[8] = {};
  void phase_mark(int phase);
  uint64_t total_weight_bytes_ = 0;

  // Each block adds its output projection into the residual stream x.
  void attention_mixer(const LayerWeights& L, int layer, const float* xn, float* x, int64_t rows);
  void deltanet_mixer(const LayerWeights& L, int layer, const float* xn, float* x, int64_t rows);
  void ffn(const LayerWeights& L, const float* xn, float* x, int64_t rows);
};

}  // namespace memra
