// Deterministic float math shared bit for bit by the host and the CUDA device.
//
// The sampler must pick the same token on the CPU and on the GPU from the same logits. libm is
// of no use for that: glibc logf/expf and CUDA logf/expf differ in the last ulp on some inputs.
// So everything the draw path needs is built here from IEEE-754 binary32 operations that are
// correctly rounded (round to nearest even) on both sides: +, -, *, exactly rounded /, integer
// and bit manipulation, comparisons. No fused multiply-add is used anywhere: a plain mul+add is
// as reproducible as fmaf and keeps the host fast on x86-64 builds without FMA hardware, where
// std::fma is a slow software routine. Accuracy targets "a few ulp"; tests/sampling_test.cpp
// measures it against libm on millions of points.
//
// Build rules these functions rely on (they make the results identical, not just close):
// - Device: never compile with --use_fast_math, -ftz=true or -prec-div=false. The helpers below
//   use __fmul_rn/__fadd_rn/__fdiv_rn, which the compiler never contracts into FMAs, but flushing
//   subnormals to zero would still change det_log of subnormal inputs.
// - Host: every product goes through mul_rn(), which hides the value from the optimiser when the
//   target has FMA instructions, so even -ffp-contract=fast -march=native cannot fuse a product
//   into a following add. -ffast-math and x87 excess precision are refused at compile time.
// Verified exhaustively: for all 2^32 input bit patterns, log, log1p, exp and gumbel_from_bits
// (philox.h) give identical bits from g++ 12 (-O2, and -O3 -march=native -ffp-contract=fast) and
// from nvcc 13 sm_90 device code on an H200. Without the mul_rn barrier the -march=native host
// build differed from the device on 79128 inputs of log alone.
#pragma once

#include <cfloat>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define MEMRA_HD __host__ __device__
#else
#define MEMRA_HD
#endif

#if defined(__FAST_MATH__)
#error "det_math.h needs IEEE semantics: do not compile with -ffast-math / --use_fast_math"
#endif
#if !defined(__CUDA_ARCH__) && defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD != 0
#error "det_math.h needs float arithmetic evaluated in float (FLT_EVAL_METHOD == 0), e.g. SSE2 on x86"
#endif

namespace memra::det {

// ---- bit casts ----
MEMRA_HD inline uint32_t float_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
#endif
}

MEMRA_HD inline float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
#endif
}

// ---- correctly rounded basic operations that the compiler may not fuse or reorder ----
MEMRA_HD inline float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

MEMRA_HD inline float sub_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}

MEMRA_HD inline float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  float r = a * b;
  // Contraction needs the product to feed the add directly; an empty asm that "changes" r cuts
  // that link. Only targets that have FMA instructions need it (without them GCC cannot fuse).
#if defined(__FMA__) || defined(__FP_FAST_FMAF) || defined(__aarch64__) || defined(__ARM_FEATURE_FMA)
#if defined(__x86_64__) || defined(__i386__)
  __asm__("" : "+x"(r));
#elif defined(__aarch64__)
  __asm__("" : "+w"(r));
#else
  volatile float v = r;
  r = v;
#endif
#endif
  return r;
#endif
}

MEMRA_HD inline float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

// Exact conversions (no rounding choices involved).
MEMRA_HD inline float u32_to_float_rn(uint32_t x) {
#if defined(__CUDA_ARCH__)
  return __uint2float_rn(x);
#else
  return static_cast<float>(x);  // IEEE conversion, round to nearest even
#endif
}

// ---- constants (binary32, written as hex literals so they are exact) ----
// ln 2 split so that k * kLn2Hi is exact for |k| < 512 (kLn2Hi has 15 significant bits).
inline constexpr float kLn2Hi = 0x1.62e4p-1f;      // 0.693145751953125
inline constexpr float kLn2Lo = 0x1.7f7d1cp-20f;   // ln 2 - kLn2Hi, rounded
inline constexpr float kLog2E = 0x1.715476p+0f;    // 1 / ln 2, rounded
inline constexpr float kSqrt2 = 0x1.6a09e6p+0f;    // sqrt 2, rounded down
inline constexpr float kInf = __builtin_huge_valf();
// The reduced range of log1p_reduced(): [kSqrt2/2 - 1, kSqrt2 - 1] ~ [-0.2929, 0.4142] (both exact).
inline constexpr float kReducedLo = kSqrt2 * 0.5f - 1.0f;
inline constexpr float kReducedHi = kSqrt2 - 1.0f;

