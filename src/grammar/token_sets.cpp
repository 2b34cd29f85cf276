#include "grammar/token_sets.h"

#include "grammar/stacks.h"

namespace memra::grammar {

namespace {
// An escape with more tokens below it than this is kept as a subtree of the vocabulary trie.
constexpr uint32_t kMaxListedEscapes = 128;
}  // namespace

std::shared_ptr<const TokenSet> compute_token_set(const CompiledGrammar& g, uint32_t state, const TokenVocab& vocab,
                                                  const ByteTrie& trie) {
  Stacks st(g, kMaxStackDepth);
  std::vector<std::vector<Top>> level;
  std::vector<size_t> mark;
  std::vector<uint32_t> accepted(vocab.mask_words(), 0);
  size_t n_accepted = 0;
  std::vector<std::pair<uint32_t, uint32_t>> escape_at;  // (node, depth)
  walk_trie(st, {{state, kEscape}}, trie, 0, trie.n_nodes(), 0, level, mark, [&](size_t i, uint32_t d, bool alive, uint8_t flags) {
    const bool escaped = (flags & kReachedEscape) != 0;
    if (alive || escaped) {
      for (uint32_t k = trie.first(i); k < trie.here_end(i); ++k) {
        const auto id = static_cast<uint32_t>(trie.entry(k));
        accepted[id / 32] |= 1u << (id % 32);
        ++n_accepted;
      }
    }
    if (escaped && trie.here_end(i) < trie.first(trie.next(i))) escape_at.emplace_back(static_cast<uint32_t>(i), d);
  });

  auto out = std::make_shared<TokenSet>();
  std::vector<std::pair<std::string, int32_t>> suffixes;
  for (auto [node, d] : escape_at) {
    if (trie.first(trie.next(node)) - trie.here_end(node) > kMaxListedEscapes) {
      out->escape_subtrees.emplace_back(node, d);
      continue;
    }
    for (uint32_t k = trie.here_end(node); k < trie.first(trie.next(node)); ++k) {
      const int32_t id = trie.entry(k);
      if ((accepted[static_cast<uint32_t>(id) / 32] >> (static_cast<uint32_t>(id) % 32)) & 1u) continue;
      suffixes.emplace_back(vocab.bytes(id).substr(d), id);
    }
  }
  out->escapes = ByteTrie(std::move(suffixes));
  out->trie = &trie;
  out->n_accepted = n_accepted;
  if (n_accepted * 32 < static_cast<size_t>(vocab.n_vocab())) {
    out->ids.reserve(n_accepted);
    for (size_t w = 0; w < accepted.size(); ++w)
      for (uint32_t bits = accepted[w]; bits; bits &= bits - 1)
        out->ids.push_back(static_cast<int32_t>(w * 32 + static_cast<uint32_t>(__builtin_ctz(bits))));
  } else {
    out->bits = std::move(accepted);
  }
  return out;
}

StateTokenSets token_sets(const CompiledGrammar& g, uint32_t state, const TokenVocab& vocab) {
  auto get = [&](uint64_t key, const ByteTrie& trie) {
    if (auto hit = vocab.find(key)) return hit;
    auto set = compute_token_set(g, state, vocab, trie);
    vocab.insert(key, set);
    return set;
  };
  // Distinct salts: the two sets of one state must not share a cache slot.
  return {get(g.short_key(state) ^ 0x5ull, vocab.short_trie()), get(g.state_key(state) ^ 0xAull, vocab.long_trie())};
}

}  // namespace memra::grammar
