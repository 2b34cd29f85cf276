// Binding of the layer pieces the Qwen3 / Qwen3.5 family shares (names as llama.cpp writes them).
#include <fmt/format.h>

#include "common/error.h"
#include "model/arch.h"
#include "model/binder.h"
#include "model/model.h"

namespace memra {

namespace {
std::string blk(int layer, const char* name) { return fmt::format("blk.{}.{}", layer, name); }
}  // namespace

void bind_embeddings(TensorBinder& b, Model& m) {
  ModelConfig& c = m.cfg_;
  // The vocabulary size comes from the embedding table itself.
  int64_t n_vocab = b.dim("token_embd.weight", 1);
  if (n_vocab < 1 || n_vocab > (1 << 24))
    fail("token_embd.weight: vocabulary size {} is out of range", n_vocab);
  c.n_vocab = static_cast<int>(n_vocab);
  m.token_embd_ = b.matrix("token_embd.weight", c.n_embd, c.n_vocab);
  m.output_norm_ = b.vec("output_norm.weight", c.n_embd);
  // Tied embeddings: no output.weight, the head reuses the embedding table.
  m.output_ = b.has("output.weight") ? b.matrix("output.weight", c.n_embd, c.n_vocab) : m.token_embd_;
}

void bind_layers(TensorBinder& b, Model& m, const std::function<FfnWeights(int layer)>& ffn) {
  const ModelConfig& c = m.cfg_;
  m.layers_.resize(c.n_layer);
  for (int l = 0; l < c.n_layer; ++l) {
    LayerWeights& L = m.layers_[l];
    L.mixer = c.layer_mixer[l];
    L.attn_norm = b.vec(blk(l, "attn_norm.weight"), c.n_embd);
    L.post_norm = b.vec(fmt::format("blk.{}.{}.weight", l, c.arch->traits.post_norm), c.n_embd);
    if (L.mixer == MixerKind::FullAttention) L.attn = bind_attention(b, c, l);
    else L.gdn = bind_deltanet(b, c, l);
    L.ffn = ffn(l);
  }
}

AttentionWeights bind_attention(TensorBinder& b, const ModelConfig& c, int l) {
  AttentionWeights a;
  const int64_t q_out = static_cast<int64_t>(c.n_head) * c.head_dim * (c.attn_gated ? 2 : 1);
  const int64_t kv_out = static_cast<int64_t>(c.n_head_kv) * c.head_dim;
  a.wq = b.matrix(blk(l, "attn_q.weight"), c.n_embd, q_out);
  a.wk = b.matrix(blk(l, "attn_k.weight"), c.n_embd, kv_out);
  a.wv = b.matrix(blk(l, "attn_v.weight"), c.n_embd, kv_out);
  a.wo = b.matrix(blk(l, "attn_output.weight"), static_cast<int64_t>(c.n_head) * c.head_dim, c.n_embd);
  a.q_norm = b.vec(blk(l, "attn_q_norm.weight"), c.head_dim);
  a.k_norm = b.vec(blk(l, "attn_k_norm.weight"), c.head_dim);
  return a;
}

DeltaNetWeights bind_deltanet(TensorBinder& b, const ModelConfig& c, int l) {
  DeltaNetWeights g;
  const bool fused_ba = c.arch->traits.gdn_gate_layout == GdnGateLayout::GroupedBA;
  const int64_t v_dim = static_cast<int64_t>(c.ssm_n_v) * c.ssm_d;
  g.qkv = b.matrix(blk(l, "attn_qkv.weight"), c.n_embd, c.ssm_conv_channels());
  g.z = b.matrix(blk(l, "attn_gate.weight"), c.n_embd, v_dim);
  if (fused_ba) {
    g.ba = b.matrix(blk(l, "ssm_ba.weight"), c.n_embd, 2 * c.ssm_n_v);
  } else {
    g.beta = b.matrix(blk(l, "ssm_beta.weight"), c.n_embd, c.ssm_n_v);
    g.alpha = b.matrix(blk(l, "ssm_alpha.weight"), c.n_embd, c.ssm_n_v);
  }
  g.out = b.matrix(blk(l, "ssm_out.weight"), v_dim, c.n_embd);
  g.conv = b.vec_shaped(blk(l, "ssm_conv1d.weight"), {c.ssm_conv_kernel, c.ssm_conv_channels()});
  g.ssm_a = b.vec(blk(l, "ssm_a"), c.ssm_n_v);
  g.dt_bias = b.vec(blk(l, "ssm_dt.bias"), c.ssm_n_v);
  g.norm = b.vec(blk(l, "ssm_norm.weight"), c.ssm_d);
  return g;
}

FfnWeights bind_dense_ffn(TensorBinder& b, const ModelConfig& c, int l) {
  FfnWeights f;
  f.gate = b.matrix(blk(l, "ffn_gate.weight"), c.n_embd, c.n_ff);
  f.up = b.matrix(blk(l, "ffn_up.weight"), c.n_embd, c.n_ff);
  f.down = b.matrix(blk(l, "ffn_down.weight"), c.n_ff, c.n_embd);
  return f;
}

FfnWeights bind_moe_ffn(TensorBinder& b, const ModelConfig& c, int l) {
  FfnWeights f;
  f.is_moe = true;
  MoeWeights& m = f.moe;
  m.n_expert = c.n_expert;
  m.n_used = c.n_expert_used;
  m.norm_topk = c.moe_norm_topk;
  m.router = b.matrix(blk(l, "ffn_gate_inp.weight"), c.n_embd, c.n_expert);
  m.gate_exps = b.matrix(blk(l, "ffn_gate_exps.weight"), c.n_embd, c.n_ff_expert, c.n_expert);
  m.up_exps = b.matrix(blk(l, "ffn_up_exps.weight"), c.n_embd, c.n_ff_expert, c.n_expert);
  m.down_exps = b.matrix(blk(l, "ffn_down_exps.weight"), c.n_ff_expert, c.n_embd, c.n_expert);
  if (c.n_ff_shexp > 0) {
    m.gate_shexp = b.matrix(blk(l, "ffn_gate_shexp.weight"), c.n_embd, c.n_ff_shexp);
    m.up_shexp = b.matrix(blk(l, "ffn_up_shexp.weight"), c.n_embd, c.n_ff_shexp);
    m.down_shexp = b.matrix(blk(l, "ffn_down_shexp.weight"), c.n_ff_shexp, c.n_embd);
    m.shexp_gate = b.matrix_opt(blk(l, "ffn_gate_inp_shexp.weight"), c.n_embd, 1);
  }
  return f;
}

}  // namespace memra
