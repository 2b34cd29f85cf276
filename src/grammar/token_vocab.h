// The model's vocabulary as the grammar engine sees it: every token's bytes in a ByteTrie, the
// end-of-generation ids (allowed only where the grammar may end), and the cache of per-state
// token sets (token_sets.h), which is valid for this vocabulary only.
//
// Control tokens (<|im_start|>, <|endoftext|>, ...) are never produced by a grammar; user-defined
// added tokens (<tool_call>, <think>) take part with their text, as the tokenizer reads them.
#pragma once

#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/byte_trie.h"

namespace memra {
class Tokenizer;
}

namespace memra::grammar {

struct TokenSet;

class TokenVocab {
 public:
  // bytes[i]: token i's bytes ("" for ids no grammar may produce); end_ids: end-of-generation.
  TokenVocab(std::vector<std::string> bytes, std::vector<int32_t> end_ids);
  static std::shared_ptr<TokenVocab> from_tokenizer(const Tokenizer& tok);

  int32_t n_vocab() const { return static_cast<int32_t>(bytes_.size()); }
  size_t mask_words() const { return (bytes_.size() + 31) / 32; }
  const std::string& bytes(int32_t id) const { return bytes_[static_cast<size_t>(id)]; }
  bool is_end(int32_t id) const { return id >= 0 && id < n_vocab() && is_end_[static_cast<size_t>(id)]; }
  const std::vector<int32_t>& end_ids() const { return end_ids_; }
  const ByteTrie& trie() const { return trie_; }
  // The same tokens split by length: token sets are computed separately for tokens of at most
  // kShortTokenBytes bytes (cached by a key that only sees that far, so states that differ only
  // deeper share them: the positions of a long bounded string) and for the few longer ones.
  static constexpr uint32_t kShortTokenBytes = 16;
  const ByteTrie& short_trie() const { return short_trie_; }
  const ByteTrie& long_trie() const { return long_trie_; }
  // Tokens with a '"' byte, and those with two or more: the only tokens that can complete a
  // string item of a uniqueItems array (matcher.cpp checks them one by one there).
  const std::vector<int32_t>& quote_tokens() const { return quote_tokens_; }
  const std::vector<int32_t>& multi_quote_tokens() const { return multi_quote_tokens_; }

  // The cached token set of a state key, or null.
  std::shared_ptr<const TokenSet> find(uint64_t key) const;
  void insert(uint64_t key, std::shared_ptr<const TokenSet> set) const;
  size_t cache_entries() const;
  size_t cache_bytes() const;
  void set_cache_limit(size_t bytes) { cache_limit_ = bytes; }

 private:
  std::vector<std::string> bytes_;
  std::vector<char> is_end_;
  std::vector<int32_t> end_ids_;
  ByteTrie trie_, short_trie_, long_trie_;
  std::vector<int32_t> quote_tokens_, multi_quote_tokens_;
  mutable std::shared_mutex mu_;
  mutable std::unordered_map<uint64_t, std::shared_ptr<const TokenSet>> cache_;
  mutable size_t cache_bytes_ = 0;
  size_t cache_limit_ = size_t{512} << 20;
};

}  // namespace memra::grammar