// log(1 + f) for f in [kSqrt2/2 - 1, kSqrt2 - 1] ~ [-0.2929, 0.4142], plus k * ln 2.
// With s = f / (2 + f), log(1 + f) = 2 atanh(s) = 2s + s R(s^2), R(z) = 2z/3 + 2z^2/5 + ...;
// |s| <= 0.1716 so z <= 0.0295 and the Taylor terms through z^4 leave a relative truncation error
// below 3e-9. The sum is arranged as f - (f^2/2 - s (f^2/2 + R)) - using 2s = f - s f and
// f^2/2 (1 - s) = s f - so the rounding errors land in the small correction, not in f.
MEMRA_HD inline float log1p_reduced(float f, float k) {
  float s = div_rn(f, add_rn(2.0f, f));
  float z = mul_rn(s, s);
  float r = mul_rn(z, 0x1.c71c72p-3f);                  // 2/9
  r = mul_rn(z, add_rn(0x1.24924ap-2f, r));              // 2/7
  r = mul_rn(z, add_rn(0x1.99999ap-2f, r));              // 2/5
  r = mul_rn(z, add_rn(0x1.555556p-1f, r));              // 2/3
  float hfsq = mul_rn(mul_rn(0.5f, f), f);
  float corr = sub_rn(hfsq, add_rn(mul_rn(s, add_rn(hfsq, r)), mul_rn(k, kLn2Lo)));
  return add_rn(mul_rn(k, kLn2Hi), sub_rn(f, corr));
}

// Natural log. Special values as IEEE: log(+-0) = -inf, log(x<0) = NaN, log(inf) = inf, NaN -> NaN.
// Subnormal inputs are scaled into the normal range first (needs subnormal support, see above).
MEMRA_HD inline float log(float x) {
  if (!(x > 0.0f)) return x == 0.0f ? -kInf : bits_float(0x7fc00000u);
  if (!(x < kInf)) return x;
  float k = 0.0f;
  if (x < FLT_MIN) {
    x = mul_rn(x, 0x1p24f);  // exact
    k = -24.0f;
  }
  uint32_t bits = float_bits(x);
  int32_t e = static_cast<int32_t>(bits >> 23) - 127;
  float m = bits_float((bits & 0x007fffffu) | 0x3f800000u);  // [1, 2)
  if (m > kSqrt2) {
    m = mul_rn(m, 0.5f);  // exact
    e += 1;
  }
  k = add_rn(k, static_cast<float>(e));  // small integers: exact
  return log1p_reduced(sub_rn(m, 1.0f), k);  // m - 1 is exact (Sterbenz)
}

// log(1 + x). For x in [-1/2, 1] 1 + x is never rounded: the reduced argument is x itself,
// 1 + 2x (k = -1) or (x - 1) / 2 (k = 1), each exact by Sterbenz' lemma. Elsewhere log(1 + x).
MEMRA_HD inline float log1p(float x) {
  if (x >= kReducedLo && x <= kReducedHi) return log1p_reduced(x, 0.0f);
  if (x >= -0.5f && x < kReducedLo) return log1p_reduced(add_rn(1.0f, mul_rn(2.0f, x)), -1.0f);
  if (x > kReducedHi && x <= 1.0f) return log1p_reduced(mul_rn(sub_rn(x, 1.0f), 0.5f), 1.0f);
  return log(add_rn(1.0f, x));
}

// e^x. Results below e^-86 (~4.5e-38) are returned as 0 so no subnormal is ever produced;
// x above ~88.72 gives inf; exp(0) == 1 exactly. Reduction x = k ln2 + r with |r| <= ~0.347
// (Cody-Waite: x - k kLn2Hi is exact), then a degree-7 Taylor polynomial (truncation < 6e-9).
MEMRA_HD inline float exp(float x) {
  if (x != x) return x;
  if (x < -86.0f) return 0.0f;
  if (x > 89.0f) return kInf;
  float t = mul_rn(x, kLog2E);
  // Round half away from zero; the float -> int conversion truncates, identically on both sides.
  int32_t ki = static_cast<int32_t>(t >= 0.0f ? add_rn(t, 0.5f) : sub_rn(t, 0.5f));
  float k = static_cast<float>(ki);
  float hi = sub_rn(x, mul_rn(k, kLn2Hi));
  float r = sub_rn(hi, mul_rn(k, kLn2Lo));
  float p = 0x1.a01a02p-13f;                              // 1/5040
  p = add_rn(0x1.6c16c2p-10f, mul_rn(r, p));              // 1/720
  p = add_rn(0x1.111112p-7f, mul_rn(r, p));               // 1/120
  p = add_rn(0x1.555556p-5f, mul_rn(r, p));               // 1/24
  p = add_rn(0x1.555556p-3f, mul_rn(r, p));               // 1/6
  p = add_rn(0.5f, mul_rn(r, p));
  p = add_rn(1.0f, mul_rn(r, p));
  p = add_rn(1.0f, mul_rn(r, p));
  // ki in [-124, 128]; 2^128 is not a float, so scale in two exact steps there.
  if (ki > 127) return mul_rn(mul_rn(p, bits_float(static_cast<uint32_t>(ki - 1 + 127) << 23)), 2.0f);
  return mul_rn(p, bits_float(static_cast<uint32_t>(ki + 127) << 23));
}

}  // namespace memra::det
