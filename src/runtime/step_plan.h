// What one forward call computes: which sequences take part, which activation rows are theirs,
// and at which positions. The same plan drives prefill (one sequence, many rows) and batched
// decode (many sequences, one row each).
#pragma once

#include <cstdint>
#include <vector>

namespace memra {

class SequenceCache;

struct StepSeq {
  SequenceCache* cache = nullptr;
  int32_t row0 = 0;    // first activation row of this sequence
  int32_t n_rows = 0;  // its tokens in this step
  int32_t pos0 = 0;    // position of its first token (= tokens already in its cache)
};

struct StepPlan {
  std::vector<int32_t> tokens;     // one per row
  std::vector<int32_t> positions;  // one per row
  std::vector<StepSeq> seqs;
  int64_t n_rows() const { return static_cast<int64_t>(tokens.size()); }
  // Appends a sequence's tokens as the next rows.
  void add(SequenceCache* cache, const int32_t* toks, int32_t n, int32_t pos0) {
    StepSeq s{cache, static_cast<int32_t>(tokens.size()), n, pos0};
    for (int32_t i = 0; i < n; ++i) {
      tokens.push_back(toks[i]);
      positions.push_back(pos0 + i);
    }
    seqs.push_back(s);
  }
};

}  // namespace memra
