// The CUDA sampler (CudaBackend::sample) against the host sampler (sample_token): the same token
// on every row, for rows with ties, -inf, NaN, +inf and huge values, every filter, penalties, bias
// and masks; logits left untouched; a row's token independent of its batch.
//
// GpuSamplingModel runs without a GPU: a sequential host model of the kernels, built from the
// same per-row functions (sample_row.h) and host tables (sample_host.h), must agree with
// sample_token. It checks the method (radix selection, tie groups, top-p targets, the Gumbel
// seeding); the GPU suites check the kernels.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/sample_host.h"
#include "common/error.h"
#include "gpu_test_util.h"
#include "step/det_math.h"
#include "step/philox.h"
#include "step/sampling.h"

namespace memra {
namespace {

constexpr float kInf = det::kInf;

// ---- cases ----

enum class RowKind { Normal, Ties, InfNaN, PlusInf, Huge, Flat, Empty, Narrow, kCount };

const char* kind_name(RowKind k) {
  static const char* names[] = {"normal", "ties", "inf-nan", "plus-inf", "huge", "flat", "empty", "narrow"};
  return names[static_cast<int>(k)];
}

std::vector<float> make_row(RowKind kind, int64_t n, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 2.5f);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  std::uniform_int_distribution<int64_t> any_id(0, n - 1);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = normal(rng);
  for (int s = 0; s < 3; ++s) v[static_cast<size_t>(any_id(rng))] = 12.0f + 4.0f * unit(rng);  // a few peaks
  switch (kind) {
    case RowKind::Normal:
      break;
    case RowKind::Ties:  // few distinct values: tie groups everywhere, including at the top
      for (auto& x : v) x = std::round(x * 2.0f) * 0.5f;
      v[static_cast<size_t>(any_id(rng))] = 9.0f;
      v[static_cast<size_t>(any_id(rng))] = 9.0f;
      break;
    case RowKind::InfNaN:
      for (auto& x : v) {
        const float u = unit(rng);
        if (u < 0.3f) x = -kInf;
        else if (u < 0.35f) x = NAN;
      }
      break;
    case RowKind::PlusInf:  // only the +inf ids are candidates (equally likely)
      for (int s = 0; s < 5; ++s) v[static_cast<size_t>(any_id(rng))] = kInf;
      v[static_cast<size_t>(any_id(rng))] = NAN;
      break;
    case RowKind::Huge:  // s = l / T overflows to +-inf for T < 1
      for (auto& x : v) x *= 1e37f;
      v[static_cast<size_t>(any_id(rng))] = 3.3e38f;
      break;
    case RowKind::Flat:
      for (auto& x : v) x = 0.25f;
      v[static_cast<size_t>(any_id(rng))] = -0.0f;
      break;
    case RowKind::Empty:
      for (auto& x : v) x = unit(rng) < 0.5f ? -kInf : NAN;
      break;
    case RowKind::Narrow:  // nearly uniform: top-p cuts deep into the row
      for (auto& x : v) x = unit(rng) * 0.5f - 0.25f;
      break;
    case RowKind::kCount:
      break;
  }
  return v;
}

struct Case {
  RowKind kind = RowKind::Normal;
  std::vector<float> logits;
  SamplingParams p;
  std::vector<int32_t> history;
  std::vector<uint32_t> mask;
  uint64_t token_index = 0;

