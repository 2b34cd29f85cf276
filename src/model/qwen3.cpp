// qwen3: the plain transformer trunk (GQA with QK-norm, rope over the whole head, no output
// gate, dense SwiGLU FFN). The post-attention norm is named ffn_norm in these files.
#include "model/arch.h"
#include "model/binder.h"
#include "model/model.h"

// A namespace per architecture: the model library compiles as one unity batch (MEMRA_UNITY),
// where every architecture's kTraits, bind and registrar would otherwise collide.
namespace memra::arch_qwen3 {
namespace {

// Traits beyond the defaults (model/arch.h): full attention in every layer, no gate, dense FFN.
constexpr ArchTraits kTraits{.post_norm = "ffn_norm"};

// Released sizes (published config.json files) and the dimensions of the `tiny` fixture
// (../shared/fixtures/qwen3-tiny.json).
constexpr int64_t kVocab = 151936;
constexpr uint32_t kContext = 40960;
constexpr uint32_t kTinyContext = 32768;  // transformers' default, as in the fixtures
// clang-format off
constexpr ArchShape kShapes[] = {
  // shape, hidden, layers, heads, kv heads, head dim, rope dims, ffn, | Gated DeltaNet: k heads, v heads, head dim,
  // conv kernel, | experts, used, expert ffn, shared ffn, | vocab, tied, rope theta, context, full-attention interval
  {"tiny", 128, 4, 4, 2, 64, 64, 256, 0, 0, 0, 0, 0, 0, 0, 0, 1024, false, 1e6f, kTinyContext, 1},
  {"0.6b", 1024, 28, 16, 8, 128, 128, 3072, 0, 0, 0, 0, 0, 0, 0, 0, kVocab, true, 1e6f, kContext, 1},
  {"1.7b", 2048, 28, 16, 8, 128, 128, 6144, 0, 0, 0, 0, 0, 0, 0, 0, kVocab, true, 1e6f, kContext, 1},
  {"4b", 2560, 36, 32, 8, 128, 128, 9728, 0, 0, 0, 0, 0, 0, 0, 0, kVocab, true, 1e6f, kContext, 1},
  {"8b", 4096, 36, 32, 8, 128, 128, 12288, 0, 0, 0, 0, 0, 0, 0, 0, kVocab, false, 1e6f, kContext, 1},
  {"14b", 5120, 40, 40, 8, 128, 128, 17408, 0, 0, 0, 0, 0, 0, 0, 0, kVocab, false, 1e6f, kContext, 1},
  {"32b", 5120, 64, 64, 8, 128, 128, 25600, 0, 0, 0, 0, 0, 0, 0, 0, kVocab, false, 1e6f, kContext, 1},
};
// clang-format on

void bind(TensorBinder& b, Model& m) {
  bind_embeddings(b, m);
  bind_layers(b, m, [&](int l) { return bind_dense_ffn(b, m.cfg_, l); });
}

constexpr Arch kArch{"qwen3", kTraits, bind, kShapes};
const ArchRegistrar kRegistrar(kArch);

}  // namespace
}  // namespace memra::arch_qwen3
