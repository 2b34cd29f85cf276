// The sampler pipeline (step/sampling.h): adjustments, greedy, candidate filters, the
// Gumbel-max draw and its distribution, parameter validation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "common/error.h"
#include "step/det_math.h"
#include "step/philox.h"
#include "step/sampling.h"

namespace memra {
namespace {

constexpr float kInf = det::kInf;

std::vector<int32_t> ids_of(const std::vector<SamplingCandidate>& c) {
  std::vector<int32_t> ids;
  for (const auto& x : c) ids.push_back(x.id);
  return ids;
}

std::vector<int32_t> survivors(const std::vector<float>& logits, const SamplingParams& p) {
  return ids_of(sampling_candidates(logits, p));
}

SamplingParams sampled(float temperature) {
  SamplingParams p;
  p.temperature = temperature;
  return p;
}

// Regularised upper incomplete gamma Q(a, x): the chi-square survival function is Q(df/2, x/2).
// Series for x < a + 1, Lentz's continued fraction otherwise.
double gamma_q(double a, double x) {
  if (x <= 0.0) return 1.0;
  const double log_prefix = -x + a * std::log(x) - std::lgamma(a);
  if (x < a + 1.0) {
    double term = 1.0 / a, sum = term;
    for (int n = 1; n < 10000 && term > sum * 1e-16; ++n) {
      term *= x / (a + n);
      sum += term;
    }
    return 1.0 - sum * std::exp(log_prefix);
  }
  const double tiny = 1e-300;
  double b = x + 1.0 - a, c = 1.0 / tiny, d = 1.0 / b, h = d;
  for (int i = 1; i < 10000; ++i) {
    const double an = -i * (i - a);
    b += 2.0;
    d = an * d + b;
    if (std::fabs(d) < tiny) d = tiny;
    c = b + an / c;
    if (std::fabs(c) < tiny) c = tiny;
    d = 1.0 / d;
    const double delta = d * c;
    h *= delta;
    if (std::fabs(delta - 1.0) < 1e-16) break;
  }
  return std::exp(log_prefix) * h;
}

// Pearson chi-square p-value of `counts` against probabilities `expect_p`; adjacent bins are
// merged (in id order) until each expects at least 5 draws.
double chi_square_p(const std::vector<int64_t>& counts, const std::vector<double>& expect_p) {
  int64_t n = 0;
  for (int64_t c : counts) n += c;
  double chi2 = 0.0, bin_e = 0.0;
  int64_t bin_o = 0;
  int bins = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    bin_e += expect_p[i] * static_cast<double>(n);
    bin_o += counts[i];
    if (bin_e >= 5.0 || i + 1 == counts.size()) {
      chi2 += (static_cast<double>(bin_o) - bin_e) * (static_cast<double>(bin_o) - bin_e) / bin_e;
      bin_e = 0.0, bin_o = 0, ++bins;
    }
  }
  return gamma_q((bins - 1) / 2.0, chi2 / 2.0);
}

std::vector<double> softmax(const std::vector<float>& logits, double temperature) {
  std::vector<double> p(logits.size());
  double m = *std::max_element(logits.begin(), logits.end()) / temperature, z = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) z += p[i] = std::exp(logits[i] / temperature - m);
  for (double& x : p) x /= z;
  return p;
}

// Draws token indexes 0..draws-1. Steps 3 and 4 separately (the candidates do not change between
// draws); the first draws are checked against the full sample_token pipeline.
std::vector<int64_t> draw_counts(const std::vector<float>& logits, float temperature, uint64_t seed, int draws) {
  SamplingParams p = sampled(temperature);
  p.seed = seed;
  const std::vector<SamplingCandidate> candidates = sampling_candidates(logits, p);
  std::vector<int64_t> counts(logits.size(), 0);
  for (int i = 0; i < draws; ++i) {
    const int32_t t = gumbel_max(candidates, seed, static_cast<uint64_t>(i));
    if (i < 100) {
      EXPECT_EQ(t, sample_token(logits, p, static_cast<uint64_t>(i), {}));
    }
    EXPECT_GE(t, 0);
    if (t >= 0) ++counts[static_cast<size_t>(t)];
  }
  return counts;
}

void expect_error(const std::function<void()>& fn, const std::string& field, const std::string& value) {
  try {
    fn();
    ADD_FAILURE() << "expected memra::Error about " << field;
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(field), std::string::npos) << msg;
    EXPECT_NE(msg.find(value), std::string::npos) << msg;
  }
}

