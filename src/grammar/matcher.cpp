#include "grammar/matcher.h"

#include <algorithm>
#include <cstring>

#include "grammar/unique_items.h"

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
  // The suffixes are shared by tokens with different beginnings: the uniqueItems check sees only
  // the suffix here (fix_unique_items checks the tokens it could change with the whole text).
  std::string committed;
  std::swap(committed, stacks_.ctx);
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
  std::swap(committed, stacks_.ctx);
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
  if (grammar_->has_unique()) fix_unique_items(mask);
  return finish_mask(mask);
}

bool Matcher::in_unique_array() const {
  for (const Top& t : tops_) {
    if (grammar_->rule_unique(grammar_->state(t.state).rule)) return true;
    for (uint32_t f = t.below; f < kEscape; f = stacks_.frames[f].below)
      if (grammar_->rule_unique(grammar_->state(stacks_.frames[f].state).rule)) return true;
  }
  return false;
}

void Matcher::fix_unique_items(std::span<uint32_t> mask) {
  if (!in_unique_array()) return;
  auto is_set = [&](int32_t id) { return (mask[static_cast<uint32_t>(id) / 32] >> (static_cast<uint32_t>(id) % 32)) & 1u; };
  auto recheck = [&](int32_t id) {
    if (is_set(id) && !allows(id)) mask[static_cast<uint32_t>(id) / 32] &= ~(1u << (static_cast<uint32_t>(id) % 32));
  };
  // A token with two quotes or more may hold a whole item; its suffix walk saw no earlier items.
  for (int32_t id : vocab_->multi_quote_tokens()) recheck(id);
  // Inside a string item: the tokens whose first closing quote completes a value equal to an
  // earlier item (the cached token sets of string states know nothing of the items).
  std::string_view raw;
  if (!open_string_item(stacks_.ctx, raw, earlier_)) return;
  std::string done;  // the item's value so far
  const bool simple = decode_json_string(raw, done);  // false: raw ends inside an escape
  if (simple) {
    bool any = false;
    for (const std::string& e : earlier_) any = any || e.compare(0, done.size(), done) == 0;
    if (!any) return;  // no earlier item starts with the value so far: no token can repeat one
  }
  std::string value;
  for (int32_t id : vocab_->quote_tokens()) {
    if (!is_set(id)) continue;
    const std::string& b = vocab_->bytes(id);
    const size_t q = b.find('"');
    const std::string_view part(b.data(), q);
    bool repeats = false;
    if (simple && part.find('\\') == std::string_view::npos) {
      for (const std::string& e : earlier_)
        repeats = repeats || (e.size() == done.size() + part.size() && e.compare(0, done.size(), done) == 0 &&
                              e.compare(done.size(), part.size(), part) == 0);
    } else {
      repeats = true;  // escapes near the quote: let the exact check decide
    }
    if (repeats) recheck(id);
  }
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
  const size_t text = stacks_.ctx.size();
  const bool keep_text = grammar_->has_unique();
  std::vector<Top> cur = tops_, next;
  uint8_t flags = 0;
  for (char c : bytes) {
    if (keep_text) stacks_.ctx.push_back(c);
    if (cur.empty() || !stacks_.advance(cur, static_cast<uint8_t>(c), next, flags)) {
      stacks_.frames.resize(base);
      stacks_.ctx.resize(text);
      return false;
    }
    std::swap(cur, next);
  }
  if (!commit) {
    stacks_.frames.resize(base);
    stacks_.ctx.resize(text);
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
