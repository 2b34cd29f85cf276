#include "grammar/matcher.h"

#include <algorithm>
#include <cstring>

namespace memra::grammar {

Matcher::Matcher(std::shared_ptr<const CompiledGrammar> grammar, std::shared_ptr<const TokenVocab> vocab)
    : grammar_(std::move(grammar)), vocab_(std::move(vocab)), stacks_(*grammar_, kMaxStackDepth) {
  uint8_t flags = 0;
  stacks_.expand({grammar_->rule_start(grammar_->root_rule()), kBottom}, tops_, flags);
  can_end_ = (flags & kReachedBottom) != 0;
}

const StateTokenSets& Matcher::sets_of(uint32_t state) {
  auto it = sets_.find(state);
  if (it == sets_.end()) it = sets_.emplace(state, token_sets(*grammar_, state, *vocab_)).first;
  return it->second;
}

void Matcher::add_set(const TokenSet& set, bool new_state, uint32_t below, std::span<uint32_t> mask) {
  if (new_state) {
    if (!set.bits.empty()) {
      for (size_t w = 0; w < set.bits.size(); ++w) mask[w] |= set.bits[w];
    } else {
      for (int32_t id : set.ids) mask[static_cast<uint32_t>(id) / 32] |= 1u << (static_cast<uint32_t>(id) % 32);
    }
  }
  if (set.escapes.n_entries() > 0 || !set.escape_subtrees.empty()) add_escapes(set, below, mask);
}

void Matcher::add_escapes(const TokenSet& set, uint32_t below, std::span<uint32_t> mask) {
  if (below == kBottom) return;  // the root rule ended: nothing may follow
  const size_t base = stacks_.frames.size();
  std::vector<Top> start;
  uint8_t flags = 0;
  const Frame f = stacks_.frames[below];
  stacks_.expand({f.state, f.below}, start, flags);
  if (!start.empty()) {
    walk_and_mark(start, set.escapes, 0, set.escapes.n_nodes(), 0, mask);
    const ByteTrie& vt = *set.trie;
    for (auto [node, depth] : set.escape_subtrees) {
      walk_and_mark(start, vt, node + 1, vt.next(node), depth, mask);
    }
  }
  stacks_.frames.resize(base);
}

void Matcher::walk_and_mark(const std::vector<Top>& start, const ByteTrie& trie, size_t begin, size_t end,
                            uint32_t base_depth, std::span<uint32_t> mask) {
  walk_trie(stacks_, start, trie, begin, end, base_depth, level_, mark_, [&](size_t i, uint32_t, bool alive, uint8_t flags) {
    if (!alive && !(flags & kReachedBottom)) return;
    for (uint32_t k = trie.first(i); k < trie.here_end(i); ++k) {
      const auto id = static_cast<uint32_t>(trie.entry(k));
      mask[id / 32] |= 1u << (id % 32);
    }
  });
}

size_t Matcher::fill_mask(std::span<uint32_t> mask) {
  MEMRA_ASSERT(mask.size() >= vocab_->mask_words(), "mask has {} words, the vocabulary needs {}", mask.size(),
               vocab_->mask_words());
  std::fill(mask.begin(), mask.end(), 0u);
  if (finished_) return 0;
  // Near the depth limit the cached sets (computed from depth 0) may allow pushes that the real
  // stack cannot make: walk the whole vocabulary with the real stacks instead (hostile nesting).
  uint32_t depth = 0;
  for (const Top& t : tops_) depth = std::max(depth, t.below >= kEscape ? 0u : stacks_.frames[t.below].depth);
  if (depth + 2 * vocab_->trie().max_depth() + 64 > kMaxStackDepth) {
    walk_and_mark(tops_, vocab_->trie(), 0, vocab_->trie().n_nodes(), 0, mask);
    return finish_mask(mask);
  }
  // Stacks sorted by top state: one accepted set per state, escapes per distinct stack below.
  std::vector<Top> tops = tops_;
  std::sort(tops.begin(), tops.end(), [](const Top& a, const Top& b) {
    return a.state != b.state ? a.state < b.state : a.below < b.below;
  });
  for (size_t i = 0; i < tops.size(); ++i) {
    const StateTokenSets& sets = sets_of(tops[i].state);
    const bool new_state = i == 0 || tops[i].state != tops[i - 1].state;
    add_set(*sets.short_tokens, new_state, tops[i].below, mask);
    add_set(*sets.long_tokens, new_state, tops[i].below, mask);
  }
  return finish_mask(mask);
}

size_t Matcher::finish_mask(std::span<uint32_t> mask) const {
  if (can_end_)
    for (int32_t id : vocab_->end_ids()) mask[static_cast<uint32_t>(id) / 32] |= 1u << (static_cast<uint32_t>(id) % 32);
  size_t count = 0;
  for (size_t w = 0; w < vocab_->mask_words(); ++w) count += static_cast<size_t>(__builtin_popcount(mask[w]));
  return count;
}

bool Matcher::run_bytes(std::string_view bytes, bool commit) {
  if (bytes.empty() || finished_) return false;
  const size_t base = stacks_.frames.size();
  std::vector<Top> cur = tops_, next;
  uint8_t flags = 0;
  for (char c : bytes) {
    if (cur.empty() || !stacks_.advance(cur, static_cast<uint8_t>(c), next, flags)) {
      stacks_.frames.resize(base);
      return false;
    }
    std::swap(cur, next);
  }
  if (!commit) {
    stacks_.frames.resize(base);
    return true;
  }
  tops_ = std::move(cur);
  can_end_ = (flags & kReachedBottom) != 0;
  return true;
}

bool Matcher::allows(int32_t id) {
  if (finished_ || id < 0 || id >= vocab_->n_vocab()) return false;
  if (vocab_->is_end(id)) return can_end_;
  return run_bytes(vocab_->bytes(id), false);
}

bool Matcher::accept_bytes(std::string_view bytes) { return run_bytes(bytes, true); }

bool Matcher::accept_token(int32_t id) {
  if (finished_ || id < 0 || id >= vocab_->n_vocab()) return false;
  if (vocab_->is_end(id)) {
    if (!can_end_) return false;
    finished_ = true;
    return true;
  }
  return run_bytes(vocab_->bytes(id), true);
}

}  // namespace memra::grammar
