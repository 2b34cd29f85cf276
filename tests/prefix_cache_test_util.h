// Helpers of the prefix-cache tests (CPU and GPU): a prompt fed as the scheduler feeds it, with
// the cache, and the cold run it must match bit for bit.
#pragma once

#include <algorithm>
#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include "engine/engine.h"
#include "engine_test_util.h"

namespace memra::test {

// A prompt fed as the scheduler feeds it: resumed from the cache where it can be, the rest
// prefilled chunk by chunk (stopping at the cache's snapshot points) while the cache records it.
struct Warm {
  std::shared_ptr<SequenceCache> seq;
  std::vector<float> logits;
  int32_t reused = 0;
  PrefixCache::Handle handle;
};

inline Warm prefill_warm(Engine& e, PrefixCache& pc, const std::vector<int32_t>& prompt) {
  Warm w;
  w.seq = e.new_sequence();
  PrefixCache::Resume r = pc.resume(*w.seq, prompt);
  w.reused = r.tokens;
  w.handle = pc.record(w.seq, prompt, r);
  if (!r.logits.empty()) {
    w.logits = std::move(r.logits);
    return w;
  }
  size_t fed = static_cast<size_t>(r.tokens);
  while (fed < prompt.size()) {
    const size_t stop = static_cast<size_t>(pc.next_stop(w.handle));
    const std::span<const int32_t> rest = std::span<const int32_t>(prompt).subspan(fed, std::min(stop, prompt.size()) - fed);
    const bool last = fed + static_cast<size_t>(e.next_chunk_len(*w.seq, rest.size())) == prompt.size();
    fed += static_cast<size_t>(e.prefill_chunk(*w.seq, rest, last ? &w.logits : nullptr));
    if (fed < prompt.size()) pc.progress(w.handle);
    else pc.finish(w.handle, w.logits);
  }
  return w;
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Greedy decode of `steps` tokens from `seq` after `logits`; returns every step's logits.
inline std::vector<std::vector<float>> greedy_tail(Engine& e, SequenceCache& seq, std::vector<float> logits, int steps) {
  std::vector<std::vector<float>> out{logits};
  SequenceCache* s = &seq;
  for (int i = 0; i < steps; ++i) {
    const int32_t t = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    decode_logits(e, std::span<SequenceCache* const>(&s, 1), std::span<const int32_t>(&t, 1), logits);
    out.push_back(logits);
  }
  return out;
}

// A prompt prefilled through the cache, then `n_answer` greedy tokens decoded after it, as a
// request's answer, and its end (PrefixCache::retire): returns the tokens now in its sequence.
inline std::vector<int32_t> answer_and_retire(Engine& e, PrefixCache& pc, const std::vector<int32_t>& prompt,
                                              int n_answer) {
  Warm w = prefill_warm(e, pc, prompt);
  std::vector<int32_t> fed = prompt;
  std::vector<float> logits = w.logits;
  SequenceCache* s = w.seq.get();
  for (int i = 0; i < n_answer; ++i) {
    const int32_t t = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    decode_logits(e, std::span<SequenceCache* const>(&s, 1), std::span<const int32_t>(&t, 1), logits);
    fed.push_back(t);
  }
  const auto other = e.new_sequence();
  pc.retire(w.handle, *other, {});  // not the recorded sequence (another choice of n > 1): ignored
  pc.retire(w.handle, *w.seq, fed);
  return fed;
}

inline std::vector<std::vector<float>> cold_run(Engine& e, const std::vector<int32_t>& prompt, int steps) {
  auto seq = e.new_sequence();
  std::vector<float> logits;
  e.prefill(*seq, prompt, &logits);
  return greedy_tail(e, *seq, logits, steps);
}

}  // namespace memra::test
