// Prefix reuse on the GPU: the snapshots are device-to-device copies through the backend
// (DeviceMemory::copy on the CUDA stream), KV blocks are shared by reference (step/kv_blocks.h),
// and a resumed prompt gives the bits of a cold GPU run (prefill logits and the decode steps after
// it); through the scheduler, greedy and seeded answers with logprobs equal those without reuse.
// SKIPPED without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <random>

#include "engine/engine.h"
#include "gpu_test_util.h"
#include "prefix_cache_test_util.h"
#include "quant/quant.h"
#include "serve/scheduler.h"
#include "test_util.h"

namespace memra {
namespace {

std::unique_ptr<Engine> open_gpu(const std::string& name, int32_t chunk, std::optional<GgmlType> kv_type = {}) {
  EngineOptions o;
  o.device = "cuda";
  o.ctx = 2048;
  o.prefill_chunk = chunk;
  o.cuda = test::gpu_options();
  if (kv_type) o.cuda.kv_type = *kv_type;
  return Engine::open(test::fixture(name), o);
}

TEST(GpuPrefixCache, ResumedPromptIsBitIdenticalToAColdGpuRun) {
  MEMRA_GPU_OR_SKIP(probe);
  probe.reset();
  {
    for (int32_t chunk : {16, 64}) {
      auto e = open_gpu("qwen35-tiny.f32.gguf", chunk);
      PrefixCache& pc = *e->prefix_cache();
      const int32_t n_vocab = e->config().n_vocab;
      std::mt19937 rng(31 + chunk);
      std::vector<int32_t> base;
      for (int i = 0; i < 300; ++i) base.push_back(static_cast<int32_t>(rng() % n_vocab));
      { test::Warm first = test::prefill_warm(*e, pc, base); }
      pc.maintain();
      int resumed = 0;
      for (int trial = 0; trial < 8; ++trial) {
        const int32_t at = 1 + static_cast<int32_t>(rng() % 299);
        std::vector<int32_t> prompt(base.begin(), base.begin() + at);
        if (trial % 4 == 3) prompt = base;  // the whole prompt again: its parked logits
        else
          for (int i = 0; i < 1 + static_cast<int>(rng() % 50); ++i) prompt.push_back(static_cast<int32_t>(rng() % n_vocab));
        const std::string what = "chunk " + std::to_string(chunk) + " trial " +
                                 std::to_string(trial) + " edit at " + std::to_string(at);
        test::Warm w = test::prefill_warm(*e, pc, prompt);
        resumed += w.reused > 0;
        const auto warm = test::greedy_tail(*e, *w.seq, w.logits, 5);
        const auto cold = test::cold_run(*e, prompt, 5);
        for (size_t i = 0; i < cold.size(); ++i)
          ASSERT_TRUE(test::same_bits(warm[i], cold[i]))
              << what << ": logits differ at step " << i << " (resumed " << w.reused << ")";
        w = test::Warm{};
        pc.maintain();
      }
      EXPECT_GE(resumed, 4) << "chunk " << chunk;
    }
  }
}

// The state after an answer (decode steps, one token each) is parked at retire; the next turn
// resumes after the answer with the bits of a cold prefill of prompt + answer + more.
TEST(GpuPrefixCache, ResumeAfterAnAnswerIsBitIdenticalToAColdGpuRun) {
  MEMRA_GPU_OR_SKIP(probe);
  probe.reset();
  auto e = open_gpu("qwen35-tiny.f32.gguf", 64);
  PrefixCache& pc = *e->prefix_cache();
  const int32_t n_vocab = e->config().n_vocab;
  std::vector<int32_t> prompt;
  for (int i = 0; i < 101; ++i) prompt.push_back((i * 41 + 3) % n_vocab);
  const std::vector<int32_t> fed = test::answer_and_retire(*e, pc, prompt, 13);
  pc.maintain();
  std::vector<int32_t> next = fed;
  for (int i = 0; i < 30; ++i) next.push_back((i * 11 + 2) % n_vocab);
  test::Warm w = test::prefill_warm(*e, pc, next);
  EXPECT_EQ(w.reused, static_cast<int32_t>(fed.size()));
  const auto warm = test::greedy_tail(*e, *w.seq, w.logits, 5);
  const auto cold = test::cold_run(*e, next, 5);
  for (size_t i = 0; i < cold.size(); ++i) ASSERT_TRUE(test::same_bits(warm[i], cold[i])) << "step " << i;
}

// Paged KV (step/kv_blocks.h): a resumed prompt shares the parked prompt's full KV blocks and
// copies only its partial last block; n > 1 forks share the prompt's full blocks the same way. The
// pool's counts show the sharing, and every sequence's logits (the forks decoding side by side in
// one batch) are a cold run's, bit for bit.
TEST(GpuPrefixCache, ResumedAndForkedSequencesShareKvBlocks) {
  MEMRA_GPU_OR_SKIP(probe);
  probe.reset();
  for (GgmlType kv : {GgmlType::F16, GgmlType::Q8_0}) {
    SCOPED_TRACE(std::string("KV ") + quant::type_name(kv));
    auto e = open_gpu("qwen35-tiny.f32.gguf", 64, kv);
    PrefixCache& pc = *e->prefix_cache();
    const KvBlockPool& pool = e->kv_pool();
    const int32_t n_vocab = e->config().n_vocab;
    int64_t n_attn = 0;
    for (MixerKind m : e->config().cache_shape(e->backend().kv_type()).layer_mixer)
      n_attn += m == MixerKind::FullAttention;
    ASSERT_GT(n_attn, 0);
    std::vector<int32_t> base;
    for (int i = 0; i < 300; ++i) base.push_back((i * 29 + 7) % n_vocab);
    { test::Warm first = test::prefill_warm(*e, pc, base); }
    pc.maintain();
    EXPECT_EQ(pool.blocks_in_use(), n_attn * 3);  // 300 positions parked: 3 blocks per layer
    EXPECT_EQ(pc.stats().kv_blocks, n_attn * 3);

    std::vector<int32_t> prompt = base;
    for (int i = 0; i < 40; ++i) prompt.push_back((i * 13 + 1) % n_vocab);
    test::Warm w = test::prefill_warm(*e, pc, prompt);
    ASSERT_EQ(w.reused, 300);
    // Blocks 0 and 1 (positions 0..255) shared with the parked prompt; block 2 (256..339) copied.
    EXPECT_EQ(pool.blocks_in_use(), n_attn * 4);
    for (size_t l = 0; l < w.seq->layers.size(); ++l) {
      const auto& blocks = w.seq->layers[l].blocks;
      if (blocks.empty()) continue;
      ASSERT_EQ(blocks.size(), 3u);
      EXPECT_EQ(pool.refs(blocks[0]), 2);
      EXPECT_EQ(pool.refs(blocks[1]), 2);
      EXPECT_EQ(pool.refs(blocks[2]), 1);
    }
    // Two more choices fork from it (as the scheduler forks n > 1): each shares blocks 0 and 1 and
    // copies block 2.
    std::vector<std::unique_ptr<SequenceCache>> forks;
    for (int f = 0; f < 2; ++f) {
      forks.push_back(e->new_sequence());
      forks.back()->copy_from(*w.seq);
    }
    EXPECT_EQ(pool.blocks_in_use(), n_attn * 6);
    for (size_t l = 0; l < w.seq->layers.size(); ++l) {
      if (!w.seq->layers[l].blocks.empty()) {
        EXPECT_EQ(pool.refs(w.seq->layers[l].blocks[0]), 4);
      }
    }

    const auto cold = test::cold_run(*e, prompt, 5);
    ASSERT_TRUE(test::same_bits(w.logits, cold[0])) << "resumed prompt's logits";
    // The resumed sequence and its forks decode greedily side by side, one batch per step.
    std::vector<SequenceCache*> seqs = {w.seq.get(), forks[0].get(), forks[1].get()};
    std::vector<std::vector<float>> last(seqs.size(), w.logits);
    for (size_t step = 1; step < cold.size(); ++step) {
      std::vector<int32_t> toks;
      for (const auto& lg : last)
        toks.push_back(static_cast<int32_t>(std::max_element(lg.begin(), lg.end()) - lg.begin()));
      std::vector<float> all;
      test::decode_logits(*e, seqs, toks, all);
      ASSERT_EQ(all.size(), seqs.size() * static_cast<size_t>(n_vocab));
      for (size_t s = 0; s < seqs.size(); ++s) {
        last[s].assign(all.begin() + static_cast<std::ptrdiff_t>(s * n_vocab),
                       all.begin() + static_cast<std::ptrdiff_t>((s + 1) * n_vocab));
        ASSERT_TRUE(test::same_bits(last[s], cold[step])) << "sequence " << s << " step " << step;
      }
    }
    // Sharing ends with its holders: the forks and the resumed sequence give their blocks back.
    forks.clear();
    w = test::Warm{};
    pc.maintain();
    EXPECT_EQ(pc.stats().kv_blocks, n_attn * 4);  // both prompts parked: 3 + 1 own block per layer
    EXPECT_EQ(pool.blocks_in_use(), n_attn * 4);
  }
}

TEST(GpuPrefixCache, SchedulerAnswersMatchWithoutReuse) {
  MEMRA_GPU_OR_SKIP(probe);
  probe.reset();
  auto e = open_gpu("qwen35-tiny.f32.gguf", 32);
  e->tokenizer();
  std::vector<int32_t> prefix;
  for (int i = 0; i < 200; ++i) prefix.push_back((i * 37 + 5) % e->config().n_vocab);
  std::vector<serve::GenerationSpec> specs;
  for (int k = 0; k < 4; ++k) {
    serve::GenerationSpec s;
    s.prompt = prefix;
    for (int i = 0; i < 2 + 7 * k; ++i) s.prompt.push_back((k * 53 + i) % e->config().n_vocab);
    s.n = 1 + k % 2;
    s.max_tokens = 10;
    s.sampling.temperature = k == 0 ? 0.0f : 0.8f;
    s.sampling.seed = 100 + k;
    s.top_logprobs = 2;
    s.ignore_eos = true;
    specs.push_back(s);
  }
  specs.push_back(specs[2]);
  std::vector<std::vector<int32_t>> tokens[2];
  std::vector<std::vector<float>> lps[2];
  std::vector<int32_t> cached;
  for (int reuse = 0; reuse < 2; ++reuse) {
    serve::SchedulerOptions o;
    o.prefix_reuse = reuse == 1;
    serve::Scheduler sched(*e, o, nullptr);
    sched.start();
    for (const auto& s : specs) {
      std::shared_ptr<serve::RequestStream> st;
      ASSERT_EQ(sched.submit(s, st), serve::SubmitStatus::Accepted);
      std::vector<serve::ChoiceEvent> events;
      std::vector<std::vector<int32_t>> tk(static_cast<size_t>(s.n));
      std::vector<std::vector<float>> lp(static_cast<size_t>(s.n));
      while (st->wait(events, std::chrono::milliseconds(200))) {
        for (auto& ev : events) {
          for (auto& l : ev.logprobs) {
            tk[static_cast<size_t>(ev.choice)].push_back(l.token);
            lp[static_cast<size_t>(ev.choice)].push_back(l.logprob);
          }
          if (ev.finish != serve::FinishReason::None && ev.choice == 0 && reuse) cached.push_back(ev.cached_tokens);
        }
        events.clear();
      }
      for (int c = 0; c < s.n; ++c) {
        tokens[reuse].push_back(tk[static_cast<size_t>(c)]);
        lps[reuse].push_back(lp[static_cast<size_t>(c)]);
      }
    }
  }
  ASSERT_EQ(tokens[0].size(), tokens[1].size());
  for (size_t i = 0; i < tokens[0].size(); ++i) {
    EXPECT_EQ(tokens[0][i], tokens[1][i]) << "answer " << i;
    EXPECT_TRUE(test::same_bits(lps[0][i], lps[1][i])) << "answer " << i << " logprobs";
  }
  ASSERT_EQ(cached.size(), specs.size());
  EXPECT_GT(cached[1], 0);
  EXPECT_EQ(cached[4], static_cast<int32_t>(specs[4].prompt.size()));
}

}  // namespace
}  // namespace memra
