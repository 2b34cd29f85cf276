// The whole model on the CPU gives the same bits however a prompt is cut into steps: on the chunk
// grid, at arbitrary points, or token by token as decode feeds it. The logits after the prompt,
// every Gated DeltaNet layer's conv window and recurrent state, the KV rows and the decode steps
// after it are compared bit for bit with one cold prefill. Prefix reuse resumes a prompt from the
// state at any position on this (step/prefix_cache.h): the end of an earlier prompt, or of an
// earlier answer that decode produced.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>

#include "engine/engine.h"
#include "engine_test_util.h"
#include "prefix_cache_test_util.h"
#include "test_util.h"

namespace memra {
namespace {

using test::same_bits;

std::unique_ptr<Engine> open_cpu(const std::string& name, int32_t chunk, GgmlType ssm_type) {
  EngineOptions o;
  o.device = "cpu";
  o.ssm_type = ssm_type;
  o.ctx = 512;
  o.prefill_chunk = chunk;
  o.prefix_cache.budget_mb = 0;
  return Engine::open(test::fixture(name), o);
}

// Every bit of a sequence's state for its first `n` positions.
std::vector<uint8_t> state_bits(const SequenceCache& seq, int32_t n) {
  const CacheShape& shape = seq.shape();
  std::vector<uint8_t> out;
  auto add = [&](const void* p, size_t bytes) {
    const auto* b = static_cast<const uint8_t*>(p);
    out.insert(out.end(), b, b + bytes);
  };
  for (size_t l = 0; l < seq.layers.size(); ++l) {
    const LayerCache& c = seq.layers[l];
    if (shape.layer_mixer[l] == MixerKind::GatedDeltaNet) {
      add(c.conv, shape.conv_bytes());
      add(c.ssm, shape.ssm_bytes());
    } else {  // through the block table: rows of one block are not adjacent to the next block's
      for (int32_t t = 0; t < n; ++t) add(seq.kv_row(static_cast<int>(l), t, false), seq.kv_row_bytes);
      for (int32_t t = 0; t < n; ++t) add(seq.kv_row(static_cast<int>(l), t, true), seq.kv_row_bytes);
    }
  }
  return out;
}

// With bf16 recurrent states too (MEMRA_SSM_STATE): rounded after every token, they keep the property.
TEST(SplitPrefill, AnyCutGivesTheBitsOfOneColdPrefill) {
  for (const GgmlType ssm_type : {GgmlType::F32, GgmlType::BF16})
  for (const std::string model_name : {"qwen35-tiny.f32.gguf", "qwen3next-tiny.f32.gguf"}) {
    const std::string model = model_name + (ssm_type == GgmlType::BF16 ? " (bf16 state)" : "");
    auto e = open_cpu(model_name, 64, ssm_type);
    ASSERT_EQ(e->new_sequence()->shape().ssm_type, ssm_type);
    const int32_t n_vocab = e->config().n_vocab;
    std::mt19937 rng(5);
    std::vector<int32_t> prompt;
    for (int i = 0; i < 150; ++i) prompt.push_back(static_cast<int32_t>(rng() % n_vocab));
    const auto cold_seq = e->new_sequence();
    std::vector<float> cold_logits;
    e->prefill(*cold_seq, prompt, &cold_logits);
    const std::vector<uint8_t> cold_state = state_bits(*cold_seq, 150);
    const auto cold_tail = test::greedy_tail(*e, *cold_seq, cold_logits, 4);
    // Cut points: on the grid, off it (one token before and after a grid point, a 1-token
    // piece, the last token alone), random ones; each piece is prefilled on its own.
    std::vector<std::vector<int32_t>> cut_sets = {{64, 128}, {63, 65}, {1, 2, 37}, {149}, {100, 101, 127}};
    for (int k = 0; k < 3; ++k) {
      std::vector<int32_t> cuts;
      for (int i = 0; i < 4; ++i) cuts.push_back(1 + static_cast<int32_t>(rng() % 149));
      std::sort(cuts.begin(), cuts.end());
      cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
      cut_sets.push_back(cuts);
    }
    for (const auto& cuts : cut_sets) {
      std::string what = model + " cut at";
      for (int32_t c : cuts) what += " " + std::to_string(c);
      auto seq = e->new_sequence();
      std::vector<float> logits;
      int32_t from = 0;
      for (size_t i = 0; i <= cuts.size(); ++i) {
        const int32_t to = i < cuts.size() ? cuts[i] : 150;
        const std::span<const int32_t> piece = std::span<const int32_t>(prompt).subspan(from, to - from);
        e->prefill(*seq, piece, to == 150 ? &logits : nullptr);
        from = to;
      }
      EXPECT_TRUE(same_bits(logits, cold_logits)) << what << ": logits after the prompt";
      EXPECT_TRUE(state_bits(*seq, 150) == cold_state) << what << ": state or KV rows";
      const auto tail = test::greedy_tail(*e, *seq, logits, 4);
      for (size_t i = 0; i < tail.size(); ++i) EXPECT_TRUE(same_bits(tail[i], cold_tail[i])) << what << " step " << i;
    }
    // The last 90 tokens fed one per decode step (as an answer is produced), batched beside
    // another sequence: the state and logits a cold prefill of the same tokens gives.
    auto seq = e->new_sequence();
    auto other = e->new_sequence();
    e->prefill(*seq, std::span<const int32_t>(prompt).first(60), nullptr);
    e->prefill(*other, std::span<const int32_t>(prompt).first(33), nullptr);
    std::vector<float> logits;
    for (int32_t p = 60; p < 150; ++p) {
      SequenceCache* both[] = {seq.get(), other.get()};
      const int32_t toks[] = {prompt[static_cast<size_t>(p)], 7};
      test::decode_logits(*e, both, toks, logits);
    }
    logits.resize(static_cast<size_t>(n_vocab));  // the first sequence's row
    EXPECT_TRUE(same_bits(logits, cold_logits)) << model << " decoded: logits after the prompt";
    EXPECT_TRUE(state_bits(*seq, 150) == cold_state) << model << " decoded: state or KV rows";
  }
}

}  // namespace
}  // namespace memra
