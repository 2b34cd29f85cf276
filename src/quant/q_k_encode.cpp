// K-quant encoders (Q2_K .. Q6_K): round-to-nearest with a small least-squares scale search.
//
// Per sub-block we fit a scale (and for Q2_K / Q4_K / Q5_K a non-negative min) to the data:
// start from the range (min/max, or the largest-magnitude element mapped to the most negative
// code), then alternate "round every element to its nearest code" and "least-squares refit of
// scale (and min) to those codes" while the squared error drops. The sub-block scales are then
// quantized against one f16 super-block scale (6-bit, 4-bit or int8 depending on the type), and
// every element is rounded to its nearest code under the scale the decoder will actually use
// (f16 super-scale times the integer sub-scale, formed exactly as the decoder forms it). This is
// not ggml's importance-weighted search, but it is the same layout and round-trips with an error
// of about half a quantization step.
#include <cmath>

#include "quant/codec.h"
#include "quant/quant.h"

namespace memra::quant::detail {
namespace {

constexpr int kRefineIters = 2;  // more buys < 1% RMS error on Gaussian data, at ~25% speed each

// Nearest integer to v clamped to lo..hi; NaN gives lo (never reached for finite input, but a
// float-to-int conversion of NaN would be undefined).
// Written with selects rather than early returns so the element loops stay branch-free.
inline int round_clamp(float v, int lo, int hi) {
  const auto flo = static_cast<float>(lo), fhi = static_cast<float>(hi);
  v = v > flo ? v : flo;
  v = v < fhi ? v : fhi;
  return round_half_away(v);
}

// f16 bits of v, saturated to the largest finite f16 instead of overflowing to infinity.
inline uint16_t f16_saturating(float v) {
  uint16_t h = f32_to_f16(v);
  if ((h & 0x7FFF) == 0x7C00) h = static_cast<uint16_t>((h & 0x8000) | 0x7BFF);
  return h;
}

void check_finite(const float* x, const char* type) {
  for (int i = 0; i < kQK_K; ++i)
    if (!std::isfinite(x[i])) fail_non_finite(type, x[i]);
}

// ---- affine sub-blocks: x ~= scale * q - min, q in 0..nmax, scale >= 0, min >= 0 ----

struct Affine {
  float scale = 0.0f;
  float min = 0.0f;
};

// Codes (as floats) of x under `a`, and their squared error. Sums run in four interleaved lanes
// so the loops vectorize; the fit is a heuristic, so its summation order is free.
template <int N>
float affine_codes(const float* x, int nmax, Affine a, float* q) {
  const float inv = a.scale > 0.0f ? 1.0f / a.scale : 0.0f;
  float err[4] = {};
  for (int i = 0; i < N; ++i) {
    q[i] = static_cast<float>(round_clamp((x[i] + a.min) * inv, 0, nmax));
    const float e = a.scale * q[i] - a.min - x[i];
    err[i % 4] += e * e;
  }
  return (err[0] + err[1]) + (err[2] + err[3]);
}

template <int N>
Affine fit_affine(const float* x, int nmax) {
  float lo = 0.0f, hi = x[0];  // lo <= 0: the stored min is subtracted, so it cannot add
  for (int i = 0; i < N; ++i) {
    lo = x[i] < lo ? x[i] : lo;
    hi = x[i] > hi ? x[i] : hi;
  }
  Affine best{(hi - lo) / static_cast<float>(nmax), -lo};
  if (!(best.scale > 0.0f)) return {0.0f, -lo};
  float q[N];
  float best_err = affine_codes<N>(x, nmax, best, q);
  for (int it = 0; it < kRefineIters; ++it) {
    // Least squares of x ~= s * q + b over the current codes, with b <= 0.
    float sq[4] = {}, sqq[4] = {}, sx[4] = {}, sqx[4] = {};
    for (int i = 0; i < N; ++i) {
      sq[i % 4] += q[i];
      sqq[i % 4] += q[i] * q[i];
      sx[i % 4] += x[i];
      sqx[i % 4] += q[i] * x[i];
    }
    const double tq = static_cast<double>(sq[0] + sq[1]) + (sq[2] + sq[3]);
    const double tqq = static_cast<double>(sqq[0] + sqq[1]) + (sqq[2] + sqq[3]);
    const double tx = static_cast<double>(sx[0] + sx[1]) + (sx[2] + sx[3]);
    const double tqx = static_cast<double>(sqx[0] + sqx[1]) + (sqx[2] + sqx[3]);
    const double det = N * tqq - tq * tq;
    if (!(det > 0)) break;
    double sc = (N * tqx - tq * tx) / det;
    double b = (tqq * tx - tq * tqx) / det;
    if (b > 0) {
      b = 0;
      sc = tqx / tqq;
    }
    if (!(sc > 0)) break;
    const Affine cand{static_cast<float>(sc), static_cast<float>(-b)};
    float cq[N];
    const float err = affine_codes<N>(x, nmax, cand, cq);
    if (!(err < best_err)) break;
    best = cand;
    best_err = err;
    std::memcpy(q, cq, sizeof q);
  }
  return best;
}

// Fits every sub-block, quantizes scales and mins to 0..smax against f16 super-scales d / dmin,
// and writes the final codes (q[e], 0..nmax) for the whole super-block.
template <int Sub>
void encode_affine(const float* x, int nmax, int smax, uint16_t& d16, uint16_t& dmin16, uint8_t* sc, uint8_t* mn,
                   uint8_t* q) {
  constexpr int sub = Sub, nsub = kQK_K / Sub;
  Affine fit[16];
  float max_scale = 0.0f, max_min = 0.0f;
  for (int s = 0; s < nsub; ++s) {
    fit[s] = fit_affine<Sub>(x + s * sub, nmax);
    max_scale = fit[s].scale > max_scale ? fit[s].scale : max_scale;
    max_min = fit[s].min > max_min ? fit[s].min : max_min;
  }
  d16 = f16_saturating(max_scale / static_cast<float>(smax));
  dmin16 = f16_saturating(max_min / static_cast<float>(smax));
  const float d = f16_to_f32(d16), dmin = f16_to_f32(dmin16);
  const float id = d > 0.0f ? 1.0f / d : 0.0f, idmin = dmin > 0.0f ? 1.0f / dmin : 0.0f;
  for (int s = 0; s < nsub; ++s) {
    sc[s] = static_cast<uint8_t>(round_clamp(fit[s].scale * id, 0, smax));
    mn[s] = static_cast<uint8_t>(round_clamp(fit[s].min * idmin, 0, smax));
    const float dl = d * static_cast<float>(sc[s]);  // as the decoder forms them
    const float ml = dmin * static_cast<float>(mn[s]);
    const float inv = dl > 0.0f ? 1.0f / dl : 0.0f;
    for (int i = s * sub; i < (s + 1) * sub; ++i)
      q[i] = static_cast<uint8_t>(round_clamp((x[i] + ml) * inv, 0, nmax));
  }
}

// ---- symmetric sub-blocks: x ~= scale * q, q in -nneg..nneg-1 ----

float symmetric_codes(const float* x, int nneg, float scale, float* q) {
  const float inv = scale != 0.0f ? 1.0f / scale : 0.0f;
  float err[4] = {};
  for (int i = 0; i < 16; ++i) {
    q[i] = static_cast<float>(round_clamp(x[i] * inv, -nneg, nneg - 1));
    const float e = scale * q[i] - x[i];
    err[i % 4] += e * e;
  }
  return (err[0] + err[1]) + (err[2] + err[3]);
}

// Scale of a sub-block of 16. The element of largest magnitude maps to code -nneg (so the scale
// may be negative), which uses the one extra negative code; then least-squares refinement.
float fit_symmetric(const float* x, int nneg) {
  float amax = 0.0f, max = 0.0f;
  for (int i = 0; i < 16; ++i)
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  if (amax == 0.0f) return 0.0f;
  float best = max / static_cast<float>(-nneg);
  float q[16];
  float best_err = symmetric_codes(x, nneg, best, q);
  for (int it = 0; it < kRefineIters; ++it) {
    float sqq[4] = {}, sqx[4] = {};
    for (int i = 0; i < 16; ++i) {
      sqq[i % 4] += q[i] * q[i];
      sqx[i % 4] += q[i] * x[i];
    }
    const float tqq = (sqq[0] + sqq[1]) + (sqq[2] + sqq[3]);
    if (!(tqq > 0.0f)) break;
    const float cand = ((sqx[0] + sqx[1]) + (sqx[2] + sqx[3])) / tqq;
    float cq[16];
    const float err = symmetric_codes(x, nneg, cand, cq);
    if (!(err < best_err)) break;
    best = cand;
    best_err = err;
    std::memcpy(q, cq, sizeof q);
  }
  return best;
}

// Fits the 16 sub-blocks of 16, quantizes their scales to -sneg..sneg-1 against an f16
// super-scale (largest-magnitude scale -> -sneg), and writes codes q[e] in -nneg..nneg-1.
void encode_symmetric(const float* x, int nneg, int sneg, uint16_t& d16, int8_t* sc, int8_t* q) {
  float scale[16];
  float amax = 0.0f, max = 0.0f;
  for (int s = 0; s < 16; ++s) {
    scale[s] = fit_symmetric(x + 16 * s, nneg);
    if (std::fabs(scale[s]) > amax) {
      amax = std::fabs(scale[s]);
      max = scale[s];
    }
  }
  d16 = f16_saturating(max / static_cast<float>(-sneg));
  const float d = f16_to_f32(d16);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int s = 0; s < 16; ++s) {
    sc[s] = static_cast<int8_t>(round_clamp(scale[s] * id, -sneg, sneg - 1));
    const float dl = d * static_cast<float>(sc[s]);
    const float inv = dl != 0.0f ? 1.0f / dl : 0.0f;
    for (int i = 16 * s; i < 16 * (s + 1); ++i)
      q[i] = static_cast<int8_t>(round_clamp(x[i] * inv, -nneg, nneg - 1));
  }
}

}  // namespace

