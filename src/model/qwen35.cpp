// qwen35: Qwen3.5 dense. Gated DeltaNet layers with separate beta / alpha projections and value
// heads tiled over key heads, gated full attention every `full_attention_interval` layers,
// dense SwiGLU FFN.
#include "model/arch.h"
#include "model/binder.h"
#include "model/model.h"

namespace memra::arch_qwen35 {
namespace {

// Traits beyond the defaults (model/arch.h): Gated DeltaNet layers, gated attention, dense FFN.
constexpr ArchTraits kTraits{.hybrid = true, .attn_gated = true, .tokenizer_pre = "qwen35", .rope_sections = true};

// Released sizes (published config.json files; ../shared/shapes.md) and the dimensions of the
// `tiny` fixture (../shared/fixtures/qwen35-tiny.json). Common to the sizes: head_dim 256, 64 rope
// dims, theta 1e7, linear-attention head dim 128, conv kernel 4, full attention every 4th layer,
// 262,144-token native context.
constexpr int64_t kVocab = 248320;
constexpr uint32_t kContext = 262144;
constexpr uint32_t kTinyContext = 32768;  // transformers' default, as in the fixtures
// clang-format off
constexpr ArchShape kShapes[] = {
  // shape, hidden, layers, heads, kv heads, head dim, rope dims, ffn, | Gated DeltaNet: k heads, v heads, head dim,
  // conv kernel, | experts, used, expert ffn, shared ffn, | vocab, tied, rope theta, context, full-attention interval
  {"tiny", 128, 4, 4, 2, 64, 16, 256, 2, 4, 32, 4, 0, 0, 0, 0, 1024, false, 1e7f, kTinyContext, 4},
  {"0.8b", 1024, 24, 8, 2, 256, 64, 3584, 16, 16, 128, 4, 0, 0, 0, 0, kVocab, true, 1e7f, kContext, 4},
  {"2b", 2048, 24, 8, 2, 256, 64, 6144, 16, 16, 128, 4, 0, 0, 0, 0, kVocab, true, 1e7f, kContext, 4},
  {"4b", 2560, 32, 16, 4, 256, 64, 9216, 16, 32, 128, 4, 0, 0, 0, 0, kVocab, true, 1e7f, kContext, 4},
  {"9b", 4096, 32, 16, 4, 256, 64, 12288, 16, 32, 128, 4, 0, 0, 0, 0, kVocab, false, 1e7f, kContext, 4},
  {"27b", 5120, 64, 24, 4, 256, 64, 17408, 16, 48, 128, 4, 0, 0, 0, 0, kVocab, false, 1e7f, kContext, 4},
};
// clang-format on

void bind(TensorBinder& b, Model& m) {
  bind_embeddings(b, m);
  bind_layers(b, m, [&](int l) { return bind_dense_ffn(b, m.cfg_, l); });
}

constexpr Arch kArch{"qwen35", kTraits, bind, kShapes};
const ArchRegistrar kRegistrar(kArch);

}  // namespace
}  // namespace memra::arch_qwen35
