// Philox4x32-10, the deterministic float math (det_math.h) and the Gumbel noise built on them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>

#include "step/det_math.h"
#include "step/philox.h"

namespace memra {
namespace {

// Error of a float result in units of the last place of the (double) reference, measured with the
// float spacing at the reference's magnitude.
double ulp_error(float got, double ref) {
  if (ref == 0.0) return got == 0.0f ? 0.0 : std::numeric_limits<double>::infinity();
  int exp2 = 0;
  std::frexp(ref, &exp2);                                  // |ref| in [2^(exp2-1), 2^exp2)
  const double ulp = std::ldexp(1.0, std::max(exp2 - 24, -149));
  return std::fabs(static_cast<double>(got) - ref) / ulp;
}

// ---- Philox4x32-10: the Random123 known-answer vectors (kat_vectors, "philox4x32 10" lines).
// Any wrong multiplier, Weyl constant, word permutation or round count changes every word.
struct PhiloxKat {
  uint32_t ctr[4];
  uint32_t key[2];
  uint32_t expect[4];
};

TEST(SamplingPhilox, KnownAnswerVectors) {
  const PhiloxKat kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const auto& k : kats) {
    PhiloxBlock in{{k.ctr[0], k.ctr[1], k.ctr[2], k.ctr[3]}};
    PhiloxBlock out = philox4x32_10(in, k.key[0], k.key[1]);
    for (int w = 0; w < 4; ++w) EXPECT_EQ(out.w[w], k.expect[w]) << "word " << w << " of ctr " << std::hex << k.ctr[0];
  }
}

TEST(SamplingPhilox, SamplerCounterAndKeyLayout) {
  // sampling_bits is word 0 of the block at counter (index lo, index hi, id, 0), key (seed lo, hi).
  const uint64_t seed = 0x0123456789abcdefull, index = 0xfedcba9876543210ull;
  const uint32_t id = 77;
  PhiloxBlock ctr{{0x76543210u, 0xfedcba98u, id, 0u}};
  EXPECT_EQ(sampling_bits(seed, index, id), philox4x32_10(ctr, 0x89abcdefu, 0x01234567u).w[0]);
  // Every part of the input changes the bits.
  EXPECT_NE(sampling_bits(seed, index, id), sampling_bits(seed ^ (1ull << 40), index, id));
  EXPECT_NE(sampling_bits(seed, index, id), sampling_bits(seed, index ^ (1ull << 40), id));
  EXPECT_NE(sampling_bits(seed, index, id), sampling_bits(seed, index, id + 1));
}

// ---- det_math.h against libm (double references).

TEST(SamplingDetMath, LogMatchesLibmWithinOneUlp) {
  double max_err = 0.0;
  float worst = 0.0f;
  uint64_t points = 0;
  // Every 509th positive finite float, subnormals included (~4.2M points), plus a dense sweep
  // around 1 where the result is tiny and relative accuracy is hardest.
  auto check = [&](float x) {
    const double err = ulp_error(det::log(x), std::log(static_cast<double>(x)));
    if (err > max_err) max_err = err, worst = x;
    ++points;
  };
  for (uint32_t bits = 1; bits < 0x7f800000u; bits += 509) check(det::bits_float(bits));
  for (uint32_t bits = 0x3f700000u; bits < 0x3f880000u; bits += 7) check(det::bits_float(bits));
  std::printf("det::log: %llu points, max error %.3f ulp (at %a)\n", static_cast<unsigned long long>(points),
              max_err, static_cast<double>(worst));
  EXPECT_GT(points, 4000000u);
  EXPECT_LE(max_err, 1.0);  // measured 0.75

  EXPECT_EQ(det::log(1.0f), 0.0f);
  EXPECT_EQ(det::log(0.0f), -det::kInf);
  EXPECT_EQ(det::log(det::kInf), det::kInf);
  EXPECT_TRUE(std::isnan(det::log(-1.0f)));
  EXPECT_TRUE(std::isnan(det::log(std::nanf(""))));
}

TEST(SamplingDetMath, Log1pMatchesLibmWithinOneUlp) {
  double max_err = 0.0;
  float worst = 0.0f;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-0.5f, 1.0f);
  for (int i = 0; i < 1000000; ++i) {
    const float x = i < 500000 ? dist(rng) : std::ldexp(dist(rng), -(i % 60));  // tiny ones too
    const double err = ulp_error(det::log1p(x), std::log1p(static_cast<double>(x)));
    if (err > max_err) max_err = err, worst = x;
  }
  std::printf("det::log1p: 1M points in [-0.5, 1], max error %.3f ulp (at %a)\n", max_err, static_cast<double>(worst));
  EXPECT_LE(max_err, 1.0);  // measured 0.81
}

