// Per-row logic of the CUDA sampler (k_sample.cu), written once for the device and the host so
// that a host model of the kernels (tests/gpu_sampling_test.cpp) runs the same decisions.
//
// How the device reproduces step/sampling.h without ever sorting a row:
// - Adjusted logits l are never stored: kernels read the raw row and replace the few ids touched
//   by logit bias / penalties (a sorted per-row list of patched values) and the masked ids (-inf).
// - Pass 1: (l_max, argmax) per row, the greedy token; s_max = l_max / T (division by T > 0 is
//   monotone, so it is the largest s), and whether some s is +inf (the "+inf candidates" case).
// - Every later filter keeps a prefix of the candidate order (s descending, id ascending), so a
//   row's surviving set is "s >= s_floor (min-p) and (key(s), id) at or before a cut", where key()
//   maps s to an unsigned integer in the same order. top-k and top-p move the cut: a radix select
//   over key(s) finds the key where the running weight (1 per id for top-k, q_i for top-p) from
//   the top reaches the target; inside that key's tie group the lowest ids come first, so the
//   cut's id is the j-th smallest id of the group (j from the weight still missing).
//   Integer sums do not depend on the order they are added in, so blocks may add them in parallel.
// - Gumbel-max over the survivors (every draw computed on the device from philox.h); the argmax
//   id, when it survived, seeds the running best so that hopeless ids skip their logs.
#pragma once

#include <cstdint>

#include "step/det_math.h"
#include "step/philox.h"

