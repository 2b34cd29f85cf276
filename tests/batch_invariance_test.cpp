// The exactness contract on the CPU backend (CI): a sequence's logits are bit-identical whether it
// decodes alone or batched with any other sequences, with members joining and leaving between
// steps, and a prompt fed in chunks lands on the same state as the same prompt fed at once when
// the chunks follow the grid.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "engine/engine.h"
#include "engine_test_util.h"
#include "test_util.h"

namespace memra {
namespace {

std::unique_ptr<Engine> open_cpu(const std::string& name) {
  EngineOptions o;
  o.device = "cpu";
  o.ctx = 1024;
  o.prefill_chunk = 64;
  return Engine::open(test::fixture(name), o);
}

TEST(BatchInvariance, CpuDecodeIsBitIdenticalAloneAndBatched) {
  for (std::string model : {"qwen35-tiny.f32.gguf", "qwen3next-tiny.f32.gguf"}) {
    auto e = open_cpu(model);
    const int32_t n_vocab = e->config().n_vocab;
    std::mt19937 rng(5);
    const int n_seq = 9, steps = 6;
    std::vector<std::vector<int32_t>> prompts(n_seq), feed(n_seq);
    for (int b = 0; b < n_seq; ++b) {
      const int len = 1 + static_cast<int>(rng() % 150);
      for (int i = 0; i < len; ++i) prompts[b].push_back(static_cast<int32_t>(rng() % n_vocab));
      for (int i = 0; i < steps; ++i) feed[b].push_back(static_cast<int32_t>(rng() % n_vocab));
    }
    // Alone.
    std::vector<std::vector<float>> alone(n_seq);
    for (int b = 0; b < n_seq; ++b) {
      auto seq = e->new_sequence();
      e->prefill(*seq, prompts[b], nullptr);
      SequenceCache* s = seq.get();
      std::vector<float> row;
      for (int i = 0; i < steps; ++i) {
        test::decode_logits(*e, std::span<SequenceCache* const>(&s, 1), std::span<const int32_t>(&feed[b][i], 1), row);
        alone[b].insert(alone[b].end(), row.begin(), row.end());
      }
    }
    // Batched, with members joining late and leaving early: sequence b takes part in steps
    // [b % 3, steps - (b % 2)).
    std::vector<std::unique_ptr<SequenceCache>> seqs(n_seq);
    for (int b = 0; b < n_seq; ++b) {
      seqs[b] = e->new_sequence();
      e->prefill(*seqs[b], prompts[b], nullptr);
    }
    std::vector<int> next_step(n_seq, 0);
    for (int t = 0; t < steps + 3; ++t) {
      std::vector<SequenceCache*> ptrs;
      std::vector<int32_t> toks;
      std::vector<int> members;
      for (int b = 0; b < n_seq; ++b) {
        if (t < b % 3 || next_step[b] >= steps - (b % 2)) continue;
        members.push_back(b);
        ptrs.push_back(seqs[b].get());
        toks.push_back(feed[b][next_step[b]]);
      }
      if (members.empty()) continue;
      std::vector<float> logits;
      test::decode_logits(*e, ptrs, toks, logits);
      for (size_t m = 0; m < members.size(); ++m) {
        const int b = members[m];
        ASSERT_EQ(0, std::memcmp(logits.data() + m * n_vocab, alone[b].data() + static_cast<size_t>(next_step[b]) * n_vocab,
                                 n_vocab * sizeof(float)))
            << model << ": sequence " << b << " step " << next_step[b] << " in a batch of " << members.size();
        ++next_step[b];
      }
    }
  }
}

// A prompt prefilled in grid-aligned pieces (as a scheduler feeds it, one chunk per tick) gives
// the same logits and state as prefill() in one call.
TEST(BatchInvariance, CpuChunkedFeedEqualsWholePrefill) {
  auto e = open_cpu("qwen35-tiny.f32.gguf");
  std::vector<int32_t> prompt;
  for (int i = 0; i < 150; ++i) prompt.push_back((i * 37 + 11) % e->config().n_vocab);
  auto a = e->new_sequence();
  std::vector<float> la;
  e->prefill(*a, prompt, &la);
  auto b = e->new_sequence();
  std::vector<float> lb;
  size_t done = 0;
  while (done < prompt.size())
    done += e->prefill_chunk(*b, std::span<const int32_t>(prompt).subspan(done), &lb);
  EXPECT_EQ(0, std::memcmp(la.data(), lb.data(), la.size() * sizeof(float)));
  int32_t t = 5;
  std::vector<float> da, db;
  SequenceCache* pa = a.get();
  SequenceCache* pb = b.get();
  test::decode_logits(*e, std::span<SequenceCache* const>(&pa, 1), std::span<const int32_t>(&t, 1), da);
  test::decode_logits(*e, std::span<SequenceCache* const>(&pb, 1), std::span<const int32_t>(&t, 1), db);
  EXPECT_EQ(0, std::memcmp(da.data(), db.data(), da.size() * sizeof(float)));
}

}  // namespace
}  // namespace memra
