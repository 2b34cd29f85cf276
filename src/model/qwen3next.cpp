// qwen3next: Qwen3-Next. Like qwen35moe, but beta and alpha come from one fused `ssm_ba`
// projection and value heads are grouped per key head (value head h reads key head h / r).
#include <fmt/format.h>

#include "model/arch.h"
#include "model/binder.h"
#include "model/model.h"

namespace memra::arch_qwen3next {
namespace {

// Traits beyond the defaults (model/arch.h): Gated DeltaNet layers with grouped heads and the
// fused beta/alpha projection, gated attention, MoE or dense FFN per layer.
constexpr ArchTraits kTraits{.hybrid = true,
                             .attn_gated = true,
                             .gdn_head_map = GdnHeadMap::Grouped,
                             .gdn_gate_layout = GdnGateLayout::GroupedBA,
                             .ffn = FfnKind::PerLayer};

// The released size (published config.json) and the dimensions of the `tiny` fixture
// (../shared/fixtures/qwen3next-tiny.json).
constexpr int64_t kVocab = 151936;
constexpr uint32_t kContext = 262144;
constexpr uint32_t kTinyContext = 32768;  // transformers' default, as in the fixtures
// clang-format off
constexpr ArchShape kShapes[] = {
  // shape, hidden, layers, heads, kv heads, head dim, rope dims, ffn, | Gated DeltaNet: k heads, v heads, head dim,
  // conv kernel, | experts, used, expert ffn, shared ffn, | vocab, tied, rope theta, context, full-attention interval
  {"tiny", 128, 4, 4, 2, 64, 16, 256, 2, 4, 32, 4, 8, 2, 64, 96, 1024, false, 1e7f, kTinyContext, 4},
  {"80b-a3b", 2048, 48, 16, 2, 256, 64, 5120, 16, 32, 128, 4, 512, 10, 512, 512, kVocab, false, 1e7f, kContext, 4},
};
// clang-format on

void bind(TensorBinder& b, Model& m) {
  bind_embeddings(b, m);
  // Qwen3-Next files may mix dense and MoE layers (decoder_sparse_step); the file decides.
  bind_layers(b, m, [&](int l) {
    return b.has(fmt::format("blk.{}.ffn_gate_inp.weight", l)) ? bind_moe_ffn(b, m.cfg_, l) : bind_dense_ffn(b, m.cfg_, l);
  });
}

constexpr Arch kArch{"qwen3next", kTraits, bind, kShapes};
const ArchRegistrar kRegistrar(kArch);

}  // namespace
}  // namespace memra::arch_qwen3next
