// qwen3: the plain transformer trunk (GQA with QK-norm, rope over the whole head, no output
// gate, dense SwiGLU FFN). The post-attention norm is named ffn_norm in these files.
#include <fmt/format.h>

#include "model/binder.h"
#include "model/model.h"

namespace memra {

void bind_qwen3(TensorBinder& b, Model& m) {
  const ModelConfig& c = m.cfg_;
  bind_embeddings(b, m);
  m.layers_.resize(c.n_layer);
  for (int l = 0; l < c.n_layer; ++l) {
    LayerWeights& L = m.layers_[l];
    L.mixer = MixerKind::FullAttention;
    L.attn_norm = b.vec(fmt::format("blk.{}.attn_norm.weight", l), c.n_embd);
    L.post_norm = b.vec(fmt::format("blk.{}.ffn_norm.weight", l), c.n_embd);
    L.attn = bind_attention(b, c, l);
    L.ffn = bind_dense_ffn(b, c, l);
  }
}

}  // namespace memra
