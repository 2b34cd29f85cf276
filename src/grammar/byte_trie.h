// A trie of byte strings laid out in preorder (the layout of llguidance's token trie, a published
// design): node i's subtree is the index range [i, next(i)), so a walk that rejects a prefix
// skips its whole subtree with one assignment. Entries (token ids) are stored in the sorted
// order of their strings; the entries of node i's subtree are [first(i), first(next(i))), and
// those ending exactly at node i are [first(i), here_end(i)).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace memra::grammar {

class ByteTrie {
 public:
  ByteTrie() = default;
  // `entries`: (string, id) pairs, any order; empty strings are left out.
  explicit ByteTrie(std::vector<std::pair<std::string, int32_t>> entries);

  size_t n_nodes() const { return byte_.size(); }
  uint8_t byte(size_t i) const { return byte_[i]; }
  uint32_t next(size_t i) const { return next_[i]; }
  uint32_t depth(size_t i) const { return depth_[i]; }  // 1 for the root's children
  uint32_t first(size_t i) const { return first_[i]; }  // i == n_nodes(): the number of entries
  uint32_t here_end(size_t i) const { return here_end_[i]; }
  int32_t entry(size_t k) const { return ids_[k]; }
  size_t n_entries() const { return ids_.size(); }
  uint32_t max_depth() const { return max_depth_; }
  size_t memory_bytes() const { return byte_.size() * 17 + ids_.size() * 4; }

 private:
  std::vector<uint8_t> byte_;
  std::vector<uint32_t> next_, depth_, first_, here_end_;
  std::vector<int32_t> ids_;
  uint32_t max_depth_ = 0;
};

}  // namespace memra::grammar
