// Reference sampler: the definitions are in sampling.h, the float helpers in det_math.h.
#include "step/sampling.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "step/det_math.h"
#include "step/philox.h"

namespace memra {

namespace {

// Q = sum of q_i <= n * 2^40 must stay below 2^63 (sampling.h, top-p).
constexpr size_t kMaxVocab = size_t{1} << 23;

bool candidate_before(const SamplingCandidate& a, const SamplingCandidate& b) {
  return a.s > b.s || (a.s == b.s && a.id < b.id);
}

// Length of the shortest prefix of `c`, in candidate_before order, whose q sum reaches the top-p
// target (sampling.h). `c` is reordered so that its first `length` elements are that prefix (in
// no particular order). Because integer sums do not depend on order, the cut is found like a
// quickselect: partition around a middle rank, sum the upper part, recurse into the half that
// holds the cut. Expected O(n), where sorting would be O(n log n) for the flat rows top-p sees.
size_t top_p_prefix(std::vector<SamplingCandidate>& c, float s_max, float top_p) {
  struct Weighted {
    SamplingCandidate c;
    uint64_t q;
  };
  std::vector<Weighted> w(c.size());
  uint64_t total = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    const float p = det::exp(det::sub_rn(c[i].s, s_max));                 // in [0, 1]
    w[i] = {c[i], static_cast<uint64_t>(det::mul_rn(p, 0x1p40f))};       // exact scaling, truncation
    total += w[i].q;
  }
  const uint64_t p24 = static_cast<uint64_t>(det::mul_rn(top_p, 0x1p24f));  // <= 2^24
  const uint64_t target = p24 * (total >> 24) + ((p24 * (total & 0xffffffu) + 0xffffffu) >> 24);

  auto before = [](const Weighted& a, const Weighted& b) { return candidate_before(a.c, b.c); };
  auto at = [&w](size_t i) { return w.begin() + static_cast<std::ptrdiff_t>(i); };
  // Invariant: w[0, lo) are the first lo elements of the order (as a set), their q sum is `below`,
  // and the cut length is in (lo, hi].
  size_t lo = 0, hi = w.size();
  uint64_t below = 0;
  while (hi - lo > 64) {
    const size_t mid = lo + (hi - lo) / 2;
    std::nth_element(at(lo), at(mid), at(hi), before);
    uint64_t upper = 0;
    for (size_t i = lo; i < mid; ++i) upper += w[i].q;
    if (below + upper >= target) {
      hi = mid;
    } else {
      below += upper;
      lo = mid;
    }
  }
  std::sort(at(lo), at(hi), before);
  size_t length = hi;
  for (size_t i = lo; i < hi; ++i) {
    below += w[i].q;
    if (below >= target) {
      length = i + 1;
      break;
    }
  }
  for (size_t i = 0; i < length; ++i) c[i] = w[i].c;
  return length;
}

// Upper bounds on gumbel_from_bits(x) for each value of the top kBoundBits bits of x. The noise
// grows with x (u = (x + 0.5) 2^-32), so a bucket's largest value is at its last x. The computed
// function could in principle lose monotonicity by an ulp through rounding, hence the margin;
// an exhaustive run over all 2^32 inputs found it monotone within every bucket (excess 0).
constexpr int kBoundBits = 10;
struct GumbelBounds {
  float upper[1u << kBoundBits];
};

const GumbelBounds& gumbel_bounds() {
  static const GumbelBounds table = [] {
    GumbelBounds t{};
    for (uint32_t b = 0; b < (1u << kBoundBits); ++b) {
      const uint32_t last = ((b + 1) << (32 - kBoundBits)) - 1;
      t.upper[b] = gumbel_from_bits(last) + 1e-3f;
    }
    return t;
  }();
  return table;
}

}  // namespace

