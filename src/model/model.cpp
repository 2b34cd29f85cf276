// Model loading and the forward pass of the Qwen3 / Qwen3.5 family, written once against the
// Backend op interface (MATH.md gives the math in GGUF terms).
#include "model/model.h"

#include "common/error.h"
#include "gguf/gguf.h"
#include "model/arch.h"
#include "model/binder.h"
#include "step/step_plan.h"

namespace memra {

const char* forward_phase_name(ForwardPhase phase) {
  switch (phase) {
    case ForwardPhase::Embed: return "embed + first norm";
    case ForwardPhase::AttentionProjections: return "attention: projections";
    case ForwardPhase::AttentionCore: return "attention: norm/rope + KV append + attend + gate + out";
    case ForwardPhase::DeltaNetProjections: return "deltanet: projections";
    case ForwardPhase::DeltaNetCore: return "deltanet: conv + delta rule + gated norm + out";
    case ForwardPhase::Ffn: return "ffn (norm, gate/up, down)";
    case ForwardPhase::Head: return "output norm + head";
  }
  return "?";
}

namespace {
void mark(ForwardObserver* observer, ForwardPhase phase) {
  if (observer) observer->phase_done(phase);
}
}  // namespace

std::unique_ptr<Model> Model::load(const gguf::File& file, Backend& backend) {
  std::unique_ptr<Model> m(new Model());
  m->backend_ = &backend;
  m->cfg_ = ModelConfig::from_gguf(file);
  TensorBinder b(file, backend, *m);
  b.check_fits();
  m->cfg_.arch->bind(b, *m);
  b.check_all_used();
  return m;
}

Model::~Model() {
  for (void* p : owned_) backend_->free(p);
}

uint64_t Model::decode_weight_bytes() const {
  auto mat = [](const WeightRef& w) -> uint64_t { return w.valid() ? w.mat_bytes * w.n_mat : 0; };
  auto one = [](const WeightRef& w) -> uint64_t { return w.valid() ? w.mat_bytes : 0; };
  auto vec = [](const VecRef& v) -> uint64_t { return v.valid() ? static_cast<uint64_t>(v.n) * 4 : 0; };
  uint64_t total = token_embd_.row_bytes + mat(output_) + vec(output_norm_);
  for (const LayerWeights& L : layers_) {
    total += vec(L.attn_norm) + vec(L.post_norm);
    if (L.mixer == MixerKind::FullAttention) {
      total += mat(L.attn.wq) + mat(L.attn.wk) + mat(L.attn.wv) + mat(L.attn.wo) + vec(L.attn.q_norm) +
               vec(L.attn.k_norm);
    } else {
      const DeltaNetWeights& g = L.gdn;
      total += mat(g.qkv) + mat(g.z) + mat(g.beta) + mat(g.alpha) + mat(g.ba) + mat(g.out) + vec(g.conv) +
               vec(g.ssm_a) + vec(g.dt_bias) + vec(g.norm);
    }
    if (L.ffn.is_moe) {
      const MoeWeights& m = L.ffn.moe;
      total += mat(m.router) + static_cast<uint64_t>(m.n_used) * (one(m.gate_exps) + one(m.up_exps) + one(m.down_exps)) +
               mat(m.gate_shexp) + mat(m.up_shexp) + mat(m.down_shexp) + mat(m.shexp_gate);
    } else {
      total += mat(L.ffn.gate) + mat(L.ffn.up) + mat(L.ffn.down);
    }
  }
  return total;
}

void Model::attention_mixer(const LayerWeights& L, int layer, MatmulInput xn, float* x, int64_t rows,
                            ForwardObserver* observer) {
  Backend& be = *backend_;
  const ModelConfig& c = cfg_;
  AttnShape s;
  s.n_head = c.n_head;
  s.n_head_kv = c.n_head_kv;
  s.head_dim = c.head_dim;
  s.n_rot = c.n_rot;
  s.rope_theta = c.rope_theta;
  s.q_head_stride = c.attn_gated ? 2 * c.head_dim : c.head_dim;
  const int64_t q_cols = L.attn.wq.n_out, kv_cols = L.attn.wk.n_out;
  float* q = be.scratch(rows * q_cols);
  float* k = be.scratch(rows * kv_cols);
  float* v = be.scratch(rows * kv_cols);
  const Backend::MatmulOut qkv[3] = {{&L.attn.wq, q}, {&L.attn.wk, k}, {&L.attn.wv, v}};
  be.matmul_multi(xn, rows, qkv, 3);
  mark(observer, ForwardPhase::AttentionProjections);
  const int64_t attn_cols = static_cast<int64_t>(c.n_head) * c.head_dim;
  float* attn = be.scratch(rows * attn_cols);
  // The gate of head h sits right after its query in the projection: [q_h | gate_h].
  Backend::AttnGate gate;
  if (c.attn_gated) gate = {q + c.head_dim, q_cols, 2 * c.head_dim};
  be.attention_block(layer, q, k, v, L.attn.q_norm, L.attn.k_norm, c.rms_eps, gate, attn, s);
  be.matmul(L.attn.wo, attn, x, rows, 0, /*accumulate=*/true);
  mark(observer, ForwardPhase::AttentionCore);
}

void Model::deltanet_mixer(const LayerWeights& L, int layer, MatmulInput xn, float* x, int64_t rows,
                           ForwardObserver* observer) {
  Backend& be = *backend_;
  const ModelConfig& c = cfg_;
  const DeltaNetWeights& g = L.gdn;
  GdnShape s;
  s.n_k = c.ssm_n_k;
  s.n_v = c.ssm_n_v;
  s.d = c.ssm_d;
  s.conv_kernel = c.ssm_conv_kernel;
  s.head_map = c.arch->traits.gdn_head_map;
  s.gate_layout = c.arch->traits.gdn_gate_layout;
  const bool fused_ba = s.gate_layout == GdnGateLayout::GroupedBA;
  const int64_t channels = s.conv_channels();
  const int64_t v_dim = static_cast<int64_t>(s.n_v) * s.d;

  float* mixed = be.scratch(rows * channels);
  float* z = be.scratch(rows * v_dim);
  const float* beta_raw;
  const float* alpha_raw;
  if (fused_ba) {
    float* ba = be.scratch(rows * 2 * s.n_v);
    const Backend::MatmulOut outs[3] = {{&g.qkv, mixed}, {&g.z, z}, {&g.ba, ba}};
    be.matmul_multi(xn, rows, outs, 3);
    beta_raw = alpha_raw = ba;
  } else {
    float* b = be.scratch(rows * s.n_v);
    float* a = be.scratch(rows * s.n_v);
    const Backend::MatmulOut outs[4] = {{&g.qkv, mixed}, {&g.z, z}, {&g.beta, b}, {&g.alpha, a}};
    be.matmul_multi(xn, rows, outs, 4);
    beta_raw = b;
    alpha_raw = a;
  }
  mark(observer, ForwardPhase::DeltaNetProjections);
  float* y = be.scratch(rows * v_dim);
  be.deltanet(layer, mixed, z, beta_raw, alpha_raw, g.conv, g.ssm_a, g.dt_bias, g.norm, y, s, c.rms_eps);
  be.matmul(g.out, y, x, rows, 0, /*accumulate=*/true);
  mark(observer, ForwardPhase::DeltaNetCore);
}

void Model::ffn(const LayerWeights& L, MatmulInput xn, float* x, int64_t rows) {
  Backend& be = *backend_;
  if (L.ffn.is_moe) {
    be.moe_ffn(L.ffn.moe, xn, x, rows, cfg_.n_embd);
    return;
  }
  float* act = be.scratch(rows * L.ffn.gate.n_out);
  be.swiglu(L.ffn.gate, L.ffn.up, xn, act, rows);
  be.matmul(L.ffn.down, act, x, rows, 0, /*accumulate=*/true);
}

void Model::check_step(const StepPlan& plan, const std::vector<int32_t>& logit_rows) const {
  const int64_t rows = plan.n_rows();
  MEMRA_ASSERT(rows > 0, "empty step");
  for (int32_t r : logit_rows) MEMRA_ASSERT(r >= 0 && r < rows, "logit row {} out of range", r);
  for (int32_t t : plan.tokens)
    if (t < 0 || t >= cfg_.n_vocab) fail("token id {} is out of range for a vocabulary of {}", t, cfg_.n_vocab);
}

const float* Model::forward(const StepPlan& plan, const std::vector<int32_t>& logit_rows, ForwardObserver* observer) {
  Backend& be = *backend_;
  const ModelConfig& c = cfg_;
  const int64_t rows = plan.n_rows();
  float* x = be.scratch(rows * c.n_embd);
  float* xn = be.scratch(rows * c.n_embd);
  be.embed(token_embd_, x);
  // Each norm's token lets the matmuls that read xn next reuse the backend's form of it.
  uint64_t xn_token = be.rms_norm(x, layers_[0].attn_norm, xn, rows, c.n_embd, c.rms_eps);
  mark(observer, ForwardPhase::Embed);
  // Scratch of a layer is released at its end: only x and xn live across layers.
  const size_t layer_mark = be.scratch_mark();
  for (int l = 0; l < c.n_layer; ++l) {
    be.scratch_release(layer_mark);
    const LayerWeights& L = layers_[l];
    if (L.mixer == MixerKind::FullAttention) attention_mixer(L, l, {xn, xn_token}, x, rows, observer);
    else deltanet_mixer(L, l, {xn, xn_token}, x, rows, observer);
    xn_token = be.rms_norm(x, L.post_norm, xn, rows, c.n_embd, c.rms_eps);
    ffn(L, {xn, xn_token}, x, rows);
    const VecRef& next_norm = l + 1 < c.n_layer ? layers_[l + 1].attn_norm : output_norm_;
    xn_token = be.rms_norm(x, next_norm, xn, rows, c.n_embd, c.rms_eps);
    mark(observer, ForwardPhase::Ffn);
  }
  be.scratch_release(layer_mark);
  const int64_t n_out = static_cast<int64_t>(logit_rows.size());
  float* logits = be.scratch(std::max<int64_t>(n_out, 1) * c.n_vocab);
  if (n_out == 0) return logits;
  MatmulInput head_in{xn, xn_token};
  if (!(n_out == rows && [&] { for (int64_t i = 0; i < n_out; ++i) if (logit_rows[i] != i) return false; return true; }())) {
    float* g = be.scratch(n_out * c.n_embd);
    be.gather_rows(xn, logit_rows.data(), n_out, c.n_embd, g);
    head_in = MatmulInput(g);
  }
  be.matmul(output_, head_in, logits, n_out);
  mark(observer, ForwardPhase::Head);
  return logits;
}

}  // namespace memra