// ---------------------------------------------------------------------------------------------

TEST(SamplingGreedy, ArgmaxLowestIdOnTiesAndNaNNeverWins) {
  const float nan = std::nanf("");
  EXPECT_EQ(argmax(std::vector<float>{1, 3, 2, 3}), 1);
  EXPECT_EQ(argmax(std::vector<float>{nan, 1, nan, 1}), 1);
  EXPECT_EQ(argmax(std::vector<float>{-kInf, nan, -5, nan}), 2);
  EXPECT_EQ(argmax(std::vector<float>{nan, kInf, kInf}), 1);
  EXPECT_EQ(argmax(std::vector<float>{-kInf, nan, -kInf}), -1);
  EXPECT_EQ(argmax(std::vector<float>{}), -1);
  EXPECT_EQ(argmax(std::vector<float>{-0.0f, 0.0f}), 0);  // -0 == +0: a tie
}

TEST(SamplingGreedy, SampleTokenAtZeroTemperatureIsArgmaxAfterAdjustments) {
  std::vector<float> logits{1.0f, 4.0f, 3.5f, 2.0f};
  SamplingParams p;
  EXPECT_EQ(sample_token(logits, p, 0, {}), 1);
  p.repetition_penalty = 2.0f;  // 4 -> 2 for id 1, so 3.5 wins
  const int32_t history[] = {1};
  EXPECT_EQ(sample_token(logits, p, 0, history), 2);
  const uint32_t mask[] = {0b1001u};  // only ids 0 and 3
  EXPECT_EQ(sample_token(logits, p, 0, history, mask), 3);
  const uint32_t none[] = {0u};
  EXPECT_EQ(sample_token(logits, p, 0, history, none), -1);
}

// ---------------------------------------------------------------------------------------------

TEST(SamplingAdjust, LogitBiasAdds) {
  std::vector<float> l{1.0f, 2.0f, 3.0f};
  SamplingParams p;
  p.logit_bias = {{0, 0.5f}, {2, -kInf}, {0, 0.25f}};
  apply_logit_adjustments(l, p, {}, {});
  EXPECT_EQ(l, (std::vector<float>{1.75f, 2.0f, -kInf}));
}

TEST(SamplingAdjust, RepetitionPenaltyHfRuleOverTheWindow) {
  std::vector<float> l{2.0f, -2.0f, 3.0f, 0.0f, 5.0f};
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  p.penalty_last_n = 4;
  const int32_t history[] = {4, 0, 1, 1, 3};  // window = last 4: ids 0, 1, 3 (id 4 falls out)
  apply_logit_adjustments(l, p, history, {});
  EXPECT_EQ(l, (std::vector<float>{1.0f, -4.0f, 3.0f, 0.0f, 5.0f}));

  std::vector<float> all{2.0f, -2.0f, 3.0f, 0.0f, 5.0f};
  p.penalty_last_n = -1;
  apply_logit_adjustments(all, p, history, {});
  EXPECT_EQ(all, (std::vector<float>{1.0f, -4.0f, 3.0f, 0.0f, 2.5f}));

  std::vector<float> none{2.0f, -2.0f, 3.0f, 0.0f, 5.0f};
  p.penalty_last_n = 0;
  apply_logit_adjustments(none, p, history, {});
  EXPECT_EQ(none, (std::vector<float>{2.0f, -2.0f, 3.0f, 0.0f, 5.0f}));
}

TEST(SamplingAdjust, PresenceAndFrequencyOpenAiRule) {
  std::vector<float> l{1.0f, 1.0f, 1.0f};
  SamplingParams p;
  p.presence_penalty = 0.25f;
  p.frequency_penalty = 0.5f;
  const int32_t history[] = {2, 0, 2, 2};
  apply_logit_adjustments(l, p, history, {});
  // id 0: 1 - (1 * 0.5 + 0.25); id 2: 1 - (3 * 0.5 + 0.25); id 1 untouched. All exact in float.
  EXPECT_EQ(l, (std::vector<float>{0.25f, 1.0f, -0.75f}));

  std::vector<float> neg{1.0f, 1.0f, 1.0f};
  p.presence_penalty = -1.0f;  // negative values encourage repeats
  p.frequency_penalty = 0.0f;
  apply_logit_adjustments(neg, p, history, {});
  EXPECT_EQ(neg, (std::vector<float>{2.0f, 1.0f, 2.0f}));
}

