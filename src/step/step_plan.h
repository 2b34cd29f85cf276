// What one forward call computes: which sequences take part, which activation rows are theirs,
// and at which positions. The same plan drives prefill (one sequence, many rows) and batched
// decode (many sequences, one row each).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace memra {

class SequenceCache;

// The chunk grid: a prompt is cut into chunks of `chunk` tokens counted from position 0 of its
// own sequence, never by load. (The backends give a sequence the same bits wherever its steps
// are cut, so the grid is about step sizes, not numbers: a prompt resumed from a prefix snapshot
// at any position continues to the next grid point.) The next chunk of a sequence at `pos` with
// `remaining` tokens left to feed:
inline int32_t grid_chunk_len(int32_t pos, int64_t remaining, int32_t chunk) {
  return static_cast<int32_t>(std::min<int64_t>(chunk - pos % chunk, remaining));
}

// Decode steps are recorded as graphs per (rows, KV length bucket). Backends size their launches
// from the bucketed KV length, so every step a recording replays launches the same grids.
inline constexpr int32_t kKvLenBucket = 256;
inline int32_t bucketed_kv_len(int32_t kv_len) { return (kv_len + kKvLenBucket - 1) / kKvLenBucket * kKvLenBucket; }

struct StepSeq {
  SequenceCache* cache = nullptr;
  int32_t row0 = 0;    // first activation row of this sequence
  int32_t n_rows = 0;  // its tokens in this step
  int32_t pos0 = 0;    // position of its first token (= tokens already in its cache)
  // Blocks of `block` positions its keys fill after this step (the attention's splits).
  int32_t kv_blocks(int32_t block) const { return (pos0 + n_rows + block - 1) / block; }
};

struct StepPlan {
  std::vector<int32_t> tokens;     // one per row
  std::vector<int32_t> positions;  // one per row
  std::vector<StepSeq> seqs;
  int64_t n_rows() const { return static_cast<int64_t>(tokens.size()); }
  // Keys the longest sequence attends to after this step.
  int32_t max_kv_len() const {
    int32_t m = 0;
    for (const StepSeq& s : seqs) m = std::max(m, s.pos0 + s.n_rows);
    return m;
  }
  // A decode step (one row a sequence) whose sequences are of mixed depths: their KV blocks of
  // `block` positions together fewer than 3/4 of every sequence at the deepest one's count. The
  // CUDA backend then launches the split attention over a list of each sequence's own splits
  // instead of every sequence x the deepest one's splits (the same blocks' work: the same bits);
  // decode graphs are keyed on it.
  bool mixed_depths(int32_t block) const {
    if (seqs.empty() || static_cast<int64_t>(seqs.size()) != n_rows()) return false;
    int64_t own = 0;
    for (const StepSeq& s : seqs) own += s.kv_blocks(block);
    const int64_t deepest = (max_kv_len() + block - 1) / block;
    return 4 * own < 3 * deepest * static_cast<int64_t>(seqs.size());
  }
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