  RowSampling row() const {
    RowSampling rs;
    rs.params = &p;
    rs.token_index = token_index;
    rs.history = history.data();
    rs.history_len = static_cast<int64_t>(history.size());
    rs.allowed = mask.empty() ? nullptr : mask.data();
    rs.allowed_words = static_cast<int64_t>(mask.size());
    return rs;
  }
  int32_t host_token() const {
    return sample_token(logits, p, token_index, history, std::span<const uint32_t>(mask));
  }
  std::string describe() const {
    std::string s = std::string(kind_name(kind)) + " T=" + std::to_string(p.temperature) +
                    " top_k=" + std::to_string(p.top_k) + " top_p=" + std::to_string(p.top_p) +
                    " min_p=" + std::to_string(p.min_p) + " rep=" + std::to_string(p.repetition_penalty) +
                    " bias=" + std::to_string(p.logit_bias.size()) + " hist=" + std::to_string(history.size()) +
                    " mask=" + std::to_string(mask.size()) + " seed=" + std::to_string(p.seed) +
                    " ti=" + std::to_string(token_index);
    return s;
  }
};

const float kTemps[] = {0.0f, 0.3f, 0.7f, 1.0f, 1.5f};
const int32_t kTopK[] = {0, 1, 40, 1000};
const float kTopP[] = {1.0f, 0.5f, 0.9f, 0.99f};
const float kMinP[] = {0.0f, 0.05f};
const uint64_t kSeeds[] = {0, uint64_t{1} << 63, 0x9e3779b97f4a7c15ull, 42};

std::vector<uint32_t> make_mask(int64_t n, int mode, std::mt19937_64& rng) {
  std::vector<uint32_t> m(static_cast<size_t>((n + 31) / 32), 0);
  auto allow = [&m](int64_t i) { m[static_cast<size_t>(i / 32)] |= 1u << (i % 32); };
  if (mode == 1) {  // about half the ids
    std::bernoulli_distribution half(0.5);
    for (int64_t i = 0; i < n; ++i)
      if (half(rng)) allow(i);
  } else {  // all but three banned
    std::uniform_int_distribution<int64_t> id(0, n - 1);
    for (int k = 0; k < 3; ++k) allow(id(rng));
  }
  return m;
}

// Fills the adjustments of a case at random (penalties, bias, mask) with probability `rate`.
void add_adjustments(Case& c, int64_t n, double rate, std::mt19937_64& rng) {
  std::bernoulli_distribution on(rate);
  std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(n - 1));
  if (on(rng)) {
    c.p.repetition_penalty = 1.3f;
    c.p.presence_penalty = 0.5f;
    c.p.frequency_penalty = 0.3f;
    const int32_t last_n[] = {64, -1, 0, 5};
    c.p.penalty_last_n = last_n[rng() % 4];
    const int len = static_cast<int>(rng() % 200);
    // Repeats, and ids near the top of the row, so penalties land on candidates.
    std::vector<int32_t> pool;
    for (int k = 0; k < 12; ++k) pool.push_back(id(rng));
    for (int k = 0; k < len; ++k) c.history.push_back(k % 3 == 0 ? id(rng) : pool[rng() % pool.size()]);
  }
  if (on(rng)) {
    const int32_t a = id(rng), b = id(rng);
    c.p.logit_bias = {{a, 2.5f}, {b, -kInf}, {a, -0.75f}, {id(rng), 30.0f}};
  }
  if (on(rng)) c.mask = make_mask(n, 1 + static_cast<int>(rng() % 2), rng);
}

Case random_case(int64_t n, std::mt19937_64& rng, double adjust_rate = 0.35) {
  Case c;
  c.kind = static_cast<RowKind>(rng() % static_cast<uint64_t>(RowKind::kCount));
  c.logits = make_row(c.kind, n, rng);
  c.p.temperature = kTemps[rng() % 5];
  c.p.top_k = kTopK[rng() % 4];
  c.p.top_p = kTopP[rng() % 4];
  c.p.min_p = kMinP[rng() % 2];
  c.p.seed = rng() % 3 == 0 ? kSeeds[rng() % 4] : rng();
  c.token_index = rng() % 1001;
  add_adjustments(c, n, adjust_rate, rng);
  return c;
}

// ---- host model of the kernels (sequential; the device's segments change nothing) ----

