// The token set of a state (the "adaptive token mask cache" of XGrammar's published design):
// which tokens a stack whose top is this state accepts, computed once by walking the vocabulary
// trie with the state alone on its stack, so the result holds whatever lies below it:
// - accepted: the token's bytes match inside the state's rule (or end exactly where it ends);
// - escapes: the token leaves the rule with bytes left over; whether it is allowed depends on
//   the stacks below, so the leftover suffixes are kept in a trie of their own and walked against
//   the real stack at mask time (typically a few hundred short suffixes such as `",` or `}`);
// - every other token is rejected.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "grammar/byte_trie.h"
#include "grammar/compiled_grammar.h"
#include "grammar/token_vocab.h"

namespace memra::grammar {

struct TokenSet {
  std::vector<uint32_t> bits;  // accepted ids as a packed bitset, or empty when `ids` is used
  std::vector<int32_t> ids;    // accepted ids when there are few
  ByteTrie escapes;            // suffix -> token ids
  // Escapes from a node with many tokens below it (whitespace at the end of a rule, a number
  // that may end after any digit): (vocabulary trie node, depth) - every token of the node's
  // subtree, minus the first `depth` bytes, is checked at mask time by walking that subtree.
  std::vector<std::pair<uint32_t, uint32_t>> escape_subtrees;
  const ByteTrie* trie = nullptr;  // the vocabulary trie the set was computed over (its subtrees)
  size_t n_accepted = 0;
  size_t memory_bytes() const {
    return bits.size() * 4 + ids.size() * 4 + escapes.memory_bytes() + escape_subtrees.size() * 8 + sizeof(*this);
  }
};

// Deepest rule nesting a stack may reach.
inline constexpr uint32_t kMaxStackDepth = 1024;

// Computes the set over the tokens of `trie` (one of the vocabulary's tries; no cache).
std::shared_ptr<const TokenSet> compute_token_set(const CompiledGrammar& g, uint32_t state, const TokenVocab& vocab,
                                                  const ByteTrie& trie);

// A state's token sets: over the short tokens (cached under the state's short key) and over the
// long ones (cached under its full key).
struct StateTokenSets {
  std::shared_ptr<const TokenSet> short_tokens, long_tokens;
};
// From the vocabulary's cache, computed and inserted on a miss.
StateTokenSets token_sets(const CompiledGrammar& g, uint32_t state, const TokenVocab& vocab);

}  // namespace memra::grammar