void SamplingParams::validate() const {
  if (!(temperature >= 0.0f && temperature <= 100.0f))
    fail("sampling: temperature must be in [0, 100] (0 = greedy), got {}", temperature);
  if (top_k < 0) fail("sampling: top_k must be >= 0 (0 = off), got {}", top_k);
  if (!(top_p > 0.0f && top_p <= 1.0f)) fail("sampling: top_p must be in (0, 1] (1 = off), got {}", top_p);
  if (!(min_p >= 0.0f && min_p <= 1.0f)) fail("sampling: min_p must be in [0, 1] (0 = off), got {}", min_p);
  if (!(repetition_penalty > 0.0f && std::isfinite(repetition_penalty)))
    fail("sampling: repetition_penalty must be a finite number > 0 (1 = off), got {}", repetition_penalty);
  if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f))
    fail("sampling: presence_penalty must be in [-2, 2], got {}", presence_penalty);
  if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f))
    fail("sampling: frequency_penalty must be in [-2, 2], got {}", frequency_penalty);
  if (penalty_last_n < -1)
    fail("sampling: penalty_last_n must be >= -1 (-1 = whole history, 0 = off), got {}", penalty_last_n);
  for (const auto& [id, value] : logit_bias) {
    if (id < 0) fail("sampling: logit_bias token id must be >= 0, got {}", id);
    if (std::isnan(value) || value == det::kInf)
      fail("sampling: logit_bias value for token {} must be a finite number or -inf, got {}", id, value);
  }
}

void SamplingParams::validate(int32_t n_vocab) const {
  validate();
  for (const auto& [id, value] : logit_bias)
    if (id >= n_vocab)
      fail("sampling: logit_bias token id {} is outside the vocabulary (n_vocab = {})", id, n_vocab);
}

void apply_logit_adjustments(std::span<float> logits, const SamplingParams& p,
                             std::span<const int32_t> history, std::span<const uint32_t> allowed) {
  const size_t n = logits.size();
  for (const auto& [id, value] : p.logit_bias) {
    if (id < 0 || static_cast<size_t>(id) >= n)
      fail("sampling: logit_bias token id {} is outside the vocabulary (n_vocab = {})", id, n);
    logits[static_cast<size_t>(id)] = det::add_rn(logits[static_cast<size_t>(id)], value);
  }

  const bool penalise = p.repetition_penalty != 1.0f || p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
  if (penalise && p.penalty_last_n != 0 && !history.empty()) {
    size_t window = p.penalty_last_n < 0 ? history.size()
                                         : std::min(history.size(), static_cast<size_t>(p.penalty_last_n));
    std::vector<int32_t> ids(history.end() - static_cast<std::ptrdiff_t>(window), history.end());
    std::sort(ids.begin(), ids.end());
    for (size_t i = 0; i < ids.size();) {
      const int32_t id = ids[i];
      size_t j = i;
      while (j < ids.size() && ids[j] == id) ++j;
      if (id < 0 || static_cast<size_t>(id) >= n)
        fail("sampling: history token id {} is outside the vocabulary (n_vocab = {})", id, n);
      float& l = logits[static_cast<size_t>(id)];
      l = l > 0.0f ? det::div_rn(l, p.repetition_penalty) : det::mul_rn(l, p.repetition_penalty);
      const float count = static_cast<float>(j - i);  // round to nearest; exact below 2^24
      l = det::sub_rn(l, det::add_rn(det::mul_rn(count, p.frequency_penalty), p.presence_penalty));
      i = j;
    }
  }

  if (!allowed.empty()) {
    MEMRA_ASSERT(allowed.size() >= (n + 31) / 32, "mask has {} words for {} ids", allowed.size(), n);
    for (size_t i = 0; i < n; ++i)
      if (((allowed[i / 32] >> (i % 32)) & 1u) == 0) logits[i] = -det::kInf;
  }
}

int32_t argmax(std::span<const float> logits) {
  int32_t best = -1;
  float best_value = -det::kInf;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] > best_value) {  // strict: ties keep the lower id; NaN and -inf never pass
      best_value = logits[i];
      best = static_cast<int32_t>(i);
    }
  }
  return best;
}

