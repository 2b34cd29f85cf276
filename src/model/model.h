// A loaded model: configuration, weights bound to a backend, and the forward pass (written once
// against the Backend interface for the whole Qwen3 / Qwen3.5 family).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/config.h"

namespace memra::gguf { class File; }

namespace memra {

struct StepPlan;

// The parts of a forward pass, in the order a layer runs them. Model::forward reports each
// boundary to an observer (the engine times phases with it, engine/step_runner.h).
enum class ForwardPhase : uint8_t {
  Embed,                // embedding + the first norm
  AttentionProjections, // q, k, v projections + q/k norm and rope
  AttentionCore,        // KV append + attention + gate + output projection
  DeltaNetProjections,  // qkv, z, beta, alpha projections
  DeltaNetCore,         // conv + delta rule + gated norm + output projection
  Ffn,                  // post norm, FFN, next norm
  Head,                 // output norm + head
};
inline constexpr int kForwardPhases = 7;
const char* forward_phase_name(ForwardPhase phase);

class ForwardObserver {
 public:
  // Called when the ops of `phase` have been issued (not necessarily run).
  virtual void phase_done(ForwardPhase phase) = 0;

 protected:
  ~ForwardObserver() = default;
};

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

  // Throws memra::Error for a plan the model cannot run (a token outside the vocabulary).
  void check_step(const StepPlan& plan, const std::vector<int32_t>& logit_rows) const;
  // Issues the ops of `plan` through the model on the backend, whose step must already be set
  // (Backend::set_step) on a reset scratch arena. Returns backend memory holding logits for the
  // rows listed in `logit_rows` (in that order), n_vocab floats each; valid until the next step.
  // How steps are run around this (checks, graph capture and replay, timing) is the engine's
  // (engine/step_runner.h).
  const float* forward(const StepPlan& plan, const std::vector<int32_t>& logit_rows,
                       ForwardObserver* observer = nullptr);

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
  uint64_t total_weight_bytes_ = 0;

  // Each block adds its output projection into the residual stream x.
  void attention_mixer(const LayerWeights& L, int layer, MatmulInput xn, float* x, int64_t rows,
                       ForwardObserver* observer);
  void deltanet_mixer(const LayerWeights& L, int layer, MatmulInput xn, float* x, int64_t rows,
                      ForwardObserver* observer);
  void ffn(const LayerWeights& L, MatmulInput xn, float* x, int64_t rows);
};

}  // namespace memra
