// qwen3next: Qwen3-Next. Like qwen35moe, but beta and alpha come from one fused `ssm_ba`
// projection and value heads are grouped per key head (value head h reads key head h / r).
#include <fmt/format.h>

#include "model/binder.h"
#include "model/model.h"

namespace memra {

void bind_qwen3next(TensorBinder& b, Model& m) {
  const ModelConfig& c = m.cfg_;
  bind_embeddings(b, m);
  m.layers_.resize(c.n_layer);
  for (int l = 0; l < c.n_layer; ++l) {
    LayerWeights& L = m.layers_[l];
    L.mixer = c.layer_mixer[l];
    L.attn_norm = b.vec(fmt::format("blk.{}.attn_norm.weight", l), c.n_embd);
    L.post_norm = b.vec(fmt::format("blk.{}.post_attention_norm.weight", l), c.n_embd);
    if (L.mixer == MixerKind::FullAttention) L.attn = bind_attention(b, c, l);
    else L.gdn = bind_deltanet(b, c, l, /*fused_ba=*/true);
    // Qwen3-Next files may mix dense and MoE layers (decoder_sparse_step); the file decides.
    if (b.has(fmt::format("blk.{}.ffn_gate_inp.weight", l))) L.ffn = bind_moe_ffn(b, c, l);
    else L.ffn = bind_dense_ffn(b, c, l);
  }
}

}  // namespace memra