TEST(SamplingDetMath, ExpMatchesLibmWithinOneAndHalfUlp) {
  double max_err = 0.0;
  float worst = 0.0f;
  const int n = 3000000;
  for (int i = 0; i <= n; ++i) {
    const float x = -86.0f + 174.7f * static_cast<float>(i) / n;  // [-86, 88.7]
    const double err = ulp_error(det::exp(x), std::exp(static_cast<double>(x)));
    if (err > max_err) max_err = err, worst = x;
  }
  std::printf("det::exp: %d points in [-86, 88.7], max error %.3f ulp (at %a)\n", n + 1, max_err,
              static_cast<double>(worst));
  EXPECT_LE(max_err, 1.5);  // measured 1.19

  EXPECT_EQ(det::exp(0.0f), 1.0f);  // the top-p weight of the best candidate is exactly 2^40
  EXPECT_EQ(det::exp(-86.5f), 0.0f);
  EXPECT_EQ(det::exp(-det::kInf), 0.0f);
  EXPECT_EQ(det::exp(89.5f), det::kInf);
  EXPECT_TRUE(std::isnan(det::exp(std::nanf(""))));
  EXPECT_GT(det::exp(-86.0f), std::numeric_limits<float>::min());  // never subnormal
}

// ---- The uniform -> exponential -> Gumbel chain.

double exp1_reference(uint32_t x) {
  // u = (x + 0.5) 2^-32 and 1 - u are exact in double; log1p keeps the u -> 1 tail accurate.
  if ((x >> 31) == 0) return -std::log((2.0 * x + 1.0) * 0x1p-33);
  return -std::log1p(-(2.0 * static_cast<double>(~x) + 1.0) * 0x1p-33);
}

TEST(SamplingGumbel, ExponentialVariateAccurateInBothTails) {
  double max_err = 0.0;
  uint32_t worst = 0;
  std::mt19937 rng(11);
  auto check = [&](uint32_t x) {
    const double err = ulp_error(exp1_from_bits(x), exp1_reference(x));
    if (err > max_err) max_err = err, worst = x;
  };
  for (int i = 0; i < 1000000; ++i) check(static_cast<uint32_t>(rng()));
  for (uint32_t x = 0; x < 100000; ++x) check(x), check(~x), check(0x80000000u + x), check(0x7fffffffu - x);
  std::printf("exp1_from_bits: max error %.3f ulp (at x = %08x)\n", max_err, worst);
  EXPECT_LE(max_err, 2.0);  // measured 1.52: log error plus the rounding of w to float
}

TEST(SamplingGumbel, ExtremesStayInsideDeclaredBounds) {
  // The largest noise comes from u closest to 1 (x = ~0), the smallest from u closest to 0.
  const float g_hi = gumbel_from_bits(0xffffffffu), g_lo = gumbel_from_bits(0u);
  EXPECT_NEAR(g_hi, -std::log(-std::log1p(-0x1p-33)), 1e-5);  // 22.87
  EXPECT_NEAR(g_lo, -std::log(-std::log(0x1p-33)), 1e-5);     // -3.13
  float lo = det::kInf, hi = -det::kInf;
  std::mt19937 rng(3);
  for (int i = 0; i < 1000000; ++i) {
    const float g = gumbel_from_bits(static_cast<uint32_t>(rng()));
    lo = std::min(lo, g), hi = std::max(hi, g);
  }
  for (uint32_t x = 0; x < 65536; ++x) {
    for (float g : {gumbel_from_bits(x), gumbel_from_bits(~x), gumbel_from_bits(x ^ 0x80000000u)})
      lo = std::min(lo, g), hi = std::max(hi, g);
  }
  EXPECT_GE(lo, kGumbelMin);
  EXPECT_LE(hi, kGumbelMax);
  EXPECT_GE(lo, g_lo);
  EXPECT_LE(hi, g_hi);
}

TEST(SamplingGumbel, NoiseHasGumbelMoments) {
  // Mean = Euler-Mascheroni constant, variance = pi^2 / 6; 1M draws give standard errors of
  // ~0.0013 and ~0.004, so 0.01 / 0.03 tolerances are > 7 sigma. Dropping the outer log
  // (exponential noise) or using -log(u) alone would miss both by far.
  double sum = 0.0, sum2 = 0.0;
  const int n = 1000000;
  for (int i = 0; i < n; ++i) {
    const double g = gumbel_noise(42, static_cast<uint64_t>(i / 1000), static_cast<uint32_t>(i % 1000));
    sum += g, sum2 += g * g;
  }
  const double mean = sum / n, var = sum2 / n - mean * mean;
  EXPECT_NEAR(mean, 0.5772156649, 0.01);
  EXPECT_NEAR(var, 1.6449340668, 0.03);
}

}  // namespace
}  // namespace memra