int32_t model_sample(const Case& c) {
  const int64_t n = static_cast<int64_t>(c.logits.size());
  const SamplingParams& p = c.p;
  cuda::SampleRowDesc d;
  const cuda::RowPhases ph = cuda::describe_row(p, c.token_index, n, d);

  // Adjusted row from the patch list, as the kernels see it (raw value, patched ids, mask).
  std::vector<cuda::SamplePatchOp> ops;
  std::vector<int32_t> ids, seg_offsets;
  std::vector<float> bias;
  cuda::append_row_patches(p, c.history, n, 0, ops, ids, bias);
  const int seg = 1024;
  cuda::append_patch_segments(ids, n, seg, seg_offsets);
  for (size_t g = 0; g + 1 < seg_offsets.size(); ++g)
    for (int32_t k = seg_offsets[g]; k < seg_offsets[g + 1]; ++k)
      EXPECT_TRUE(ids[k] >= static_cast<int64_t>(g) * seg && ids[k] < static_cast<int64_t>(g + 1) * seg);
  std::vector<float> l = c.logits;
  for (const auto& op : ops) l[op.id] = cuda::adjusted_patch_value(c.logits[op.id], d, op, bias.data());
  if (!c.mask.empty())
    for (int64_t i = 0; i < n; ++i)
      if (((c.mask[i / 32] >> (i % 32)) & 1u) == 0) l[i] = -kInf;

  float l_max = 0.0f;
  int32_t arg = -1;
  for (int64_t i = 0; i < n; ++i)
    if (l[i] > -kInf && (arg < 0 || l[i] > l_max)) {
      l_max = l[i];
      arg = static_cast<int32_t>(i);
    }
  cuda::SampleRowState st;
  cuda::start_row(st, d, l_max, arg);
  if (st.done) return st.token;

  auto select = [&](int mode) {
    for (int pass = 0; pass < cuda::kSelectPasses; ++pass) {
      if (pass > 0 && !st.selecting) return;
      const int shift = cuda::select_shift(pass), n_bins = 1 << cuda::select_width(pass);
      const uint32_t prefix = pass == 0 ? 0u : st.prefix, mask = pass == 0 ? 0u : st.prefix_mask;
      std::vector<unsigned long long> bins(static_cast<size_t>(n_bins), 0);
      for (int64_t i = 0; i < n; ++i) {
        float s;
        if (!cuda::row_keeps(st, d.temperature, l[i], static_cast<int32_t>(i), s)) continue;
        const uint32_t k = cuda::sample_key(s);
        if ((k & mask) != prefix) continue;
        bins[(k >> shift) & (n_bins - 1)] += mode == cuda::kSelectCount ? 1 : cuda::top_p_weight(s, st.s_max);
      }
      if (pass == 0) {
        unsigned long long total = 0;
        for (auto b : bins) total += b;
        if (!cuda::select_begin(st, d, mode, total)) return;
      }
      unsigned long long above = 0;
      const int digit = cuda::select_find_digit(bins.data(), 0, n_bins, st.above, st.target, &above);
      ASSERT_GE(digit, 0);
      cuda::select_take_digit(st, pass, digit, above);
      if (pass < cuda::kSelectPasses - 1) continue;
      uint64_t j = cuda::select_finish(st, mode, bins[digit]);
      if (j == 0) return;
      for (int64_t i = 0; i < n; ++i) {
        float s;
        if (cuda::row_keeps(st, d.temperature, l[i], static_cast<int32_t>(i), s) && cuda::sample_key(s) == st.prefix &&
            --j == 0) {
          st.cut_key = st.prefix;
          st.cut_id = static_cast<int32_t>(i);
          return;
        }
      }
      ADD_FAILURE() << "tie group shorter than its cut";
    }
  };
  if (ph.top_k) select(cuda::kSelectCount);
  if (ph.top_p) select(cuda::kSelectTopP);

  // Gumbel pass as one device thread runs it: seeded by the argmax id, with the same skips.
  int32_t best = -1;
  float best_v = 0.0f;
  float s;
  if (cuda::row_keeps(st, d.temperature, st.l_max, st.arg, s)) {
    best = st.arg;
    best_v = det::add_rn(s, gumbel_noise(d.seed, d.token_index, static_cast<uint32_t>(st.arg)));
  }
  for (int64_t i = 0; i < n; ++i) {
    if (!cuda::row_keeps(st, d.temperature, l[i], static_cast<int32_t>(i), s)) continue;
    if (best >= 0 && det::add_rn(s, kGumbelMax) < best_v) continue;
    const uint32_t x = sampling_bits(d.seed, d.token_index, static_cast<uint32_t>(i));
    if (best >= 0 && det::add_rn(s, cuda::gumbel_bucket_bound(x >> 24)) < best_v) continue;
    const float v = det::add_rn(s, gumbel_from_bits(x));
    if (best < 0 || v > best_v || (v == best_v && i < best)) {
      best = static_cast<int32_t>(i);
      best_v = v;
    }
  }
  return best;
}

TEST(GpuSamplingModel, KeyOrderMatchesFloatOrder) {
  const float xs[] = {-kInf, -3.4e38f, -1.0f, -1e-45f, -0.0f, 0.0f, 1e-45f, 1.0f, 3.4e38f, kInf};
  for (float a : xs)
    for (float b : xs) {
      EXPECT_EQ(cuda::sample_key(a) < cuda::sample_key(b), a < b) << a << " " << b;
      EXPECT_EQ(cuda::sample_key(a) == cuda::sample_key(b), a == b) << a << " " << b;
    }
  for (float a : xs) EXPECT_EQ(cuda::sample_key_value(cuda::sample_key(a)), a == 0.0f ? 0.0f : a);
}

