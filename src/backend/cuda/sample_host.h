// Host-side preparation of the CUDA sampler's per-row tables: parameter fields, the sorted list
// of ids that logit bias and penalties change, and its per-segment offsets. Plain C++ (no CUDA
// headers), used by cuda_sampling.cpp and by the host model in tests/gpu_sampling_test.cpp.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <span>
#include <vector>

#include "backend/cuda/sample_row.h"
#include "common/error.h"
#include "step/det_math.h"
#include "step/sampling.h"

namespace memra::cuda {

// sampling.cpp's limit: top-p weights summed over n ids must stay below 2^63.
inline constexpr int64_t kSampleMaxVocab = int64_t{1} << 23;

// The device phases a row takes part in (greedy rows: none of them).
struct RowPhases {
  bool temperature = false;  // the Gumbel pass
  bool top_k = false;        // a count selection
  bool top_p = false;        // a top-p selection
};

// Validates like sample_token() and fills d's parameter fields (not its pointers).
inline RowPhases describe_row(const SamplingParams& p, uint64_t token_index, int64_t n, SampleRowDesc& d) {
  if (n >= kSampleMaxVocab)
    fail("sampling: vocabulary of {} ids is too large for the sampler (limit {})", n, kSampleMaxVocab);
  p.validate(static_cast<int32_t>(n));
  RowPhases ph;
  d.temperature = p.temperature;
  d.repetition_penalty = p.repetition_penalty;
  d.frequency_penalty = p.frequency_penalty;
  d.presence_penalty = p.presence_penalty;
  d.seed = p.seed;
  d.token_index = token_index;
  d.top_k = 0;
  d.log_min_p = -det::kInf;
  d.top_p24 = 0;
  if (p.greedy()) return ph;
  ph.temperature = true;
  if (p.top_k > 0 && p.top_k < n) {  // top_k >= n keeps every candidate
    ph.top_k = true;
    d.top_k = p.top_k;
  }
  if (p.min_p > 0.0f) d.log_min_p = det::log(p.min_p);
  if (p.top_p < 1.0f) {
    ph.top_p = true;
    d.top_p24 = static_cast<uint32_t>(static_cast<uint64_t>(det::mul_rn(p.top_p, 0x1p24f)));  // <= 2^24
  }
  return ph;
}

// Appends the row's adjusted ids in ascending order to `ops` / `ids` (one entry per id: its bias
// values in the order given, then its count in the penalty window) and the bias values to
// `bias`. Throws like apply_logit_adjustments() for a window id outside [0, n); bias ids were
// checked by describe_row().
inline void append_row_patches(const SamplingParams& p, std::span<const int32_t> history, int64_t n, int32_t row,
                               std::vector<SamplePatchOp>& ops, std::vector<int32_t>& ids, std::vector<float>& bias) {
  std::vector<int32_t> by_id(p.logit_bias.size());
  std::iota(by_id.begin(), by_id.end(), 0);
  std::stable_sort(by_id.begin(), by_id.end(),
                   [&p](int32_t a, int32_t b) { return p.logit_bias[a].first < p.logit_bias[b].first; });

  std::vector<int32_t> window;
  const bool penalise = p.repetition_penalty != 1.0f || p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
  if (penalise && p.penalty_last_n != 0 && !history.empty()) {
    const size_t w = p.penalty_last_n < 0 ? history.size()
                                          : std::min(history.size(), static_cast<size_t>(p.penalty_last_n));
    window.assign(history.end() - static_cast<std::ptrdiff_t>(w), history.end());
    std::sort(window.begin(), window.end());
    for (int32_t id : window)  // ascending: the same id is reported as by the host sampler
      if (id < 0 || id >= n) fail("sampling: history token id {} is outside the vocabulary (n_vocab = {})", id, n);
  }

  size_t a = 0, b = 0;
  while (a < by_id.size() || b < window.size()) {
    const int32_t next_bias = a < by_id.size() ? p.logit_bias[by_id[a]].first : INT32_MAX;
    const int32_t next_window = b < window.size() ? window[b] : INT32_MAX;
    SamplePatchOp op;
    op.row = row;
    op.id = std::min(next_bias, next_window);
    op.bias_begin = static_cast<int32_t>(bias.size());
    for (; a < by_id.size() && p.logit_bias[by_id[a]].first == op.id; ++a) bias.push_back(p.logit_bias[by_id[a]].second);
    op.bias_end = static_cast<int32_t>(bias.size());
    size_t count = 0;
    for (; b < window.size() && window[b] == op.id; ++b) ++count;
    op.count = static_cast<float>(count);  // as apply_logit_adjustments converts it
    ops.push_back(op);
    ids.push_back(op.id);
  }
}

// For a row's ascending patched ids: offsets[g] = index of the first id >= g * seg, for
// g = 0 .. ceil(n / seg) (the last one is ids.size()). Appended to `out`.
inline void append_patch_segments(std::span<const int32_t> ids, int64_t n, int seg, std::vector<int32_t>& out) {
  const int64_t n_seg = (n + seg - 1) / seg;
  for (int64_t g = 0; g <= n_seg; ++g) {
    const int64_t start = std::min(g * seg, n);
    out.push_back(static_cast<int32_t>(std::lower_bound(ids.begin(), ids.end(), start) - ids.begin()));
  }
}

}  // namespace memra::cuda
