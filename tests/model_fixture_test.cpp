// Golden tests: the four tiny fixture models against Hugging Face's float64 logits, teacher-forced
// on prompt_ids + greedy_ids, through every way of feeding tokens: whole prefill, one token at a
// time through the caches, and prefill in chunks of 7, 64 and 100 tokens.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <vector>

#include "engine/engine.h"
#include "engine_test_util.h"
#include "step/sampling.h"
#include "test_util.h"

namespace memra {
namespace {

struct Case {
  std::vector<int32_t> prompt, greedy;
  std::vector<float> ref;  // n_positions x n_vocab
  int n_vocab = 0;
};

std::vector<Case> load_cases(const std::string& name) {
  std::ifstream jf(test::fixture(name + ".json"));
  nlohmann::json j = nlohmann::json::parse(jf);
  std::ifstream lf(test::fixture(name + ".logits.f32"), std::ios::binary);
  std::vector<Case> cases;
  for (const auto& c : j["cases"]) {
    Case k;
    k.prompt = c["prompt_ids"].get<std::vector<int32_t>>();
    k.greedy = c["greedy_ids"].get<std::vector<int32_t>>();
    k.n_vocab = c["n_vocab"].get<int>();
    const size_t n = c["n_positions"].get<size_t>() * k.n_vocab;
    k.ref.resize(n);
    lf.seekg(c["logits_offset_bytes"].get<std::streamoff>());
    lf.read(reinterpret_cast<char*>(k.ref.data()), static_cast<std::streamsize>(n * sizeof(float)));
    EXPECT_TRUE(lf.good()) << "short read of " << name << ".logits.f32";
    EXPECT_EQ(c["n_positions"].get<size_t>(), k.prompt.size() + k.greedy.size());
    cases.push_back(std::move(k));
  }
  EXPECT_EQ(cases.size(), 4u);
  return cases;
}

double rel_err(const std::vector<float>& got, const std::vector<float>& ref) {
  EXPECT_EQ(got.size(), ref.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size() && i < got.size(); ++i) {
    double d = static_cast<double>(got[i]) - ref[i];
    if (!std::isfinite(got[i])) return INFINITY;
    num += d * d;
    den += static_cast<double>(ref[i]) * ref[i];
  }
  return std::sqrt(num / den);
}

std::vector<float> run_prefill(const std::string& model, const std::vector<int32_t>& ids, int chunk) {
  EngineOptions o;
  o.device = "cpu";
  o.prefill_chunk = chunk;
  auto e = Engine::open(model, o);
  auto seq = e->new_sequence();
  std::vector<float> all;
  e->prefill(*seq, ids, nullptr, &all);
  return all;
}

std::vector<float> run_decode(const std::string& model, const std::vector<int32_t>& ids) {
  EngineOptions o;
  o.device = "cpu";
  auto e = Engine::open(model, o);
  auto seq = e->new_sequence();
  SequenceCache* s = seq.get();
  std::vector<float> all, row;
  for (int32_t id : ids) {
    test::decode_logits(*e, std::span<SequenceCache* const>(&s, 1), std::span<const int32_t>(&id, 1), row);
    all.insert(all.end(), row.begin(), row.end());
  }
  return all;
}

class FixtureModel : public ::testing::TestWithParam<std::string> {};

TEST_P(FixtureModel, LogitsMatchReferenceEveryFeedingMode) {
  const std::string name = GetParam();
  const std::string model = test::fixture(name + ".f32.gguf");
  auto cases = load_cases(name);
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const Case& c = cases[ci];
    std::vector<int32_t> ids = c.prompt;
    ids.insert(ids.end(), c.greedy.begin(), c.greedy.end());
    double e_whole = rel_err(run_prefill(model, ids, 1 << 20), c.ref);
    double e_decode = rel_err(run_decode(model, ids), c.ref);
    EXPECT_LE(e_whole, 1e-4) << name << " case " << ci << " whole prefill";
    EXPECT_LE(e_decode, 1e-4) << name << " case " << ci << " token by token";
    for (int chunk : {7, 64, 100}) {
      double e = rel_err(run_prefill(model, ids, chunk), c.ref);
      EXPECT_LE(e, 1e-4) << name << " case " << ci << " chunks of " << chunk;
    }
    std::printf("[ %s case %zu ] %zu positions: rel err whole %.2e, decode %.2e\n", name.c_str(), ci, ids.size(),
                e_whole, e_decode);
  }
}

TEST_P(FixtureModel, GreedyReproducesReferenceTokens) {
  const std::string name = GetParam();
  EngineOptions o;
  o.device = "cpu";
  auto e = Engine::open(test::fixture(name + ".f32.gguf"), o);
  for (const Case& c : load_cases(name)) {
    auto seq = e->new_sequence();
    std::vector<float> logits;
    e->prefill(*seq, c.prompt, &logits);
    SequenceCache* s = seq.get();
    std::vector<int32_t> got;
    for (size_t i = 0; i < c.greedy.size(); ++i) {
      int32_t t = argmax(logits);
      got.push_back(t);
      test::decode_logits(*e, std::span<SequenceCache* const>(&s, 1), std::span<const int32_t>(&t, 1), logits);
    }
    EXPECT_EQ(got, c.greedy) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Tiny, FixtureModel,
                         ::testing::Values("qwen35-tiny", "qwen35moe-tiny", "qwen3next-tiny", "qwen3-tiny"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (auto& ch : n) if (ch == '-') ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace memra