std::vector<SamplingCandidate> sampling_candidates(std::span<const float> logits, const SamplingParams& p) {
  MEMRA_ASSERT(!p.greedy(), "sampling_candidates needs temperature > 0, got {}", p.temperature);
  if (logits.size() >= kMaxVocab)
    fail("sampling: vocabulary of {} ids is too large for the sampler (limit {})", logits.size(), kMaxVocab);

  std::vector<SamplingCandidate> c;
  c.reserve(logits.size());
  bool any_inf = false;
  for (size_t i = 0; i < logits.size(); ++i) {
    const float s = det::div_rn(logits[i], p.temperature);
    if (std::isnan(s) || s == -det::kInf) continue;
    if (s == det::kInf && !any_inf) {
      any_inf = true;
      c.clear();
    }
    if (any_inf && s != det::kInf) continue;
    c.push_back({static_cast<int32_t>(i), any_inf ? 0.0f : s});
  }
  if (c.empty()) return c;

  float s_max = c[0].s;
  for (const auto& x : c) s_max = std::max(s_max, x.s);

  bool reordered = false;  // c is in id order until a filter partially sorts it
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < c.size()) {
    std::nth_element(c.begin(), c.begin() + p.top_k - 1, c.end(), candidate_before);
    c.resize(static_cast<size_t>(p.top_k));
    reordered = true;
  }
  if (p.min_p > 0.0f) {
    const float threshold = det::add_rn(s_max, det::log(p.min_p));
    std::erase_if(c, [threshold](const SamplingCandidate& x) { return !(x.s >= threshold); });
  }
  if (p.top_p < 1.0f) {
    c.resize(top_p_prefix(c, s_max, p.top_p));
    reordered = true;
  }
  if (reordered)
    std::sort(c.begin(), c.end(), [](const SamplingCandidate& a, const SamplingCandidate& b) { return a.id < b.id; });
  return c;
}

int32_t gumbel_max(std::span<const SamplingCandidate> candidates, uint64_t seed, uint64_t token_index) {
  if (candidates.empty()) return -1;
  float s_max = candidates[0].s;
  for (const auto& x : candidates) s_max = std::max(s_max, x.s);
  // Ids below this bound cannot win whatever their noise (sampling.h, step 4): skip their draws.
  const float reach = det::add_rn(s_max, kGumbelMin);
  const GumbelBounds& bounds = gumbel_bounds();

  int32_t best = -1;
  float best_value = -det::kInf;
  for (const auto& x : candidates) {
    if (det::add_rn(x.s, kGumbelMax) < reach) continue;
    const uint32_t bits = sampling_bits(seed, token_index, static_cast<uint32_t>(x.id));
    // Most draws cannot beat the best so far even with the largest noise of their bucket: skip
    // the two logs for them. Strictly below, so no tie (which a lower id would win) is skipped.
    if (best >= 0 && det::add_rn(x.s, bounds.upper[bits >> (32 - kBoundBits)]) < best_value) continue;
    const float v = det::add_rn(x.s, gumbel_from_bits(bits));
    if (best < 0 || v > best_value || (v == best_value && x.id < best)) {
      best_value = v;
      best = x.id;
    }
  }
  return best;
}

int32_t sample_token(std::span<const float> logits, const SamplingParams& p, uint64_t token_index,
                     std::span<const int32_t> history, std::span<const uint32_t> allowed) {
  if (logits.size() >= kMaxVocab)
    fail("sampling: vocabulary of {} ids is too large for the sampler (limit {})", logits.size(), kMaxVocab);
  p.validate(static_cast<int32_t>(logits.size()));
  std::vector<float> adjusted(logits.begin(), logits.end());
  apply_logit_adjustments(adjusted, p, history, allowed);
  if (p.greedy()) return argmax(adjusted);
  std::vector<SamplingCandidate> candidates = sampling_candidates(adjusted, p);
  return gumbel_max(candidates, p.seed, token_index);
}

}  // namespace memra
