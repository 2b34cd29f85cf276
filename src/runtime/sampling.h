// Token sampling with the semantics the CPU and the GPU share bit for bit.
//
// Order of operations on a row of logits (float32, n_vocab):
//   1. logit bias (added), repetition penalty (HF rule: positive logits divided, negative
//      multiplied, for every id present in the history), presence / frequency penalties
//      (subtract presence once per present id, frequency times its count), grammar mask
//      (banned ids become -inf).
//   2. greedy (temperature <= 0): argmax, lowest id wins ties. Done.
//   3. candidate filtering on the scaled logits l_i / T: top-k, then min-p, then top-p
//      (definitions in sampling.cpp).
//   4. Gumbel-max: token = argmax over surviving ids of (l_i / T + g(seed, token_index, i)),
//      g = -log(-log(u)), u a Philox4x32-10 uniform keyed by the request seed and counted by
//      (token_index, vocab id): the draw for a row depends only on (seed, token index, logits),
//      never on batch slot or batch size.
// All float math in the draw path uses functions from `philox.h` that compile identically for
// host and device (no libm), so a GPU sampler can match this one exactly.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace memra {

struct SamplingParams {
  float temperature = 0.0f;  // <= 0: greedy
  int32_t top_k = 0;         // <= 0: off
  float top_p = 1.0f;        // >= 1: off
  float min_p = 0.0f;        // <= 0: off
  float repetition_penalty = 1.0f;  // 1: off
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  int32_t penalty_last_n = 64;  // history window for penalties (-1: whole history)
  uint64_t seed = 0;
  std::vector<std::pair<int32_t, float>> logit_bias;

  // Throws memra::Error with a message naming the field for out-of-range values.
  void validate() const;
  bool greedy() const { return temperature <= 0.0f; }
};

// Applies bias / penalties / mask in place (step 1). `history`: previously generated tokens
// (and prompt tokens if the caller wants them penalised). `allowed`: optional packed bitset of
// ceil(n/32) words, bit i set = id i allowed; empty span = everything allowed.
void apply_logit_adjustments(std::span<float> logits, const SamplingParams& p,
                             std::span<const int32_t> history, std::span<const uint32_t> allowed);

// Greedy argmax, lowest id on ties; NaN never wins. Returns -1 only if every logit is -inf/NaN.
int32_t argmax(std::span<const float> logits);

// Full pipeline (steps 1-4) on a copy of the logits. token_index: index of the token being drawn
// within the request's generated stream (0 for the first generated token).
int32_t sample_token(std::span<const float> logits, const SamplingParams& p, uint64_t token_index,
                     std::span<const int32_t> history, std::span<const uint32_t> allowed = {});

}  // namespace memra