void encode_q2_k(const float* x, BlockQ2_K& b) {
  check_finite(x, "q2_k");
  uint8_t sc[16], mn[16], q[kQK_K];
  encode_affine<16>(x, 3, 15, b.d, b.dmin, sc, mn, q);
  for (int s = 0; s < 16; ++s) b.scales[s] = static_cast<uint8_t>(sc[s] | (mn[s] << 4));
  std::memset(b.qs, 0, sizeof b.qs);
  for (int e = 0; e < kQK_K; ++e) b.qs[(e / 128) * 32 + e % 32] |= static_cast<uint8_t>(q[e] << (2 * ((e / 32) % 4)));
}

void encode_q3_k(const float* x, BlockQ3_K& b) {
  check_finite(x, "q3_k");
  int8_t sc[16], q[kQK_K];
  encode_symmetric(x, 4, 32, b.d, sc, q);
  q3k_pack_scales(sc, b.scales);
  std::memset(b.qs, 0, sizeof b.qs);
  std::memset(b.hmask, 0, sizeof b.hmask);
  for (int e = 0; e < kQK_K; ++e) {
    const int u = q[e] + 4;  // 0..7: low 2 bits in qs, bit 2 (set when q >= 0) in hmask
    b.qs[(e / 128) * 32 + e % 32] |= static_cast<uint8_t>((u & 3) << (2 * ((e / 32) % 4)));
    b.hmask[e % 32] |= static_cast<uint8_t>((u >> 2) << (e / 32));
  }
}

