// qwen35: Qwen3.5 dense. Gated DeltaNet layers with separate beta / alpha projections and value
// heads tiled over key heads, gated full attention every `full_attention_interval` layers,
// dense SwiGLU FFN.
#include <fmt/format.h>

#include "model/binder.h"
#include "model/model.h"

namespace memra {

void bind_qwen35(TensorBinder& b, Model& m) {
  const ModelConfig& c = m.cfg_;
  bind_embeddings(b, m);
  m.layers_.resize(c.n_layer);
  for (int l = 0; l < c.n_layer; ++l) {
    LayerWeights& L = m.layers_[l];
    L.mixer = c.layer_mixer[l];
    L.attn_norm = b.vec(fmt::format("blk.{}.attn_norm.weight", l), c.n_embd);
    L.post_norm = b.vec(fmt::format("blk.{}.post_attention_norm.weight", l), c.n_embd);
    if (L.mixer == MixerKind::FullAttention) L.attn = bind_attention(b, c, l);
    else L.gdn = bind_deltanet(b, c, l, /*fused_ba=*/false);
    L.ffn = bind_dense_ffn(b, c, l);
  }
}

}  // namespace memra