TEST(SamplingAdjust, OrderIsBiasThenRepetitionThenPresence) {
  std::vector<float> l{3.0f};
  SamplingParams p;
  p.logit_bias = {{0, 1.0f}};
  p.repetition_penalty = 2.0f;
  p.presence_penalty = 1.0f;
  const int32_t history[] = {0};
  apply_logit_adjustments(l, p, history, {});
  EXPECT_EQ(l[0], 1.0f);  // (3 + 1) / 2 - 1
}

TEST(SamplingAdjust, MaskBansIds) {
  std::vector<float> l(40, 1.0f);
  std::vector<uint32_t> mask{0xffffffffu, 0u};
  mask[0] &= ~(1u << 5);
  mask[1] |= 1u << 3;  // id 35
  apply_logit_adjustments(l, SamplingParams{}, {}, mask);
  for (size_t i = 0; i < l.size(); ++i) {
    const bool allowed = (i < 32 && i != 5) || i == 35;
    EXPECT_EQ(l[i], allowed ? 1.0f : -kInf) << "id " << i;
  }
  // Sampling only ever draws allowed ids.
  std::vector<float> flat(40, 0.0f);
  SamplingParams p = sampled(1.0f);
  std::set<int32_t> seen;
  for (uint64_t i = 0; i < 2000; ++i) seen.insert(sample_token(flat, p, i, {}, mask));
  EXPECT_EQ(seen.size(), 32u);
  EXPECT_EQ(seen.count(5), 0u);
  EXPECT_EQ(seen.count(35), 1u);
  EXPECT_EQ(*seen.rbegin(), 35);
}

TEST(SamplingAdjust, OutOfRangeIdsAreErrors) {
  std::vector<float> l(10, 0.0f);
  SamplingParams p;
  p.repetition_penalty = 1.5f;
  const int32_t bad_history[] = {3, 10};
  expect_error([&] { apply_logit_adjustments(l, p, bad_history, {}); }, "history token id", "10");
  const int32_t negative[] = {-1};
  expect_error([&] { apply_logit_adjustments(l, p, negative, {}); }, "history token id", "-1");
  SamplingParams b;
  b.logit_bias = {{12, 1.0f}};
  expect_error([&] { apply_logit_adjustments(l, b, {}, {}); }, "logit_bias token id", "12");
  expect_error([&] { sample_token(l, b, 0, {}); }, "logit_bias token id", "12");
}

// ---------------------------------------------------------------------------------------------

TEST(SamplingFilters, TopKKeepsLowerIdsOnTies) {
  const std::vector<float> l{1, 3, 3, 2, 3, 0};
  SamplingParams p = sampled(1.0f);
  p.top_k = 2;
  EXPECT_EQ(survivors(l, p), (std::vector<int32_t>{1, 2}));
  p.top_k = 4;
  EXPECT_EQ(survivors(l, p), (std::vector<int32_t>{1, 2, 3, 4}));
  p.top_k = 1;
  EXPECT_EQ(survivors(l, p), (std::vector<int32_t>{1}));
  p.top_k = 100;
  EXPECT_EQ(survivors(l, p).size(), 6u);
}

