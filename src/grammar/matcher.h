// The per-request state of constrained decoding: the set of stacks the text so far leaves the
// grammar in, the token mask for the next position, and advancing by a sampled token.
//
// Mask = for each stack, its top state's cached token set (token_sets.h): the accepted tokens,
// plus those escape suffixes that the stacks below accept (a walk of the small suffix trie), plus
// the end-of-generation tokens when the grammar may end here. A matcher is used by one thread at
// a time; matchers of different requests share the compiled grammar and the vocabulary's cache.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "grammar/compiled_grammar.h"
#include "grammar/stacks.h"
#include "grammar/token_sets.h"
#include "grammar/token_vocab.h"

namespace memra::grammar {

class Matcher {
 public:
  Matcher(std::shared_ptr<const CompiledGrammar> grammar, std::shared_ptr<const TokenVocab> vocab);

  // Writes the allowed tokens of the next position into `mask` (vocab.mask_words() words, bit
  // i of word i/32 = token i). Returns the number of allowed tokens; 0 is a dead end (only
  // possible when no token of the vocabulary can continue the text).
  size_t fill_mask(std::span<uint32_t> mask);
  // Advances by token `id`; false (state unchanged) when the grammar does not allow it. An
  // end-of-generation token is allowed where the grammar may end, and finishes the matcher.
  bool accept_token(int32_t id);
  // Advances by raw bytes (tests, forced prefixes); false (state unchanged) if not allowed.
  bool accept_bytes(std::string_view bytes);
  // Whether accept_token(id) would succeed, without advancing: the exact check, token by token,
  // that fill_mask computes for all tokens at once (tests compare the two).
  bool allows(int32_t id);

  bool can_end() const { return can_end_; }         // the text so far is a complete match
  bool can_continue() const { return !tops_.empty(); }
  bool finished() const { return finished_; }        // an end-of-generation token was accepted
  const TokenVocab& vocab() const { return *vocab_; }

 private:
  bool run_bytes(std::string_view bytes, bool commit);
  void add_escapes(const TokenSet& set, uint32_t below, std::span<uint32_t> mask);
  // Sets the bits of the entries of trie nodes [begin, end) that the stacks `start`, standing at
  // depth base_depth, accept.
  void walk_and_mark(const std::vector<Top>& start, const ByteTrie& trie, size_t begin, size_t end, uint32_t base_depth,
                     std::span<uint32_t> mask);
  size_t finish_mask(std::span<uint32_t> mask) const;  // adds the end tokens, counts
  const StateTokenSets& sets_of(uint32_t state);
  // uniqueItems (unique_items.h): whether a stack is inside such an array, and the exact check
  // of the tokens that could complete an item there.
  bool in_unique_array() const;
  void fix_unique_items(std::span<uint32_t> mask);
  void add_set(const TokenSet& set, bool new_state, uint32_t below, std::span<uint32_t> mask);

  std::shared_ptr<const CompiledGrammar> grammar_;
  std::shared_ptr<const TokenVocab> vocab_;
  Stacks stacks_;
  std::vector<Top> tops_;
  bool can_end_ = false;
  bool finished_ = false;
  std::unordered_map<uint32_t, StateTokenSets> sets_;  // this matcher's lookups
  std::vector<std::vector<Top>> level_;                                 // scratch of the walks
  std::vector<size_t> mark_;
  std::vector<std::string> earlier_;  // scratch of fix_unique_items
};

}  // namespace memra::grammar
