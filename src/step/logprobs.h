// Log-probabilities of a generated token and its best alternatives (what OpenAI's `logprobs`
// report), from a row of raw logits.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace memra {

// Natural-log probabilities of the model's raw distribution (before any sampling adjustment) of
// one generated token and of the most likely alternatives, best first (lowest id on ties).
struct TokenLogprob {
  int32_t token = -1;
  float logprob = 0.0f;
  std::vector<std::pair<int32_t, float>> top;
};

// Log-softmax of `row` in double precision: `token`'s entry and the `k` best (logit descending,
// lowest id on ties; NaN never listed, and -inf for NaN entries or a row without a finite max).
TokenLogprob token_logprobs(std::span<const float> row, int32_t token, int32_t k);

}  // namespace memra
