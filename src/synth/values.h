// Random weight values for synthetic models (internal to src/synth).
//
// Every element is a pure function of (seed, tensor name, element index): a counter-based
// generator (splitmix64's finalizer over a Weyl sequence), so any split of a tensor into chunks
// or threads produces the same numbers.
//
// Distributions, chosen so a forward pass stays numerically sane at any depth and the logits
// are spread (no NaN, no all-equal rows):
// - "normal" draws are Irwin-Hall(4) rescaled to unit variance: close to N(0,1) in the body,
//   bounded by +-3.47 (no outliers to wreck a quantization block), one hash per element;
// - Matrix: N(0, 1/sqrt(in)), so a projection of an RMS-normalised vector has unit-size outputs;
// - ResidualOut (ssm_out, attn_output, ffn_down*): additionally / sqrt(2 * n_layers written),
//   so the 2 * n_layers residual branches add up to the same O(1) stream at any depth;
// - Embedding and output head: N(0, c / sqrt(hidden)), c = 1 for an untied token_embd (the
//   first RMSNorm rescales it anyway), 3 for an untied output head (logit std ~3: a clear but
//   not certain argmax over 248k tokens), 1.5 for a tied one (see plan.cpp for why smaller);
// - Norm: 1 + U(-0.1, 0.1); SsmNorm: 1 + U(-0.05, 0.05);
// - SsmA: -exp(U(log 1, log 16)) (= -exp(A_log) with A in [1, 16], HF's init range): decays;
// - SsmDtBias: U(-0.5, 0.5), so softplus(alpha + dt_bias) stays O(1);
// - SsmConv: N(0, 0.5^2) (taps of a 4-wide causal conv, O(1) output);
// - Router: N(0, 1/sqrt(in)), so routing logits are O(1) and top-k varies per token.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "synth/synth.h"

namespace memra::synth {

// Per-tensor stream key from the file seed and the tensor's name.
uint64_t tensor_key(uint64_t seed, std::string_view name);

// Writes elements [first, first + count) of a tensor with init `init` and scale `scale`.
void fill_values(Init init, float scale, uint64_t key, uint64_t first, size_t count, float* out);

}  // namespace memra::synth
