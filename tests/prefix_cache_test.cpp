// Prefix and state reuse (step/prefix_cache.h) on the CPU: a prompt resumed from the cache gives
// the bits of a cold prefill (logits after the prompt and after each decode step), whatever the
// edit point and wherever the snapshots sit (every `spacing` tokens, on the chunk grid or off it,
// a few tokens before the prompt's end, at its end, after an answer); the pool stays within its
// budget, evicting least recently used entries and never one a request holds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "common/error.h"
#include "engine/engine.h"
#include "engine_test_util.h"
#include "prefix_cache_test_util.h"
#include "test_util.h"

namespace memra {
namespace {

using test::cold_run;
using test::greedy_tail;
using test::prefill_warm;
using test::same_bits;
using test::Warm;

constexpr int32_t kChunk = 16;

std::unique_ptr<Engine> open_cpu(const std::string& name, PrefixCacheOptions pc = {},
                                 GgmlType ssm_type = GgmlType::F32) {
  EngineOptions o;
  o.device = "cpu";
  o.ssm_type = ssm_type;
  o.ctx = 1024;
  o.prefill_chunk = kChunk;
  o.prefix_cache = pc;
  return Engine::open(test::fixture(name), o);
}

// The longest reuse the cache can give `prompt` from one entry recorded for `base` (snapshots
// every `spacing` tokens, `tail` before its end and at its end): the whole prompt when it equals
// base, else the last snapshot at or before the shared length and short of the prompt.
int32_t expected_reuse(const std::vector<int32_t>& base, const std::vector<int32_t>& prompt, int32_t spacing,
                       int32_t tail) {
  if (prompt == base) return static_cast<int32_t>(base.size());
  size_t lcp = 0;
  while (lcp < base.size() && lcp < prompt.size() && base[lcp] == prompt[lcp]) ++lcp;
  const int32_t limit = static_cast<int32_t>(std::min(lcp, prompt.size() - 1));
  const int32_t n = static_cast<int32_t>(base.size());
  int32_t best = std::min(limit, n - 1) / spacing * spacing;
  if (n - tail <= limit) best = std::max(best, n - tail);
  if (n <= limit) best = n;
  return best;
}

// With bf16 recurrent states too (MEMRA_SSM_STATE): their snapshots are the rounded states, and a
// prompt resumed off the chunk grid still matches its cold run bit for bit.
TEST(PrefixCache, ResumedPromptIsBitIdenticalAtRandomEditPoints) {
  // (spacing, tail): on the chunk grid, and off it (23 and 5 are no multiples of 16 nor of 64).
  const std::pair<int32_t, int32_t> layouts[] = {{kChunk, 16}, {23, 5}};
  const std::pair<std::string, GgmlType> models[] = {{"qwen35-tiny.f32.gguf", GgmlType::F32},
                                                     {"qwen3next-tiny.f32.gguf", GgmlType::F32},
                                                     {"qwen3-tiny.f32.gguf", GgmlType::F32},
                                                     {"qwen35-tiny.f32.gguf", GgmlType::BF16},
                                                     {"qwen3next-tiny.f32.gguf", GgmlType::BF16}};
  for (const auto& [model_file, ssm_type] : models)
  for (auto [spacing, tail] : layouts) {
    const std::string model = model_file + (ssm_type == GgmlType::BF16 ? " (bf16 state)" : "");
    auto e = open_cpu(model_file, PrefixCacheOptions{4096, spacing, tail}, ssm_type);
    PrefixCache& pc = *e->prefix_cache();
    const int32_t n_vocab = e->config().n_vocab;
    std::mt19937 rng(12);
    auto random_tokens = [&](int n) {
      std::vector<int32_t> t;
      for (int i = 0; i < n; ++i) t.push_back(static_cast<int32_t>(rng() % n_vocab));
      return t;
    };
    const std::vector<int32_t> base = random_tokens(150);
    {
      Warm first = prefill_warm(*e, pc, base);
      EXPECT_EQ(first.reused, 0);
    }
    pc.maintain();
    int resumed = 0;
    for (int trial = 0; trial < 12; ++trial) {
      // An edit at a random point (a fresh tail), a truncation, an extension, a repeat.
      std::vector<int32_t> prompt;
      const int kind = trial % 4;
      const int32_t at = 1 + static_cast<int32_t>(rng() % 149);
      if (kind == 0) {
        prompt.assign(base.begin(), base.begin() + at);
        const auto tail = random_tokens(1 + static_cast<int>(rng() % 40));
        prompt.insert(prompt.end(), tail.begin(), tail.end());
      } else if (kind == 1) {
        prompt.assign(base.begin(), base.begin() + at);
      } else if (kind == 2) {
        prompt = base;
        const auto tail = random_tokens(1 + static_cast<int>(rng() % 40));
        prompt.insert(prompt.end(), tail.begin(), tail.end());
      } else {
        prompt = base;
      }
      const std::string what = model + " spacing " + std::to_string(spacing) + " tail " + std::to_string(tail) + " trial " + std::to_string(trial) + " (kind " + std::to_string(kind) +
                               ", edit at " + std::to_string(at) + ", " + std::to_string(prompt.size()) + " tokens)";
      const int32_t want = expected_reuse(base, prompt, spacing, tail);
      Warm w = prefill_warm(*e, pc, prompt);
      // Entries of earlier trials may offer more, never less.
      EXPECT_GE(w.reused, want) << what;
      resumed += w.reused > 0;
      const auto warm = greedy_tail(*e, *w.seq, w.logits, 6);
      const auto cold = cold_run(*e, prompt, 6);
      for (size_t i = 0; i < cold.size(); ++i)
        ASSERT_TRUE(same_bits(warm[i], cold[i])) << what << ": logits differ at step " << i << " (resumed "
                                                 << w.reused << " tokens)";
      w = Warm{};
      pc.maintain();
    }
    EXPECT_GE(resumed, 8) << model << ": most trials should have resumed";
  }
}

TEST(PrefixCache, RepeatedPromptReusesItAllWithItsLogits) {
  auto e = open_cpu("qwen35-tiny.f32.gguf");
  PrefixCache& pc = *e->prefix_cache();
  std::vector<int32_t> prompt;
  for (int i = 0; i < 37; ++i) prompt.push_back((i * 53 + 7) % e->config().n_vocab);
  Warm a = prefill_warm(*e, pc, prompt);
  Warm b = prefill_warm(*e, pc, prompt);
  EXPECT_EQ(a.reused, 0);
  EXPECT_EQ(b.reused, 37);
  EXPECT_EQ(b.handle, nullptr) << "a whole-prompt hit records no second entry";
  EXPECT_EQ(b.seq->pos(), 37);
  const auto cold = cold_run(*e, prompt, 4);
  const auto warm = greedy_tail(*e, *b.seq, b.logits, 4);
  for (size_t i = 0; i < cold.size(); ++i) EXPECT_TRUE(same_bits(warm[i], cold[i])) << "step " << i;
  const PrefixCacheStats s = pc.stats();
  EXPECT_EQ(s.lookups, 2);
  EXPECT_EQ(s.hits, 1);
  EXPECT_EQ(s.reused_tokens, 37);
}

TEST(PrefixCache, SnapshotsSitAtTheSpacingTheTailAndTheEnd) {
  auto e = open_cpu("qwen35-tiny.f32.gguf", PrefixCacheOptions{4096, 3 * kChunk, 10});
  PrefixCache& pc = *e->prefix_cache();
  // 3 Gated DeltaNet layers: conv window 3 x 256 channels, state 4 heads x 32 x 32.
  EXPECT_EQ(pc.snapshot_bytes(), 3u * (3 * 256 + 4 * 32 * 32) * sizeof(float));
  std::vector<int32_t> base;
  for (int i = 0; i < 150; ++i) base.push_back((i * 31 + 3) % e->config().n_vocab);
  { Warm w = prefill_warm(*e, pc, base); }
  // At 48, 96 and 144 (the spacing), 140 (10 before the end) and 150 (the end).
  EXPECT_EQ(pc.stats().snapshots, 5);
  std::vector<int32_t> p(base.begin(), base.begin() + 120);
  p.push_back(1);
  EXPECT_EQ(prefill_warm(*e, pc, p).reused, 96);
  p.assign(base.begin(), base.begin() + 143);
  p.push_back(1);
  EXPECT_EQ(prefill_warm(*e, pc, p).reused, 140) << "the tail snapshot";
  p.assign(base.begin(), base.begin() + 147);
  EXPECT_EQ(prefill_warm(*e, pc, p).reused, 144);
  p = base;
  p.push_back(1);
  p.push_back(2);
  Warm w = prefill_warm(*e, pc, p);
  EXPECT_EQ(w.reused, 150) << "the end of the prompt: an extension resumes there";
  const auto cold = cold_run(*e, p, 3);
  const auto warm = greedy_tail(*e, *w.seq, w.logits, 3);
  for (size_t i = 0; i < cold.size(); ++i) EXPECT_TRUE(same_bits(warm[i], cold[i])) << "step " << i;
}

// The next turn of a chat renders the last answer into its history: after retire() a prompt
// that extends the prompt + the answer's fed tokens resumes after them, with a cold run's bits.
TEST(PrefixCache, RetireKeepsTheStateAfterTheAnswer) {
  auto e = open_cpu("qwen35-tiny.f32.gguf");
  PrefixCache& pc = *e->prefix_cache();
  std::vector<int32_t> prompt;
  for (int i = 0; i < 45; ++i) prompt.push_back((i * 13 + 5) % e->config().n_vocab);
  const std::vector<int32_t> fed = test::answer_and_retire(*e, pc, prompt, 8);
  pc.maintain();
  std::vector<int32_t> next = fed;
  for (int i = 0; i < 20; ++i) next.push_back((i * 7 + 1) % e->config().n_vocab);
  Warm w = prefill_warm(*e, pc, next);
  EXPECT_EQ(w.reused, static_cast<int32_t>(fed.size()));
  const auto cold = cold_run(*e, next, 4);
  const auto warm = greedy_tail(*e, *w.seq, w.logits, 4);
  for (size_t i = 0; i < cold.size(); ++i) EXPECT_TRUE(same_bits(warm[i], cold[i])) << "step " << i;
  // An edit inside the answer falls back to the end of the prompt.
  next.assign(fed.begin(), fed.end());
  next[50] = (next[50] + 1) % e->config().n_vocab;
  EXPECT_EQ(prefill_warm(*e, pc, next).reused, 45);
}

TEST(PrefixCache, NegativeSpacingIsAnError) {
  try {
    open_cpu("qwen35-tiny.f32.gguf", PrefixCacheOptions{4096, -1});
    FAIL() << "expected an error";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("MEMRA_PREFIX_SPACING"), std::string::npos) << err.what();
  }
}

TEST(PrefixCache, StaysInItsBudgetAndNeverEvictsWhatARequestHolds) {
  auto e = open_cpu("qwen35-tiny.f32.gguf", PrefixCacheOptions{1, 0});  // 1 MiB
  PrefixCache& pc = *e->prefix_cache();
  const int32_t n_vocab = e->config().n_vocab;
  auto prompt_of = [&](int k) {
    std::vector<int32_t> p;
    for (int i = 0; i < 200; ++i) p.push_back((i * 17 + k * 101 + 5) % n_vocab);
    return p;
  };
  // Held: recorded and its sequence alive, like a request still decoding.
  Warm held = prefill_warm(*e, pc, prompt_of(0));
  for (int k = 1; k < 6; ++k) {
    Warm w = prefill_warm(*e, pc, prompt_of(k));
    w = Warm{};
    pc.maintain();
    EXPECT_LE(pc.stats().bytes, pc.stats().budget_bytes) << "after prompt " << k;
  }
  const PrefixCacheStats s = pc.stats();
  EXPECT_GT(s.evictions, 0);
  // The held entry is still there: its prompt resumes from it.
  {
    Warm again = prefill_warm(*e, pc, prompt_of(0));
    EXPECT_EQ(again.reused, 200);
  }
  // The least recently used released prompts went first: 1 is gone, 5 (the last) is there.
  Warm one = prefill_warm(*e, pc, prompt_of(1));
  EXPECT_EQ(one.reused, 0);
  // Evicted or not, the bits are those of a cold run.
  const auto cold = cold_run(*e, prompt_of(1), 3);
  const auto warm = greedy_tail(*e, *one.seq, one.logits, 3);
  for (size_t i = 0; i < cold.size(); ++i) EXPECT_TRUE(same_bits(warm[i], cold[i])) << "step " << i;
  held = Warm{};
  one = Warm{};
  pc.maintain();
  EXPECT_LE(pc.stats().bytes, pc.stats().budget_bytes);
}

TEST(PrefixCache, ForkedChoicesFromAResumedPromptMatchColdForks) {
  // n > 1: the choices fork from the resumed sequence (cache copies) and decode side by side.
  auto e = open_cpu("qwen35-tiny.f32.gguf");
  PrefixCache& pc = *e->prefix_cache();
  std::vector<int32_t> base;
  for (int i = 0; i < 90; ++i) base.push_back((i * 7 + 1) % e->config().n_vocab);
  { Warm w = prefill_warm(*e, pc, base); }
  pc.maintain();
  std::vector<int32_t> prompt(base.begin(), base.begin() + 70);
  prompt.push_back(3);
  Warm w = prefill_warm(*e, pc, prompt);
  ASSERT_EQ(w.reused, 64);
  auto fork = e->new_sequence();
  fork->copy_from(*w.seq);
  auto cold = e->new_sequence();
  std::vector<float> cold_logits;
  e->prefill(*cold, prompt, &cold_logits);
  ASSERT_TRUE(same_bits(cold_logits, w.logits));
  // Different continuations per choice, batched with a cold sequence.
  SequenceCache* seqs[3] = {w.seq.get(), fork.get(), cold.get()};
  for (int step = 0; step < 4; ++step) {
    const int32_t toks[3] = {5 + step, 9 + step, 5 + step};
    std::vector<float> logits;
    test::decode_logits(*e, seqs, toks, logits);
    const size_t n = static_cast<size_t>(e->config().n_vocab);
    EXPECT_EQ(0, std::memcmp(logits.data(), logits.data() + 2 * n, n * sizeof(float))) << "step " << step;
  }
}

}  // namespace
}  // namespace memra