void encode_q4_k(const float* x, BlockQ4_K& b) {
  check_finite(x, "q4_k");
  uint8_t sc[8], mn[8], q[kQK_K];
  encode_affine<32>(x, 15, 63, b.d, b.dmin, sc, mn, q);
  k_pack_scale_min(sc, mn, b.scales);
  std::memset(b.qs, 0, sizeof b.qs);
  for (int e = 0; e < kQK_K; ++e) b.qs[(e / 64) * 32 + e % 32] |= static_cast<uint8_t>(q[e] << (4 * ((e / 32) % 2)));
}

void encode_q5_k(const float* x, BlockQ5_K& b) {
  check_finite(x, "q5_k");
  uint8_t sc[8], mn[8], q[kQK_K];
  encode_affine<32>(x, 31, 63, b.d, b.dmin, sc, mn, q);
  k_pack_scale_min(sc, mn, b.scales);
  std::memset(b.qs, 0, sizeof b.qs);
  std::memset(b.qh, 0, sizeof b.qh);
  for (int e = 0; e < kQK_K; ++e) {
    b.qs[(e / 64) * 32 + e % 32] |= static_cast<uint8_t>((q[e] & 0x0F) << (4 * ((e / 32) % 2)));
    b.qh[e % 32] |= static_cast<uint8_t>((q[e] >> 4) << (e / 32));
  }
}

void encode_q6_k(const float* x, BlockQ6_K& b) {
  check_finite(x, "q6_k");
  int8_t q[kQK_K];
  encode_symmetric(x, 32, 128, b.d, b.scales, q);
  q6k_pack_codes(q, b);
}

}  // namespace memra::quant::detail
