#include "grammar/token_vocab.h"

#include <algorithm>
#include <mutex>

#include "grammar/token_sets.h"
#include "tokenizer/tokenizer.h"

namespace memra::grammar {

TokenVocab::TokenVocab(std::vector<std::string> bytes, std::vector<int32_t> end_ids)
    : bytes_(std::move(bytes)), is_end_(bytes_.size(), 0), end_ids_(std::move(end_ids)) {
  std::vector<std::pair<std::string, int32_t>> entries;
  entries.reserve(bytes_.size());
  for (int32_t id : end_ids_) {
    MEMRA_ASSERT(id >= 0 && static_cast<size_t>(id) < bytes_.size(), "end id {} out of range", id);
    is_end_[static_cast<size_t>(id)] = 1;
  }
  for (size_t i = 0; i < bytes_.size(); ++i) {
    if (is_end_[i] || bytes_[i].empty()) continue;
    entries.emplace_back(bytes_[i], static_cast<int32_t>(i));
    const auto quotes = std::count(bytes_[i].begin(), bytes_[i].end(), '"');
    if (quotes >= 1) quote_tokens_.push_back(static_cast<int32_t>(i));
    if (quotes >= 2) multi_quote_tokens_.push_back(static_cast<int32_t>(i));
  }
  std::vector<std::pair<std::string, int32_t>> short_entries, long_entries;
  for (const auto& e : entries) (e.first.size() <= kShortTokenBytes ? short_entries : long_entries).push_back(e);
  trie_ = ByteTrie(std::move(entries));
  short_trie_ = ByteTrie(std::move(short_entries));
  long_trie_ = ByteTrie(std::move(long_entries));
}

std::shared_ptr<TokenVocab> TokenVocab::from_tokenizer(const Tokenizer& tok) {
  const int32_t n = tok.n_vocab();
  std::vector<std::string> bytes(static_cast<size_t>(n));
  std::vector<int32_t> ends;
  for (int32_t i = 0; i < n; ++i) {
    if (tok.is_end_of_generation(i)) ends.push_back(i);
    else if (!tok.is_special(i)) bytes[static_cast<size_t>(i)] = tok.token_bytes(i);
  }
  return std::make_shared<TokenVocab>(std::move(bytes), std::move(ends));
}

std::shared_ptr<const TokenSet> TokenVocab::find(uint64_t key) const {
  std::shared_lock lk(mu_);
  auto it = cache_.find(key);
  return it == cache_.end() ? nullptr : it->second;
}

void TokenVocab::insert(uint64_t key, std::shared_ptr<const TokenSet> set) const {
  const size_t size = set->memory_bytes();
  std::unique_lock lk(mu_);
  if (cache_bytes_ + size > cache_limit_) {
    // Simple bound: start over. Entries in use stay alive through their shared_ptr.
    cache_.clear();
    cache_bytes_ = 0;
  }
  if (cache_.emplace(key, std::move(set)).second) cache_bytes_ += size;
}

size_t TokenVocab::cache_entries() const {
  std::shared_lock lk(mu_);
  return cache_.size();
}

size_t TokenVocab::cache_bytes() const {
  std::shared_lock lk(mu_);
  return cache_bytes_;
}

}  // namespace memra::grammar
