#include "grammar/byte_trie.h"

#include <algorithm>

namespace memra::grammar {

ByteTrie::ByteTrie(std::vector<std::pair<std::string, int32_t>> entries) {
  std::erase_if(entries, [](const auto& e) { return e.first.empty(); });
  std::sort(entries.begin(), entries.end());
  ids_.reserve(entries.size());
  std::vector<uint32_t> path;  // node index at each depth of the current string
  const std::string* prev = nullptr;
  auto close_to = [&](size_t depth) {
    while (path.size() > depth) {
      next_[path.back()] = static_cast<uint32_t>(byte_.size());
      path.pop_back();
    }
  };
  for (size_t k = 0; k < entries.size(); ++k) {
    const std::string& s = entries[k].first;
    size_t common = 0;
    if (prev) {
      const size_t m = std::min(prev->size(), s.size());
      while (common < m && (*prev)[common] == s[common]) ++common;
    }
    close_to(common);
    for (size_t d = common; d < s.size(); ++d) {
      path.push_back(static_cast<uint32_t>(byte_.size()));
      byte_.push_back(static_cast<uint8_t>(s[d]));
      next_.push_back(0);
      depth_.push_back(static_cast<uint32_t>(d + 1));
      first_.push_back(static_cast<uint32_t>(k));
      here_end_.push_back(static_cast<uint32_t>(k));
      max_depth_ = std::max(max_depth_, static_cast<uint32_t>(d + 1));
    }
    ids_.push_back(entries[k].second);
    here_end_[path.back()] = static_cast<uint32_t>(k + 1);
    prev = &s;
  }
  close_to(0);
  first_.push_back(static_cast<uint32_t>(ids_.size()));
}

}  // namespace memra::grammar