TEST(GpuSamplingModel, TopPTargetIsExactCeiling) {
  std::mt19937_64 rng(3);
  for (int k = 0; k < 10000; ++k) {
    const uint64_t p24 = rng() % ((1u << 24) + 1), total = rng() >> (1 + rng() % 40);
    const unsigned __int128 exact = (static_cast<unsigned __int128>(p24) * total + 0xffffff) >> 24;
    EXPECT_EQ(cuda::top_p_target(p24, total), exact == 0 ? 1 : static_cast<uint64_t>(exact));
  }
}

TEST(GpuSamplingModel, GumbelBucketBoundCoversTheBucket) {
  // sampling.cpp found, over all 2^32 inputs, that the noise of each 10-bit bucket peaks at its
  // last input; an 8-bit bucket is four of those, so its bound must cover their four peaks.
  std::mt19937_64 rng(6);
  for (uint32_t b = 0; b < 256; ++b) {
    const float bound = cuda::gumbel_bucket_bound(b);
    for (uint32_t sub = 0; sub < 4; ++sub) EXPECT_LE(gumbel_from_bits(((4 * b + sub + 1) << 22) - 1), bound) << b;
    for (int k = 0; k < 200; ++k) EXPECT_LE(gumbel_from_bits((b << 24) | static_cast<uint32_t>(rng() & 0xffffff)), bound);
  }
}

TEST(GpuSamplingModel, PatchListReproducesHostAdjustments) {
  std::mt19937_64 rng(12);
  for (int k = 0; k < 300; ++k) {
    const int64_t n = 1000 + static_cast<int64_t>(rng() % 3000);
    Case c = random_case(n, rng, 0.8);
    c.mask.clear();
    std::vector<float> want = c.logits;
    apply_logit_adjustments(want, c.p, c.history, {});
    cuda::SampleRowDesc d;
    cuda::describe_row(c.p, c.token_index, n, d);
    std::vector<cuda::SamplePatchOp> ops;
    std::vector<int32_t> ids;
    std::vector<float> bias;
    cuda::append_row_patches(c.p, c.history, n, 3, ops, ids, bias);
    EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end()) && std::adjacent_find(ids.begin(), ids.end()) == ids.end());
    std::vector<float> got = c.logits;
    for (const auto& op : ops) {
      EXPECT_EQ(op.row, 3);
      got[op.id] = cuda::adjusted_patch_value(c.logits[op.id], d, op, bias.data());
    }
    EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0) << c.describe();
  }
}

TEST(GpuSamplingModel, MatchesSampleTokenOnRandomRows) {
  std::mt19937_64 rng(2024);
  int checked = 0, sampled = 0;
  for (int64_t n : {1024, 4099, 20000}) {
    const int cases = n == 20000 ? 150 : 1500;
    for (int k = 0; k < cases; ++k) {
      const Case c = random_case(n, rng);
      const int32_t want = c.host_token();
      EXPECT_EQ(model_sample(c), want) << "n=" << n << " " << c.describe();
      ++checked;
      sampled += c.p.temperature > 0.0f && want >= 0;
    }
  }
  EXPECT_GT(sampled, checked / 2);
}

TEST(GpuSamplingModel, EveryFilterCombinationOnEveryRowKind) {
  std::mt19937_64 rng(77);
  const int64_t n = 2053;
  for (int kind = 0; kind < static_cast<int>(RowKind::kCount); ++kind) {
    Case base;
    base.kind = static_cast<RowKind>(kind);
    base.logits = make_row(base.kind, n, rng);
    for (float t : kTemps)
      for (int32_t top_k : kTopK)
        for (float top_p : kTopP)
          for (float min_p : kMinP) {
            Case c = base;
            c.p.temperature = t;
            c.p.top_k = top_k;
            c.p.top_p = top_p;
            c.p.min_p = min_p;
            c.p.seed = rng();
            c.token_index = rng() % 1001;
            EXPECT_EQ(model_sample(c), c.host_token()) << c.describe();
          }
  }
}

TEST(GpuSamplingModel, TopPInsidePlusInfTieGroup) {
  // Five +inf ids, equally weighted: top-p 0.5 keeps the three lowest ids (ceil(2.5)).
  std::vector<float> row(300, 1.0f);
  for (int id : {250, 7, 99, 31, 180}) row[id] = kInf;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    Case c;
    c.kind = RowKind::PlusInf;
    c.logits = row;
    c.p.temperature = 0.8f;
    c.p.top_p = 0.5f;
    c.p.seed = seed;
    const int32_t t = model_sample(c);
    EXPECT_EQ(t, c.host_token());
    EXPECT_TRUE(t == 7 || t == 31 || t == 99) << t;
  }
}