TEST(SamplingFilters, MinPRelativeToTheBestOnScaledLogits) {
  const std::vector<float> l{0.0f, -0.5f, -0.7f, -1.0f, 0.0f, -0.69f};
  SamplingParams p = sampled(1.0f);
  p.min_p = 0.5f;  // keep s >= s_max + log 0.5 = -0.6931
  EXPECT_EQ(survivors(l, p), (std::vector<int32_t>{0, 1, 4, 5}));
  p.temperature = 2.0f;  // s = l / 2: -0.7 / 2 and -1 / 2 now pass, the cut is l >= -1.386
  EXPECT_EQ(survivors(l, p), (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
  p.temperature = 1.0f;
  p.min_p = 1.0f;  // only the maxima
  EXPECT_EQ(survivors(l, p), (std::vector<int32_t>{0, 4}));
  p.min_p = 0.5f;
  p.top_k = 2;  // top-k first: ids 0, 4
  EXPECT_EQ(survivors(l, p), (std::vector<int32_t>{0, 4}));
}

TEST(SamplingFilters, TopPShortestPrefixWithIdOrderOnTies) {
  // Probabilities 0.1, 0.4, 0.2, 0.2, 0.1: order 1, 2, 3, 0, 4; running mass .4 .6 .8 .9 1.
  std::vector<float> l;
  for (double q : {0.1, 0.4, 0.2, 0.2, 0.1}) l.push_back(static_cast<float>(std::log(q)));
  SamplingParams p = sampled(1.0f);
  const std::vector<std::pair<float, std::vector<int32_t>>> cases{
      {0.3f, {1}}, {0.5f, {1, 2}}, {0.7f, {1, 2, 3}}, {0.85f, {0, 1, 2, 3}}, {0.95f, {0, 1, 2, 3, 4}},
      {1e-30f, {1}}};
  for (const auto& [top_p, expect] : cases) {
    p.top_p = top_p;
    EXPECT_EQ(survivors(l, p), expect) << "top_p " << top_p;
  }
  // Mass that underflows the 2^-40 grid never extends the prefix.
  p.top_p = 0.999999f;
  EXPECT_EQ(survivors(std::vector<float>{0.0f, -100.0f}, p), (std::vector<int32_t>{0}));
  // top-p measures mass over the min-p survivors only: with ids 0 and 4 removed the mass of
  // id 1 is 0.5 of the rest: top_p 0.45 keeps it alone, 0.55 adds id 2.
  p.min_p = 0.3f;
  p.top_p = 0.45f;
  EXPECT_EQ(survivors(l, p), (std::vector<int32_t>{1}));
  p.top_p = 0.55f;
  EXPECT_EQ(survivors(l, p), (std::vector<int32_t>{1, 2}));
}

TEST(SamplingFilters, InfNaNAndBannedIds) {
  const float nan = std::nanf("");
  SamplingParams p = sampled(1.0f);
  auto c = sampling_candidates(std::vector<float>{1.0f, kInf, 2.0f, kInf, nan}, p);
  ASSERT_EQ(ids_of(c), (std::vector<int32_t>{1, 3}));
  EXPECT_EQ(c[0].s, 0.0f);
  EXPECT_EQ(c[1].s, 0.0f);
  EXPECT_EQ(survivors(std::vector<float>{nan, -kInf, -3.0f}, p), (std::vector<int32_t>{2}));
  EXPECT_TRUE(survivors(std::vector<float>{nan, -kInf}, p).empty());
  EXPECT_EQ(sample_token(std::vector<float>{nan, -kInf}, p, 0, {}), -1);
  // Tiny temperature overflows s to +inf: the top logits share the draw.
  p.temperature = 1e-38f;
  EXPECT_EQ(survivors(std::vector<float>{5.0f, 2.0f, 5.0f}, p), (std::vector<int32_t>{0, 2}));  // 2e38 is finite
}

// Reference for the filters written the obvious way: full sort, then the definitions literally.
std::vector<int32_t> reference_filters(const std::vector<float>& l, const SamplingParams& p) {
  std::vector<std::pair<float, int32_t>> c;
  for (size_t i = 0; i < l.size(); ++i) c.emplace_back(det::div_rn(l[i], p.temperature), static_cast<int32_t>(i));
  std::sort(c.begin(), c.end(), [](auto a, auto b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < c.size()) c.resize(static_cast<size_t>(p.top_k));
  const float s_max = c[0].first;
  if (p.min_p > 0.0f) {
    const float cut = det::add_rn(s_max, det::log(p.min_p));
    while (c.back().first < cut) c.pop_back();
  }
  if (p.top_p < 1.0f) {
    std::vector<uint64_t> q;
    unsigned __int128 total = 0;
    for (auto& x : c) total += q.emplace_back(static_cast<uint64_t>(std::ldexp(det::exp(det::sub_rn(x.first, s_max)), 40)));
    const unsigned __int128 need = static_cast<uint64_t>(std::ldexp(p.top_p, 24)) * total;  // compare sum * 2^24 >= need
    unsigned __int128 run = 0;
    size_t keep = 0;
    while (keep < c.size() && (keep == 0 || (run << 24) < need)) run += q[keep++];
    c.resize(keep);
  }
  std::vector<int32_t> ids;
  for (auto& x : c) ids.push_back(x.second);
  std::sort(ids.begin(), ids.end());
  return ids;
}

TEST(SamplingFilters, MatchReferenceOnLargeRowsWithTies) {
  std::mt19937 rng(5);
  std::vector<float> l(5000);
  for (int trial = 0; trial < 12; ++trial) {
    // Quantised logits so many values tie; a spread wide enough that the lazy top-p sort
    // needs several chunks.
    for (float& x : l) x = static_cast<float>(static_cast<int>(rng() % 400)) * 0.05f - 10.0f;
    SamplingParams p = sampled(trial % 2 ? 0.7f : 1.3f);
    p.top_k = trial % 3 == 0 ? 0 : static_cast<int32_t>(100 + 700 * (trial % 4));
    p.min_p = trial % 4 == 1 ? 0.0f : 1e-4f * static_cast<float>(trial);
    p.top_p = trial % 5 == 0 ? 1.0f : 0.5f + 0.04f * static_cast<float>(trial);
    EXPECT_EQ(survivors(l, p), reference_filters(l, p)) << "trial " << trial;
  }
}

// ---------------------------------------------------------------------------------------------

TEST(SamplingDraw, ReproducibleAndIndexedBySeedAndTokenIndex) {
  std::vector<float> l(1000, 0.0f);  // uniform: every id equally likely
  SamplingParams p = sampled(1.0f);
  p.seed = 99;
  std::vector<int32_t> a, b, c;
  for (uint64_t i = 0; i < 200; ++i) {
    a.push_back(sample_token(l, p, i, {}));
    b.push_back(sample_token(l, p, i, {}));
  }
  EXPECT_EQ(a, b);
  EXPECT_GT(std::set<int32_t>(a.begin(), a.end()).size(), 150u);  // different index, different draw
  p.seed = 100;
  for (uint64_t i = 0; i < 200; ++i) c.push_back(sample_token(l, p, i, {}));
  int same = 0;
  for (size_t i = 0; i < a.size(); ++i) same += a[i] == c[i];
  EXPECT_LT(same, 10);  // chance agreement is 1/1000 per draw
  // Large token indexes use the high counter word too.
  p.seed = 99;
  EXPECT_NE(sample_token(l, p, 1ull << 32, {}), sample_token(l, p, 1ull << 33, {}));
}

TEST(SamplingDraw, SkippingHopelessIdsNeverChangesTheResult) {
  // gumbel_max skips ids that cannot reach the maximum; compare with the brute-force argmax.
  std::mt19937 rng(17);
  std::vector<SamplingCandidate> c(300);
  int skipped_some = 0;
  for (uint64_t t = 0; t < 3000; ++t) {
    const float spread = 5.0f + static_cast<float>(t % 60);
    for (size_t i = 0; i < c.size(); ++i)
      c[i] = {static_cast<int32_t>(i * 3), -spread * static_cast<float>(rng() % 1000) / 1000.0f};
    int32_t best = -1;
    float best_v = 0.0f;
    for (const auto& x : c) {
      const float v = det::add_rn(x.s, gumbel_noise(7, t, static_cast<uint32_t>(x.id)));
      if (best < 0 || v > best_v) best = x.id, best_v = v;
    }
    EXPECT_EQ(gumbel_max(c, 7, t), best) << "token " << t;
    skipped_some += spread > 30.0f;
  }
  EXPECT_GT(skipped_some, 0);
  EXPECT_EQ(gumbel_max({}, 7, 0), -1);
}

// ---------------------------------------------------------------------------------------------
// Distribution: Gumbel-max draws must follow softmax(l / T). 100k draws per case, fixed seeds.

std::vector<float> random_logits(size_t n, uint32_t seed, float spread) {
  std::mt19937 rng(seed);
  std::vector<float> l(n);
  for (float& x : l) x = spread * static_cast<float>(rng() % 100000) / 100000.0f;
  return l;
}

TEST(SamplingDistribution, SixteenTokensMatchSoftmax) {
  const std::vector<float> l = random_logits(16, 1, 5.0f);
  for (float t : {1.0f, 0.7f}) {
    const std::vector<int64_t> counts = draw_counts(l, t, 1234, 100000);
    const double pv = chi_square_p(counts, softmax(l, t));
    EXPECT_GT(pv, 1e-4) << "T = " << t;
    // The same draws against the other temperature's softmax must be rejected (test power).
    EXPECT_LT(chi_square_p(counts, softmax(l, t == 1.0f ? 0.7 : 1.0)), 1e-4) << "T = " << t;
  }
}

TEST(SamplingDistribution, ThousandTokensMatchSoftmax) {
  const std::vector<float> l = random_logits(1000, 2, 4.0f);
  for (float t : {1.0f, 0.7f}) {
    const std::vector<int64_t> counts = draw_counts(l, t, 777, 100000);
    EXPECT_GT(chi_square_p(counts, softmax(l, t)), 1e-4) << "T = " << t;
    EXPECT_LT(chi_square_p(counts, softmax(l, t == 1.0f ? 0.7 : 1.0)), 1e-4) << "T = " << t;
  }
}

TEST(SamplingDistribution, ChiSquareHelperIsCalibrated) {
  // df = 2: the survival function is exp(-x / 2). df = 10 at x = 23.209: p = 0.01 (table value).
  EXPECT_NEAR(gamma_q(1.0, 3.0), std::exp(-3.0), 1e-12);
  EXPECT_NEAR(gamma_q(5.0, 23.209 / 2), 0.01, 1e-4);
  EXPECT_NEAR(gamma_q(5.0, 2.0), 0.947347, 1e-5);
}

// ---------------------------------------------------------------------------------------------

TEST(SamplingValidate, DefaultsAreValid) {
  EXPECT_NO_THROW(SamplingParams{}.validate());
  EXPECT_NO_THROW(SamplingParams{}.validate(10));
}

TEST(SamplingValidate, ErrorsNameTheFieldAndValue) {
  auto with = [](auto&& set) {
    SamplingParams p;
    set(p);
    return p;
  };
  const float nan = std::nanf("");
  struct Case {
    SamplingParams p;
    std::string field, value;
  };
  const std::vector<Case> cases{
      {with([](auto& p) { p.temperature = -1.0f; }), "temperature", "-1"},
      {with([](auto& p) { p.temperature = 101.0f; }), "temperature", "101"},
      {with([&](auto& p) { p.temperature = nan; }), "temperature", "nan"},
      {with([](auto& p) { p.temperature = kInf; }), "temperature", "inf"},
      {with([](auto& p) { p.top_k = -1; }), "top_k", "-1"},
      {with([](auto& p) { p.top_p = 0.0f; }), "top_p", "0"},
      {with([](auto& p) { p.top_p = 1.5f; }), "top_p", "1.5"},
      {with([](auto& p) { p.min_p = -0.1f; }), "min_p", "-0.1"},
      {with([](auto& p) { p.min_p = 2.0f; }), "min_p", "2"},
      {with([](auto& p) { p.repetition_penalty = 0.0f; }), "repetition_penalty", "0"},
      {with([](auto& p) { p.repetition_penalty = kInf; }), "repetition_penalty", "inf"},
      {with([](auto& p) { p.presence_penalty = 2.5f; }), "presence_penalty", "2.5"},
      {with([](auto& p) { p.frequency_penalty = -3.0f; }), "frequency_penalty", "-3"},
      {with([&](auto& p) { p.frequency_penalty = nan; }), "frequency_penalty", "nan"},
      {with([](auto& p) { p.penalty_last_n = -2; }), "penalty_last_n", "-2"},
      {with([](auto& p) { p.logit_bias = {{-4, 1.0f}}; }), "logit_bias", "-4"},
      {with([&](auto& p) { p.logit_bias = {{3, nan}}; }), "logit_bias", "nan"},
      {with([](auto& p) { p.logit_bias = {{3, kInf}}; }), "logit_bias", "inf"},
  };
  for (const auto& c : cases) expect_error([&] { c.p.validate(); }, c.field, c.value);
  // Boundary values are accepted.
  EXPECT_NO_THROW(with([](auto& p) {
                    p.temperature = 100.0f, p.top_p = 1e-30f, p.min_p = 1.0f, p.presence_penalty = -2.0f;
                    p.frequency_penalty = 2.0f, p.penalty_last_n = -1, p.logit_bias = {{0, -kInf}};
                  }).validate());
  // The vocabulary bound needs n_vocab.
  const SamplingParams b = with([](auto& p) { p.logit_bias = {{10, 1.0f}}; });
  EXPECT_NO_THROW(b.validate());
  EXPECT_NO_THROW(b.validate(11));
  expect_error([&] { b.validate(10); }, "logit_bias", "10");
  // sample_token validates too.
  expect_error([] { sample_token(std::vector<float>{0.0f}, sampled(-1.0f), 0, {}); },
               "temperature", "-1");
}

}  // namespace
}  // namespace memra