namespace memra::cuda {

// How a row is sampled, as the kernels read it (filled by cuda_sampling.cpp; device pointers).
struct SampleRowDesc {
  const float* logits = nullptr;       // the row's raw logits, n floats
  const uint32_t* allowed = nullptr;   // grammar mask, ceil(n/32) words; nullptr: all allowed
  const int32_t* patch_id = nullptr;   // n_patch ids in ascending order whose adjusted value...
  const float* patch_val = nullptr;    // ...is patch_val[k] (bias and penalties applied)
  const int32_t* patch_seg = nullptr;  // n_seg + 1 offsets: ids of segment g are [patch_seg[g], patch_seg[g+1])
  int32_t n_patch = 0;
  float temperature = 0.0f;            // <= 0: greedy
  int32_t top_k = 0;                   // target of the count selection (rows on the top-k list)
  float log_min_p = -det::kInf;        // det::log(min_p), or -inf when min-p is off
  uint32_t top_p24 = 0;                // floor(top_p * 2^24) (rows on the top-p list)
  float repetition_penalty = 1.0f, frequency_penalty = 0.0f, presence_penalty = 0.0f;
  uint64_t seed = 0;
  uint64_t token_index = 0;
};

// One adjusted id: bias values [bias_begin, bias_end) added in order, then the penalties if
// count > 0 (occurrences in the penalty window, as a float).
struct SamplePatchOp {
  int32_t row = 0;
  int32_t id = 0;
  int32_t bias_begin = 0, bias_end = 0;
  float count = 0.0f;
};

MEMRA_HD inline float adjusted_patch_value(float l, const SampleRowDesc& d, const SamplePatchOp& op,
                                           const float* bias_values) {
  for (int32_t b = op.bias_begin; b < op.bias_end; ++b) l = det::add_rn(l, bias_values[b]);
  if (op.count > 0.0f) {
    l = l > 0.0f ? det::div_rn(l, d.repetition_penalty) : det::mul_rn(l, d.repetition_penalty);
    l = det::sub_rn(l, det::add_rn(det::mul_rn(op.count, d.frequency_penalty), d.presence_penalty));
  }
  return l;
}

// Order key of a scaled logit (not NaN): a larger key comes earlier. -0 and +0 share the key of
// +0 because they compare equal, and ties are decided by id.
MEMRA_HD inline uint32_t sample_key(float s) {
  const uint32_t b = s == 0.0f ? 0u : det::float_bits(s);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
MEMRA_HD inline float sample_key_value(uint32_t k) {
  return det::bits_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

// top-p weight q = floor(exp(s - s_max) * 2^40) (sampling.h). Equal s give equal q, whatever
// the signs of zero: s - s_max differs only in the sign of a zero result and exp(-0) = exp(0).
MEMRA_HD inline uint64_t top_p_weight(float s, float s_max) {
  return static_cast<uint64_t>(det::mul_rn(det::exp(det::sub_rn(s, s_max)), 0x1p40f));
}

// ceil(P * Q / 2^24) in integers, P <= 2^24, Q < 2^63 (sampling.h). A target of 0 keeps exactly
// the first candidate, like a target of 1 (the first q is 2^40), so 1 is returned for it: the
// selection then needs no special case.
MEMRA_HD inline uint64_t top_p_target(uint64_t p24, uint64_t total) {
  const uint64_t t = p24 * (total >> 24) + ((p24 * (total & 0xffffffu) + 0xffffffu) >> 24);
  return t == 0 ? 1 : t;
}

// Radix selection digits over the 32-bit key: 11 + 11 + 10 bits, most significant first.
inline constexpr int kSelectPasses = 3;
inline constexpr int kSelectBins = 2048;
MEMRA_HD inline int select_shift(int pass) { return pass == 0 ? 21 : pass == 1 ? 10 : 0; }
MEMRA_HD inline int select_width(int pass) { return pass == 2 ? 10 : 11; }

enum SelectMode : int32_t { kSelectCount = 0, kSelectTopP = 1 };

// Trivial (no member initializers) so that a kernel can keep one in shared memory; start_row()
// sets every field.
struct SampleRowState {
  float l_max;    // largest adjusted logit (not NaN, > -inf) and its lowest id (-1: none)
  int32_t arg;
  float s_max;    // the largest s (0 in the +inf case)
  float s_floor;  // min-p: survivors have s >= s_floor (-inf when off)
  int32_t any_inf;  // some s is +inf: only those are candidates, with s = 0
  int32_t done;     // token decided by pass 1 (greedy, or no candidate)
  int32_t token;
  uint32_t cut_key;  // survivors: key > cut_key, or key == cut_key and id <= cut_id
  int32_t cut_id;
  // radix selection in progress: keys matching `prefix` on `prefix_mask`; `above` = weight of
  // the survivors with a larger key than any key under the prefix.
  int32_t selecting;
  uint32_t prefix, prefix_mask;
  uint64_t above, target;
};

// Pass 1 result: sets the row up. Greedy rows and rows without a candidate are done.
MEMRA_HD inline void start_row(SampleRowState& st, const SampleRowDesc& d, float l_max, int32_t arg) {
  st = SampleRowState{};
  st.l_max = l_max;
  st.arg = arg;
  st.token = -1;
  st.cut_key = 0;  // with cut_id = INT32_MAX: every key survives
  st.cut_id = INT32_MAX;
  if (!(d.temperature > 0.0f) || arg < 0) {
    st.done = 1;
    st.token = arg;
    return;
  }
  const float s = det::div_rn(l_max, d.temperature);
  if (!(s > -det::kInf)) {  // every s is -inf: no candidate
    st.done = 1;
    st.token = -1;
    return;
  }
  st.any_inf = s == det::kInf;
  st.s_max = st.any_inf ? 0.0f : s;
  st.s_floor = det::add_rn(st.s_max, d.log_min_p);
}

// Whether id (adjusted logit l) survives the filters applied so far; its s (0 in the +inf case).
MEMRA_HD inline bool row_keeps(const SampleRowState& st, float temperature, float l, int32_t id, float& s) {
  s = det::div_rn(l, temperature);
  if (st.any_inf) {
    if (!(s == det::kInf)) return false;
    s = 0.0f;
  } else if (!(s > -det::kInf)) {  // NaN or -inf
    return false;
  }
  if (!(s >= st.s_floor)) return false;
  const uint32_t k = sample_key(s);
  return k > st.cut_key || (k == st.cut_key && id <= st.cut_id);
}

// Start of a selection, given the total weight of the current survivors. Returns false (and
// leaves the cut alone) when the filter keeps them all.
MEMRA_HD inline bool select_begin(SampleRowState& st, const SampleRowDesc& d, int mode, uint64_t total) {
  st.prefix = 0;
  st.prefix_mask = 0;
  st.above = 0;
  st.selecting = 0;
  if (mode == kSelectCount) {
    if (total <= static_cast<uint64_t>(d.top_k)) return false;
    st.target = static_cast<uint64_t>(d.top_k);
  } else {
    if (total == 0) return false;
    st.target = top_p_target(d.top_p24, total);
  }
  st.selecting = 1;
  return true;
}

// Scans digits hi-1 down to lo of one pass's weights; `base` is the weight above digit hi-1.
// Returns the digit where the running weight reaches the target (and the weight above it), or
// -1 when it is not in [lo, hi) (including when it was reached above).
MEMRA_HD inline int select_find_digit(const unsigned long long* bins, int lo, int hi, unsigned long long base,
                                      unsigned long long target,
                                      unsigned long long* above) {
  if (base >= target) return -1;
  for (int dg = hi - 1; dg >= lo; --dg) {
    if (base + bins[dg] >= target) {
      *above = base;
      return dg;
    }
    base += bins[dg];
  }
  return -1;
}

MEMRA_HD inline void select_take_digit(SampleRowState& st, int pass, int digit, uint64_t above) {
  const int shift = select_shift(pass);
  st.prefix |= static_cast<uint32_t>(digit) << shift;
  st.prefix_mask |= ((1u << select_width(pass)) - 1u) << shift;
  st.above = above;
}

// After the last digit: the cut key is st.prefix and `bin` is its weight among the survivors.
// Returns 0 when the whole tie group stays (the cut is set here), else j: the new cut id is the
// j-th smallest id of the group's survivors (st.cut is left for that search; j is below their
// number, and the survivors of a tie group are always its lowest ids).
MEMRA_HD inline uint64_t select_finish(SampleRowState& st, int mode, uint64_t bin) {
  const uint32_t key = st.prefix;
  const uint64_t missing = st.target - st.above;  // > 0 by construction
  uint64_t ties = bin, j = missing;
  if (mode == kSelectTopP) {
    const uint64_t q = top_p_weight(sample_key_value(key), st.s_max);  // > 0: bin >= missing > 0
    ties = bin / q;
    j = (missing + q - 1) / q;
  }
  st.selecting = 0;
  if (j >= ties) {
    if (key != st.cut_key) st.cut_id = INT32_MAX;
    st.cut_key = key;
    return 0;
  }
  return j;
}

// An upper bound on the noise of every draw whose top 8 bits are `bucket`: the noise
// grows with the bits and each bucket's maximum is at its last input (checked exhaustively for
// finer buckets in sampling.cpp); the margin covers an ulp of non-monotonicity.
MEMRA_HD inline float gumbel_bucket_bound(uint32_t bucket) {
  return det::add_rn(gumbel_from_bits(((bucket + 1u) << 24) - 1u), 1e-3f);
}

}  // namespace memra::cuda