// ---- the GPU against the host sampler ----

// Samples the cases as one batch on the GPU; checks the logits buffer is left as it was.
std::vector<int32_t> gpu_tokens(Backend& gpu, const std::vector<Case>& cases) {
  const size_t n = cases[0].logits.size();
  std::vector<float> all;
  std::vector<RowSampling> rows;
  for (const Case& c : cases) {
    all.insert(all.end(), c.logits.begin(), c.logits.end());
    rows.push_back(c.row());
  }
  test::DevFloats dev(gpu, all);
  gpu.reset_scratch();
  std::vector<int32_t> out(cases.size(), -7);
  gpu.sample(dev.get(), static_cast<int64_t>(cases.size()), static_cast<int64_t>(n), rows.data(), out.data());
  const std::vector<float> after = dev.download();
  EXPECT_EQ(std::memcmp(after.data(), all.data(), all.size() * sizeof(float)), 0) << "sample() changed the logits";
  return out;
}

void expect_matches_host(Backend& gpu, const std::vector<Case>& cases, const std::string& what) {
  const std::vector<int32_t> got = gpu_tokens(gpu, cases);
  for (size_t r = 0; r < cases.size(); ++r)
    EXPECT_EQ(got[r], cases[r].host_token()) << what << " row " << r << ": " << cases[r].describe();
}

TEST(GpuSampling, MatchesHostSamplerOnRandomBatches) {
  MEMRA_GPU_OR_SKIP(gpu);
  std::mt19937_64 rng(11);
  const struct {
    int64_t n;
    int batch;
    int rounds;
  } shapes[] = {{1024, 1, 40}, {1024, 7, 20}, {1024, 64, 10}, {4099, 64, 4},
                {248320, 1, 6}, {248320, 7, 3}, {248320, 64, 2}};
  for (const auto& sh : shapes)
    for (int round = 0; round < sh.rounds; ++round) {
      std::vector<Case> cases;
      for (int r = 0; r < sh.batch; ++r) cases.push_back(random_case(sh.n, rng));
      expect_matches_host(*gpu, cases, "n=" + std::to_string(sh.n) + " B=" + std::to_string(sh.batch));
    }
}

TEST(GpuSampling, EveryFilterCombinationOnEveryRowKind) {
  MEMRA_GPU_OR_SKIP(gpu);
  std::mt19937_64 rng(5);
  for (int64_t n : {int64_t{4099}, int64_t{248320}}) {
    for (int kind = 0; kind < static_cast<int>(RowKind::kCount); ++kind) {
      Case base;
      base.kind = static_cast<RowKind>(kind);
      base.logits = make_row(base.kind, n, rng);
      std::vector<Case> batch;
      for (float t : kTemps)
        for (int32_t top_k : kTopK)
          for (float top_p : kTopP)
            for (float min_p : kMinP) {
              if (t == 0.0f && (top_k || top_p < 1.0f || min_p > 0.0f)) continue;  // greedy ignores them
              Case c = base;
              c.p.temperature = t;
              c.p.top_k = top_k;
              c.p.top_p = top_p;
              c.p.min_p = min_p;
              c.p.seed = kSeeds[batch.size() % 4];
              c.token_index = rng() % 1001;
              batch.push_back(std::move(c));
              if (batch.size() == 64) {
                expect_matches_host(*gpu, batch, "grid n=" + std::to_string(n));
                batch.clear();
              }
            }
      if (!batch.empty()) expect_matches_host(*gpu, batch, "grid n=" + std::to_string(n));
    }
  }
}

TEST(GpuSampling, AdjustmentsMasksAndPenalties) {
  MEMRA_GPU_OR_SKIP(gpu);
  std::mt19937_64 rng(8);
  for (int64_t n : {int64_t{1024}, int64_t{248320}}) {
    std::vector<Case> cases;
    for (int r = 0; r < 64; ++r) cases.push_back(random_case(n, rng, 1.0));  // every row adjusted
    expect_matches_host(*gpu, cases, "adjusted n=" + std::to_string(n));
  }
}

