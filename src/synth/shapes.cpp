// Shape table: released Qwen3.5 / Qwen3-Next / Qwen3 hyperparameters (published config.json
// files; ../shared/shapes.md for the hybrids) plus the `tiny` fixture dimensions of each arch
// (../shared/fixtures/*-tiny.json).
//
// Common to the hybrids: head_dim 256, 64 rope dims, theta 1e7, linear-attention head dim 128,
// conv kernel 4, full attention every 4th layer, 262,144-token native context.
#include "synth/shapes.h"

#include <string>

#include "common/error.h"

namespace memra::synth {
namespace {

constexpr uint32_t kHybridContext = 262144;
constexpr uint32_t kQwen3Context = 40960;
constexpr uint32_t kTinyContext = 32768;  // transformers' default, as in the fixtures
constexpr int64_t kQwen35Vocab = 248320;
constexpr int64_t kQwenVocab = 151936;  // Qwen3 and Qwen3-Next

// clang-format off
//   arch, arch_name, shape, hidden, layers, heads, kv heads, head_dim, n_rot, ffn,
//   lin k heads, lin v heads, lin head dim, conv kernel, experts, used, expert ffn, shared ffn,
//   vocab, tied, theta, context, full-attention interval
constexpr ModelShape kShapes[] = {
  {Arch::Qwen35, "qwen35", "tiny", 128, 4, 4, 2, 64, 16, 256, 2, 4, 32, 4, 0, 0, 0, 0,
   1024, false, 1e7f, kTinyContext, 4},
  {Arch::Qwen35, "qwen35", "0.8b", 1024, 24, 8, 2, 256, 64, 3584, 16, 16, 128, 4, 0, 0, 0, 0,
   kQwen35Vocab, true, 1e7f, kHybridContext, 4},
  {Arch::Qwen35, "qwen35", "2b", 2048, 24, 8, 2, 256, 64, 6144, 16, 16, 128, 4, 0, 0, 0, 0,
   kQwen35Vocab, true, 1e7f, kHybridContext, 4},
  {Arch::Qwen35, "qwen35", "4b", 2560, 32, 16, 4, 256, 64, 9216, 16, 32, 128, 4, 0, 0, 0, 0,
   kQwen35Vocab, true, 1e7f, kHybridContext, 4},
  {Arch::Qwen35, "qwen35", "9b", 4096, 32, 16, 4, 256, 64, 12288, 16, 32, 128, 4, 0, 0, 0, 0,
   kQwen35Vocab, false, 1e7f, kHybridContext, 4},
  {Arch::Qwen35, "qwen35", "27b", 5120, 64, 24, 4, 256, 64, 17408, 16, 48, 128, 4, 0, 0, 0, 0,
   kQwen35Vocab, false, 1e7f, kHybridContext, 4},

  {Arch::Qwen35Moe, "qwen35moe", "tiny", 128, 4, 4, 2, 64, 16, 0, 2, 4, 32, 4, 8, 2, 64, 96,
   1024, false, 1e7f, kTinyContext, 4},
  {Arch::Qwen35Moe, "qwen35moe", "35b-a3b", 2048, 40, 16, 2, 256, 64, 0, 16, 32, 128, 4, 256, 8, 512, 512,
   kQwen35Vocab, false, 1e7f, kHybridContext, 4},
  {Arch::Qwen35Moe, "qwen35moe", "122b-a10b", 3072, 48, 32, 2, 256, 64, 0, 16, 64, 128, 4, 256, 8, 1024, 1024,
   kQwen35Vocab, false, 1e7f, kHybridContext, 4},
  {Arch::Qwen35Moe, "qwen35moe", "397b-a17b", 4096, 60, 32, 2, 256, 64, 0, 16, 64, 128, 4, 512, 10, 1024, 1024,
   kQwen35Vocab, false, 1e7f, kHybridContext, 4},

  {Arch::Qwen3Next, "qwen3next", "tiny", 128, 4, 4, 2, 64, 16, 256, 2, 4, 32, 4, 8, 2, 64, 96,
   1024, false, 1e7f, kTinyContext, 4},
  {Arch::Qwen3Next, "qwen3next", "80b-a3b", 2048, 48, 16, 2, 256, 64, 5120, 16, 32, 128, 4, 512, 10, 512, 512,
   kQwenVocab, false, 1e7f, kHybridContext, 4},

  {Arch::Qwen3, "qwen3", "tiny", 128, 4, 4, 2, 64, 64, 256, 0, 0, 0, 0, 0, 0, 0, 0,
   1024, false, 1e6f, kTinyContext, 1},
  {Arch::Qwen3, "qwen3", "0.6b", 1024, 28, 16, 8, 128, 128, 3072, 0, 0, 0, 0, 0, 0, 0, 0,
   kQwenVocab, true, 1e6f, kQwen3Context, 1},
  {Arch::Qwen3, "qwen3", "1.7b", 2048, 28, 16, 8, 128, 128, 6144, 0, 0, 0, 0, 0, 0, 0, 0,
   kQwenVocab, true, 1e6f, kQwen3Context, 1},
  {Arch::Qwen3, "qwen3", "4b", 2560, 36, 32, 8, 128, 128, 9728, 0, 0, 0, 0, 0, 0, 0, 0,
   kQwenVocab, true, 1e6f, kQwen3Context, 1},
  {Arch::Qwen3, "qwen3", "8b", 4096, 36, 32, 8, 128, 128, 12288, 0, 0, 0, 0, 0, 0, 0, 0,
   kQwenVocab, false, 1e6f, kQwen3Context, 1},
  {Arch::Qwen3, "qwen3", "14b", 5120, 40, 40, 8, 128, 128, 17408, 0, 0, 0, 0, 0, 0, 0, 0,
   kQwenVocab, false, 1e6f, kQwen3Context, 1},
  {Arch::Qwen3, "qwen3", "32b", 5120, 64, 64, 8, 128, 128, 25600, 0, 0, 0, 0, 0, 0, 0, 0,
   kQwenVocab, false, 1e6f, kQwen3Context, 1},
};
// clang-format on

}  // namespace

const ModelShape* shapes_begin() { return std::begin(kShapes); }
const ModelShape* shapes_end() { return std::end(kShapes); }

const ModelShape& find_shape(std::string_view arch, std::string_view shape) {
  bool arch_known = false;
  std::string arch_shapes;
  for (const ModelShape& s : kShapes) {
    if (arch != s.arch_name) continue;
    arch_known = true;
    if (shape == s.shape_name) return s;
    arch_shapes += arch_shapes.empty() ? "" : ", ";
    arch_shapes += s.shape_name;
  }
  if (!arch_known) {
    // The table is grouped by arch, so each name starts a run once.
    std::string archs;
    std::string_view previous;
    for (const ModelShape& s : kShapes) {
      if (previous == s.arch_name) continue;
      previous = s.arch_name;
      archs += (archs.empty() ? "" : ", ") + std::string(s.arch_name);
    }
    fail("unknown architecture '{}': valid architectures are {}", arch, archs);
  }
  fail("unknown shape '{}' for architecture {}: valid shapes are {}", shape, arch, arch_shapes);
}

}  // namespace memra::synth
