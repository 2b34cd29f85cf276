// Helpers for the tests that run a whole engine.
#pragma once

#include <span>
#include <utility>
#include <vector>

#include "engine/engine.h"

namespace memra::test {

// One decode step that brings back every row's logits (B x n_vocab) and draws nothing.
inline void decode_logits(Engine& e, std::span<SequenceCache* const> seqs, std::span<const int32_t> tokens,
                          std::vector<float>& logits) {
  StepOutput out;
  e.decode(seqs, tokens, StepSampling{}, out);
  logits = std::move(out.logits);
}

}  // namespace memra::test
