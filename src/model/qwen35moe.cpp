// qwen35moe: Qwen3.5 MoE. The qwen35 trunk with a mixture-of-experts FFN in every layer
// (softmax router, top-k renormalised, plus a sigmoid-gated shared expert).
#include "model/arch.h"
#include "model/binder.h"
#include "model/model.h"

namespace memra::arch_qwen35moe {
namespace {

// Traits beyond the defaults (model/arch.h): Gated DeltaNet layers, gated attention, MoE FFN.
constexpr ArchTraits kTraits{
    .hybrid = true, .attn_gated = true, .ffn = FfnKind::Moe, .tokenizer_pre = "qwen35", .rope_sections = true};

// Released sizes (published config.json files; ../shared/shapes.md) and the dimensions of the
// `tiny` fixture (../shared/fixtures/qwen35moe-tiny.json).
constexpr int64_t kVocab = 248320;
constexpr uint32_t kContext = 262144;
constexpr uint32_t kTinyContext = 32768;  // transformers' default, as in the fixtures
// clang-format off
constexpr ArchShape kShapes[] = {
  // shape, hidden, layers, heads, kv heads, head dim, rope dims, ffn, | Gated DeltaNet: k heads, v heads, head dim,
  // conv kernel, | experts, used, expert ffn, shared ffn, | vocab, tied, rope theta, context, full-attention interval
  {"tiny", 128, 4, 4, 2, 64, 16, 0, 2, 4, 32, 4, 8, 2, 64, 96, 1024, false, 1e7f, kTinyContext, 4},
  {"35b-a3b", 2048, 40, 16, 2, 256, 64, 0, 16, 32, 128, 4, 256, 8, 512, 512, kVocab, false, 1e7f, kContext, 4},
  {"122b-a10b", 3072, 48, 32, 2, 256, 64, 0, 16, 64, 128, 4, 256, 8, 1024, 1024, kVocab, false, 1e7f, kContext, 4},
  {"397b-a17b", 4096, 60, 32, 2, 256, 64, 0, 16, 64, 128, 4, 512, 10, 1024, 1024, kVocab, false, 1e7f, kContext, 4},
};
// clang-format on

void bind(TensorBinder& b, Model& m) {
  bind_embeddings(b, m);
  bind_layers(b, m, [&](int l) { return bind_moe_ffn(b, m.cfg_, l); });
}

constexpr Arch kArch{"qwen35moe", kTraits, bind, kShapes};
const ArchRegistrar kRegistrar(kArch);

}  // namespace
}  // namespace memra::arch_qwen35moe
