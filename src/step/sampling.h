// Token sampling with the semantics the CPU and the GPU share bit for bit.
//
// Every step below is defined by IEEE binary32 operations (each correctly rounded, none fused;
// det_math.h), integer arithmetic and orderings, so a CUDA sampler can reproduce it exactly.
// This file is the specification; sampling.cpp is the reference implementation.
//
// Step 1 - adjustments, in place on the raw logits l[0..n):
//   a. logit bias: for each (id, b) of logit_bias in order, l[id] = l[id] + b.
//   b. penalties use the window W = the last penalty_last_n entries of `history` (all of it for
//      -1, none for 0); c(id) = occurrences of id in W. For every id with c(id) > 0:
//      repetition (HF rule): l = l > 0 ? l / repetition_penalty : l * repetition_penalty;
//      then presence / frequency (OpenAI rule): l = l - ((float)c * frequency_penalty + presence_penalty)
//      (each operator one rounded float operation, evaluated in the written order).
//   c. mask: ids whose bit is clear in `allowed` become -inf.
// Step 2 - greedy (temperature == 0): token = argmax(l), lowest id on ties, NaN never wins.
// Step 3 - candidates. s_i = l_i / T (one IEEE division). The candidate set C is every id whose
//   s_i is neither NaN nor -inf. If some s_i == +inf, C is only those ids, and their s is taken as
//   0 (they are equally likely, the limit of the softmax). Order C by (s descending, id ascending);
//   s_max = the s of the first element. Then, in this order:
//   - top-k (top_k > 0): keep the first top_k elements.
//   - min-p (min_p > 0): keep s_i >= s_max + det::log(min_p)  (one rounded add).
//   - top-p (top_p < 1): q_i = floor(det::exp(s_i - s_max) * 2^40) as an integer (exact: the
//     product is a power-of-two scaling, the conversion truncates); Q = sum of q_i over the
//     survivors (uint64; n < 2^23 keeps it below 2^63; integer sums are exact in any order, so a
//     GPU may reduce in parallel); P = floor(top_p * 2^24); target = ceil(P * Q / 2^24) computed
//     exactly in integers. Keep the shortest non-empty prefix (in the order above) whose running
//     sum of q reaches target. Ties at the cut are kept by lower id first.
//   Each filter keeps the first element, so C never becomes empty unless it started empty.
// Step 4 - Gumbel-max: token = argmax over C of v_i = s_i + g(seed, token_index, i) (one rounded
//   add), lowest id on ties; g is gumbel_noise() from philox.h: Philox4x32-10 keyed by the seed,
//   counted by (token_index, id). The draw depends only on (seed, token_index, logits), never on
//   batch slot or size, and is one exact sample from softmax over C of s.
//   An implementation may skip work that cannot change the result (rounding is monotone): ids
//   with s_i + kGumbelMax < s_max + kGumbelMin, and - as the CPU does - the logs of a draw whose
//   bucket bound already falls strictly below the best v so far. A GPU can simply draw every id.
// If C is empty (everything banned, -inf or NaN) sample_token returns -1, as argmax does.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace memra {

struct SamplingParams {
  float temperature = 0.0f;  // 0: greedy; valid range [0, 100]
  int32_t top_k = 0;         // 0: off
  float top_p = 1.0f;        // 1: off; valid range (0, 1]
  float min_p = 0.0f;        // 0: off; valid range [0, 1]
  float repetition_penalty = 1.0f;  // 1: off; > 0
  float presence_penalty = 0.0f;    // [-2, 2]
  float frequency_penalty = 0.0f;   // [-2, 2]
  int32_t penalty_last_n = 64;      // history window for penalties (-1: whole history, 0: none)
  uint64_t seed = 0;
  // (token id, value added to its logit). Values may be finite or -inf (bans the id).
  std::vector<std::pair<int32_t, float>> logit_bias;

  // Throws memra::Error naming the field and the value for out-of-range values.
  void validate() const;
  // validate() plus: every logit_bias id is < n_vocab.
  void validate(int32_t n_vocab) const;
  // The one greedy rule (step 2): temperature 0 picks the argmax.
  bool greedy() const { return temperature <= 0.0f; }
  // Greedy with nothing that changes the logits first (bias, penalties): a plain argmax.
  bool plain_greedy() const {
    return greedy() && logit_bias.empty() && repetition_penalty == 1.0f && presence_penalty == 0.0f &&
           frequency_penalty == 0.0f;
  }
};

// How one row of a decode step is sampled (the backends' sample op, the engine's decode step).
struct RowSampling {
  const SamplingParams* params = nullptr;
  uint64_t token_index = 0;                 // index of the token being drawn in its request's stream
  const int32_t* history = nullptr;         // tokens the penalties look at (host memory)
  int64_t history_len = 0;
  const uint32_t* allowed = nullptr;        // grammar mask: packed bitset (bit i: id i allowed), host
  int64_t allowed_words = 0;                // 0: no mask
  // Nothing changes the row's logits before a greedy pick: the backend's argmax gives its token.
  bool plain_greedy() const { return params->plain_greedy() && allowed_words == 0; }
};

// Applies bias / penalties / mask in place (step 1). `history`: previously generated tokens
// (and prompt tokens if the caller wants them penalised). `allowed`: optional packed bitset of
// ceil(n/32) words, bit (i % 32) of word i / 32 set = id i allowed; empty span = all allowed.
// Throws memra::Error if a history or bias id is outside [0, n).
void apply_logit_adjustments(std::span<float> logits, const SamplingParams& p,
                             std::span<const int32_t> history, std::span<const uint32_t> allowed);

// Greedy argmax, lowest id on ties; NaN never wins. Returns -1 only if every logit is -inf/NaN.
int32_t argmax(std::span<const float> logits);

// A step-3 survivor: vocab id and scaled logit s (0 for the +inf case, see above).
struct SamplingCandidate {
  int32_t id;
  float s;
};

// Step 3 on already adjusted logits (requires p.temperature > 0). Survivors in ascending id order.
std::vector<SamplingCandidate> sampling_candidates(std::span<const float> logits, const SamplingParams& p);

// Step 4: the Gumbel-max draw over the candidates; -1 if there are none.
int32_t gumbel_max(std::span<const SamplingCandidate> candidates, uint64_t seed, uint64_t token_index);

// Full pipeline (steps 1-4) on a copy of the logits; validates p first. token_index: index of the
// token being drawn within the request's generated stream (0 for the first generated token).
int32_t sample_token(std::span<const float> logits, const SamplingParams& p, uint64_t token_index,
                     std::span<const int32_t> history, std::span<const uint32_t> allowed = {});

}  // namespace memra