TEST(GpuSampling, RowTokenIndependentOfBatch) {
  MEMRA_GPU_OR_SKIP(gpu);
  std::mt19937_64 rng(21);
  const int64_t n = 248320;
  std::vector<Case> cases;
  for (int r = 0; r < 64; ++r) cases.push_back(random_case(n, rng));
  const std::vector<int32_t> batched = gpu_tokens(*gpu, cases);
  for (size_t r = 0; r < cases.size(); ++r) {
    const std::vector<int32_t> alone = gpu_tokens(*gpu, {cases[r]});
    EXPECT_EQ(alone[0], batched[r]) << "row " << r << ": " << cases[r].describe();
  }
}

TEST(GpuSampling, RejectsWhatTheHostRejects) {
  MEMRA_GPU_OR_SKIP(gpu);
  std::mt19937_64 rng(4);
  const int64_t n = 1024;
  test::DevFloats dev(*gpu, make_row(RowKind::Normal, n, rng));
  int32_t out = 0;
  auto run = [&](const SamplingParams& p, std::vector<int32_t> history) {
    RowSampling rs;
    rs.params = &p;
    rs.history = history.data();
    rs.history_len = static_cast<int64_t>(history.size());
    gpu->reset_scratch();
    gpu->sample(dev.get(), 1, n, &rs, &out);
  };
  SamplingParams bad_t;
  bad_t.temperature = -1.0f;
  EXPECT_THROW(run(bad_t, {}), Error);
  SamplingParams bad_bias;
  bad_bias.logit_bias = {{static_cast<int32_t>(n), 1.0f}};
  EXPECT_THROW(run(bad_bias, {}), Error);
  SamplingParams penalised;
  penalised.repetition_penalty = 1.2f;
  EXPECT_THROW(run(penalised, {3, static_cast<int32_t>(n) + 5}), Error);
  EXPECT_NO_THROW(run(penalised, {3, 4}));
  // An id outside the window is not looked at, by either sampler.
  penalised.penalty_last_n = 1;
  EXPECT_NO_THROW(run(penalised, {-5, 4}));
}

TEST(GpuSampling, ThroughputPrint) {
  MEMRA_GPU_OR_SKIP(gpu);
  std::mt19937_64 rng(9);
  const int64_t n = 248320, batch = 64;
  std::vector<float> all;
  for (int r = 0; r < batch; ++r) {
    const auto row = make_row(RowKind::Normal, n, rng);
    all.insert(all.end(), row.begin(), row.end());
  }
  test::DevFloats dev(*gpu, all);
  struct Mode {
    const char* name;
    SamplingParams p;
  };
  std::vector<Mode> modes(5);
  modes[0].name = "greedy";
  modes[1].name = "temperature 1";
  modes[1].p.temperature = 1.0f;
  modes[2].name = "top-k 40";
  modes[2].p.temperature = 0.7f;
  modes[2].p.top_k = 40;
  modes[3].name = "top-p 0.9";
  modes[3].p.temperature = 0.7f;
  modes[3].p.top_p = 0.9f;
  modes[4].name = "top-k 40 + top-p 0.9 + penalties";
  modes[4].p.temperature = 0.7f;
  modes[4].p.top_k = 40;
  modes[4].p.top_p = 0.9f;
  modes[4].p.repetition_penalty = 1.1f;
  std::vector<int32_t> history(64);
  for (auto& h : history) h = static_cast<int32_t>(rng() % n);
  for (const Mode& m : modes) {
    std::vector<RowSampling> rows(static_cast<size_t>(batch));
    for (int r = 0; r < batch; ++r) {
      rows[r].params = &m.p;
      rows[r].token_index = static_cast<uint64_t>(r);
      rows[r].history = history.data();
      rows[r].history_len = static_cast<int64_t>(history.size());
    }
    std::vector<int32_t> out(static_cast<size_t>(batch));
    std::vector<double> us;
    for (int it = 0; it < 23; ++it) {
      gpu->reset_scratch();
      const auto t0 = std::chrono::steady_clock::now();
      gpu->sample(dev.get(), batch, n, rows.data(), out.data());  // returns with the ids on the host
      const auto t1 = std::chrono::steady_clock::now();
      if (it >= 3) us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    }
    std::sort(us.begin(), us.end());
    std::printf("[ sample   ] B=%lld n=%lld %-34s median %8.1f us/call\n", static_cast<long long>(batch),
                static_cast<long long>(n), m.name, us[us.size() / 2]);
  }
}

}  // namespace
}  // namespace memra
